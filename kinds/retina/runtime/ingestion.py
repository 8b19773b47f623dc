"""Retina's contract on the ingestion program's side: the child gets the training rows and
the pooled test features; what comes back is a probability and an uncertainty per test row."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from kinds.kind import copy_inputs_file
from runtime.beneath import copy_beneath, fd_path, link_open_file, open_beneath
from runtime.formats import FormatError

from . import predictions
from .participant import IMAGE_FILES


def stage_inputs(task, input_dir: Path, folder: Path, child_uid: int | None = None) -> Path:
    """The task's inputs file, copied for the child; on an image task a folder with it and
    the image arrays (named as participant.py reads them). Each array is a hard link to the
    input file where the child can change neither its content nor its metadata (it runs as
    ``child_uid``, a user that neither owns the file nor may write it, and the two folders
    share a file system): no copy of tens of GB per task. Else a read-only copy: a child that
    runs as root owns the inode, and its times, extended attributes and (Landlock ABI 2 or
    older) its size would change on the organizer's file. Nothing is read through a link
    (``runtime/beneath.py``). The child maps them; it never writes them."""
    if task.contract.get("inputs") != "images":
        return copy_inputs_file(task, input_dir, folder)
    staged = folder / "data"
    staged.mkdir()
    copy_beneath(input_dir, task.inputs, staged / "inputs.npz", mode=0o444)
    for name in IMAGE_FILES:
        _link_or_copy(input_dir, task.contract["image_files"][name], staged / name, child_uid)
    os.chmod(staged, 0o755)
    return staged


def _link_or_copy(input_dir: Path, relative: str, destination: Path,
                  child_uid: int | None) -> None:
    fd = open_beneath(input_dir, relative)
    try:
        if _child_cannot_change(os.fstat(fd), child_uid):
            try:
                link_open_file(fd, destination)      # the open inode, not the name
                return
            except OSError:               # another file system, or links not allowed there
                pass
        shutil.copyfile(fd_path(fd), destination)
        os.chmod(destination, 0o444)
    finally:
        os.close(fd)


def _child_cannot_change(status: os.stat_result, child_uid: int | None) -> bool:
    """Readable by all, written by its owner alone, and the child a user other than root
    and the owner: it can then set neither the times, nor extended attributes, nor the size
    (on Linux a user.* attribute needs the right to write the file)."""
    if child_uid is None or child_uid in (0, status.st_uid):
        return False
    return bool(status.st_mode & 0o004) and not status.st_mode & 0o022


def output_bytes(task) -> int:
    return task.contract["n_test"] * 16 + 4096


def check_output(array, task, what: str = "predictions") -> tuple[np.ndarray, tuple[str, ...]]:
    """(N, 1) or (N, 2): probability in [0, 1], optional finite uncertainty."""
    try:
        values = predictions.check(array, task.contract["n_test"], what)
    except (TypeError, ValueError) as error:
        raise FormatError(str(error)) from None
    return values, (() if values.shape[1] == 2 else
                    ("no uncertainty returned: the scorer uses the predictive entropy",))

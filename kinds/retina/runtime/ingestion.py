"""Retina's contract on the ingestion program's side: the child gets the training rows and
the pooled test features; what comes back is a probability and an uncertainty per test row."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from kinds.kind import copy_inputs_file
from runtime.formats import FormatError

from . import predictions
from .participant import IMAGE_FILES


def stage_inputs(task, input_dir: Path, folder: Path) -> Path:
    """The task's inputs file, copied for the child; on an image task a folder with it and
    the image arrays (named as participant.py reads them), each a hard link to the input
    file where the two folders share a file system and the file is already readable by all
    and writable by its owner alone (no copy of tens of GB per task, and no change to the
    input file's mode), else a read-only copy. The child maps them; it never writes them."""
    if task.contract.get("inputs") != "images":
        return copy_inputs_file(task, input_dir, folder)
    staged = folder / "data"
    staged.mkdir()
    _copy_read_only(input_dir / task.inputs, staged / "inputs.npz")
    for name in IMAGE_FILES:
        _link_or_copy(input_dir / task.contract["image_files"][name], staged / name)
    os.chmod(staged, 0o755)
    return staged


def _copy_read_only(source: Path, destination: Path) -> None:
    shutil.copyfile(source, destination)
    os.chmod(destination, 0o444)


def _link_or_copy(source: Path, destination: Path) -> None:
    mode = os.stat(source).st_mode
    if mode & 0o004 and not mode & 0o022:      # what the child may do with it already
        try:
            os.link(source, destination)
            return
        except OSError:               # another file system, or links not allowed there
            pass
    _copy_read_only(source, destination)


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

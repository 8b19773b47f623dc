"""Reading the organizer's files strictly beneath a folder, never through a symbolic link.

The ingestion runs as root. Where something else can write its input folder while it runs (a
submission's own command in a container beside it, or a child without Landlock), a file or
folder there can be replaced by a link to the hidden reference data or to the program's key;
opened by name, root would follow it and stage the target for the next task's child. So every
name is opened here one component at a time, relative to the folder above it, with
``O_NOFOLLOW``, and only a regular file (``fstat``) is read. An API that needs a path reads
``/proc/self/fd/<n>``: the kernel's link to the inode already open, which no name in the input
folder can redirect.

Standard library only (shipped in both programs) and Python 3.10.
"""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO put in a file's place must not hold the ingestion in open(); the fstat
# that follows refuses it.
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
COPY_BLOCK = 1 << 20


class InputChanged(Exception):
    """A name below the folder is a link or not what it must be: someone changed the data
    during the run. The task fails with this message; nothing of the target was read."""


class LinkFound(InputChanged):
    """The name is a symbolic link."""


def _changed(name: str, what: str, kind: type = InputChanged) -> InputChanged:
    return kind(f"{name} is {what}: the input data was changed during the run; the "
                "organizers' files are never followed through links")


def _parts(relative: str) -> list[str]:
    parts = [part for part in str(relative).split("/") if part not in ("", ".")]
    if str(relative).startswith("/") or ".." in parts or not parts:
        raise ValueError(f"{relative!r}: expected a relative path inside the folder, "
                         "without '..'")
    return parts


def open_folder(folder: str | os.PathLike) -> int:
    """The folder itself, opened as the platform named it (its own path may pass through
    links the platform made); what is beneath it is opened with ``open_beneath``."""
    return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def open_beneath(folder: str | os.PathLike, relative: str, *, directory: bool = False) -> int:
    """A descriptor of ``folder/relative``, a regular file (or, with ``directory``, a folder),
    no component of which is a link; ``InputChanged`` naming it otherwise."""
    parts = _parts(relative)
    current = open_folder(folder)
    try:
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            flags = FILE_FLAGS if last and not directory else FOLDER_FLAGS
            name = "/".join(parts[:depth + 1])
            following = _open_at(part, flags, current, name)
            os.close(current)
            current = following
        _require_kind(current, relative, directory)
        return current
    except BaseException:
        os.close(current)
        raise


def _open_at(part: str, flags: int, parent: int, name: str) -> int:
    try:
        return os.open(part, flags, dir_fd=parent)
    except OSError as error:
        # O_NOFOLLOW refuses a link with ELOOP, or with ENOTDIR where a folder was asked for
        if error.errno == errno.ELOOP or error.errno == errno.ENOTDIR and _is_link(part, parent):
            raise _changed(name, "a symbolic link", LinkFound) from None
        if error.errno == errno.ENOTDIR:
            raise _changed(name, "not a folder") from None
        if error.errno == errno.ENOENT:
            raise FileNotFoundError(errno.ENOENT, "no such file or folder in the input data",
                                    name) from None
        raise


def _is_link(part: str, parent: int) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(part, dir_fd=parent).st_mode)
    except OSError:
        return False


def _require_kind(fd: int, name: str, directory: bool) -> None:
    mode = os.fstat(fd).st_mode
    if directory and not stat.S_ISDIR(mode):
        raise _changed(name, "not a folder")
    if not directory and not stat.S_ISREG(mode):
        raise _changed(name, "not a regular file")


def fd_path(fd: int) -> Path:
    """A path to the inode ``fd`` holds, for APIs that open by name (np.load with a memory
    map, zipfile, shutil.copyfile): the kernel resolves it to that inode, not by its name."""
    return Path(f"/proc/self/fd/{fd}")


@contextlib.contextmanager
def opened_beneath(folder: str | os.PathLike, relative: str) -> Iterator[Path]:
    """``fd_path`` of ``open_beneath(folder, relative)``, closed on leaving."""
    fd = open_beneath(folder, relative)
    try:
        yield fd_path(fd)
    finally:
        os.close(fd)


def copy_beneath(folder: str | os.PathLike, relative: str, destination: Path,
                 mode: int = 0o644) -> None:
    """``folder/relative`` copied to ``destination`` (a new file of ``mode``)."""
    with opened_beneath(folder, relative) as source:
        shutil.copyfile(source, destination)
    os.chmod(destination, mode)


def copy_tree_beneath(folder: str | os.PathLike, relative: str, destination: Path, *,
                      skip: Callable[[str], bool] = lambda name: False,
                      on_refused: Callable[[str, InputChanged], None] | None = None) -> None:
    """The tree ``folder/relative`` (``relative`` "": the folder itself) copied to
    ``destination`` (made here): folders 0o755, files 0o644. Names ``skip`` accepts are left
    out at every level. A link, anything neither file nor folder, or an entry gone while the
    tree is copied raises ``InputChanged``; with ``on_refused`` it goes there instead (its
    path in ``folder`` and the error) and the copy goes on without it."""
    prefix = "" if relative in ("", ".") else "/".join(_parts(relative)) + "/"
    top = _open_tree(folder, relative)
    try:
        _copy_folder(top, prefix, destination, skip, on_refused)
    finally:
        os.close(top)


def _copy_folder(fd: int, prefix: str, destination: Path, skip, on_refused) -> None:
    destination.mkdir(mode=0o755)
    os.chmod(destination, 0o755)
    with os.scandir(fd) as entries:
        names = sorted(entry.name for entry in entries if not skip(entry.name))
    for name in names:
        path = prefix + name
        try:
            child = _open_child(name, fd, path)
        except InputChanged as error:
            if on_refused is None:
                raise
            on_refused(path, error)
            continue
        try:
            if stat.S_ISDIR(os.fstat(child).st_mode):
                _copy_folder(child, path + "/", destination / name, skip, on_refused)
            else:
                shutil.copyfile(fd_path(child), destination / name)
                os.chmod(destination / name, 0o644)
        finally:
            os.close(child)


def _open_child(name: str, parent: int, path: str) -> int:
    """A folder or a regular file of the folder ``parent``, listed a moment ago."""
    try:
        fd = _open_at(name, FILE_FLAGS, parent, path)
    except FileNotFoundError:
        raise _changed(path, "gone") from None
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return fd
    os.close(fd)
    raise _changed(path, "not a regular file")


@contextlib.contextmanager
def folder_beneath(folder: str | os.PathLike, relative: str) -> Iterator[Path]:
    """``fd_path`` of the folder ``folder/relative``, opened as ``open_beneath`` opens one
    (``relative`` "": ``folder`` itself, as named), closed on leaving."""
    fd = _open_tree(folder, relative)
    try:
        yield fd_path(fd)
    finally:
        os.close(fd)


def _open_tree(folder: str | os.PathLike, relative: str) -> int:
    if relative in ("", "."):
        return open_folder(folder)
    return open_beneath(folder, relative, directory=True)


def link_open_file(fd: int, destination: Path) -> None:
    """A hard link at ``destination`` of the inode ``fd`` holds, not of any name. linkat()
    must follow the /proc link to that inode; os.link calls link(), which would link the
    /proc entry itself (EXDEV), unless given a folder descriptor, as here."""
    proc = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.link(str(fd), destination, src_dir_fd=proc, follow_symlinks=True)
    finally:
        os.close(proc)

"""What a task leaves on the machine: its working folder, and whatever it put in the shared
scratch folders (/tmp, /var/tmp, /dev/shm, the last one RAM outside the memory limit) when
nothing kept it out of them. All of it counts towards the disk limit. The working folder is
removed after the task, even folders the child made unreadable (mode 000) or nested
thousands deep; so are its scratch entries where they can be told from other programs'
(``ScratchWatch``).

The supervisor measures it with ``TreeWalk`` a slice at a time: a walk over a task's files may
take seconds, and one long pause would leave its results unread past the budget.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")
STAGING_PREFIX = "ingestion-"
FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Deeper than this a task is stopped: each level of a walk holds a descriptor open.
MAX_DEPTH = 512
CLOCK_EVERY = 64          # entries measured between two looks at the clock


def _unlock_at(name: str, dir_fd: int | None) -> None:
    """Gives a folder its owner's rights back, through a descriptor, so no link is followed;
    a supervisor without capabilities could neither measure nor remove it otherwise."""
    handle = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    try:
        mode = stat.S_IMODE(os.fstat(handle).st_mode)
        os.chmod(f"/proc/self/fd/{handle}", mode | 0o700)
    finally:
        os.close(handle)


def _searchable(fd: int) -> None:
    """A folder this program can list but not search (or the reverse) hides what is in it as
    well as mode 000 does, from a supervisor without capabilities."""
    if os.access(f"/proc/self/fd/{fd}", os.R_OK | os.X_OK):
        return
    try:
        os.fchmod(fd, stat.S_IMODE(os.fstat(fd).st_mode) | 0o700)
    except OSError:
        pass


def open_folder(name: str, dir_fd: int | None = None) -> int | None:
    """A descriptor of the folder ``name`` (relative to ``dir_fd``), never through a link,
    its owner's rights given back where they were taken; None when it cannot be opened."""
    try:
        fd = os.open(name, FOLDER_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        fd = _open_locked(name, dir_fd)
    except OSError:
        return None
    if fd is not None:
        _searchable(fd)
    return fd


def _open_locked(name: str, dir_fd: int | None) -> int | None:
    try:
        _unlock_at(name, dir_fd)
        return os.open(name, FOLDER_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None


def _emptied(fd: int) -> list[str]:
    """Removes everything but folders from the open folder; returns the folders' names."""
    folders = []
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.name)
                    else:
                        os.unlink(entry.name, dir_fd=fd)
                except OSError:
                    pass
    except OSError:
        pass
    return folders


def _remove_tree(top: str) -> None:
    """Removes a tree one folder at a time, down by name and back up through '..', holding two
    descriptors at most: shutil.rmtree recurses, and a tree a thousand folders deep raises
    RecursionError. Only for trees nothing changes any more (the task's processes are gone)."""
    fd = open_folder(top)
    if fd is None:
        return
    levels = [("", _emptied(fd))]       # per level open so far: its name, its folders left
    try:
        while levels:
            name, folders = levels[-1]
            if folders:
                folder = folders.pop()
                inner = open_folder(folder, fd)
                if inner is not None:
                    os.close(fd)
                    fd = inner
                    levels.append((folder, _emptied(fd)))
                continue
            levels.pop()
            if levels:
                fd = _up(fd)
                _remove_folder(name, fd)
    except OSError:
        pass                             # what is left is reported by the caller
    finally:
        os.close(fd)
    try:
        os.rmdir(top)
    except OSError:
        pass


def _remove_folder(name: str, dir_fd: int) -> None:
    try:
        os.rmdir(name, dir_fd=dir_fd)
    except OSError:
        pass                             # not empty: something in it could not be removed


def _up(fd: int) -> int:
    parent = os.open("..", FOLDER_FLAGS, dir_fd=fd)
    os.close(fd)
    return parent


def force_remove(path: str | Path) -> bool:
    """Removes a file or a whole tree whatever its modes and depth; True when it is gone."""
    path = str(path)
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
            return True
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        pass
    if os.path.lexists(path):
        _remove_tree(path)
    return not os.path.lexists(path)


@dataclass(frozen=True)
class Root:
    """Where a walk starts. ``keep(name, info)`` picks the entries of the root folder itself
    (the child's, in a shared scratch folder); ``held_open``: the root is a /proc/<pid>/fd
    folder, and only the deleted files it holds count (the walk cannot see them elsewhere);
    ``fd``: the root, opened before the child started, so that no mode the child later gives
    a folder above it keeps the walk out."""
    path: str
    keep: Callable[[str, os.stat_result], bool] | None = None
    held_open: bool = False
    fd: int | None = None


class _Folder:
    """An open folder, kept open while its own scan or a sub-folder waiting to be opened
    through it needs it."""

    def __init__(self, fd: int):
        self.fd, self.users = fd, 1

    def release(self) -> None:
        self.users -= 1
        if self.users == 0:
            os.close(self.fd)


class TreeWalk:
    """Allocated bytes and entries below some roots, walked a slice at a time (``step``).

    Folders are opened relative to their parent's descriptor and never through a link, so no
    path grows too long and a link the child swaps in leads nowhere."""

    def __init__(self, roots: list[Root]):
        self.bytes = self.entries = 0
        self.too_deep = False
        self._roots = list(reversed(roots))
        self._waiting: list[tuple[_Folder, str, int, Root]] = []   # folders not opened yet
        self._scan = None                  # (entries iterator, its folder, depth, root)
        self._seen: set[tuple[int, int]] = set()   # deleted files held open, counted once
        self._visited = 0

    def step(self, seconds: float) -> bool:
        """Walks for about ``seconds``; True once everything was measured."""
        stop = time.monotonic() + seconds
        while self._advance():
            self._visited += 1
            if self._visited % CLOCK_EVERY == 0 and time.monotonic() >= stop:
                return False
        return True

    def finish(self) -> "TreeWalk":
        self.step(float("inf"))
        return self

    def close(self) -> None:
        """Releases every descriptor of a walk left unfinished."""
        if self._scan is not None:
            self._end_scan()
        for folder, *_ in self._waiting:
            folder.release()
        self._waiting.clear()

    def _advance(self) -> bool:
        """Measures one entry or opens the next folder; False when nothing is left."""
        if self._scan is None:
            return self._open_next()
        try:
            entry = next(self._scan[0])
        except (StopIteration, OSError):
            self._end_scan()
            return True
        self._measure(entry)
        return True

    def _end_scan(self) -> None:
        entries, folder, _, _ = self._scan
        entries.close()
        folder.release()
        self._scan = None

    def _open_next(self) -> bool:
        if self._waiting:
            parent, name, depth, root = self._waiting.pop()
            fd = open_folder(name, parent.fd)
            parent.release()
        elif self._roots:
            root, depth = self._roots.pop(), 0
            fd = _open_root(root)
        else:
            return False
        if fd is not None:
            try:
                self._scan = (os.scandir(fd), _Folder(fd), depth, root)
            except OSError:
                os.close(fd)
        return True

    def _measure(self, entry: os.DirEntry) -> None:
        _, folder, depth, root = self._scan
        try:
            info = entry.stat(follow_symlinks=root.held_open)
        except OSError:
            return                                  # gone since it was listed
        if depth == 0 and root.keep is not None and not root.keep(entry.name, info):
            return
        if root.held_open:
            self._count_deleted(info)
            return
        self.entries += 1
        self.bytes += info.st_blocks * 512
        if stat.S_ISDIR(info.st_mode):
            if depth + 1 > MAX_DEPTH:
                self.too_deep = True
                return
            folder.users += 1
            self._waiting.append((folder, entry.name, depth + 1, root))

    def _count_deleted(self, info: os.stat_result) -> None:
        """A deleted file still open (O_TMPFILE, or unlinked after opening) is in no folder."""
        key = (info.st_dev, info.st_ino)
        if stat.S_ISREG(info.st_mode) and info.st_nlink == 0 and key not in self._seen:
            self._seen.add(key)
            self.bytes += info.st_blocks * 512


def _open_root(root: Root) -> int | None:
    """Roots are this program's own paths: a link there (/dev/shm -> /run/shm) is followed."""
    try:
        if root.fd is None:
            return os.open(root.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        fd = os.dup(root.fd)
    except OSError:
        return None
    os.lseek(fd, 0, os.SEEK_SET)          # a walk left unfinished shares the position
    _searchable(fd)
    return fd


def open_root(path: str | Path) -> int | None:
    """A descriptor to give a ``Root`` as its ``fd``; the caller closes it."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None


def tree_bytes(path: str) -> int:
    """Allocated bytes of a file or a whole tree."""
    try:
        info = os.lstat(path)
    except OSError:
        return 0
    if not stat.S_ISDIR(info.st_mode):
        return info.st_blocks * 512
    return info.st_blocks * 512 + TreeWalk([Root(path)]).finish().bytes


def held_open_roots(pids) -> list[Root]:
    return [Root(f"/proc/{pid}/fd", held_open=True) for pid in pids]


@dataclass(frozen=True)
class ScratchLeft:
    """What a task left in the scratch folders: ``removed`` entries and their ``bytes``,
    ``stuck``: entries that could not be removed, ``kept``: entries left alone because they
    cannot be told from other programs' (``ScratchWatch``)."""
    removed: int = 0
    bytes: int = 0
    stuck: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()


class ScratchWatch:
    """New entries in the shared scratch folders since the task started, ours excluded.

    With a user of its own (``owner``: CodaLab's nobody), the child's entries are that user's
    new ones: counted, and removed after the task. Without one (root on Codabench, the
    participant's own user in run_local) any program of our user may have made a new entry
    while the task ran, and nothing the child cannot share marks its own: every new entry
    counts towards the disk limit, so a child filling /dev/shm is still stopped, but none is
    removed, since it may be a stranger's; the log names them.
    """

    def __init__(self, exclude: Path, owner: int | None):
        self.exclude, self.owner = str(exclude), owner
        self.before = {folder: set(_names(folder)) for folder in SCRATCH}
        self.fds = {folder: open_root(folder) for folder in SCRATCH}

    def close(self) -> None:
        for fd in self.fds.values():
            if fd is not None:
                os.close(fd)
        self.fds = dict.fromkeys(self.fds)

    def roots(self) -> list[Root]:
        """The scratch folders, each keeping only the new entries that may be the child's."""
        return [Root(folder, keep=lambda name, info, folder=folder: self._childs(folder, name,
                                                                                  info),
                     fd=fd)
                for folder, fd in self.fds.items()]

    def _childs(self, folder: str, name: str, info: os.stat_result) -> bool:
        return (name not in self.before[folder] and os.path.join(folder, name) != self.exclude
                and (self.owner is None or info.st_uid == self.owner))

    def entries(self) -> list[str]:
        found = []
        for folder, before in self.before.items():
            for name in set(_names(folder)) - before:
                path = os.path.join(folder, name)
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                if self._childs(folder, name, info):
                    found.append(path)
        return sorted(found)

    def clean(self) -> ScratchLeft:
        """Removes the child's entries where its own user marks them; else leaves them all."""
        entries = self.entries()
        size = sum(tree_bytes(path) for path in entries)
        if self.owner is None:
            return ScratchLeft(bytes=size, kept=tuple(entries))
        stuck = tuple(path for path in entries if not force_remove(path))
        return ScratchLeft(len(entries) - len(stuck), size, stuck)


def _names(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def new_staging_folder() -> Path:
    """Named after this process, so a later run can tell an abandoned one."""
    return Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-"))


def remove_abandoned_staging() -> list[str]:
    """Staging folders of earlier runs whose process is gone (killed before its cleanup)."""
    removed = []
    pattern = re.compile(rf"{STAGING_PREFIX}(\d+)-")
    folder = tempfile.gettempdir()
    for name in _names(folder):
        match = pattern.match(name)
        if not match or _alive(int(match.group(1))):
            continue
        if force_remove(os.path.join(folder, name)):
            removed.append(name)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False             # an earlier container's run that had our pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

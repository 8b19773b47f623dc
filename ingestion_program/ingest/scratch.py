"""What a task leaves on the machine: its working folder, and whatever it put in the shared
scratch folders (/tmp, /var/tmp, /dev/shm, the last one RAM outside the memory limit) when
nothing kept it out of them. All of it counts towards the disk limit and is removed after
the task, even folders the child made unreadable (mode 000).
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")
STAGING_PREFIX = "ingestion-"


def _unlock(top: str) -> None:
    """Give every folder below ``top`` back its owner's rights, so rmtree can enter it."""
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                continue
            os.chmod(folder, 0o700)
            stack.extend(entry.path for entry in os.scandir(folder)
                         if entry.is_dir(follow_symlinks=False))
        except OSError:
            pass


def force_remove(path: str | Path) -> bool:
    """Removes a file or a whole tree whatever its modes; True when it is gone."""
    path = str(path)
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
            return True
    except FileNotFoundError:
        return True
    except OSError:
        return False
    shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path):
        _unlock(path)
        shutil.rmtree(path, ignore_errors=True)
    return not os.path.lexists(path)


def tree_bytes(path: str, limit: int) -> int:
    """Allocated bytes below ``path`` (stops counting past ``limit``)."""
    try:
        info = os.lstat(path)
    except OSError:
        return 0
    total = info.st_blocks * 512
    if not stat.S_ISDIR(info.st_mode):
        return total
    for root, folders, files in os.walk(path):
        for name in files + folders:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
            if total > limit:
                return total
    return total


class ScratchWatch:
    """New entries in the shared scratch folders since the task started, ours excluded.

    With a user of its own, only that user's entries are the child's; otherwise every new
    entry is taken for the child's (the worker's container runs nothing else).
    """

    def __init__(self, exclude: Path, owner: int | None):
        self.exclude, self.owner = str(exclude), owner
        self.before = {folder: set(_names(folder)) for folder in SCRATCH}

    def entries(self) -> list[str]:
        found = []
        for folder, before in self.before.items():
            for name in set(_names(folder)) - before:
                path = os.path.join(folder, name)
                if path == self.exclude or not self._childs(path):
                    continue
                found.append(path)
        return found

    def _childs(self, path: str) -> bool:
        try:
            return self.owner is None or os.lstat(path).st_uid == self.owner
        except OSError:
            return False

    def usage(self, limit: int) -> int:
        return sum(tree_bytes(path, limit) for path in self.entries())

    def clean(self) -> tuple[int, int, list[str]]:
        """(entries removed, their bytes, entries that could not be removed)."""
        entries = self.entries()
        size = sum(tree_bytes(path, 1 << 62) for path in entries)
        stuck = [path for path in entries if not force_remove(path)]
        return len(entries) - len(stuck), size, stuck


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

"""The modes of the folders and files this program needs, put back after each task.

Landlock has no right for chmod, and where the child runs as this program's user (Codabench:
root with every capability dropped) it owns them all: a child may set the output folder, the
staging folder or one of their parents to mode 000, and this program, without
CAP_DAC_OVERRIDE, could then write neither its predictions nor its record. So the modes of
the output, program, input, hidden and staging folders (with everything in them and every
folder above them) are recorded before any child runs, and set again after each task, before
anything is written; a change the child made is named in the log.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

SHOWN = 5          # paths named in one log line


class ModeGuard:
    def __init__(self, roots: list[Path | None]):
        self.modes: dict[str, int] = {}
        for root in filter(None, roots):
            self.add(root)

    def add(self, root: Path) -> None:
        """Records ``root``, what is in it and every folder above it (a task's staging
        folder, once it is made)."""
        self._record_above(str(root))
        self._record_tree(str(root))

    def _record(self, path: str) -> None:
        try:
            info = os.lstat(path)
        except OSError:
            return
        if not stat.S_ISLNK(info.st_mode):
            self.modes[path] = stat.S_IMODE(info.st_mode)

    def _record_above(self, path: str) -> None:
        parent = os.path.dirname(os.path.abspath(path))
        while True:
            self._record(parent)
            if parent == os.path.dirname(parent):
                return
            parent = os.path.dirname(parent)

    def _record_tree(self, top: str) -> None:
        self._record(top)
        for folder, folders, files in os.walk(top):
            for name in folders + files:
                self._record(os.path.join(folder, name))

    def restore(self) -> list[str]:
        """Sets every recorded mode again, each folder before what is in it (a sorted path
        comes before the paths below it); returns lines for the log."""
        changed, stuck = [], []
        for path, mode in sorted(self.modes.items()):
            outcome = _put_back(path, mode)
            if outcome:
                (changed if outcome == "changed" else stuck).append(
                    path if outcome == "changed" else f"{path} ({outcome})")
        lines = []
        if changed:
            lines.append(f"modes it had changed were put back: {_some(changed)}")
        if stuck:
            lines.append(f"modes that could not be put back: {_some(stuck)}")
        return lines


def _put_back(path: str, mode: int) -> str | None:
    """None when the mode was right (or the path is gone: a file rewritten later, a task's
    folder removed), "changed" when it was set again, else why it could not be."""
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode) or stat.S_IMODE(info.st_mode) == mode:
            return None
        os.chmod(path, mode)
        return "changed"
    except FileNotFoundError:
        return None
    except OSError as error:
        return error.strerror or type(error).__name__


def _some(paths: list[str]) -> str:
    more = len(paths) - SHOWN
    return ", ".join(paths[:SHOWN]) + (f" and {more} more" if more > 0 else "")

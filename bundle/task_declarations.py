"""A task's declaration file in the data root (``<root>/<name>/<name>_task.json``): where it
is and how it is read, with the organizer's file named in every problem. A leaf: the phase
plan and the competition rules both read declarations, and neither may import the other's
caller (an import cycle)."""
from __future__ import annotations

import json
from pathlib import Path

DECLARATION_SUFFIX = "_task.json"


def declaration_path(root: Path, name: str) -> Path:
    return Path(root) / name / f"{name}{DECLARATION_SUFFIX}"


class TaskDataError(ValueError):
    """A task's files in the data root are missing or malformed: one problem per line, each
    naming the organizer's file."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def read_declaration(path: Path, name: str) -> dict:
    if not path.is_file():
        raise TaskDataError([f"{path}: no declaration for task {name!r} (expected "
                             f"{name}/{name}{DECLARATION_SUFFIX}; see docs/organizer_data.md)"])
    try:
        declaration = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise TaskDataError([f"{path}, line {error.lineno}, column {error.colno}: not valid "
                             f"JSON ({error.msg}); is the file truncated?"]) from None
    except (OSError, UnicodeDecodeError) as error:
        raise TaskDataError([f"{path}: cannot be read as UTF-8 text ({error})"]) from None
    if not isinstance(declaration, dict):
        raise TaskDataError([f"{path}: expected a JSON object of keys, found "
                             f"{type(declaration).__name__}"])
    return declaration

"""JSON files the programs read (their configs, the run record): one reader, clear errors.

The scoring and ingestion configs, and each kind's settings inside them, are read with the
same two functions, so a broken config says the same kind of thing whichever program reads it.
"""
from __future__ import annotations

import json
from pathlib import Path

from .matrix_files import FormatError, PathLike


def read_json_object(path: PathLike, missing_hint: str = "") -> dict:
    """The JSON object in ``path``, or FormatError naming the file and what is wrong."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FormatError(f"{path}: missing" + (f"; {missing_hint}" if missing_hint else "")) from None
    except (OSError, ValueError) as error:
        raise FormatError(f"{path}: not readable JSON ({error})") from None
    if not isinstance(raw, dict):
        raise FormatError(f"{path}: expected a JSON object, found {type(raw).__name__}")
    return raw


def config_field(mapping: dict, key: str, kind, where: str, error=FormatError):
    """``mapping[key]``, checked to be a ``kind`` (a type or tuple; bool never counts as a
    number); ``error`` names ``where.key`` and what was expected. ``kind`` None: any value."""
    if key not in mapping:
        raise error(f"{where}: missing key {key!r}")
    value = mapping[key]
    numeric = isinstance(kind, tuple) and int in kind or kind in (int, float)
    if kind is not None and (not isinstance(value, kind) or numeric and isinstance(value, bool)):
        expected = " or ".join(k.__name__ for k in kind) if isinstance(kind, tuple) else kind.__name__
        raise error(f"{where}.{key}: expected {expected}, found {type(value).__name__} {value!r}")
    return value


def load_config_file(path: PathLike, parse, who_writes_it: str, error=FormatError):
    """Read a generated config and hand it to ``parse(raw, source)``; a missing or unreadable
    file raises ``error`` saying so (and who writes it)."""
    try:
        raw = read_json_object(path, who_writes_it)
    except FormatError as problem:
        raise error(str(problem)) from None
    return parse(raw, str(path))

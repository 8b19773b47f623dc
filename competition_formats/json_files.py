"""JSON files the programs read (their configs, the run record): one reader, clear errors."""
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

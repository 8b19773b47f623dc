"""The Retina task files: csv tables with a header row of column names.

A task folder holds ``train.csv`` (feature columns, then ``label`` and ``grade``), ``test.csv``
(the same feature columns, in-domain and shifted rows pooled) and the hidden
``test_reference.csv`` (``label``, ``grade``, ``shifted`` for each row of ``test.csv``, in
order). Standard library and numpy only: the scorer reads the reference with this module.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from runtime.formats import FormatError

TRAIN_FILE = "train.csv"
FEATURES_FILE = "test.csv"
REFERENCE_FILE = "test_reference.csv"
TARGET_COLUMNS = ("label", "grade")
REFERENCE_COLUMNS = ("label", "grade", "shifted")
MAX_TABLE_BYTES = 256 << 20


def read_table(path: Path) -> tuple[list[str], np.ndarray]:
    """(column names, float64 rows x columns); FormatError names the file, line and column
    of the first problem: a missing header, a ragged row, a value that is not a finite number."""
    path = Path(path)
    if not path.is_file():
        raise FormatError(f"{path}: file does not exist")
    if path.stat().st_size > MAX_TABLE_BYTES:
        raise FormatError(f"{path}: {path.stat().st_size} bytes; tables above "
                          f"{MAX_TABLE_BYTES >> 20} MiB are not read")
    with open(path, newline="", encoding="utf-8-sig") as handle:
        try:
            rows = list(csv.reader(handle))
        except (csv.Error, UnicodeDecodeError) as error:
            raise FormatError(f"{path}: not a csv text file ({error})") from None
    rows = [row for row in rows if row]
    if not rows:
        raise FormatError(f"{path}: empty; expected a header row of column names")
    header = [name.strip() for name in rows[0]]
    if any(_is_number(name) for name in header):
        raise FormatError(f"{path}: line 1 should be a header of column names, found "
                          f"{','.join(header[:4])}")
    if len(set(header)) != len(header):
        raise FormatError(f"{path}: line 1: repeated column names")
    values = np.empty((len(rows) - 1, len(header)))
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise FormatError(f"{path}: line {line} has {len(row)} values, the header "
                              f"{len(header)}")
        for column, text in enumerate(row):
            number = _number(text)
            if number is None:
                raise FormatError(f"{path}: line {line}, column {header[column]}: {text!r} is "
                                  "not a finite number")
            values[line - 2, column] = number
    if not len(values):
        raise FormatError(f"{path}: no data rows after the header")
    return header, values


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if np.isfinite(value) else None


def _is_number(text: str) -> bool:
    return _number(text) is not None


def columns(path: Path, required: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Every column of a table by name, in the file's order; ``required`` checked present."""
    header, values = read_table(path)
    missing = [name for name in required if name not in header]
    if missing:
        raise FormatError(f"{path}: no column {', '.join(missing)}; the header has "
                          f"{', '.join(header)}")
    return {name: values[:, index] for index, name in enumerate(header)}


def reference(path: Path) -> dict[str, np.ndarray]:
    """The hidden reference: label 0/1, grade (an integer), shifted 0/1, one per test row."""
    table = columns(path, REFERENCE_COLUMNS)
    for name in ("label", "shifted"):
        wrong = np.flatnonzero(~np.isin(table[name], (0, 1)))
        if wrong.size:
            raise FormatError(f"{path}: line {wrong[0] + 2}, column {name}: "
                              f"{table[name][wrong[0]]:g}; expected 0 or 1")
    wrong = np.flatnonzero(table["grade"] != np.round(table["grade"]))
    if wrong.size:
        raise FormatError(f"{path}: line {wrong[0] + 2}, column grade: expected an integer")
    return {"label": table["label"].astype(np.int64), "grade": table["grade"].astype(np.int64),
            "shifted": table["shifted"].astype(bool)}

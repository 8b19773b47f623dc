"""2-D numeric matrices as text (np.savetxt style) or .npy, read with precise error messages.

Only the standard library and numpy may be imported: this package is copied into the scoring and
ingestion programs that run inside the competition's docker image.
"""

from __future__ import annotations

import math
import os
import re
import warnings
import zipfile
import zlib
from pathlib import Path

import numpy as np

TEXT_EXTENSIONS = (".csv", ".txt")
NPY_EXTENSION = ".npy"
MATRIX_EXTENSIONS = TEXT_EXTENSIONS + (NPY_EXTENSION,)

_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NON_FINITE = re.compile(r"[+-]?(?:nan|inf|infinity)", re.IGNORECASE)
_NPY_MAGIC = b"\x93NUMPY"
SNIFF_BYTES = 1 << 16     # enough for the header and first data line of any of our formats
# Size bounds for a matrix whose shape is known, checked before a byte is parsed, so a file far
# larger than its shape (a 1 GiB upload for a 50 x 3 matrix) costs neither time nor memory.
# np.savetxt's "%.18e" plus a delimiter is 26 bytes a number; 64 leaves room for any sane
# format, a header of column names and CRLF line ends. .npy: 8 bytes a float64 (16 allows
# any real dtype) after a header numpy keeps far below SNIFF_BYTES.
MAX_TEXT_BYTES_PER_VALUE = 64
MAX_NPY_BYTES_PER_VALUE = 16
# What np.load raises for corrupt files (MemoryError: a header claiming a huge shape).
NUMPY_LOAD_ERRORS = (ValueError, OSError, EOFError, MemoryError, zipfile.BadZipFile, zlib.error)

PathLike = str | os.PathLike


class FormatError(ValueError):
    """A data file is missing or malformed; the message names the file and where known the spot."""


def find_misplaced(path: PathLike, limit: int = 3) -> list[Path]:
    """Files named like `path` in subfolders of its folder (participants often zip the folder)."""
    path = Path(path)
    if not path.parent.is_dir():
        return []
    found = sorted(p for p in path.parent.rglob(path.name) if p.is_file() and p != path)
    return found[:limit]


def require_file(path: PathLike, extensions: tuple[str, ...]) -> Path:
    """Return `path` as a Path after checking it is an existing file with one of `extensions`."""
    path = Path(path)
    if not path.exists():
        message = f"{path}: file does not exist"
        misplaced = find_misplaced(path)
        if misplaced:
            where = ", ".join(str(p) for p in misplaced)
            message += (f"; a file of that name was found at {where}: move it to {path} "
                        "(was the enclosing folder zipped instead of its contents?)")
        raise FormatError(message)
    if not path.is_file():
        raise FormatError(f"{path}: is a directory, expected a file")
    if path.suffix.lower() not in extensions:
        raise FormatError(f"{path}: unsupported file extension {path.suffix or '(none)'!r}; "
                          f"accepted: {', '.join(extensions)}")
    return path


def check_numeric_array(path: Path, array: np.ndarray, what: str = "array") -> None:
    """Reject non-numeric dtypes, empty arrays and NaN/inf, naming the first bad element's index."""
    if array.dtype.kind not in "iuf":
        raise FormatError(f"{path}: expected a real numeric {what}, found dtype {array.dtype}")
    if array.size == 0:
        raise FormatError(f"{path}: {what} is empty (shape {array.shape})")
    if array.dtype.kind == "f":
        bad = np.argwhere(~np.isfinite(array))
        if len(bad):
            index = tuple(int(i) for i in bad[0])
            raise FormatError(f"{path}: {what} element at index {index} (0-based): "
                              f"expected a finite number, found {array[index]}")


def read_matrix(path: PathLike, *, n_rows: int | None = None, n_cols: int | None = None,
                row_label: str = "", col_label: str = "") -> np.ndarray:
    """Read a float64 2-D matrix from .csv/.txt text or .npy, checking the shape when given.

    `row_label` / `col_label` (e.g. "samples") only make shape errors say what rows/columns mean.
    When both are given, a file too large for that shape is refused from its size alone,
    and a text file is read no further than two rows past ``n_rows``: memory stays bounded
    by the expected shape, whatever was uploaded.
    """
    path = require_file(path, MATRIX_EXTENSIONS)
    if n_rows is not None and n_cols is not None:
        _check_file_size(path, n_rows, n_cols, row_label, col_label)
    if path.suffix.lower() == NPY_EXTENSION:
        matrix = _read_npy_matrix(path)
        shape = matrix.shape
    else:
        # Two rows past the expected count tell "one row too many (a header?)" from "more".
        max_rows = None if n_rows is None else n_rows + 2
        matrix = _read_text_matrix(path, max_rows)
        shape = matrix.shape
        if max_rows is not None and shape[0] >= max_rows:    # stopped early: count the rest
            shape = (_count_data_rows(path), shape[1])
    _check_matrix_shape(path, shape, n_rows, n_cols, row_label, col_label)
    return matrix


def max_matrix_bytes(n_rows: int, n_cols: int, suffix: str) -> int:
    """The largest file accepted for an n_rows x n_cols matrix (see MAX_*_BYTES_PER_VALUE).

    Text: n_rows + 1 lines (a header allowed) of n_cols numbers at MAX_TEXT_BYTES_PER_VALUE
    bytes each plus CRLF; .npy: the values at MAX_NPY_BYTES_PER_VALUE bytes; both plus
    SNIFF_BYTES of slack (BOM, blank lines, the .npy header).
    """
    if suffix.lower() == NPY_EXTENSION:
        return SNIFF_BYTES + n_rows * n_cols * MAX_NPY_BYTES_PER_VALUE
    return SNIFF_BYTES + (n_rows + 1) * (n_cols * MAX_TEXT_BYTES_PER_VALUE + 2)


def _check_file_size(path: Path, n_rows: int, n_cols: int, row_label: str, col_label: str) -> None:
    size, bound = path.stat().st_size, max_matrix_bytes(n_rows, n_cols, path.suffix)
    if size > bound:
        shape = " x ".join(_count(n, name) + (f" ({label})" if label else "")
                           for n, name, label in ((n_rows, "row", row_label),
                                                  (n_cols, "column", col_label)))
        raise FormatError(f"{path}: {size:,} bytes, far more than {shape} can take (at most "
                          f"{bound:,} bytes); refused without reading it: check the file's shape")


def _count_data_rows(path: Path) -> int:
    """Non-blank lines less a header, streamed, for the shape error of a file with too many
    rows (only called once its size is known to be bounded)."""
    with open(path, "rb") as stream:
        head = stream.read(SNIFF_BYTES).decode("utf-8", errors="replace").splitlines()[:-1]
    header, _ = _detect_header_and_delimiter(path, head)
    with open(path, "rb") as stream:
        return sum(1 for line in stream if line.strip()) - (header is not None)


def write_matrix(path: PathLike, array: np.ndarray) -> None:
    """Write a 2-D matrix canonically: np.savetxt defaults for text, np.save for .npy."""
    array = np.asarray(array, dtype=np.float64)
    if array.ndim != 2:
        raise ValueError(f"{path}: expected a 2-D array to write, got shape {array.shape}")
    suffix = Path(path).suffix.lower()
    if suffix == NPY_EXTENSION:
        np.save(path, array)
    elif suffix in TEXT_EXTENSIONS:
        np.savetxt(path, array)
    else:
        raise ValueError(f"{path}: cannot write extension {suffix!r}; use {MATRIX_EXTENSIONS}")


def load_npy(path: Path) -> np.ndarray:
    """np.load without pickles, turning every failure into a FormatError."""
    try:
        array = np.load(path, allow_pickle=False)
    except NUMPY_LOAD_ERRORS as error:
        raise FormatError(f"{path}: not a valid .npy file ({error})") from None
    if not isinstance(array, np.ndarray):  # an .npz archive saved under a .npy name
        array.close()
        raise FormatError(f"{path}: is an .npz archive, expected one array saved with np.save")
    return array


def _read_npy_matrix(path: Path) -> np.ndarray:
    """Load a 2-D numeric .npy as float64."""
    array = load_npy(path)
    if array.ndim != 2:
        raise FormatError(f"{path}: expected a 2-D array, found shape {array.shape}")
    check_numeric_array(path, array, "matrix")
    return array.astype(np.float64)


def _read_text_matrix(path: Path, max_rows: int | None = None) -> np.ndarray:
    """Fast path: sniff the head, then np.loadtxt straight from the file (C, chunked).

    Anything unusual (binary bytes, a BOM, blank lines between comma rows, a bad token,
    NaN) falls back to the careful path, whose only job is the precise error message.
    """
    try:
        with open(path, "rb") as stream:
            head = stream.read(SNIFF_BYTES)
            complete = len(stream.read(1)) == 0
    except OSError as error:
        raise FormatError(f"{path}: cannot be read ({error.strerror or error})") from None
    lines = head.decode("utf-8", errors="replace").splitlines()
    if not complete:
        lines = lines[:-1]       # the last line of the head may be cut
    if head.startswith(_NPY_MAGIC) or b"\0" in head or len(lines) < 2:
        return _read_text_matrix_carefully(path)
    header, delimiter = _detect_header_and_delimiter(path, lines)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")        # loadtxt warns about empty input
            matrix = np.loadtxt(path, dtype=np.float64, delimiter=delimiter, comments=None,
                                skiprows=0 if header is None else header + 1, ndmin=2,
                                encoding="utf-8", max_rows=max_rows)
    except (ValueError, UnicodeDecodeError):
        matrix = None
    if matrix is None or matrix.size == 0 or not np.isfinite(matrix).all():
        return _read_text_matrix_carefully(path, max_rows)
    return matrix


def _read_text_matrix_carefully(path: Path, max_rows: int | None = None) -> np.ndarray:
    """Parse the decoded lines; on failure scan them to say where it broke."""
    lines = _decode_text(path).splitlines()
    header, delimiter = _detect_header_and_delimiter(path, lines)
    start = 0 if header is None else header + 1
    # loadtxt rejects whitespace-only lines when splitting on commas: drop blank lines first.
    data = [line for line in lines[start:] if line.strip()][:max_rows]
    try:
        matrix = np.loadtxt(data, dtype=np.float64, delimiter=delimiter, comments=None, ndmin=2)
    except ValueError:
        matrix = None
    if matrix is None or not np.isfinite(matrix).all():
        matrix = _scan_lines(path, lines, start, delimiter)
    return matrix


def _decode_text(path: Path) -> str:
    """Read a file as UTF-8 text (a BOM is allowed), rejecting binary content."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise FormatError(f"{path}: cannot be read ({error.strerror or error})") from None
    if raw.startswith(_NPY_MAGIC):
        raise FormatError(f"{path}: is a binary NumPy .npy file, not text; name it "
                          f"{path.with_suffix('.npy').name} or write it with np.savetxt")
    nul = raw.find(b"\0")
    if nul >= 0:
        line = raw.count(b"\n", 0, nul) + 1
        raise FormatError(f"{path}, line {line}: binary content (NUL byte at byte offset {nul}), "
                          "expected text with one row of numbers per line")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise FormatError(f"{path}, line {line}: not valid UTF-8 text (byte "
                          f"0x{raw[error.start]:02x} at byte offset {error.start}), "
                          "expected plain text numbers") from None


def _split(line: str, delimiter: str | None) -> list[str]:
    """Split a line into stripped fields the way np.loadtxt would."""
    if delimiter is None:
        return line.split()
    return [field.strip() for field in line.split(delimiter)]


def _is_number(token: str) -> bool:
    """True for decimal/scientific numbers and nan/inf spellings (the latter are rejected later)."""
    return bool(_NUMBER.fullmatch(token) or _NON_FINITE.fullmatch(token))


def _detect_header_and_delimiter(path: Path, lines: list[str]) -> tuple[int | None, str | None]:
    """Return (index of the header line or None, delimiter: ',' or None for whitespace).

    Only the first non-blank line may be a header: one in which no field is a number.
    A first line mixing numbers and other tokens is data with a bad token, reported as such.
    """
    content = (i for i, line in enumerate(lines) if line.strip())
    first = next(content, None)
    if first is None:
        state = "is empty" if not lines else "contains only blank lines"
        raise FormatError(f"{path}: {state}, expected rows of numbers")
    delimiter = "," if "," in lines[first] else None
    if any(_is_number(token) for token in _split(lines[first], delimiter)):
        return None, delimiter
    following = next(content, None)
    if following is None:
        raise FormatError(f"{path}: contains only a header (line {first + 1}), no rows of numbers")
    return first, "," if "," in lines[following] else None


def _scan_lines(path: Path, lines: list[str], start: int, delimiter: str | None) -> np.ndarray:
    """Parse line by line to report the first bad line/column (1-based; columns count fields)."""
    rows: list[list[float]] = []
    first_line = 0
    for number, line in enumerate(lines[start:], start=start + 1):
        if not line.strip():
            continue
        tokens = enumerate(_split(line, delimiter), start=1)
        row = [_parse_token(path, number, column, token) for column, token in tokens]
        if rows and len(row) != len(rows[0]):
            raise FormatError(f"{path}: line {number} has {_count(len(row), 'column')}, expected "
                              f"{len(rows[0])} (as on line {first_line})")
        first_line = first_line or number
        rows.append(row)
    return np.array(rows, dtype=np.float64)


def _parse_token(path: Path, line: int, column: int, token: str) -> float:
    """Convert one field to a finite float or raise a FormatError pointing at it."""
    where = f"{path}, line {line}, column {column}"
    shown = repr(token if len(token) <= 40 else token[:37] + "...")
    if not token:
        raise FormatError(f"{where}: expected a number, found an empty field")
    if not _is_number(token):
        raise FormatError(f"{where}: expected a number, found {shown}")
    value = float(token)
    if not math.isfinite(value):
        raise FormatError(f"{where}: expected a finite number, found {shown}")
    return value


def _check_matrix_shape(path: Path, shape: tuple[int, ...], n_rows: int | None, n_cols: int | None,
                        row_label: str, col_label: str) -> None:
    """Raise if the shape differs from the expected one, phrased in the file's own orientation."""
    if (n_rows is None or shape[0] == n_rows) and (n_cols is None or shape[1] == n_cols):
        return
    dims = [(n, name, label, found) for n, name, label, found in
            ((n_rows, "row", row_label, shape[0]), (n_cols, "column", col_label, shape[1]))
            if n is not None]
    wrong = " and ".join(f"{name}s" for n, name, _, found in dims if n != found)
    expected = " x ".join(_count(n, name) + (f" ({label})" if label else "")
                          for n, name, label, _ in dims)
    message = (f"{path}: wrong number of {wrong}: expected {expected}, "
               f"found {_count(shape[0], 'row')} x {_count(shape[1], 'column')}")
    if n_rows is not None and n_cols is not None and n_rows != n_cols and shape == (n_cols, n_rows):
        message += " (the file looks transposed)"
    elif n_rows is not None and shape[0] == n_rows + 1 and path.suffix.lower() != NPY_EXTENSION:
        message += " (one row too many: if the first line holds column names, remove it)"
    raise FormatError(message)


def _count(n: int, noun: str) -> str:
    """'1 row', '2 rows'."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def describe_position(path: PathLike, row: int, column: int | None = None) -> str:
    """Where element (row, column) (0-based) of a matrix read by read_matrix sits in its file.

    Text files: the 1-based line (header and blank lines counted) and field; .npy: the index.
    Without a column, only the line (row). Only called on the error path: it re-reads the file.
    """
    path = Path(path)
    if path.suffix.lower() == NPY_EXTENSION:
        where = f"{path}, row {row}" + ("" if column is None else f" column {column}")
        return where + " (0-based)"
    lines = _decode_text(path).splitlines()
    header, _ = _detect_header_and_delimiter(path, lines)
    start = 0 if header is None else header + 1
    data_lines = (number for number, line in enumerate(lines[start:], start=start + 1)
                  if line.strip())
    field = "" if column is None else f", column {column + 1}"
    for index, number in enumerate(data_lines):
        if index == row:
            return f"{path}, line {number}{field}"
    return f"{path}, data row {row + 1}{field}"

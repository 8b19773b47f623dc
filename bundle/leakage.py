"""The leakage check: proof that no hidden file, array or test label reached a public file.

Hidden references are small (kB to MB) and read into memory; public files may be far larger
than memory (image sets of tens of GB), so each is read in chunks, once for its sha256 and
the byte search, and its arrays are loaded only where one could equal a hidden array (the
same number of values: a .npy header says it before the data) or must be checked all zeros.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import math
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from typing import BinaryIO, Iterator

import numpy as np

from .zips import CHUNK, NESTED_IN_MEMORY_BYTES, Content, Member, member

NEEDLE_BYTES = 64           # shorter hidden bytes turn up in public files by chance
SMALL_ARRAY = 8             # fewer values than this equal public ones by chance
# Text arrays this small are parsed outright, as they always were; a larger text file is
# parsed only when its count of values is that of some hidden array.
TEXT_PARSE_BYTES = 16 * 2**20
HEADERS = {(1, 0): np.lib.format.read_array_header_1_0,
           (2, 0): np.lib.format.read_array_header_2_0}


def _arrays(name: str, data: bytes) -> dict[str, np.ndarray]:
    """The numeric arrays inside an .npy, .npz, .csv or .txt member (nothing otherwise)."""
    try:
        if name.endswith(".npy"):
            return {name: np.load(io.BytesIO(data), allow_pickle=False)}
        if name.endswith(".npz"):
            with np.load(io.BytesIO(data), allow_pickle=False) as archive:
                return {f"{name}:{key}": archive[key] for key in archive.files}
        if name.endswith((".csv", ".txt")):
            return {name: _text_array(io.BytesIO(data), _delimiter(data[:4096]))}
    except (ValueError, OSError, zipfile.BadZipFile):
        return {}
    return {}


def _delimiter(head: bytes) -> str | None:
    return "," if b"," in head else None


def _text_array(stream: BinaryIO, delimiter: str | None) -> np.ndarray:
    return np.loadtxt(stream, delimiter=delimiter, ndmin=2)


def _same_values(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal as flat sequences: a leak may change the shape (N x 1 vs N) but not the values."""
    return a.size == b.size and a.dtype.kind in "iuf" and b.dtype.kind in "iuf" \
        and np.array_equal(a.ravel(), b.ravel())


@dataclass
class _Hidden:
    """What the public files are searched for."""
    hashes: dict[str, str]                   # sha256 -> hidden file
    arrays: dict[str, np.ndarray]            # label -> hidden array
    # (bytes, label, whether the public file must be larger than them to count)
    needles: list[tuple[bytes, str, bool]] = field(default_factory=list)

    @property
    def sizes(self) -> set[int]:
        return {array.size for array in self.arrays.values()}


def _hidden(hidden: dict[str, bytes]) -> _Hidden:
    arrays = {label: array for name, data in hidden.items()
              for label, array in _arrays(name, data).items() if array.size >= SMALL_ARRAY}
    raw = [(np.ascontiguousarray(array).tobytes(), label, False)
           for label, array in arrays.items()]
    # a same-sized copy of a hidden file is the sha256 check's to report
    files = [(data, name, True) for name, data in hidden.items()]
    return _Hidden({hashlib.sha256(data).hexdigest(): name for name, data in hidden.items()},
                   arrays, [n for n in raw + files if len(n[0]) >= NEEDLE_BYTES])


def leakage_problems(hidden: dict[str, bytes], public: dict[str, dict[str, Content | Member]],
                     zeroed: tuple[str, ...] = ()) -> list[str]:
    """Proof that no hidden file, array or test label reached a public zip.

    ``hidden``: member name -> bytes of the hidden reference data; ``public``: zip name ->
    its members (bytes, files, or ``zips.Member``s read when needed); ``zeroed``: names of
    .npz arrays the kind publishes as placeholders, all zeros (its ``ZEROED_PUBLIC_ARRAYS``).
    Checks: identical files (sha256); hidden arrays (references, true labels) equal to any
    public array; hidden arrays' raw bytes, and any hidden file of 64 bytes or more, inside
    any public file (a reference pasted into a bigger file); every placeholder all zeros.
    """
    found = _hidden(hidden)
    problems = []
    for zip_name, members in public.items():
        for name, content in members.items():
            problems += _member_problems(f"{zip_name}:{name}", name, member(content), found,
                                         zeroed)
    return sorted(set(problems))


def _member_problems(where: str, name: str, public: Member, hidden: _Hidden,
                     zeroed: tuple[str, ...]) -> list[str]:
    digest, inside = _scan(public, hidden.needles)
    problems = [f"{where} is a copy of hidden {hidden.hashes[digest]}"] \
        if digest in hidden.hashes else []
    problems += [f"{where} contains the bytes of hidden {label}" for label in inside]
    try:
        problems += _array_problems(where, name, public, hidden, zeroed)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile):
        pass                                  # not an array file after all
    return problems


def _scan(public: Member, needles: list[tuple[bytes, str, bool]]) -> tuple[str, set[str]]:
    """The sha256 of ``public`` and the labels of the needles inside it, in one pass of
    chunks that overlap by the longest needle less one byte (no match falls between two)."""
    wanted = [(needle, label) for needle, label, smaller in needles
              if len(needle) < public.size or (not smaller and len(needle) == public.size)]
    overlap = max((len(needle) for needle, _ in wanted), default=1) - 1
    digest, found, tail = hashlib.sha256(), set(), b""
    with public.open() as stream:
        while chunk := stream.read(max(CHUNK, 4 * overlap)):
            digest.update(chunk)
            window = tail + chunk
            found |= {label for needle, label in wanted if needle in window}
            tail = window[len(window) - overlap:] if overlap else b""
    return digest.hexdigest(), found


def _array_problems(where: str, name: str, public: Member, hidden: _Hidden,
                    zeroed: tuple[str, ...]) -> list[str]:
    if name.endswith(".npy"):
        with public.open() as stream:
            return _npy_problems(where, name, stream, hidden, False)
    if name.endswith(".npz"):
        return _npz_problems(where, name, public, hidden, zeroed)
    if name.endswith((".csv", ".txt")):
        array = _text_values(public, hidden.sizes)
        return [] if array is None else _equal_problems(where, name, array, hidden)
    return []


def _equal_problems(where: str, label: str, array: np.ndarray, hidden: _Hidden) -> list[str]:
    return [f"{where}: array {label} equals hidden {hidden_label}"
            for hidden_label, hidden_array in hidden.arrays.items()
            if _same_values(array, hidden_array)]


def _npz_problems(where: str, name: str, public: Member, hidden: _Hidden,
                  zeroed: tuple[str, ...]) -> list[str]:
    problems = []
    with _seekable(public) as stream, zipfile.ZipFile(stream) as archive:
        for entry in archive.namelist():
            key = entry.removesuffix(".npy")
            with archive.open(entry) as array_stream:
                problems += _npy_problems(where, f"{name}:{key}", array_stream, hidden,
                                          key in zeroed)
    return problems


@contextlib.contextmanager
def _seekable(public: Member) -> Iterator[BinaryIO]:
    """The member as a file a zip reader can seek in cheaply (a zip's member stream re-reads
    from its start at every seek back): in memory when small, else a temporary copy."""
    with public.open() as stream:
        if public.size <= NESTED_IN_MEMORY_BYTES:
            yield io.BytesIO(stream.read())
            return
        with tempfile.TemporaryFile() as copy:
            shutil.copyfileobj(stream, copy, CHUNK)
            copy.seek(0)
            yield copy


def _npy_header(stream: BinaryIO) -> tuple[tuple[int, ...], bool, np.dtype]:
    version = np.lib.format.read_magic(stream)
    if version not in HEADERS:
        raise ValueError(f"npy format {version}")
    return HEADERS[version](stream)


def _npy_problems(where: str, label: str, stream: BinaryIO, hidden: _Hidden,
                  placeholder: bool) -> list[str]:
    """An .npy stream's array against the hidden arrays (read only when it has as many
    values as one of them) and, a placeholder, checked all zeros chunk by chunk."""
    try:
        shape, fortran, dtype = _npy_header(stream)
    except ValueError:
        return []                             # not an array file, as np.load would find
    if dtype.hasobject:
        return []                             # np.load refuses these without pickle
    size = math.prod(shape)
    if size in hidden.sizes and dtype.kind in "iuf":
        data = stream.read(size * dtype.itemsize)
        array = np.frombuffer(data, dtype).reshape(shape, order="F" if fortran else "C")
        nonzero = placeholder and bool(np.any(array != 0))
        problems = _equal_problems(where, label, array, hidden)
    else:
        nonzero = placeholder and not _all_zeros(stream, dtype, size)
        problems = []
    if nonzero:
        problems.append(f"{where}: {label.rpartition(':')[2]} is not all zeros "
                        "(test labels would leak)")
    return problems


def _all_zeros(stream: BinaryIO, dtype: np.dtype, size: int) -> bool:
    left, step = size * dtype.itemsize, max(1, CHUNK // dtype.itemsize) * dtype.itemsize
    while left > 0 and (chunk := stream.read(min(step, left))):
        left -= len(chunk)
        whole = len(chunk) - len(chunk) % dtype.itemsize
        if np.any(np.frombuffer(chunk[:whole], dtype) != 0):
            return False
    return True


def _text_values(public: Member, sizes: set[int]) -> np.ndarray | None:
    """A .csv or .txt member's array, read where it could equal a hidden array."""
    with public.open() as stream:
        head = stream.read(4096)
    delimiter = _delimiter(head)
    if public.size > TEXT_PARSE_BYTES and _text_count(public, delimiter) not in sizes:
        return None
    with public.open() as stream:
        return _text_array(stream, delimiter)


def _text_count(public: Member, delimiter: str | None) -> int:
    """How many values np.loadtxt would read: data lines (comments and blank lines left out)
    times the fields of the first; a ragged file, which it refuses, may count anything."""
    rows, fields = 0, 0
    with public.open() as stream:
        for line in stream:
            data = line.split(b"#", 1)[0].strip()
            if data:
                rows += 1
                fields = fields or len(re.split(rb"\s+", data) if delimiter is None
                                       else data.split(delimiter.encode()))
    return rows * fields

"""The leakage check: proof that no hidden file, array or test label reached a public file.

Hidden references are small (kB to MB) and read into memory; public files may be far larger
than memory (image sets of tens of GB), so each is read in chunks, once for its sha256 and
the byte search, and its arrays are loaded only where one could equal a hidden array (the
same number of values: a .npy header says it before the data) or must be checked all zeros.
"""
from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import math
import re
import shutil
import struct
import tempfile
import zipfile
import zlib
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


# -- the pages' embedded images (bundle/data_examples.py writes them) -------------------------

PAGE_IMAGE = re.compile(r"data:image/[a-z+.-]+;base64,([A-Za-z0-9+/=\s]+)")
# Rows of a test array converted at once when compared with the pages' images.
TEST_BATCH_VALUES = 2**25


class PageImageError(ValueError):
    pass


def png_pixels(data: bytes) -> np.ndarray:
    """The 8-bit pixels of a PNG (grey, grey+alpha, RGB or RGBA; not interlaced), every
    filter undone: (H, W) or (H, W, channels). Standard library and numpy only."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise PageImageError("not a PNG")
    position, header, compressed = 8, None, []
    while position + 8 <= len(data):
        length, = struct.unpack(">I", data[position:position + 4])
        kind, body = data[position + 4:position + 8], data[position + 8:position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            compressed.append(body)
    if header is None:
        raise PageImageError("no IHDR chunk")
    width, height, depth, colour, _, _, interlace = header
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(colour)
    if depth != 8 or channels is None or interlace:
        raise PageImageError(f"bit depth {depth}, colour type {colour}, interlace {interlace}: "
                             "not one the pages write")
    try:
        raw = zlib.decompress(b"".join(compressed))
    except zlib.error as error:
        raise PageImageError(f"its data does not decompress ({error})") from None
    stride = width * channels
    if len(raw) != height * (stride + 1):
        raise PageImageError("its data is not as long as its header says")
    rows = np.frombuffer(raw, np.uint8).reshape(height, stride + 1)
    out = np.zeros((height, stride), np.int32)
    for y in range(height):
        line, up = rows[y, 1:].astype(np.int32), out[y - 1] if y else np.zeros(stride, np.int32)
        kind = rows[y, 0]
        if kind in (0, 2):
            out[y] = (line + (up if kind == 2 else 0)) % 256
        elif kind in (1, 3, 4):
            for x in range(stride):        # each byte depends on the one just decoded
                left = out[y, x - channels] if x >= channels else 0
                corner = up[x - channels] if x >= channels else 0
                if kind == 1:
                    guess = left
                elif kind == 3:
                    guess = (left + up[x]) // 2
                else:
                    p = left + up[x] - corner
                    pa, pb, pc = abs(p - left), abs(p - up[x]), abs(p - corner)
                    guess = left if pa <= pb and pa <= pc else up[x] if pb <= pc else corner
                out[y, x] = (line[x] + guess) % 256
        else:
            raise PageImageError(f"row {y} has filter type {kind}")
    pixels = out.astype(np.uint8).reshape(height, width, channels)
    return pixels[..., 0] if channels == 1 else pixels


def native_pixels(pixels: np.ndarray) -> np.ndarray:
    """An image enlarged by repeating each pixel k x k times, at its size before (k the
    largest that fits): what a page enlarged, compared as the array it came from."""
    height, width = pixels.shape[:2]
    for factor in range(min(height, width), 1, -1):
        if height % factor or width % factor:
            continue
        small = pixels[::factor, ::factor]
        if np.array_equal(small.repeat(factor, axis=0).repeat(factor, axis=1), pixels):
            return small
    return pixels


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def page_images(pages: dict[str, str]) -> tuple[dict[str, dict[str, bytes]], list[str]]:
    """The images embedded in the pages as data: URIs, as public files for the leakage check:
    per page, each image's PNG bytes, its pixels as an .npy (so the array checks see them),
    and its pixels before enlarging where it was. Also the problems of images that cannot be
    read back (a page must hold nothing the check cannot see into)."""
    members, problems = {}, []
    for page, html in pages.items():
        found = {}
        for number, match in enumerate(PAGE_IMAGE.finditer(html), 1):
            where = f"{page}: image {number}"
            try:
                data = base64.b64decode("".join(match.group(1).split()), validate=True)
                pixels = png_pixels(data)
            except (ValueError, PageImageError, struct.error) as error:
                problems.append(f"{where} cannot be read back for the leakage check ({error})")
                continue
            found[f"image {number}.png"] = data
            found[f"image {number}.npy"] = _npy(pixels)
            small = native_pixels(pixels)
            if small.shape != pixels.shape:
                found[f"image {number} before enlarging.npy"] = _npy(small)
        if found:
            members[page] = found
    return members, problems


def _test_arrays(members: dict[str, Content | Member]) -> Iterator[tuple[str, BinaryIO]]:
    """Each .npy stream of the members (inside .npz files too) whose name says it holds test
    inputs (``test`` in the file or array name: x_test, test_images.npy), positioned at its
    header."""
    for name, content in members.items():
        public = member(content)
        if name.endswith(".npy") and "test" in name.lower():
            with public.open() as stream:
                yield name, stream
        elif name.endswith(".npz"):
            try:
                with _seekable(public) as stream, zipfile.ZipFile(stream) as archive:
                    for entry in archive.namelist():
                        if "test" in entry.lower():
                            with archive.open(entry) as array_stream:
                                yield f"{name}:{entry.removesuffix('.npy')}", array_stream
            except zipfile.BadZipFile:
                continue


def shown_test_inputs(images: dict[str, dict[str, bytes]],
                        inputs: dict[str, dict[str, Content | Member]]) -> list[str]:
    """No page image is a test input: every row of every test array of ``inputs`` (zip name
    -> members) is made 8-bit and, where its thumbnail has the shape of a page image, brought
    to a thumbnail as the data page does (``bundle/data_examples.py``), then compared with the
    page images, and with the images before enlarging as they are. Rows are read in batches,
    and only from arrays whose shape could give a page image."""
    from .data_examples import eight_bit, thumbnail_shape, thumbnails
    wanted: dict[bytes, str] = {}
    for page, found in images.items():
        for name, data in found.items():
            if name.endswith(".npy"):
                pixels = np.load(io.BytesIO(data), allow_pickle=False)
                image = name.removesuffix(".npy").removesuffix(" before enlarging")
                wanted.setdefault(_digest(pixels), f"{page} ({image})")
    shapes = {tuple(np.load(io.BytesIO(d), allow_pickle=False).shape)
              for found in images.values() for n, d in found.items() if n.endswith(".npy")}
    problems = []
    for zip_name, members in inputs.items():
        for label, stream in _test_arrays(members):
            try:
                shape, fortran, dtype = _npy_header(stream)
            except ValueError:
                continue
            if len(shape) not in (3, 4) or dtype.kind not in "iuf" or fortran:
                continue
            row = _eight_bit_shape(shape[1:])
            if row not in shapes and thumbnail_shape(row) not in shapes:
                continue
            size = math.prod(shape[1:])
            step = max(1, TEST_BATCH_VALUES // max(1, size))
            for first in range(0, shape[0], step):
                count = min(step, shape[0] - first)
                data = stream.read(count * size * dtype.itemsize)
                batch = eight_bit(np.frombuffer(data, dtype).reshape(count, *shape[1:]))
                for candidates in (batch, thumbnails(batch)):
                    for offset, pixels in enumerate(candidates):
                        page = wanted.get(_digest(pixels))
                        if page:
                            problems.append(f"{page} shows test input row {first + offset} of "
                                            f"{zip_name}:{label} (the pages may show training "
                                            "data only)")
    return sorted(set(problems))


def _eight_bit_shape(shape: tuple) -> tuple:
    """The shape ``eight_bit`` gives one image of ``shape``."""
    if len(shape) == 3 and shape[-1] != 3:
        return tuple(shape[:2])
    return tuple(shape)


def _digest(pixels: np.ndarray) -> bytes:
    return hashlib.sha256(repr(pixels.shape).encode() + np.ascontiguousarray(pixels).tobytes()
                          ).digest()

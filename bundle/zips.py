"""Deterministic, flat zips: the same inputs give byte-identical archives.

Members are sorted, stamped 1980-01-01, given fixed permissions, and junk that breaks
or bloats CodaLab bundles (G1, G2) is never written.

Data may be far larger than memory (image sets of tens of GB), so a member given as a file is
copied into the zip in chunks, and everything reading members back (sha256, sizes, nested zips)
reads them in chunks too: a build's memory does not grow with its data.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import shutil
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from .progress import Progress

FIXED_TIME = (1980, 1, 1, 0, 0, 0)
JUNK_PARTS = ("__MACOSX", "__pycache__", ".DS_Store", ".pytest_cache", ".ipynb_checkpoints")
CHUNK = 2**20
# Below this a member is always deflated: at most a fraction of a second, and every small file
# the builds made before this rule (pages, programs, small arrays) keeps its bytes.
STORE_CANDIDATE_BYTES = 8 * 2**20
# Deflate gains nothing on image pixels, random or float arrays, or zips of them, yet took two
# thirds of a 1.8 GB build's time. Deflating a few samples spread over the member says which
# kind it is in milliseconds; a member whose samples shrink by less than a tenth is stored.
SAMPLES, SAMPLE_BYTES, WORTH_DEFLATING = 4, 256 * 2**10, 0.9

Content = bytes | Path
# Zips at least this large show their progress on a terminal (bundle/progress.py).
PROGRESS_BYTES = 256 * 2**20


def is_junk(relative: str) -> bool:
    parts = relative.split("/")
    return any(part in JUNK_PARTS or part.startswith("._") or part.endswith(".pyc")
               for part in parts)


def folder_members(folder: Path) -> dict[str, Path]:
    """Files below ``folder`` by their zip name (relative, forward slashes), junk left out."""
    members = {}
    for path in sorted(Path(folder).rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if path.is_file() and not path.is_symlink() and not is_junk(relative):
            members[relative] = path
    return members


def content_size(content: Content) -> int:
    return Path(content).stat().st_size if isinstance(content, Path) else len(content)


def open_content(content: Content) -> BinaryIO:
    return open(content, "rb") if isinstance(content, Path) else io.BytesIO(content)


def stream_sha256(stream: BinaryIO) -> str:
    digest = hashlib.sha256()
    while chunk := stream.read(CHUNK):
        digest.update(chunk)
    return digest.hexdigest()


def content_sha256(content: Content) -> str:
    if isinstance(content, Path):
        with open(content, "rb") as stream:
            return stream_sha256(stream)
    return hashlib.sha256(content).hexdigest()


def _samples(stream: BinaryIO, size: int) -> Iterator[bytes]:
    for index in range(SAMPLES):
        stream.seek((size - SAMPLE_BYTES) * index // (SAMPLES - 1))
        yield stream.read(SAMPLE_BYTES)


def compress_type(content: Content) -> int:
    """ZIP_STORED for a large member that deflate would not shrink (see WORTH_DEFLATING)."""
    size = content_size(content)
    if size < STORE_CANDIDATE_BYTES:
        return zipfile.ZIP_DEFLATED
    with open_content(content) as stream:
        sampled = b"".join(_samples(stream, size))
    deflated = len(zlib.compress(sampled, 6))
    return zipfile.ZIP_DEFLATED if deflated < WORTH_DEFLATING * len(sampled) \
        else zipfile.ZIP_STORED


def _info(name: str, content: Content) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, FIXED_TIME)
    info.compress_type = compress_type(content)
    info.external_attr = 0o644 << 16
    # Known before writing, as writestr knows it: zipfile then adds zip64 fields exactly where
    # it did when members were written from memory (large ones), so small zips keep their bytes.
    info.file_size = content_size(content)
    info._compresslevel = 6 if info.compress_type == zipfile.ZIP_DEFLATED else None
    return info


def write_zip(destination: Path, members: dict[str, Content]) -> Path:
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    total = sum(content_size(content) for content in members.values())
    # a zip of the real data takes minutes: a terminal sees the bytes written, a log nothing
    with zipfile.ZipFile(destination, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as archive, \
            Progress(total, f"  writing {destination.name}", "B",
                     force=None if total >= PROGRESS_BYTES else False) as progress:
        for name in sorted(members):
            content = members[name]
            with open_content(content) as source, \
                    archive.open(_info(name, content), "w") as target:
                while chunk := source.read(CHUNK):
                    target.write(chunk)
                    progress.advance(len(chunk))
    return destination


def zip_folder(folder: Path, destination: Path) -> Path:
    """The folder's contents at the zip root (never the folder itself: G1)."""
    return write_zip(destination, folder_members(folder))


@dataclass(frozen=True)
class Member:
    """A file's content read only when needed: in memory, on disk or inside a zip on disk."""
    size: int
    open: Callable[[], BinaryIO]


def member(content: Content | Member) -> Member:
    if isinstance(content, Member):
        return content
    return Member(content_size(content), lambda: open_content(content))


class _OpenedOnce:
    """A zip on disk whose central directory is read once, on the first member opened, and
    kept for the others: reading it again per member made scanning a zip of n members cost
    n times its directory (most of a build's leakage check). Closed with its members' last
    reference."""

    def __init__(self, path: Path):
        self.path, self._archive = path, None

    def open(self, name: str) -> BinaryIO:
        if self._archive is None:
            self._archive = zipfile.ZipFile(self.path)
        return self._archive.open(name)

    def __del__(self):
        if self._archive is not None:
            self._archive.close()


def zip_members(archive: Content) -> dict[str, Member]:
    """The members of a zip (a file, or bytes), each read from the zip when opened."""
    if not isinstance(archive, Path):
        with zipfile.ZipFile(io.BytesIO(archive)) as opened:
            return {name: member(opened.read(name)) for name in opened.namelist()}
    with zipfile.ZipFile(archive) as opened:
        infos = [info for info in opened.infolist() if not info.is_dir()]
    shared = _OpenedOnce(archive)
    return {info.filename: Member(info.file_size,
                                  lambda name=info.filename: shared.open(name))
            for info in infos}


def read_members(archive: Content) -> dict[str, bytes]:
    """Every member of a zip in memory: for the hidden references only, which are small."""
    with zipfile.ZipFile(open_content(archive)) as opened:
        return {name: opened.read(name) for name in opened.namelist()}


# A nested zip this small is opened in memory, as it always was; a larger one from a copy on
# disk, since a zip read through its parent's stream re-reads the parent at every seek.
NESTED_IN_MEMORY_BYTES = 16 * 2**20


@contextlib.contextmanager
def nested_zip(archive: zipfile.ZipFile, name: str) -> Iterator[zipfile.ZipFile]:
    """The member ``name`` of ``archive`` opened as a zip (BadZipFile if it is none)."""
    if archive.getinfo(name).file_size <= NESTED_IN_MEMORY_BYTES:
        with zipfile.ZipFile(io.BytesIO(archive.read(name))) as inner:
            yield inner
        return
    with tempfile.TemporaryFile() as copy:
        with archive.open(name) as source:
            shutil.copyfileobj(source, copy, CHUNK)
        copy.seek(0)
        with zipfile.ZipFile(copy) as inner:
            yield inner

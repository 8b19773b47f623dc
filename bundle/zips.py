"""Deterministic, flat zips: the same inputs give byte-identical archives.

Members are sorted, stamped 1980-01-01, given fixed permissions, and junk that breaks
or bloats CodaLab bundles (G1, G2) is never written.
"""
from __future__ import annotations

import zipfile
from pathlib import Path

FIXED_TIME = (1980, 1, 1, 0, 0, 0)
JUNK_PARTS = ("__MACOSX", "__pycache__", ".DS_Store", ".pytest_cache", ".ipynb_checkpoints")


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


def write_zip(destination: Path, members: dict[str, bytes | Path]) -> Path:
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(destination, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for name in sorted(members):
            content = members[name]
            data = content.read_bytes() if isinstance(content, Path) else content
            info = zipfile.ZipInfo(name, FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data, compresslevel=6)
    return destination


def zip_folder(folder: Path, destination: Path) -> Path:
    """The folder's contents at the zip root (never the folder itself: G1)."""
    return write_zip(destination, folder_members(folder))

"""The zoo's manifest: size, sha256 and array shapes of every file, and its verification.

The shared format and checks (``reference_data/manifest.py``); the zoo's .npz files hold any
keys, so each key's shape is listed.
"""
from __future__ import annotations

from pathlib import Path

from runtime.formats import file_digest
from reference_data import manifest

from .npz import read_npz

MANIFEST = "manifest.json"
UNLISTED = ("generation_log.json",)


def describe(path: Path) -> dict:
    entry = {"bytes": path.stat().st_size, "sha256": file_digest(path)}
    if path.suffix.lower() == ".npz":
        entry["shape"] = {key: list(array.shape) for key, array in read_npz(path).items()}
    return entry


def write_manifest(root: Path) -> dict:
    return manifest.write_manifest(root, describe, MANIFEST, UNLISTED)


def verify_manifest(root: Path) -> list[str]:
    """Every difference between the folder and its manifest (empty = ok)."""
    return manifest.verify_manifest(root, describe, MANIFEST, UNLISTED,
                                    "python -m reference_data --kind pgdl2020 generate")

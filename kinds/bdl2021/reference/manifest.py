"""The BDL references' manifest: the shared format (``reference_data/manifest.py``) with
array shapes as the competition loaders see them."""
from __future__ import annotations

from pathlib import Path

from reference_data import manifest

from runtime.formats import file_digest, read_matrix
from kinds.bdl2021.runtime.formats import read_task_inputs
from runtime.formats.matrix_files import load_npy


def array_shapes(path: Path) -> dict | list | None:
    """Shapes as the competition loaders see them (None for non-array files)."""
    suffix = path.suffix.lower()
    if suffix == ".npz":
        return {key: list(array.shape) for key, array in read_task_inputs(path)._asdict().items()}
    if suffix == ".npy":
        return list(load_npy(path).shape)
    if suffix in (".csv", ".txt"):
        return list(read_matrix(path).shape)
    return None


def describe(path: Path) -> dict:
    entry = {"bytes": path.stat().st_size, "sha256": file_digest(path)}
    shapes = array_shapes(path)
    if shapes is not None:
        entry["shape"] = shapes
    return entry


def write_manifest(root: Path, manifest_name: str, unlisted: tuple[str, ...] = ()) -> dict:
    """List every file under root except the manifest itself and the `unlisted` names."""
    return manifest.write_manifest(root, describe, manifest_name, unlisted)


def verify_manifest(root: Path, manifest_name: str, unlisted: tuple[str, ...] = ()) -> list[str]:
    """Every difference between the folder and its manifest, as readable lines (empty = ok)."""
    return manifest.verify_manifest(root, describe, manifest_name, unlisted,
                                    "python -m reference_data generate")

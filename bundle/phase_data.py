"""The data folders of a phase: hidden references, participants' inputs, public data.

And the leakage check that proves no hidden byte reached a public folder.
"""
from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import numpy as np

from kinds.kind import kind

from . import competition_rules
from .phase_plan import PhasePlan
from .record_key import write_record_key


def stage_input_data(plan: PhasePlan, destination: Path) -> Path:
    """The participants' input folder (what the ingestion program reads), as the kind stages it."""
    destination = Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    definition = kind(plan.kind)
    for task in (*competition_rules.extra_tasks(plan), *plan.tasks):
        definition.stage_inputs(task, destination)
    return destination


def stage_reference_data(plan: PhasePlan, destination: Path) -> Path:
    """The hidden ref/ folder: each task's files as the kind stages them, and in a code phase
    the key that signs the ingestion record."""
    destination = Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    definition = kind(plan.kind)
    for task in plan.tasks:
        definition.stage_reference(task, destination)
    if plan.code_submission:
        write_record_key(destination, plan)
    return destination


def stage_public_data(plan: PhasePlan, destination: Path) -> Path:
    """What anyone may download, as the kind stages it (the leakage check below proves no
    hidden file or array is among it)."""
    destination = Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    definition = kind(plan.kind)
    for task in plan.tasks:
        definition.stage_public(task, destination, plan.code_submission)
    return destination


def _arrays(name: str, data: bytes) -> dict[str, np.ndarray]:
    """The numeric arrays inside an .npy, .npz, .csv or .txt member (nothing otherwise)."""
    try:
        if name.endswith(".npy"):
            return {name: np.load(io.BytesIO(data), allow_pickle=False)}
        if name.endswith(".npz"):
            with np.load(io.BytesIO(data), allow_pickle=False) as archive:
                return {f"{name}:{key}": archive[key] for key in archive.files}
        if name.endswith((".csv", ".txt")):
            delimiter = "," if b"," in data[:4096] else None
            return {name: np.loadtxt(io.BytesIO(data), delimiter=delimiter, ndmin=2)}
    except (ValueError, OSError, zipfile.BadZipFile):
        return {}
    return {}


def _same_values(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal as flat sequences: a leak may change the shape (N x 1 vs N) but not the values."""
    return a.size == b.size and a.dtype.kind in "iuf" and b.dtype.kind in "iuf" \
        and np.array_equal(a.ravel(), b.ravel())


def leakage_problems(hidden: dict[str, bytes], public: dict[str, dict[str, bytes]],
                     zeroed: tuple[str, ...] = ()) -> list[str]:
    """Proof that no hidden file, array or test label reached a public zip.

    ``hidden``: member name -> bytes of the hidden reference data; ``public``: zip name ->
    its members; ``zeroed``: names of .npz arrays the kind publishes as placeholders, all
    zeros (its ``ZEROED_PUBLIC_ARRAYS``). Checks: identical files (sha256); hidden arrays
    (references, true labels) equal to any public array; hidden arrays' raw bytes, and any
    hidden file of 64 bytes or more, inside any public file (a reference pasted into a bigger
    file); every placeholder all zeros.
    """
    problems = []
    hidden_hashes = {hashlib.sha256(data).hexdigest(): name for name, data in hidden.items()}
    hidden_arrays = {label: array for name, data in hidden.items()
                     for label, array in _arrays(name, data).items() if array.size >= 8}
    for zip_name, members in public.items():
        for name, data in members.items():
            where = f"{zip_name}:{name}"
            digest = hashlib.sha256(data).hexdigest()
            if digest in hidden_hashes:
                problems.append(f"{where} is a copy of hidden {hidden_hashes[digest]}")
            for label, array in _arrays(name, data).items():
                placeholder = label.rpartition(":")[2]
                if ":" in label and placeholder in zeroed and np.any(array != 0):
                    problems.append(f"{where}: {placeholder} is not all zeros "
                                    "(test labels would leak)")
                for hidden_label, hidden_array in hidden_arrays.items():
                    if _same_values(array, hidden_array):
                        problems.append(f"{where}: array {label} equals hidden {hidden_label}")
            for hidden_label, hidden_array in hidden_arrays.items():
                raw = np.ascontiguousarray(hidden_array).tobytes()
                if len(raw) >= 64 and raw in data:
                    problems.append(f"{where} contains the bytes of hidden {hidden_label}")
            problems += [f"{where} contains the bytes of hidden {hidden_name}"
                         for hidden_name, hidden_data in hidden.items()
                         if len(hidden_data) >= 64 and hidden_data in data
                         and len(hidden_data) < len(data)]
    return sorted(set(problems))

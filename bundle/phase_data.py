"""The data folders of a phase: hidden references, participants' inputs, public data.

And the leakage check that proves no hidden byte reached a public folder.
"""
from __future__ import annotations

import hashlib
import io
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np

from competition_formats import (RECORD_KEY_NAME, file_digest, read_chain_probs,
                                 read_chain_samples, read_classification_probs, read_matrix,
                                 read_regression_samples, read_task_inputs, write_task_inputs)
from competition_formats.loader import SAMPLES_BY_POINTS
from scoring_program.scorer.exact_posterior import expectation_document

from .phase_plan import PhasePlan
from .programs import reference_names


def stage_input_data(plan: PhasePlan, destination: Path) -> Path:
    """The public input folder: each task's npz, whose y_test is all zeros."""
    destination = Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    for task in plan.tasks:
        copy_public_inputs(task.files.inputs, destination / task.files.inputs.name)
    return destination


def copy_public_inputs(source: Path, destination: Path) -> None:
    """The task's npz as participants get it: y_test all zeros, whatever the source holds."""
    inputs = read_task_inputs(source)
    if np.any(inputs.y_test != 0):
        write_task_inputs(destination, inputs._replace(y_test=np.zeros_like(inputs.y_test)))
    else:
        shutil.copyfile(source, destination)


def stage_reference_data(plan: PhasePlan, destination: Path) -> Path:
    """The hidden ref/ folder: model average and labels (.npy), per-chain references, and
    the exact-posterior expectation (a property of the references, computed once here)."""
    destination = Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    for task in plan.tasks:
        names, files = reference_names(task), task.files
        if task.kind == "classification":
            average = read_classification_probs(files.reference)
        else:    # kept S x N on disk, like the csv it comes from
            average = read_regression_samples(files.reference, layout=SAMPLES_BY_POINTS).T
        np.save(destination / names["reference"], np.ascontiguousarray(average))
        if names["chain_reference"]:
            shutil.copyfile(files.chain_reference, destination / names["chain_reference"])
            chains = (read_chain_probs(files.chain_reference) if task.kind == "classification"
                      else read_chain_samples(files.chain_reference))
            # Regression: the reference's draws per point (S x N on disk) and the submission's.
            draws = None if task.kind == "classification" else average.shape[0]
            document = expectation_document(task.name, task.kind, chains, draws,
                                            task.declaration.get("num_samples"))
            (destination / names["exact_posterior_expectation"]).write_text(
                json.dumps(document, indent=1) + "\n")
        if names["test_labels"]:
            np.save(destination / names["test_labels"], read_matrix(files.test_labels))
    if plan.code_submission:
        write_record_key(destination, plan.name)
    return destination


def write_record_key(folder: Path, phase: str) -> Path:
    """The key that signs the ingestion record (competition_formats.run_record).

    Derived from the hidden files themselves, so only someone holding them can sign, and a
    rebuild of the same data gives the same bundle."""
    digest = hashlib.sha256(f"ingestion-record-key/{phase}".encode())
    for path in sorted(Path(folder).iterdir()):
        digest.update(path.name.encode() + b"\0" + file_digest(path).encode())
    key = Path(folder) / RECORD_KEY_NAME
    key.write_text(digest.hexdigest() + "\n", encoding="ascii")
    return key


def stage_public_data(plan: PhasePlan, destination: Path) -> Path:
    """What anyone may download: inputs and declarations; references only in a results
    phase, whose references are public by design (as CIFAR-10's and IMDB's were in 2021)."""
    destination = Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    for task in plan.tasks:
        files = task.files
        copy_public_inputs(files.inputs, destination / files.inputs.name)
        declaration = {k: v for k, v in task.declaration.items() if k != "files"}
        (destination / files.declaration.name).write_text(json.dumps(declaration, indent=1) + "\n")
        if not plan.code_submission:
            shutil.copyfile(files.reference, destination / files.reference.name)
            if files.chain_reference.is_file():
                shutil.copyfile(files.chain_reference, destination / files.chain_reference.name)
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


def leakage_problems(hidden: dict[str, bytes], public: dict[str, dict[str, bytes]]) -> list[str]:
    """Proof that no hidden file, array or test label reached a public zip.

    ``hidden``: member name -> bytes of the hidden reference data; ``public``: zip name ->
    its members. Checks: identical files (sha256); hidden arrays (references, chains, true
    labels) equal to any public array; hidden arrays' raw bytes inside any public file
    (a reference pasted into a bigger file); every public ``y_test`` all zeros.
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
                if label.endswith(":y_test") and np.any(array != 0):
                    problems.append(f"{where}: y_test is not all zeros (test labels would leak)")
                for hidden_label, hidden_array in hidden_arrays.items():
                    if _same_values(array, hidden_array):
                        problems.append(f"{where}: array {label} equals hidden {hidden_label}")
            for hidden_label, hidden_array in hidden_arrays.items():
                raw = np.ascontiguousarray(hidden_array).tobytes()
                if len(raw) >= 64 and raw in data:
                    problems.append(f"{where} contains the bytes of hidden {hidden_label}")
    return sorted(set(problems))

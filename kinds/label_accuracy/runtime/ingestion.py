"""Label accuracy's contract, on the ingestion program's side."""
from __future__ import annotations

import numpy as np

from runtime.formats import FormatError


def output_bytes(task) -> int:
    return task.contract["n_test"] * 8 + 4096


def check_output(array, task, what: str = "labels") -> tuple[np.ndarray, tuple[str, ...]]:
    n_test, num_classes = task.contract["n_test"], task.contract["num_classes"]
    labels = np.asarray(array, dtype=np.float64).reshape(-1) if np.size(array) == n_test else None
    if labels is None:
        raise FormatError(f"{what}: expected {n_test} labels, found shape {np.shape(array)}")
    wrong = np.flatnonzero(~np.isfinite(labels) | (labels != np.round(labels)) | (labels < 0)
                           | (labels >= num_classes))
    if len(wrong):
        raise FormatError(f"{what}: entry {wrong[0]} is {labels[wrong[0]]!r}; expected a class "
                          f"label 0..{num_classes - 1}")
    return labels.reshape(-1, 1), ()

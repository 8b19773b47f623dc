"""Label accuracy's contract, on the ingestion program's side."""
from __future__ import annotations

import numpy as np

from runtime.formats import FormatError

from .labels import expected_labels, wrong_labels


def output_bytes(task) -> int:
    return task.contract["n_test"] * 8 + 4096


def check_output(array, task, what: str = "labels") -> tuple[np.ndarray, tuple[str, ...]]:
    n_test, num_classes = task.contract["n_test"], task.contract["num_classes"]
    labels = np.asarray(array, dtype=np.float64).reshape(-1) if np.size(array) == n_test else None
    if labels is None:
        raise FormatError(f"{what}: expected {n_test} labels, found shape {np.shape(array)}")
    wrong = wrong_labels(labels, num_classes)
    if len(wrong):
        raise FormatError(f"{what}: entry {wrong[0]} is {labels[wrong[0]]!r}; "
                          f"{expected_labels(num_classes)}")
    return labels.reshape(-1, 1), ()

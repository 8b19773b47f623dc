"""What a Retina submission gives for a task: one row per test row, the predicted probability
of the positive (referable) class and, optionally, an uncertainty. One check for both routes,
a results file read by the scorer and the array a code submission returns."""
from __future__ import annotations

import numpy as np

from runtime.formats import FormatError

COLUMNS = ("probability", "uncertainty")


def check(array: np.ndarray, n_test: int, what: str) -> np.ndarray:
    """The (N, 1) or (N, 2) predictions, each probability in [0, 1] and every value finite;
    FormatError names the first bad row (1-based) and column."""
    array = np.asarray(array, dtype=np.float64)
    if array.ndim == 1:
        array = array.reshape(-1, 1)
    if array.ndim != 2 or array.shape[0] != n_test or array.shape[1] not in (1, 2):
        raise FormatError(f"{what}: expected {n_test} rows of 1 or 2 columns (probability, "
                          f"optional uncertainty), found shape {array.shape}")
    bad = np.argwhere(~np.isfinite(array))
    if bad.size:
        row, column = bad[0]
        raise FormatError(f"{what}: row {row + 1}, {COLUMNS[column]}: {array[row, column]}; "
                          "expected a finite number")
    outside = np.flatnonzero((array[:, 0] < 0) | (array[:, 0] > 1))
    if outside.size:
        raise FormatError(f"{what}: row {outside[0] + 1}, probability: "
                          f"{array[outside[0], 0]!r}; expected a value in [0, 1] "
                          f"({outside.size} rows outside)")
    return array

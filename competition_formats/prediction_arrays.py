"""Checks on a prediction array before anyone writes it: shape, finiteness, probabilities.

The ingestion program runs these on what the participant's code returned; the scorer
runs the file-aware version (with line and column) on uploaded files, with the same
tolerance.
"""
from __future__ import annotations

import numpy as np

from .matrix_files import FormatError

# Rows whose probabilities sum to within this of 1 are renormalised (rounding); farther
# off is a wrong prediction, not rounding.
ROW_SUM_TOLERANCE = 1e-3


def check_predictions(array, kind: str, n_points: int, width: int,
                      what: str = "predictions") -> tuple[np.ndarray, tuple[str, ...]]:
    """(checked float64 array, notes) or FormatError saying what is wrong."""
    try:
        array = np.asarray(array, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise FormatError(f"{what}: not a numeric array ({error})") from None
    meaning = "classes" if kind == "classification" else "samples"
    if array.shape != (n_points, width):
        raise FormatError(f"{what}: expected shape ({n_points}, {width}) = (test points, "
                          f"{meaning}), found {array.shape}")
    bad = np.argwhere(~np.isfinite(array))
    if len(bad):
        row, column = (int(v) for v in bad[0])
        raise FormatError(f"{what}: row {row}, column {column} (0-based) is {array[row, column]}; "
                          f"expected finite numbers ({len(bad)} non-finite in all)")
    if kind != "classification":
        return array, ()
    notes = check_probability_rows(array, lambda row, column=None: f"{what}: row {row}" + (
        f", column {column}" if column is not None else "") + " (0-based)", what)
    return array, notes


def check_probability_rows(probs: np.ndarray, where, name: str) -> tuple[str, ...]:
    """The one probability rule of ingestion and scorer: entries >= 0, each row summing to 1
    within ROW_SUM_TOLERANCE; rows off by less are renormalised in place (returns the note).
    ``where(row, column=None)`` says where a problem is, in the caller's terms."""
    negative = np.argwhere(probs < 0)
    if len(negative):
        row, column = (int(v) for v in negative[0])
        raise FormatError(f"{where(row, column)}: expected a probability >= 0, found "
                          f"{probs[row, column]!r} ({len(negative)} negative entries in all)")
    deviation = np.abs(probs.sum(axis=1) - 1.0)
    worst = int(deviation.argmax())
    if deviation[worst] > ROW_SUM_TOLERANCE:
        raise FormatError(f"{where(worst)}: probabilities sum to {probs[worst].sum():.6g}, "
                          f"expected 1 (within {ROW_SUM_TOLERANCE:g}); "
                          f"{int((deviation > ROW_SUM_TOLERANCE).sum())} rows are off")
    off = deviation > 1e-12
    if not off.any():
        return ()
    probs[off] /= probs[off].sum(axis=1, keepdims=True)
    return (f"{name}: renormalised {int(off.sum())} rows whose sums were off by up to "
            f"{deviation.max():.2g}",)

"""The one probability rule: what a row of class probabilities must be.

A kind's ingestion runs it on what the participant's code returned, its scorer on uploaded
files (placing errors by line and column), with the same tolerance.
"""
from __future__ import annotations

import numpy as np

from .matrix_files import FormatError

# Rows whose probabilities sum to within this of 1 are renormalised (rounding); farther
# off is a wrong prediction, not rounding.
ROW_SUM_TOLERANCE = 1e-3


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

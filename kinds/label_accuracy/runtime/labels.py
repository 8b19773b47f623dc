"""What a class label is, for both programs: the ingestion checks the labels the code returns,
the scorer those a file holds, by the same rule; each names the place in its own terms (a
returned array's entry from 0, a file's row from 1, as an editor counts lines)."""
from __future__ import annotations

import numpy as np


def wrong_labels(values: np.ndarray, num_classes: int) -> np.ndarray:
    """The indices of ``values`` that are not a class label 0..num_classes-1: a fraction, a
    number out of range, NaN or an infinity."""
    return np.flatnonzero(~np.isfinite(values) | (values != np.round(values)) | (values < 0)
                          | (values >= num_classes))


def expected_labels(num_classes: int) -> str:
    return f"expected a class label 0..{num_classes - 1}"

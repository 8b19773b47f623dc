"""Confidence bins, shared by the kinds' ECEs: which of ``bins`` equal-width bins each
confidence falls in, each bin's count and means, and the ECE of such a table. A kind decides
what its confidence and correctness are (BDL: the top class of a row; Retina: the larger of p
and 1 - p) and how many bins the paper it follows used."""
from __future__ import annotations

import numpy as np


def bin_index(values, bins: int) -> np.ndarray:
    """The bin of each value in [0, 1] among ``bins`` equal-width bins: floor(value * bins),
    clipped to [0, bins - 1], so a value on an inner edge goes to the bin above it and 1.0 to
    the last bin (TensorFlow's ``histogram_fixed_width_bins``, in float64)."""
    values = np.asarray(values, dtype=np.float64)
    return np.clip(np.floor(values * bins), 0, bins - 1).astype(np.int64)


def binned(confidence: np.ndarray, correct: np.ndarray, bins: int):
    """Per bin of confidence (``bin_index``): its mean confidence, its share of correct rows
    (the mean of ``correct``, 0/1) and its count; an empty bin has count 0 and NaN means."""
    which = bin_index(confidence, bins)
    counts = np.bincount(which, minlength=bins)
    with np.errstate(invalid="ignore"):
        mean_confidence = np.bincount(which, confidence, bins) / counts
        share_correct = np.bincount(which, correct, bins) / counts
    return mean_confidence, share_correct, counts


def ece(confidence, share_correct, counts) -> float:
    """ECE = sum_b (n_b / N) |correct_b - conf_b| over the non-empty bins b of a ``binned``
    table (correct_b: the bin's share of correct rows)."""
    filled = counts > 0
    return float(np.sum(counts[filled] / counts.sum()
                        * np.abs(share_correct[filled] - confidence[filled])))

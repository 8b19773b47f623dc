"""Fidelity metrics between a submitted predictive distribution and the HMC reference.

Pure functions of arrays already validated by ``predictions.py`` (shapes agree, finite,
probability rows). P is the submission and Q the reference: (N, C) class probabilities;
S and R are (N, s) and (N, r) samples of y, one row per test point. numpy only: the
scorer must not pay scipy's import time, and these are exact for empirical distributions.
"""
from __future__ import annotations

import numpy as np

from runtime import confidence_bins


def top1_agreement_terms(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """1[argmax_c P_ic = argmax_c Q_ic] for every test point i. Classes are the last axis, so
    an (N, C) reference broadcasts against (m, N, C) submissions: its argmax is taken once."""
    return (p.argmax(axis=-1) == q.argmax(axis=-1)).astype(np.float64)


def total_variation_terms(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """1/2 sum_c |P_ic - Q_ic| for every test point i; broadcasts over leading axes as
    ``top1_agreement_terms`` does (each row summed alike, so the same numbers as row by row)."""
    return 0.5 * np.abs(p - q).sum(axis=-1)


def top1_agreement(p: np.ndarray, q: np.ndarray) -> float:
    """agreement = (1/N) sum_i 1[argmax_c P_ic = argmax_c Q_ic].

    Ties go to the lowest class index (numpy's argmax), as in the 2021 competition's code.
    """
    return float(np.mean(p.argmax(axis=1) == q.argmax(axis=1)))


def total_variation(p: np.ndarray, q: np.ndarray) -> float:
    """TV = (1/N) sum_i 1/2 sum_c |P_ic - Q_ic|."""
    return float(0.5 * np.abs(p - q).sum(axis=1).mean())


def _quantile_grid(n: int, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact common refinement of the quantile functions of n- and m-atom samples.

    The quantile function of n equally weighted sorted atoms is x_(ceil(u n)) on (0, 1].
    On the merged grid of breakpoints {i/n} and {j/m} both are constant, so with
    integer breakpoints k over the denominator n*m: the x index is ceil(k/m) - 1, the
    y index ceil(k/n) - 1, and the interval weight (k - k_prev) / (n m).
    """
    breaks = np.union1d(np.arange(1, n + 1) * m, np.arange(1, m + 1) * n)
    weights = np.diff(breaks, prepend=0) / (n * m)
    return -(-breaks // m) - 1, -(-breaks // n) - 1, weights


def sort_rows(x: np.ndarray) -> np.ndarray:
    """x with each row sorted; x itself when it already is (a linear check, not a sort)."""
    return x if bool(np.all(x[:, 1:] >= x[:, :-1])) else np.sort(x, axis=1)


def wasserstein_per_point(s: np.ndarray, r: np.ndarray, order: int) -> np.ndarray:
    """W_p between the empirical distributions of each row of S and R, for every row.

    W_p(mu, nu)^p = integral_0^1 |F_mu^-1(u) - F_nu^-1(u)|^p du: the sorted-sample
    (monotone) coupling, optimal in one dimension; for equal sample counts it is
    (1/s) sum_k |S_(k) - R_(k)|^p. Unequal counts are matched quantile by quantile.
    """
    s_sorted, r_sorted = sort_rows(s), sort_rows(r)
    if s.shape[1] == r.shape[1]:
        mean_power = (np.abs(s_sorted - r_sorted) ** order).mean(axis=1)
    else:
        s_index, r_index, weights = _quantile_grid(s.shape[1], r.shape[1])
        mean_power = (np.abs(s_sorted[:, s_index] - r_sorted[:, r_index]) ** order) @ weights
    return mean_power if order == 1 else mean_power ** (1 / order)


def wasserstein2_terms(s: np.ndarray, r: np.ndarray) -> np.ndarray:
    return wasserstein_per_point(s, r, order=2)


def wasserstein1_terms(s: np.ndarray, r: np.ndarray) -> np.ndarray:
    return wasserstein_per_point(s, r, order=1)


def wasserstein2(s: np.ndarray, r: np.ndarray) -> float:
    """W2 = (1/N) sum_i W_2(S_i, R_i), W_2 per test point by the sorted-sample coupling.

    The competition proposal's definition; the proposal's formula omits the 1/s inside
    the square root, we use the normalised distance, so it does not grow with s.
    """
    return float(wasserstein_per_point(s, r, order=2).mean())


def wasserstein1(s: np.ndarray, r: np.ndarray) -> float:
    """W1 = (1/N) sum_i W_1(S_i, R_i): what the 2021 code computed and called "W2".

    Equals scipy.stats.wasserstein_distance applied row by row, then averaged; reported
    here as a positive distance (the 2021 code returned its negative).
    """
    return float(wasserstein_per_point(s, r, order=1).mean())


def predictive_entropy(p: np.ndarray) -> np.ndarray:
    """H_i = -sum_c P_ic log P_ic (nats), with 0 log 0 = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(p), 0.0)
    return -terms.sum(axis=1)


def reliability_curve(p: np.ndarray, labels: np.ndarray, bins: int = 10):
    """Per confidence bin b: mean confidence, accuracy and count.

    confidence_i = max_c P_ic; accuracy_b = mean_{i in b} 1[argmax_c P_ic = y_i].
    Bins split [0, 1] evenly; empty bins are returned with count 0 and NaN values.
    """
    correct = (p.argmax(axis=1) == labels).astype(float)
    return confidence_bins.binned(p.max(axis=1), correct, bins)


def expected_calibration_error(p: np.ndarray, labels: np.ndarray, bins: int = 10) -> float:
    """ECE = sum_b (n_b / N) |accuracy_b - confidence_b| over non-empty bins."""
    return calibration_error_of_curve(*reliability_curve(p, labels, bins))


def calibration_error_of_curve(confidence, accuracy, counts) -> float:
    """ECE from a reliability curve already computed (see expected_calibration_error)."""
    return confidence_bins.ece(confidence, accuracy, counts)


def interval_coverage(samples: np.ndarray, y: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Fraction of test points whose y lies in the central interval of each nominal level.

    The interval at level a is between the (1-a)/2 and (1+a)/2 sample quantiles of a row.
    """
    ordered = sort_rows(samples)
    lower = _sorted_quantiles(ordered, (1 - levels) / 2)          # (levels, N)
    upper = _sorted_quantiles(ordered, (1 + levels) / 2)
    return np.mean((lower <= y) & (y <= upper), axis=1)


def _sorted_quantiles(ordered: np.ndarray, q: np.ndarray) -> np.ndarray:
    """np.quantile's default (linear) method on rows that are already sorted."""
    position = q * (ordered.shape[1] - 1)
    below = np.floor(position).astype(int)
    above = np.minimum(below + 1, ordered.shape[1] - 1)
    fraction = (position - below)[:, None]
    return ordered[:, below].T * (1 - fraction) + ordered[:, above].T * fraction


def predictive_std(samples: np.ndarray) -> np.ndarray:
    return samples.std(axis=1)

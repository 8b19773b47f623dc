"""Standard errors of leaderboard figures: how far a score would move with another draw of
what it was measured on (test rows, reference chains, networks of a zoo).

A kind says what its test rows are and how to re-score on a resample of them; this module
draws the resamples and summarises them. The draws depend only on the number of rows, their
strata and the fixed seed, so every submission of a task is scored on the same resamples (the
standard errors of two submissions are comparable, and a report is the same at every run).
Standard library and numpy only: copied into the scoring program.
"""
from __future__ import annotations

import math
from typing import Callable, Iterable, Mapping

import numpy as np

DRAWS = 200          # a standard error from 200 draws is itself within about 5% (1/sqrt(2B))
SEED = 31
# A statistic undefined on too many resamples (an AUROC with one class left) has no
# trustworthy spread: then no standard error is given rather than one from the lucky draws.
MIN_DEFINED_SHARE = 0.9


def resampled_rows(n_rows: int, strata: np.ndarray | None = None, draws: int = DRAWS,
                   seed: int = SEED) -> np.ndarray:
    """(draws, n_rows) row indices: each draw resamples every stratum's rows with
    replacement, keeping its size (a stratified bootstrap), so each evaluation set keeps its
    share of the test set in every draw."""
    generator = np.random.default_rng(seed)
    if strata is None:
        return generator.integers(0, n_rows, size=(draws, n_rows))
    strata = np.asarray(strata)
    if strata.shape != (n_rows,):
        raise ValueError(f"strata: expected {n_rows} labels, found shape {strata.shape}")
    indices = np.empty((draws, n_rows), dtype=np.int64)
    position = 0
    for stratum in np.unique(strata):
        members = np.flatnonzero(strata == stratum)
        picks = generator.integers(0, members.size, size=(draws, members.size))
        indices[:, position:position + members.size] = members[picks]
        position += members.size
    return indices


def bayesian_weights(n_units: int, draws: int = DRAWS, seed: int = SEED) -> np.ndarray:
    """(draws, n_units) weights, each row n * Dirichlet(1, ..., 1): Rubin's (1981) Bayesian
    bootstrap, which reweighs every unit instead of drawing some twice and others never. Its
    standard error agrees with the ordinary bootstrap's to first order, and it suits a
    statistic that needs every unit present (a complete grid of networks)."""
    gamma = np.random.default_rng(seed).standard_exponential((draws, n_units))
    return gamma * (n_units / gamma.sum(axis=1, keepdims=True))


def bootstrap_se(statistic: Callable[[np.ndarray], float], indices: np.ndarray) -> float | None:
    """sd (ddof=1) of statistic(draw) over the draws (rows of ``indices``: resampled row
    indices, or weights): the bootstrap standard error.

    None when the statistic is undefined (raises ValueError or is not finite) on more than
    1 - MIN_DEFINED_SHARE of the draws."""
    values = []
    for rows in indices:
        try:
            value = float(statistic(rows))
        except (ValueError, ZeroDivisionError, FloatingPointError):
            continue
        if math.isfinite(value):
            values.append(value)
    if len(values) < max(2, MIN_DEFINED_SHARE * len(indices)):
        return None
    return float(np.std(values, ddof=1))


def score_type_errors(score_types: Iterable, arrays: Mapping[str, object],
                      take: Callable[[Mapping[str, object], np.ndarray], Mapping[str, object]],
                      indices: np.ndarray, clip: Callable[[object, float], float] | None = None
                      ) -> dict[str, float | None]:
    """Every score type's bootstrap standard error: ``take(arrays, rows)`` gives the task's
    named arrays on a resample of its rows, each score type is evaluated on them (clipped as
    its leaderboard value is, where ``clip(score_type, value)`` says)."""
    def statistic(score_type):
        def on(rows):
            value = score_type.evaluate(take(arrays, rows))
            return clip(score_type, value) if clip else value
        return on
    return {t.name: bootstrap_se(statistic(t), indices) for t in score_types}


def take_rows(row_names: Iterable[str]) -> Callable:
    """A ``take`` for arrays whose named entries are indexed by test row on their first axis
    (the others are passed on whole)."""
    names = frozenset(row_names)

    def take(arrays: Mapping[str, object], rows: np.ndarray) -> dict[str, object]:
        return {name: (value[rows] if name in names else value) for name, value in arrays.items()}
    return take


def mean_se(values: Iterable[float]) -> float | None:
    """sd(values, ddof=1) / sqrt(k): the standard error of the mean of k replicates."""
    values = [float(v) for v in values]
    if len(values) < 2:
        return None
    return float(np.std(values, ddof=1) / math.sqrt(len(values)))


def combined_se(*parts: float | None) -> float | None:
    """sqrt(sum of squares) of independent sources' standard errors, the unknown left out;
    None when every part is unknown."""
    known = [p for p in parts if p is not None]
    return float(math.sqrt(sum(p * p for p in known))) if known else None

"""Standard errors of leaderboard figures: how far a score would move with another draw of
what it was measured on (test rows, reference chains, networks of a zoo).

A kind says what its test rows are and how to re-score on a resample of them; this module
draws the resamples and summarises them. The draws depend only on the number of rows, their
strata and the fixed seed, so every submission of a task is scored on the same resamples (the
standard errors of two submissions are comparable, and a report is the same at every run).
A score type that declares its per-row terms (its value is their mean) needs no resampling:
the standard error of a stratified mean has a closed form, which the bootstrap only
approximates. Standard library and numpy only: copied into the scoring program.
"""
from __future__ import annotations

import math
from typing import Callable, Iterable, Iterator, Mapping

import numpy as np

DRAWS = 200          # a standard error from 200 draws is itself within about 5% (1/sqrt(2B))
SEED = 31
# How the kinds' STANDARD_ERROR texts state the draws, so participants can tell they are fixed
DRAWN = f"{DRAWS} resamples, seed {SEED}, the same for every submission"
# A statistic undefined on too many resamples (an AUROC with one class left) has no
# trustworthy spread: then no standard error is given rather than one from the lucky draws.
MIN_DEFINED_SHARE = 0.9


def resampled_rows(n_rows: int, strata: np.ndarray | None = None, draws: int = DRAWS,
                   seed: int = SEED) -> Iterator[np.ndarray]:
    """``draws`` arrays of row indices, one at a time (memory of one draw): each resamples
    every stratum's rows with replacement, keeping its size (a stratified bootstrap), so each
    evaluation set keeps its share of the test set in every draw."""
    generator = np.random.default_rng(seed)
    groups = [np.arange(n_rows)] if strata is None else _strata_members(strata, n_rows)
    for _ in range(draws):
        yield np.concatenate([members[generator.integers(0, members.size, members.size)]
                              for members in groups])


def _strata_members(strata: np.ndarray, n_rows: int) -> list[np.ndarray]:
    strata = np.asarray(strata)
    if strata.shape != (n_rows,):
        raise ValueError(f"strata: expected {n_rows} labels, found shape {strata.shape}")
    return [np.flatnonzero(strata == stratum) for stratum in np.unique(strata)]


def bayesian_weights(n_units: int, draws: int = DRAWS, seed: int = SEED) -> Iterator[np.ndarray]:
    """``draws`` weight vectors, each n * Dirichlet(1, ..., 1): Rubin's (1981) Bayesian
    bootstrap, which reweighs every unit instead of drawing some twice and others never. Its
    standard error agrees with the ordinary bootstrap's to first order, and it suits a
    statistic that needs every unit present (a complete grid of networks)."""
    generator = np.random.default_rng(seed)
    for _ in range(draws):
        gamma = generator.standard_exponential(n_units)
        yield gamma * (n_units / gamma.sum())


def _spread(values: list[float], draws: int) -> float | None:
    """sd (ddof=1) of the defined values; None when fewer than MIN_DEFINED_SHARE of the
    draws gave one."""
    if len(values) < max(2, MIN_DEFINED_SHARE * draws):
        return None
    return float(np.std(values, ddof=1))


def bootstrap_errors(statistics: Mapping[str, Callable[[np.ndarray], float]],
                     draws: Iterable[np.ndarray]) -> dict[str, float | None]:
    """Each statistic's bootstrap standard error: the sd over the draws (resampled row
    indices, or weights) of statistic(draw). A draw on which a statistic raises ValueError
    (undefined there) or is not finite is left out of its spread."""
    values: dict[str, list[float]] = {name: [] for name in statistics}
    count = 0
    for draw in draws:
        count += 1
        for name, statistic in statistics.items():
            try:
                value = float(statistic(draw))
            except (ValueError, ZeroDivisionError, FloatingPointError):
                continue
            if math.isfinite(value):
                values[name].append(value)
    return {name: _spread(found, count) for name, found in values.items()}


def stratified_mean_se(terms: np.ndarray, strata: np.ndarray | None = None) -> float | None:
    """Standard error of the mean of per-row terms under stratified sampling of the rows:

        se^2 = sum_s (n_s / n)^2 s_s^2 / n_s,   s_s^2 the sample variance (ddof=1) of stratum s

    (one stratum: sd / sqrt(n)). None when a stratum has fewer than two rows."""
    terms = np.asarray(terms, dtype=np.float64)
    groups = [terms] if strata is None else [terms[m] for m in _strata_members(strata, terms.size)]
    if any(group.size < 2 for group in groups):
        return None
    variance = sum((group.size / terms.size) ** 2 * np.var(group, ddof=1) / group.size
                   for group in groups)
    return float(math.sqrt(variance))


def row_errors(score_types: Iterable, arrays: Mapping[str, object],
               take: Callable[[Mapping[str, object], np.ndarray], Mapping[str, object]],
               n_rows: int, strata: np.ndarray | None = None,
               clip: Callable[[object, float], float] | None = None) -> dict[str, float | None]:
    """Every score type's standard error over the task's test rows: from its per-row terms
    where it declares them (``ScoreType.per_row``), else a stratified bootstrap in which
    ``take(arrays, rows)`` gives the task's named arrays on a resample of its rows and the
    score type is evaluated on them (clipped as its leaderboard value is, where
    ``clip(score_type, value)`` says)."""
    score_types = list(score_types)
    errors = {t.name: stratified_mean_se(t.terms(arrays), strata)
              for t in score_types if t.per_row is not None}
    resampled = [t for t in score_types if t.per_row is None]
    if resampled:
        errors.update(bootstrap_errors(
            {t.name: _on_resample(t, arrays, take, clip) for t in resampled},
            resampled_rows(n_rows, strata)))
    return {t.name: errors[t.name] for t in score_types}


def _on_resample(score_type, arrays, take, clip) -> Callable[[np.ndarray], float]:
    def statistic(rows: np.ndarray) -> float:
        value = score_type.evaluate(take(arrays, rows))
        return clip(score_type, value) if clip else value
    return statistic


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

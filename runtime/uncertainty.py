"""Standard errors of leaderboard figures: how far a score would move with another draw of
what it was measured on (test rows, reference chains, networks of a zoo).

A kind says what its test rows are and how to re-score on a resample of them; this module
draws the resamples and summarises them. The draws depend only on the number of rows, their
strata and the fixed seed, so every submission of a task is scored on the same resamples (the
standard errors of two submissions are comparable, and a report is the same at every run).
A score type that declares its per-row terms (its value is their mean) needs no resampling:
the standard error of a stratified mean has a closed form, which the bootstrap only
approximates; for a proportion (terms of 0 and 1) it is held away from 0 at the ends of the
range by Wilson's score interval. No standard error of exactly 0 is given at an end of a
metric's range, where it would only say that no resample could move the value (an AUROC of 1):
there it is None, shown as n/a. Each method's assumption and simulated coverage:
docs/intervals.md. Standard library and numpy only: copied into the scoring program.
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
# How the kinds' STANDARD_ERROR texts state what ``unless_collapsed`` leaves out
NONE_AT_BOUND = ("none (n/a) where every resample gives the same end of the metric's range, "
                 "as a perfect score does: that shows no spread, not certainty")
Z95 = 1.959963984540054    # the two-sided 95% point of the normal distribution
# A share's closed form sqrt(p (1 - p) / n) is trusted with at least this many rows of 0 and
# of 1 (the normal approximation's usual condition); below, Wilson's interval holds it up.
# With 15, p +- 1.96 se covers at least 0.928 at every p and n >= 30 (docs/intervals.md);
# Wilson everywhere would widen it by up to a sixth inside the range (its asymmetry).
NORMAL_SHARE_ROWS = 15


def resampled_rows(n_rows: int, strata: np.ndarray | None = None, draws: int = DRAWS,
                   seed: int = SEED) -> Iterator[np.ndarray]:
    """``draws`` arrays of row indices, one at a time (memory of one draw): each resamples
    every stratum's rows with replacement, keeping its size (a stratified bootstrap), so each
    evaluation set keeps its share of the test set in every draw."""
    generator = np.random.default_rng(seed)
    groups = [np.arange(n_rows)] if strata is None else _strata_members(strata, n_rows)
    if len({members.size for members in groups}) == 1 and groups[0].size:
        yield from _equal_strata_rows(groups, draws, generator)
        return
    for _ in range(draws):
        yield np.concatenate([members[generator.integers(0, members.size, members.size)]
                              for members in groups])


# Row indices drawn by one call of the generator, at most (the memory of a few draws at once).
BATCHED_ROWS = 1 << 18


def _equal_strata_rows(groups: list[np.ndarray], draws: int, generator: np.random.Generator
                       ) -> Iterator[np.ndarray]:
    """``resampled_rows``'s draws when every stratum has one size, the same indices in the
    same order: the generator's bounded integers are a stream of its outputs taken one
    integer at a time, whatever the calls' sizes, so with one bound an array of several draws'
    positions holds what one call per stratum and draw would give, in that order."""
    members = np.stack(groups)                                      # (strata, size)
    per_call = max(1, BATCHED_ROWS // members.size)
    for start in range(0, draws, per_call):
        count = min(per_call, draws - start)
        positions = generator.integers(0, members.shape[1], (count, *members.shape))
        yield from np.take_along_axis(members[None], positions, axis=2).reshape(count, -1)


def _strata_members(strata: np.ndarray, n_rows: int) -> list[np.ndarray]:
    strata = np.asarray(strata)
    if strata.shape != (n_rows,):
        raise ValueError(f"strata: expected {n_rows} labels, found shape {strata.shape}")
    return [np.flatnonzero(strata == stratum) for stratum in np.unique(strata)]


def _spread(values: list[float], draws: int) -> float | None:
    """sd (ddof=1) of the defined values; None when fewer than MIN_DEFINED_SHARE of the
    draws gave one."""
    if len(values) < max(2, MIN_DEFINED_SHARE * draws):
        return None
    return float(np.std(values, ddof=1))


def root_mean_square_deviation(values: np.ndarray, observed: float) -> float | None:
    """sqrt(mean((value - observed)^2)) over the draws' finite values: the bootstrap's
    estimate of the root mean squared error, its spread and its bias together (a biased
    statistic, such as a minimum of ratios, strays from its expectation by both). None when
    fewer than MIN_DEFINED_SHARE of the draws gave a value."""
    values = np.asarray(values, dtype=np.float64)
    defined = values[np.isfinite(values)]
    if defined.size < max(2, MIN_DEFINED_SHARE * values.size):
        return None
    return float(np.sqrt(np.mean((defined - observed) ** 2)))


def bootstrap_errors(statistics: Mapping[str, Callable[[np.ndarray], float]],
                     draws: Iterable[np.ndarray],
                     on_blocks: Mapping[str, Callable[[np.ndarray], Iterable[float]]]
                     | None = None) -> dict[str, float | None]:
    """Each statistic's bootstrap standard error: the sd over the draws (resampled row
    indices, or weights) of statistic(draw). A draw on which a statistic raises ValueError
    (undefined there) or is not finite is left out of its spread. ``on_blocks``: statistics
    that take a block of draws at once (stacked, one draw a row, so the draws must have one
    length) and give one value per draw, nan where undefined."""
    on_blocks = on_blocks or {}
    values: dict[str, list[float]] = {name: [] for name in (*statistics, *on_blocks)}
    count = 0
    blocks = _stacked(draws) if on_blocks else ([draw] for draw in draws)
    for block in blocks:
        count += len(block)
        for name, statistic in on_blocks.items():
            values[name].extend(value for value in map(float, statistic(block))
                                if math.isfinite(value))
        for draw in block:
            for name, statistic in statistics.items():
                try:
                    value = float(statistic(draw))
                except (ValueError, ZeroDivisionError, FloatingPointError):
                    continue
                if math.isfinite(value):
                    values[name].append(value)
    return {name: _spread(found, count) for name, found in values.items()}


def _stacked(draws: Iterable[np.ndarray]) -> Iterator[np.ndarray]:
    """The draws in order, stacked in blocks of about BATCHED_ROWS indices (at least one draw)."""
    block: list[np.ndarray] = []
    for draw in draws:
        block.append(draw)
        if len(block) * draw.size >= BATCHED_ROWS:
            yield np.stack(block)
            block = []
    if block:
        yield np.stack(block)


def stratified_mean_se(terms: np.ndarray, strata: np.ndarray | None = None) -> float | None:
    """Standard error of the mean of per-row terms under stratified sampling of the rows:

        se^2 = sum_s (n_s / n)^2 v_s,   v_s = s_s^2 / n_s   (s_s^2: variance, ddof=1, of stratum s)

    (one stratum: sd / sqrt(n)). Terms of 0 and 1 make a share, whose v_s near 0 or 1 is
    at least ``proportion_se(stratum)^2``: a stratum all 0 or all 1 has s_s = 0, which would
    read as certainty. None when a stratum has fewer than two rows."""
    terms = np.asarray(terms, dtype=np.float64)
    groups = [terms] if strata is None else [terms[m] for m in _strata_members(strata, terms.size)]
    if any(group.size < 2 for group in groups):
        return None
    binary = bool(np.all((terms == 0.0) | (terms == 1.0)))
    variance = sum((group.size / terms.size) ** 2 * _stratum_variance(group, binary)
                   for group in groups)
    return float(math.sqrt(variance))


def _stratum_variance(group: np.ndarray, binary: bool) -> float:
    """s^2 / n, and for a share with fewer than NORMAL_SHARE_ROWS rows on one side, where
    the normal approximation fails (all rows 1: s = 0), at least ``proportion_se``^2."""
    closed_form = _sample_variance(group) / group.size
    ones = float(group.sum())
    if not binary or min(ones, group.size - ones) >= NORMAL_SHARE_ROWS:
        return closed_form
    return max(closed_form, proportion_se(ones, group.size) ** 2)


def _sample_variance(values: np.ndarray) -> float:
    """``float(np.var(values, ddof=1))`` of a 1-D float64 array of at least two numbers: the
    same operations in the same order (mean, squared deviations, their sum over n - 1), so
    the same number, without np.var's generic checks, which cost more than the arithmetic on
    the few hundred rows the coverage simulations pass it tens of thousands of times."""
    deviations = values - values.sum() / values.size
    np.multiply(deviations, deviations, out=deviations)
    return float(deviations.sum() / (values.size - 1))


def proportion_se(successes: float, n: int) -> float:
    """A proportion's standard error that does not collapse at 0 or 1: the larger distance
    from p = successes / n to an end of Wilson's 95% score interval, over 1.96, so that
    p +- 1.96 se holds the whole Wilson interval. Near 1/2 it is sqrt(p (1 - p) / n) to
    O(1/n); at p = 1 it is 1.96 / (n + 1.96^2), where sqrt(p (1 - p) / n) is 0. The
    symmetric widening also covers the dips Wilson's interval has near the ends."""
    p, z2 = successes / n, Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(p - (centre - half), centre + half - p) / Z95


def unless_collapsed(se: float | None, value: float, minimum: float,
                     maximum: float | None) -> float | None:
    """None for a standard error of exactly 0 at an end of the metric's range: every
    resample gave that same extreme value (an AUROC of 1 on every resample of a perfectly
    separated test set), which shows only that the data cannot tell how far it would move,
    and a 0 would read as certainty. A value inside the range that no resample moves keeps
    its 0: it is exact (a mean over classes of per-class shares, for a submission that
    predicts one class, is 1/K on any test set)."""
    if se == 0.0 and (value == minimum or (maximum is not None and value == maximum)):
        return None
    return se


def row_errors(score_types: Iterable, arrays: Mapping[str, object],
               take: Callable[[Mapping[str, object], np.ndarray], Mapping[str, object]],
               n_rows: int, strata: np.ndarray | None = None,
               clip: Callable[[object, float], float] | None = None,
               draws: int = DRAWS) -> dict[str, float | None]:
    """Every score type's standard error over the task's test rows: from its per-row terms
    where it declares them (``ScoreType.per_row``), else a stratified bootstrap in which
    ``take(arrays, rows)`` gives the task's named arrays on a resample of its rows and the
    score type is evaluated on them (clipped as its leaderboard value is, where
    ``clip(score_type, value)`` says). A 0 at an end of the metric's range is None
    (``unless_collapsed``)."""
    score_types = list(score_types)
    errors = {t.name: stratified_mean_se(t.terms(arrays), strata)
              for t in score_types if t.per_row is not None}
    resampled = [t for t in score_types if t.per_row is None]
    if resampled:
        on_blocks = _on_blocks_of_draws(resampled, arrays, take, clip)
        errors.update(bootstrap_errors(
            {t.name: _on_resample(t, arrays, take, clip) for t in resampled
             if t.name not in on_blocks},
            resampled_rows(n_rows, strata, draws), on_blocks))
    return {t.name: _not_collapsed(errors[t.name], t, arrays, clip) for t in score_types}


def _not_collapsed(se: float | None, score_type, arrays, clip) -> float | None:
    """``unless_collapsed`` on the score type's range (its value computed only for a 0)."""
    if se != 0.0:
        return se
    return unless_collapsed(se, _value(score_type, arrays, clip), score_type.minimum,
                            score_type.maximum)


def _value(score_type, arrays, clip) -> float:
    value = score_type.evaluate(arrays)
    return clip(score_type, value) if clip else value


def _on_resample(score_type, arrays, take, clip) -> Callable[[np.ndarray], float]:
    def statistic(rows: np.ndarray) -> float:
        return _value(score_type, take(arrays, rows), clip)
    return statistic


def _on_blocks_of_draws(score_types, arrays, take, clip) -> dict[str, Callable]:
    """The score types that evaluate a whole block of draws in one pass
    (``ScoreType.on_resamples``), clipped as one evaluation per draw is: only where ``take``
    indexes every input of the score type by row, which is what that form assumes."""
    found = {}
    for score_type in score_types:
        if score_type.on_resamples is None or not isinstance(take, RowTake) \
                or not set(score_type.inputs) <= take.names:
            continue
        on_draws = score_type.on_resamples(*(arrays[name] for name in score_type.inputs))
        if on_draws is not None:
            found[score_type.name] = _clipped_on_blocks(score_type, on_draws, clip)
    return found


def _clipped_on_blocks(score_type, on_draws, clip) -> Callable[[np.ndarray], list[float]]:
    def statistic(block: np.ndarray) -> list[float]:
        values = on_draws(block).tolist()
        return [clip(score_type, value) for value in values] if clip else values
    return statistic


class RowTake:
    """A ``take`` for arrays whose named entries are indexed by test row on their first axis
    (the others are passed on whole); ``names`` tells a bootstrap which inputs it may index
    itself."""

    def __init__(self, row_names: Iterable[str]):
        self.names = frozenset(row_names)

    def __call__(self, arrays: Mapping[str, object], rows: np.ndarray) -> dict[str, object]:
        return {name: (value[rows] if name in self.names else value)
                for name, value in arrays.items()}


def take_rows(row_names: Iterable[str]) -> RowTake:
    """A ``take`` for arrays whose named entries are indexed by test row on their first axis
    (the others are passed on whole)."""
    return RowTake(row_names)


def replicates_se(values: Iterable[float]) -> float | None:
    """sd(values, ddof=1) / sqrt(k), the standard error of the mean of k replicates, widened
    by t_{k-1} / 1.96 (the 97.5% points of Student's t and the normal): from a handful of
    replicates (BDL's 4 chains) the sd is itself uncertain, and value +- 1.96 se should be
    the t interval on k - 1 degrees of freedom (4 chains: x 1.62; unwidened, an error that
    the chains dominate was covered 0.85 of the time instead of 0.95, docs/intervals.md)."""
    values = [float(v) for v in values]
    if len(values) < 2:
        return None
    spread = float(np.std(values, ddof=1) / math.sqrt(len(values)))
    return spread * student_t95(len(values) - 1) / Z95


# Student's t, 97.5% point, for 1..29 degrees of freedom (scipy.stats.t.ppf, 4 decimals)
_T95 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
        2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
        2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452)


def student_t95(freedom: int) -> float:
    """The 97.5% point of Student's t: tabulated to 29 degrees of freedom, beyond that the
    Cornish-Fisher expansion in 1/df (within 1e-5 from 30 on)."""
    if freedom < 1:
        raise ValueError(f"degrees of freedom: expected at least 1, found {freedom}")
    if freedom <= len(_T95):
        return _T95[freedom - 1]
    z = Z95
    return (z + (z ** 3 + z) / (4 * freedom)
            + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * freedom ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * freedom ** 3))


def combined_se(*parts: float | None) -> float | None:
    """sqrt(sum of squares) of independent sources' standard errors, the unknown left out;
    None when every part is unknown."""
    known = [p for p in parts if p is not None]
    return float(math.sqrt(sum(p * p for p in known))) if known else None

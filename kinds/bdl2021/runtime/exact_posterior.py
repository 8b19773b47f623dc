"""The exact-posterior expectation: the score an exact sampler's submission should expect.

The reference is itself a Monte Carlo estimate (K chains of finite length), so even the
exact posterior predictive does not score perfectly against it: total variation and the
Wasserstein distances stay above 0, agreement below 1, by an amount set by the size of the
reference. This module estimates, from the reference's own draws, the distribution of what an
exact submission of the participant's size scores against it: its mean (the line), its
standard deviation and a central interval that holds an exact submission's score with
probability ``COVERAGE``.

The draws come as n blocks, each the mean (classification) or the draws (regression) of a
stretch of one chain: ``BATCHES_PER_CHAIN`` consecutive batches of each chain when the
generator kept them, else the chains themselves. Treated as independent and alike (the
convergence gate's R-hat <= 1.01 and bulk ESS near the draw count are what allow it), each of
``SPLITS`` random halves S of the blocks stands in for one replicate of the whole situation:

- classification (a probability file carries no sample count, so an exact sampler may
  average as many draws as it likes): the submission is the reference p (the mean of all
  blocks) and the reference is the mean of half of them, p_S. For independent blocks with
  covariance s^2, p_S - p has covariance s^2 (1/|S| - 1/n) = s^2 / n, exactly that of the
  reference's own error p - p_exact; so score(p, p_S) is distributed as score(p_exact, p),
  with the reference standing in for the exact posterior (for agreement: a plug-in, exact in
  aggregate where margins near ties spread evenly). With an odd n the step p_S - p is
  rescaled to that variance.
- regression (``num_samples`` exact draws of y per test point, the file's fixed width): the
  submission is ``submission_draws`` draws picked from the blocks in S and the reference
  ``reference_draws`` picked from the rest: both sides have the real sizes and no draw in
  common, so no rescaling is needed. HMC draws stand for the exact ones (their ESS is near
  their count; where a side is short of draws, the central-limit rate
  sqrt((1/n_sub + 1/n_ref) / (1/a + 1/b)) rescales it).

The value is the mean over the splits, the spread their standard deviation and the interval
their (1 - COVERAGE)/2 and (1 + COVERAGE)/2 quantiles. For classification the blocks estimate
the error's scale with n - 1 degrees of freedom, so the interval's halves scale their step by
sqrt((n - 1) / chi^2_{n-1}) (one draw per half): the predictive of an error whose scale is
estimated. Without it the interval held an exact submission's TV 92-94% of the time in the
simulation below, with it 96%. The splits are seeded (``SEED``), so the
same reference always gives the same figures. ``kinds/bdl2021/tests/test_bdl_expected_score.py`` checks the
interval's coverage by simulation on every embedded task.

The builder computes this once (it depends on the references only) and ships it as a
versioned JSON file (``FILE_FORMAT``) next to the references.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import metrics
from .score_types import CLASSIFICATION, SCORE_TYPES

FILE_FORMAT = "exact-posterior-expectation/2"
SPLITS = 400
SEED = 32
COVERAGE = 0.95
# Consecutive batches each chain's draws are cut into: 4 chains give 40 blocks, enough to
# estimate the reference's Monte Carlo error with 39 degrees of freedom.
BATCHES_PER_CHAIN = 10
HALF_METHOD = ("random halves of the reference's batches of draws: the reference against half "
               "of its own batches (classification), or draws of one half against draws of "
               "the other (regression)")


@dataclass(frozen=True)
class Expectation:
    value: float
    spread: float | None    # std of an exact submission's score around the value
    method: str
    low: float | None = None     # the central COVERAGE interval of an exact submission's score
    high: float | None = None


def size_factor(n_sub: float, n_ref: float, n_a: float, n_b: float) -> float:
    """sqrt((1/n_sub + 1/n_ref) / (1/n_A + 1/n_B)); n_sub may be math.inf."""
    return math.sqrt((1 / n_sub + 1 / n_ref) / (1 / n_a + 1 / n_b))


def regression_blocks(chains: np.ndarray, batches: int = BATCHES_PER_CHAIN) -> list[np.ndarray]:
    """(K, N, S) draws of y in chain order -> K x ``batches`` blocks of (N, ~S/batches)."""
    return [block for chain in chains for block in np.array_split(chain, batches, axis=1)]


def expectation_blocks(task_type: str, chains: np.ndarray, reference_draws: int | None,
                       batch_means: np.ndarray | None = None) -> tuple:
    """(blocks, reference_draws) for ``exact_posterior_expectation``: classification, the
    batch means (K, B, N, C) where the generator kept them, else the chain means (K, N, C);
    regression, each chain's draws of y (K, N, S) cut into ``BATCHES_PER_CHAIN`` stretches."""
    if task_type == CLASSIFICATION:
        blocks = chains if batch_means is None else batch_means.reshape(-1, *batch_means.shape[2:])
        return blocks, None
    return regression_blocks(chains), reference_draws


def _halves(count: int, splits: int, rng: np.random.Generator) -> np.ndarray:
    """(splits, count) booleans: which blocks each random half holds (floor(count / 2))."""
    # One permutation per split, drawn in turn as before, so a seed gives the same halves.
    chosen = np.array([rng.permutation(count)[:count // 2] for _ in range(splits)],
                      dtype=np.intp).reshape(splits, count // 2)
    halves = np.zeros((splits, count), dtype=bool)
    halves[np.arange(splits)[:, None], chosen] = True
    return halves


# Splits whose steps one matrix product makes: their test points stacked into one array of at
# most this many numbers.
STACKED_NUMBERS = 1 << 22
# Splits scored at once, at most this many numbers each array: small enough that a split's
# moved probabilities stay in the L2 cache between their adding, argmax and distance (the same
# arithmetic on each number whatever the block, so the same scores).
SCORED_NUMBERS = 1 << 16


def _stacked_scores(scores, reference: np.ndarray, moved: np.ndarray) -> dict[str, np.ndarray]:
    """Each metric of ``reference`` (N, C) against every one of m ``moved`` arrays (m, N, C):
    the score types' per-row terms broadcast the reference over the m arrays (each metric is
    the mean of a row of terms)."""
    return {score.name: score.per_row(reference, moved).mean(axis=1) for score in scores}


# The classification metrics' per-row terms as the splits' loop computes them: the same
# operations on the same numbers as ``metrics``, so the same terms, without recomputing the
# reference's argmax for every block or allocating an array for every intermediate (a new
# array of this size costs its page faults each time, more than the arithmetic).

def _agreement_terms(reference: np.ndarray, reference_top: np.ndarray, moved: np.ndarray,
                     work: np.ndarray) -> np.ndarray:
    """``metrics.top1_agreement_terms(reference, moved)``; ``reference_top`` is the
    reference's argmax."""
    return (moved.argmax(axis=-1) == reference_top).astype(np.float64)


def _total_variation_terms(reference: np.ndarray, reference_top: np.ndarray, moved: np.ndarray,
                           work: np.ndarray) -> np.ndarray:
    """``metrics.total_variation_terms(reference, moved)``, its differences written into
    ``work`` (moved's shape)."""
    np.subtract(reference, moved, out=work)
    return 0.5 * np.abs(work, out=work).sum(axis=-1)


# Which per-row terms the loop may compute as above; another score type keeps its own.
BUFFERED_TERMS = {metrics.top1_agreement_terms: _agreement_terms,
                  metrics.total_variation_terms: _total_variation_terms}


def _classification_scores(blocks: np.ndarray, halves: np.ndarray, widening: np.ndarray
                           ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Each metric per half, as is (the value and spread) and with each half's step scaled by
    its ``widening`` (the interval)."""
    count = len(blocks)
    reference = blocks.mean(axis=0)
    size = count // 2
    # Var(p_S - p) = s^2 (1/size - 1/count); an exact match to s^2 / count when size = count/2.
    scale = math.sqrt((1 / count) / (1 / size - 1 / count))
    flat = (blocks - reference).reshape(count, -1)
    per_chunk = max(1, STACKED_NUMBERS // flat.shape[1])
    per_block = max(1, SCORED_NUMBERS // flat.shape[1])
    scores = SCORE_TYPES[CLASSIFICATION]
    if not all(score.per_row in BUFFERED_TERMS for score in scores):
        return _classification_scores_unbuffered(reference, flat, scale, halves, widening)
    terms = [(score.name, BUFFERED_TERMS[score.per_row]) for score in scores]
    reference_top = reference.argmax(axis=-1)
    rows = min(per_block, per_chunk, len(halves))
    moved_buffer = np.empty((rows, *reference.shape))
    work_buffer = np.empty_like(moved_buffer)
    # One array for every chunk's steps: the same product and scaling, written in place.
    steps_buffer = np.empty((min(per_chunk, len(halves)), flat.shape[1]))
    plain, widened = [], []
    for start in range(0, len(halves), per_chunk):
        weights = halves[start:start + per_chunk] / size                # (m, count)
        steps = np.matmul(weights, flat, out=steps_buffer[:len(weights)])
        steps *= scale
        steps = steps.reshape(-1, *reference.shape)
        factors = widening[start:start + per_chunk].reshape(-1, *[1] * reference.ndim)
        for first in range(0, len(steps), per_block):
            step, factor = steps[first:first + per_block], factors[first:first + per_block]
            moved, work = moved_buffer[:len(step)], work_buffer[:len(step)]
            np.add(reference, step, out=moved)
            plain.append({name: function(reference, reference_top, moved, work).mean(axis=1)
                          for name, function in terms})
            np.add(reference, np.multiply(step, factor, out=moved), out=moved)
            widened.append({name: function(reference, reference_top, moved, work).mean(axis=1)
                            for name, function in terms})
    return tuple({name: np.concatenate([part[name] for part in parts]) for name in parts[0]}
                 for parts in (plain, widened))


def _classification_scores_unbuffered(reference: np.ndarray, flat: np.ndarray, scale: float,
                                      halves: np.ndarray, widening: np.ndarray
                                      ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``_classification_scores`` through the score types' own per-row terms."""
    size = len(flat) // 2
    per_chunk = max(1, STACKED_NUMBERS // flat.shape[1])
    per_block = max(1, SCORED_NUMBERS // flat.shape[1])
    scores = SCORE_TYPES[CLASSIFICATION]
    plain, widened = [], []
    for start in range(0, len(halves), per_chunk):
        weights = halves[start:start + per_chunk] / size                # (m, count)
        steps = (weights @ flat).reshape(-1, *reference.shape) * scale
        factors = widening[start:start + per_chunk].reshape(-1, *[1] * reference.ndim)
        for first in range(0, len(steps), per_block):
            step, factor = steps[first:first + per_block], factors[first:first + per_block]
            plain.append(_stacked_scores(scores, reference, reference + step))
            widened.append(_stacked_scores(scores, reference, reference + step * factor))
    return tuple({name: np.concatenate([part[name] for part in parts]) for name in parts[0]}
                 for parts in (plain, widened))


def _pick(columns: np.ndarray, count: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """A mask over ``width`` pool columns: ``count`` of ``columns`` (all of them if fewer)."""
    if len(columns) > count:
        columns = rng.choice(columns, count, replace=False)
    mask = np.zeros(width, dtype=bool)
    mask[columns] = True
    return mask


def _sorted_sides(sorted_pool: np.ndarray, order: np.ndarray, labels: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The values of the pool columns labelled 1 and of those labelled 2 (0: neither), each
    row sorted, without sorting: the pool is sorted once per row (``order``) and each row
    keeps its labelled entries in that order. One gather of the labels serves both sides."""
    rows = len(sorted_pool)
    in_order = labels.take(order.ravel())
    flat = sorted_pool.ravel()
    return tuple(flat.take(np.flatnonzero(in_order == label)).reshape(rows, -1)
                 for label in (1, 2))


# The regression metrics as ``metrics.wasserstein_per_point`` computes them on rows already
# sorted and of one width (its sort_rows leaves such rows as they are, and its coupling pairs
# the k-th values): the same operations, the distance |S - R| taken once for both orders.
SORTED_WASSERSTEIN_ORDERS = {metrics.wasserstein2: 2, metrics.wasserstein1: 1}


def _sorted_wasserstein(submission: np.ndarray, reference: np.ndarray, orders) -> list[float]:
    """``metrics.wasserstein{order}(submission, reference)`` for each order, the rows sorted
    and equally wide."""
    distance = np.abs(np.subtract(submission, reference, out=submission), out=submission)
    found = []
    for order in orders:
        mean_power = (distance ** order).mean(axis=1)
        found.append(float((mean_power if order == 1 else mean_power ** (1 / order)).mean()))
    return found


def _regression_scores(blocks: list[np.ndarray], halves: np.ndarray, reference_draws: int,
                       submission_draws: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    pool = np.concatenate(blocks, axis=1)
    order = np.argsort(pool, axis=1, kind="stable")
    sorted_pool = np.take_along_axis(pool, order, axis=1)
    edges = np.cumsum([0] + [block.shape[1] for block in blocks])
    columns = [np.arange(start, stop) for start, stop in zip(edges[:-1], edges[1:])]
    score_types = SCORE_TYPES["regression"]
    sorted_orders = [SORTED_WASSERSTEIN_ORDERS.get(score.function) for score in score_types]
    scores = {score.name: [] for score in score_types}
    labels = np.zeros(pool.shape[1], dtype=np.int8)
    for half in halves:
        side_a = np.concatenate([c for c, inside in zip(columns, half) if inside])
        side_b = np.concatenate([c for c, inside in zip(columns, half) if not inside])
        labels[:] = 0
        labels[_pick(side_a, submission_draws, pool.shape[1], rng)] = 1
        labels[_pick(side_b, reference_draws, pool.shape[1], rng)] = 2
        submission, reference = _sorted_sides(sorted_pool, order, labels)
        factor = size_factor(submission_draws, reference_draws, submission.shape[1],
                             reference.shape[1])
        if submission.shape == reference.shape and None not in sorted_orders:
            values = _sorted_wasserstein(submission, reference, sorted_orders)
        else:                       # sorted rows: the metrics do not sort again
            values = [score.function(submission, reference) for score in score_types]
        for score, value in zip(score_types, values):
            scores[score.name].append(value * factor)
    return {name: np.array(values) for name, values in scores.items()}


# Each metric's range: what a score can be, hence what its expectation may say.
BOUNDS = {score.name: (score.minimum, math.inf if score.maximum is None else score.maximum)
          for scores in SCORE_TYPES.values() for score in scores}


def within_bounds(name: str, value: float) -> float:
    """``value`` clipped to metric ``name``'s range. The interval's widened steps (and, with
    an odd block count, the rescaled ones) move the reference's probabilities by more than
    the blocks did, which can leave the simplex where the reference is far from the blocks'
    spread: a total variation above 1 then says nothing a score can say, and the scorer,
    rightly, refuses a range outside the metric's bounds."""
    low, high = BOUNDS[name]
    return float(min(max(value, low), high))


def expectation_from_scores(scores: dict[str, np.ndarray],
                            interval_scores: dict[str, np.ndarray] | None = None,
                            coverage: float = COVERAGE) -> dict[str, Expectation]:
    """Each metric's mean and spread over the splits' ``scores``, and the central interval of
    ``interval_scores`` (default: the same scores), each within the metric's bounds."""
    interval_scores = interval_scores or scores
    tail = (1 - coverage) / 2
    return {name: Expectation(within_bounds(name, values.mean()),
                              float(values.std(ddof=1)) if len(values) > 1 else None,
                              HALF_METHOD,
                              within_bounds(name, np.quantile(interval_scores[name], tail)),
                              within_bounds(name, np.quantile(interval_scores[name], 1 - tail)))
            for name, values in scores.items()}


def split_scores(task_type: str, blocks, reference_draws: int | None = None,
                 submission_draws: int | None = None, splits: int = SPLITS,
                 seed: int = SEED) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """What an exact submission scores in each of ``splits`` random halves (module docstring):
    the scores for the value and spread, and those for the interval.

    blocks: classification (n, N, C) block means; regression a list of n (N, S_b) blocks of
    draws of y, with ``reference_draws`` (the reference's draws per point) and
    ``submission_draws`` (the file's width).
    """
    count = len(blocks)
    if count < 2:
        raise ValueError(f"the exact-posterior expectation needs at least 2 blocks of draws "
                         f"(batches or chains), got {count}")
    rng = np.random.default_rng(seed)
    halves = _halves(count, splits, rng)
    if task_type == CLASSIFICATION:
        # The blocks estimate the error's covariance with count - 1 degrees of freedom; the
        # interval carries that uncertainty of its scale (a scaled inverse chi-square per half,
        # the predictive of a Gaussian error whose scale is estimated), the value does not.
        widening = np.sqrt((count - 1) / rng.chisquare(max(count - 1, 1), splits))
        return _classification_scores(np.asarray(blocks, dtype=float), halves, widening)
    if not reference_draws or not submission_draws:
        raise ValueError("regression needs reference_draws and submission_draws")
    scores = _regression_scores(blocks, halves, reference_draws, submission_draws, rng)
    return scores, scores


def exact_posterior_expectation(task_type: str, blocks, reference_draws: int | None = None,
                                submission_draws: int | None = None, splits: int = SPLITS,
                                seed: int = SEED) -> dict[str, Expectation]:
    """Each metric's expected value, spread and interval for an exact-posterior submission of
    the participant's size (``split_scores`` says what ``blocks`` holds)."""
    return expectation_from_scores(*split_scores(task_type, blocks, reference_draws,
                                                 submission_draws, splits, seed))


def expectation_document(task: str, task_type: str, blocks, reference_draws: int | None = None,
                         submission_draws: int | None = None, splits: int = SPLITS) -> dict:
    """The JSON the builder ships next to the references (format ``FILE_FORMAT``)."""
    expectations = exact_posterior_expectation(task_type, blocks, reference_draws,
                                               submission_draws, splits)
    submission = ("the exact posterior model average" if task_type == CLASSIFICATION
                  else f"{submission_draws} exact draws of y per test point")
    return {"format": FILE_FORMAT, "task": task, "task_type": task_type,
            "submission": submission,
            "reference": {"blocks": len(blocks), "draws_per_point": reference_draws},
            "splits": splits, "seed": SEED, "coverage": COVERAGE,
            "metrics": {name: {"value": e.value, "spread": e.spread, "low": e.low,
                               "high": e.high, "method": e.method}
                        for name, e in expectations.items()}}


def parse_expectation_document(document, task: str, task_type: str, source: str) -> dict[str, Expectation]:
    """Validate a shipped document; every problem raises ValueError naming source and key."""
    if not isinstance(document, dict):
        raise ValueError(f"{source}: expected a JSON object, found {type(document).__name__}")
    if document.get("format") != FILE_FORMAT:
        raise ValueError(f"{source}: format must be {FILE_FORMAT!r}, found "
                         f"{document.get('format')!r} (rebuild the bundle with this builder)")
    for key, expected in (("task", task), ("task_type", task_type)):
        if document.get(key) != expected:
            raise ValueError(f"{source}: {key} must be {expected!r}, found {document.get(key)!r}")
    metrics = document.get("metrics")
    names = [score.name for score in SCORE_TYPES[task_type]]
    if not isinstance(metrics, dict) or sorted(metrics) != sorted(names):
        found = sorted(metrics) if isinstance(metrics, dict) else metrics
        raise ValueError(f"{source}: metrics must hold exactly {', '.join(names)}, found {found!r}")
    parsed = {}
    for score in SCORE_TYPES[task_type]:
        entry, where = metrics[score.name], f"{source}: metrics.{score.name}"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: expected an object with value, spread, low, high, method")
        value, spread = entry.get("value"), entry.get("spread")
        upper = score.maximum if score.maximum is not None else math.inf
        bounds = {key: entry.get(key) for key in ("value", "low", "high")}
        for key, number in bounds.items():
            if not _finite_number(number) or not score.minimum <= number <= upper:
                raise ValueError(f"{where}.{key}: expected a finite number in "
                                 f"[{score.minimum:g}, {upper:g}], found {number!r}")
        if not bounds["low"] <= bounds["high"]:
            raise ValueError(f"{where}: low ({bounds['low']!r}) must not exceed high "
                             f"({bounds['high']!r})")
        if spread is not None and (not _finite_number(spread) or spread < 0):
            raise ValueError(f"{where}.spread: expected null or a finite number >= 0, "
                             f"found {spread!r}")
        parsed[score.name] = Expectation(float(value), None if spread is None else float(spread),
                                         str(entry.get("method", "")), float(bounds["low"]),
                                         float(bounds["high"]))
    return parsed


def _finite_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

"""The bootstrap evaluates an AUROC on a whole block of resampled rows in one pass
(``metrics.resampled_auroc``, declared by a score type's ``on_resamples``) instead of once per
draw. Its standard errors are on the leaderboard, so that pass must give the per-draw
evaluation's numbers bit for bit, and a change to ``metrics.auroc`` must not leave it stale.
Random inputs with ties, one class, tiny and larger sets, compared with the per-draw path."""
import dataclasses
import math

import numpy as np
import pytest

from kinds.retina.runtime import metrics, scoring
from runtime import uncertainty


def scores(rng, n: int, ties: str) -> np.ndarray:
    if ties == "none":
        return rng.random(n)
    if ties == "few values":
        return rng.integers(0, 4, n).astype(np.float64)
    if ties == "all equal":
        return np.full(n, 0.5)
    return np.round(rng.random(n), 1)


def auroc_of_each(y, score, counted, rows) -> list[float]:
    """``metrics.auroc`` on each resample, nan where it is undefined."""
    values = []
    for draw in rows:
        keep = counted[draw]
        try:
            values.append(metrics.auroc(y[draw][keep], score[draw][keep]))
        except ValueError:
            values.append(math.nan)
    return values


@pytest.mark.parametrize("n", [1, 2, 7, 60, 700])
@pytest.mark.parametrize("ties", ["none", "few values", "all equal", "rounded"])
@pytest.mark.parametrize("positive_share", [0.0, 0.03, 0.5, 1.0])
def test_the_auroc_of_a_block_of_resamples_is_the_auroc_of_each(n, ties, positive_share):
    rng = np.random.default_rng([n, len(ties), int(100 * positive_share)])
    y = (rng.random(n) < positive_share).astype(np.int64)
    score = scores(rng, n, ties)
    for counted in (np.ones(n, dtype=bool), rng.random(n) < 0.6):
        rows = rng.integers(0, n, (int(rng.integers(1, 40)), n))
        on_draws = metrics.resampled_auroc(y, score, counted)
        if not counted.any():            # every resample is rejected: the per-draw path
            assert on_draws is None
            continue
        fast = on_draws(rows)
        plain = np.array(auroc_of_each(y, score, counted, rows))
        assert np.array_equal(fast, plain, equal_nan=True)


def test_inputs_that_some_resamples_would_reject_are_left_to_the_per_draw_path():
    y, score = np.array([0, 1, 1, 0]), np.array([0.1, np.nan, 0.3, 0.2])
    assert metrics.resampled_auroc(y, score) is None
    assert metrics.resampled_auroc(np.array([0, 2, 1]), np.array([0.1, 0.2, 0.3])) is None
    assert metrics.resampled_auroc(y, score[:3]) is None


def retina_case(rng, in_domain: int, shifted: int, ties: bool) -> dict:
    n = in_domain + shifted
    y = (rng.random(n) < rng.choice([0.02, 0.3, 0.5])).astype(np.int64)
    p = np.round(rng.random(n), 1) if ties else rng.random(n)
    return {"y": y, "p": p, "u": metrics.predictive_entropy(p),
            "shifted": rng.permutation(np.repeat([False, True], [in_domain, shifted]))}


def one_per_draw(score_types) -> list:
    return [dataclasses.replace(t, on_resamples=None) for t in score_types]


@pytest.mark.parametrize("in_domain, shifted, ties", [
    (2, 1, False), (12, 5, True), (150, 90, False), (300, 300, True), (3000, 200, True)])
def test_the_retina_standard_errors_are_those_of_one_evaluation_per_draw(in_domain, shifted,
                                                                         ties):
    rng = np.random.default_rng(in_domain + shifted)
    case = retina_case(rng, in_domain, shifted, ties)
    score_types = [scoring.AUROC_IN, scoring.OOD_AUROC, scoring.ACCURACY_SHIFTED]
    assert all(t.on_resamples is not None for t in score_types[:2])
    for strata in (case["shifted"], None):
        errors = [uncertainty.row_errors(types, case, uncertainty.take_rows(case),
                                         case["y"].size, strata, draws=120,
                                         clip=lambda t, value: t.clip(value))
                  for types in (score_types, one_per_draw(score_types))]
        assert errors[0] == errors[1]


def test_a_take_that_is_not_by_row_keeps_one_evaluation_per_draw():
    rng = np.random.default_rng(3)
    case = retina_case(rng, 40, 20, ties=True)
    by_row = uncertainty.take_rows(case)
    calls = []

    def take(arrays, rows):
        calls.append(rows)
        return by_row(arrays, rows)
    errors = uncertainty.row_errors([scoring.AUROC_IN], case, take, case["y"].size, draws=30)
    assert len(calls) == 30
    assert errors == uncertainty.row_errors([scoring.AUROC_IN], case, by_row, case["y"].size,
                                            draws=30)

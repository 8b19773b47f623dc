"""One test over every score type of every kind (after scikit-learn's test_common.py): a
perfect submission scores the best a submission can, a failed task's value (``worst()``) is
never better than any submission's, an adversarial submission reaches it where the metric's
range says it can, and random submissions stay inside the declared range.

The score types are read from each kind's runtime scoring module (``scoring_runtime``); the
inputs come from one generator per (kind, task type) below. A kind or task type without one
fails ``test_every_task_type_has_a_generator``: a new kind adds its generator here.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest

from kinds.kind import KINDS, scoring_runtime

RANDOM_SUBMISSIONS = 20
# Far enough from a bound that a random submission cannot sit on it by chance, close enough
# that rounding in the metrics' sums (means over a few hundred rows) cannot cross it.
ROUNDING = 1e-9


@dataclass(frozen=True)
class Inputs:
    """A task's arrays, by the names its score types declare, for three submissions to the
    same hidden truth: perfect, random ones (a function of a generator) and adversarial
    (``adversarial_for`` a score type whose worst case is another submission)."""
    perfect: dict
    random: Callable[[np.random.Generator], dict]
    adversarial: dict
    adversarial_for: dict = field(default_factory=dict)

    def against(self, score) -> dict:
        return self.adversarial_for.get(score.name, self.adversarial)


# ------------------------------------------------------------------ BDL 2021

def _bdl_classification(rng) -> Inputs:
    points, classes = 200, 4
    # one-hot references, so a submission can put no mass where the reference has any
    reference = np.eye(classes)[rng.integers(0, classes, points)]
    opposite = np.eye(classes)[(reference.argmax(axis=1) + 1) % classes]
    return Inputs({"prediction": reference.copy(), "reference": reference},
                  lambda r: {"prediction": r.dirichlet(np.ones(classes), points),
                             "reference": reference},
                  {"prediction": opposite, "reference": reference})


def _bdl_regression(rng) -> Inputs:
    reference = np.sort(rng.standard_normal((100, 200)), axis=1)
    # an unbounded distance: its failed value is a cap per task, not reachable by
    # construction, so the adversarial submission is only far
    return Inputs({"prediction": reference.copy(), "reference": reference},
                  lambda r: {"prediction": r.standard_normal((100, 150)) * 2 + 1,
                             "reference": reference},
                  {"prediction": reference + 50.0, "reference": reference})


# ------------------------------------------------------------------ PGDL 2020

def _pgdl_zoo(rng) -> Inputs:
    codes = np.array(list(itertools.product((0, 1, 2), repeat=3)))
    hparams = {f"h{k}": codes[:, k] for k in range(codes.shape[1])}
    order = {name: [0, 1, 2] for name in hparams}
    gaps = codes @ np.array([1.0, 0.3, 0.1]) + 0.01 * rng.standard_normal(len(codes))

    def arrays(measure):
        return {"measure": measure, "gaps": gaps, "hparams": hparams, "value_order": order}
    # the reversed order is the worst correlation, but as informative as the right one to a
    # mutual information, whose worst case is a measure that says nothing
    return Inputs(arrays(gaps.copy()), lambda r: arrays(r.standard_normal(len(codes))),
                  arrays(-gaps), {"cmi": arrays(np.zeros(len(codes)))})


# ------------------------------------------------------------------ Retina

def _retina_diagnosis(rng) -> Inputs:
    rows = 300
    y = rng.integers(0, 2, rows)
    shifted = np.arange(rows) % 3 == 0
    # both labels on both sides of the shift: rows 0 and 3 are shifted, 1 and 2 are not
    y[:4] = [0, 0, 1, 1]
    certain = np.where(shifted, 1.0, 0.0)
    return Inputs({"y": y, "p": y.astype(float), "u": certain, "shifted": shifted},
                  lambda r: {"y": y, "p": r.random(rows), "u": r.random(rows),
                             "shifted": shifted},
                  {"y": y, "p": 1.0 - y, "u": 1.0 - certain, "shifted": shifted})


# ------------------------------------------------------------------ label accuracy

def _labels(rng) -> Inputs:
    labels = rng.integers(0, 5, 250)
    return Inputs({"predicted": labels.copy(), "labels": labels},
                  lambda r: {"predicted": r.integers(0, 5, 250), "labels": labels},
                  {"predicted": (labels + 1) % 5, "labels": labels})


GENERATORS = {("bdl2021", "classification"): _bdl_classification,
              ("bdl2021", "regression"): _bdl_regression,
              ("pgdl2020", "zoo"): _pgdl_zoo,
              ("retina", "diagnosis"): _retina_diagnosis,
              ("label_accuracy", "labels"): _labels}

# Score types whose worst value no submission reaches, and why (the failed value is then
# strictly worse than any submission, which the test still checks).
UNREACHABLE_WORST = {
    # every referral curve ends with the accuracy of no rows kept, 1: the area is >= 1/(N+1)
    "referral_joint": "the curve's last entry", "referral_in": "the curve's last entry",
    "referral_shifted": "the curve's last entry",
    "w2": "unbounded (capped per task)", "w1": "unbounded (capped per task)",
}


def _score_types():
    for kind in sorted(KINDS):
        for type_name, task_type in scoring_runtime(kind).TASK_TYPES.items():
            for score in task_type.score_types:
                yield pytest.param(kind, type_name, score, id=f"{kind}-{type_name}-{score.name}")


def _better_or_equal(score, a: float, b: float) -> bool:
    return a >= b - ROUNDING if score.higher_is_better else a <= b + ROUNDING


def _within_range(score, value: float) -> bool:
    upper = math.inf if score.maximum is None else score.maximum
    return math.isfinite(value) and score.minimum - ROUNDING <= value <= upper + ROUNDING


def test_every_task_type_has_a_generator():
    found = {(kind, name) for kind in KINDS for name in scoring_runtime(kind).TASK_TYPES}
    assert found == set(GENERATORS), f"add a generator for {sorted(found - set(GENERATORS))}"


@pytest.mark.parametrize("kind, type_name, score", list(_score_types()))
def test_a_perfect_submission_scores_best_and_a_failed_task_worst(kind, type_name, score):
    inputs = GENERATORS[kind, type_name](np.random.default_rng(0))
    rng = np.random.default_rng(1)
    perfect = score.evaluate(inputs.perfect)
    adversarial = score.evaluate(inputs.against(score))
    randoms = [score.evaluate(inputs.random(rng)) for _ in range(RANDOM_SUBMISSIONS)]
    everything = [perfect, adversarial, *randoms]
    assert all(_within_range(score, value) for value in everything), (score.name, everything)
    # the best a submission can do: no random submission beats the perfect one, and where
    # the range has a best end, the perfect one sits on it
    assert all(_better_or_equal(score, perfect, value) for value in everything)
    best = score.maximum if score.higher_is_better else score.minimum
    assert best is not None and perfect == pytest.approx(best, abs=ROUNDING), (score.name,
                                                                              perfect)
    # a failed task is never better than a submission (the cap: beyond every value here)
    worst = score.worst(cap=max(everything) + 1.0)
    assert all(_better_or_equal(score, value, worst) for value in everything), (worst,
                                                                                everything)
    if score.name in UNREACHABLE_WORST:
        assert not _better_or_equal(score, worst, adversarial)
    else:
        assert adversarial == pytest.approx(worst, abs=ROUNDING), (score.name, adversarial,
                                                                   worst)


def test_a_failed_run_on_a_metric_without_an_upper_bound_scores_the_tasks_cap():
    """A lower-is-better metric unbounded above (a distance, a log loss) has no worst value of
    its own: a failed run's result takes the task's cap, and without one the scorer says why
    rather than failing on a None."""
    from runtime.formats.run_record import TaskRun
    from runtime.scoring import ScoreType, TaskConfig, TaskType, run_failure
    distance = ScoreType("distance", "distance", "a distance", False, 0.0, None, 4,
                         lambda prediction, reference: 0.0)
    task = TaskConfig("task", TaskType("t", (distance,), distance), {"distance": 1.0}, 60.0,
                      None)
    crashed = TaskRun(status="failed", wall_seconds=1.0, message="boom")
    result = run_failure(task, crashed, cap=7.5)
    assert result.penalised and result.metrics["distance"].value == 7.5
    with pytest.raises(ValueError, match="distance has no upper bound: a failed task's value "
                                         "needs the task's cap"):
        run_failure(task, crashed)
    assert run_failure(task, TaskRun(status="ok", wall_seconds=1.0, prediction="final")) is None

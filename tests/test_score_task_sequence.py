"""The core's one sequence for scoring a task (``runtime.scoring.score_task``), on a kind made
of the parts a kind gives, each recording that it was called: every kind is scored by this
sequence, so its order and its penalties are the same whatever the kind."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from runtime import failures
from runtime.formats import TaskRun
from runtime.scoring import (MetricResult, ReferenceDataError, ScoreType, SubmissionError,
                             TaskConfig, TaskResult, TaskType, score_task)

ERROR = ScoreType("error", "error", "Mean distance", False, 0.0, None, 4,
                  lambda prediction, reference: float(np.mean(abs(prediction - reference))))
SHARE = ScoreType("share", "share", "Share right", True, 0.0, 1.0, 4,
                  lambda prediction, reference: float(np.mean(prediction == reference)))
TASK = TaskConfig("t", TaskType("values", (ERROR, SHARE), ERROR), {"error": 1.0}, 10.0,
                  SimpleNamespace(n_test=4))


class Parts:
    """A kind's scoring parts; ``submitted`` is what read_submission returns, or the
    SubmissionError it raises."""

    def __init__(self, submitted, reference_error: bool = False):
        self.calls: list[str] = []
        self.submitted, self.reference_error = submitted, reference_error

    def read_reference(self, task, ref):
        self.calls.append("read_reference")
        if self.reference_error:
            raise ReferenceDataError("reference data of task t: unreadable")
        return np.arange(task.settings.n_test, dtype=float)

    def first_rows(self, task, reference, rows):
        self.calls.append(f"first_rows {rows}")
        return (dataclasses.replace(task, settings=SimpleNamespace(n_test=rows)),
                reference[:rows])

    def cap(self, task, reference):
        self.calls.append(f"cap of {reference.size} rows")
        return 10.0 * reference.size

    def read_submission(self, task, res, reference):
        self.calls.append(f"read_submission of {task.settings.n_test} rows"
                          + ("" if reference.size == task.settings.n_test else
                             f" against {reference.size} reference rows"))
        if isinstance(self.submitted, SubmissionError):
            raise self.submitted
        return self.submitted

    def first_submission_rows(self, submission, rows):
        self.calls.append(f"first_submission_rows {rows}")
        return submission[:rows]

    def penalty_details(self):
        return {"kind_figure": None}

    def evaluate(self, task, reference, submission, run):
        self.calls.append(f"evaluate {submission.size} rows")
        arrays = {"prediction": submission, "reference": reference}
        return TaskResult(task, {t.name: MetricResult(t.name, t.evaluate(arrays))
                                 for t in task.score_types},
                          train_seconds=run.train_seconds if run else None)


def run(has_prediction: bool) -> TaskRun:
    if has_prediction:
        return TaskRun("ok", 3.5, prediction="final", training_seconds=3.5)
    return TaskRun("timed_out", 3.5, message="stopped at the budget", training_seconds=3.5)


def test_a_valid_submission_is_read_after_the_reference_and_evaluated(tmp_path):
    parts = Parts(np.array([0.0, 1.0, 2.0, 5.0]))
    result = score_task(parts, TASK, tmp_path, tmp_path, None)
    assert parts.calls == ["read_reference", "cap of 4 rows", "read_submission of 4 rows",
                           "evaluate 4 rows"]
    assert not result.penalised
    assert result.metrics["error"].value == 0.5 and result.metrics["share"].value == 0.75


def test_broken_reference_data_stops_the_scorer_whatever_was_submitted(tmp_path):
    parts = Parts(SubmissionError("missing"), reference_error=True)
    with pytest.raises(ReferenceDataError, match="unreadable"):
        score_task(parts, TASK, tmp_path, tmp_path, run(False))
    assert parts.calls == ["read_reference"]


def test_a_run_without_a_prediction_gets_every_worst_value_and_nothing_is_read(tmp_path):
    """The worst of a metric unbounded above is the kind's cap for the task."""
    parts = Parts(np.zeros(4))
    result = score_task(parts, TASK, tmp_path, tmp_path, run(False))
    assert parts.calls == ["read_reference", "cap of 4 rows"]
    assert result.penalised and result.failure == failures.TIMED_OUT
    assert result.penalty == "training run timed out: stopped at the budget"
    assert {name: m.value for name, m in result.metrics.items()} == {"error": 40.0, "share": 0.0}
    assert all(m.details == {"kind_figure": None} for m in result.metrics.values())
    assert result.train_seconds == 3.5


def test_a_refused_submission_is_penalised_with_its_own_category(tmp_path):
    parts = Parts(SubmissionError("t: no prediction file", failures.NOTHING))
    result = score_task(parts, TASK, tmp_path, tmp_path, run(True))
    assert result.penalised and result.failure == failures.NOTHING
    assert result.penalty == "t: no prediction file"
    assert result.metrics["error"].value == 40.0 and result.train_seconds == 3.5
    assert parts.calls[-1] == "read_submission of 4 rows"


def test_a_public_part_cuts_the_task_and_reference_but_checks_the_whole_submission(tmp_path):
    parts = Parts(np.array([0.0, 1.0, 7.0, 9.0]))
    result = score_task(parts, TASK, tmp_path, tmp_path, None, rows=2)
    assert parts.calls == ["read_reference", "first_rows 2", "cap of 2 rows",
                           "read_submission of 4 rows", "first_submission_rows 2",
                           "evaluate 2 rows"]
    assert result.task.settings.n_test == 2 and result.metrics["error"].value == 0.0
    failed = score_task(Parts(np.zeros(4)), TASK, tmp_path, tmp_path, run(False), rows=2)
    assert failed.metrics["error"].value == 20.0       # the cap of the part scored

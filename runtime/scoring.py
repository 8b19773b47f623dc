"""What the scoring program and a kind's ``runtime/scoring.py`` exchange.

The core reads the generated config into ``TaskConfig`` objects, scores each task with the
kind's parts in one sequence, the same for every kind (``score_task``), asks the kind to
report it, then writes the leaderboard values from the results and the score types the kind
declared. Standard library and numpy only: copied into the scoring program.

A kind's ``runtime/scoring.py`` provides:

- ``TASK_TYPES``: ``{name: TaskType}``, the kinds of task it scores, each with its score types;
- ``parse_settings(task_type, raw, where)``: its per-task settings from the config (raise
  ``ValueError`` naming ``where`` and the key on a problem);
- ``read_reference(task, ref)``: the task's hidden reference, in whatever form ``evaluate``
  takes; broken reference data raises ``ReferenceDataError`` (the organizer's to fix);
- ``read_submission(task, res, reference)``: the participant's checked predictions, or
  ``SubmissionError`` saying what is missing or wrong (the task is then penalised);
- ``evaluate(task, reference, submission, run)``: the ``TaskResult`` of a valid submission
  (it may still be ``penalised``, where the kind's own rule says so);
- optional: ``cap(task, reference)``, the bound of a metric without an upper one (default
  None), which a penalised result takes as its worst value; ``penalty_details()``, what the
  kind adds to each metric of a penalised result (default: nothing); ``first_rows(task,
  reference, rows)`` and ``first_submission_rows(submission, rows)``, for a kind that
  scores a part of a task's rows (``kinds/kind.py`` says how it declares that): the task,
  its reference and the submission cut to their first test rows;
- ``submission_files(task)``: the names in ``res/`` it reads (for ordering and messages);
- ``STANDARD_ERROR`` (one sentence): how the kind measures each metric's standard error
  (``MetricResult.se``, with ``runtime.uncertainty``);
- ``REPORT_INTRO`` (one sentence), ``task_summary(result) -> str`` (plain text under the
  task's heading) and ``report_section(result) -> str`` (HTML: the task's tables and charts,
  built with ``runtime.report`` and ``runtime.svg_charts``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from runtime import failures, rules


class SubmissionError(ValueError):
    """The participant's file for a task is missing or invalid: the task is penalised.
    ``failure``: its category (``runtime/failures.py``), invalid output unless said."""

    def __init__(self, message: str, failure: str = failures.INVALID_OUTPUT):
        super().__init__(message)
        self.failure = failure


class ReferenceDataError(RuntimeError):
    """The organizer's reference data is broken: scoring stops and says which file."""


@dataclass(frozen=True)
class ScoreType:
    """One metric: direction, bounds, precision and penalty are declared once, and the
    leaderboard's sort and format and a failed task's values derive from them."""
    name: str                      # column key suffix: <task>_<name>
    label: str                     # short leaderboard label
    description: str
    higher_is_better: bool
    minimum: float
    maximum: float | None          # None: unbounded above (then capped per task)
    precision: int                 # decimals shown on the leaderboard
    function: Callable[..., float]
    # What the function takes, in order, by the names the kind gives its arrays (as a
    # scikit-learn scorer declares its response_method): a kind assembles the arrays a task
    # has once and every score type picks its own.
    inputs: tuple[str, ...] = ("prediction", "reference")
    # For a metric that is a mean over test rows: its per-row terms, from the same inputs, so
    # its standard error needs no resampling (``runtime.uncertainty``); None otherwise.
    per_row: Callable[..., Any] | None = None
    # For a metric that a bootstrap can evaluate on many resamples of the test rows in one
    # pass: given its inputs whole, a function from a block of draws (row indices, one draw a
    # row) to its value on each, nan where undefined, the very floats ``function`` gives on
    # each resample; or None where it cannot promise that. None: one evaluation per draw.
    on_resamples: Callable[..., Any] | None = None

    @property
    def sort(self) -> str:
        """CodaLab's column sort: desc ranks high values first."""
        return "desc" if self.higher_is_better else "asc"

    def evaluate(self, arrays: Mapping[str, Any]) -> float:
        """The metric on the named arrays it declared; KeyError names what is missing."""
        missing = [name for name in self.inputs if name not in arrays]
        if missing:
            raise KeyError(f"{self.name} needs {', '.join(missing)}; the task has "
                           f"{', '.join(sorted(arrays))}")
        return float(self.function(*(arrays[name] for name in self.inputs)))

    def terms(self, arrays: Mapping[str, Any]):
        """The per-row terms whose mean is the metric (``per_row`` on its inputs)."""
        return self.per_row(*(arrays[name] for name in self.inputs))

    def worst(self, cap: float | None = None) -> float:
        """The value a failed task gets: the bound on the bad side, or for a metric unbounded
        there the task's ``cap`` (without one there is no worst value to give)."""
        if self.higher_is_better:
            return self.minimum
        if self.maximum is not None:
            return self.maximum
        if cap is None:
            raise ValueError(f"{self.name} has no upper bound: a failed task's value needs the "
                             "task's cap")
        return float(cap)

    def as_loss(self, value: float) -> float:
        """Lower-is-better form used by the weighted aggregate: maximum - value, or value."""
        return (self.maximum - value) if self.higher_is_better else value

    def clip(self, value: float, cap: float | None = None) -> float:
        upper = self.maximum if self.maximum is not None else cap
        return float(min(max(value, self.minimum), upper)) if upper is not None else value


@dataclass(frozen=True)
class TaskType:
    """A kind of task within a competition kind (e.g. classification): its score types, in
    report order, and the primary one that ranks the task."""
    name: str
    score_types: tuple[ScoreType, ...]
    primary: ScoreType

    @property
    def metric_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.score_types)

    def score_type(self, name: str) -> ScoreType:
        for candidate in self.score_types:
            if candidate.name == name:
                return candidate
        raise KeyError(f"{name!r} is not a metric of {self.name} tasks; known: "
                       f"{', '.join(t.name for t in self.score_types)}")


@dataclass(frozen=True)
class TaskConfig:
    """One task as the generated scoring config states it."""
    name: str
    task_type: TaskType
    weights: dict[str, float]      # metric name -> weight in the aggregate
    budget_seconds: float | None
    settings: Any                  # the kind's own, from its parse_settings
    # The competition rules' fields of this task, under their own names (runtime/rules/)
    rules: dict = field(default_factory=dict)

    @property
    def score_types(self) -> tuple[ScoreType, ...]:
        return self.task_type.score_types

    @property
    def metric_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.task_type.score_types)


@dataclass(frozen=True)
class MetricResult:
    name: str                         # score type name
    value: float                      # the leaderboard value (worst value if penalised)
    std: float | None = None          # the spread over replicates, where the kind measures one
    capped: bool = False              # the raw value exceeded the cap and was clipped
    details: dict[str, Any] = field(default_factory=dict)   # the kind's own numbers
    # How far value would move with another draw of what it was measured on (test rows,
    # reference chains, networks of a zoo): the kind's STANDARD_ERROR says how it is measured
    se: float | None = None


@dataclass(frozen=True)
class BlockResult:
    name: str
    size: int
    metrics: dict[str, float]         # metric name -> value on this block


@dataclass(frozen=True)
class TaskResult:
    task: TaskConfig
    metrics: dict[str, MetricResult]
    blocks: tuple[BlockResult, ...] = ()
    penalty: str | None = None        # why the task got the worst values, if it did
    notes: tuple[str, ...] = ()       # e.g. rows renormalised, anytime prediction used
    train_seconds: float | None = None
    figures: Any = None               # the kind's arrays for its report section
    extras: dict[str, float] = field(default_factory=dict)   # e.g. ECE, shown not ranked
    failure: str | None = None        # the penalty's category (runtime/failures.py)
    traceback: str = ""               # their own frames, from the run record, if it raised

    @property
    def penalised(self) -> bool:
        return self.penalty is not None

    @property
    def headline(self) -> str | None:
        """The penalty as participants read it, its category first."""
        return failures.headline(self.failure, self.penalty) if self.penalised else None


def penalised(task: TaskConfig, reason: str, train_seconds: float | None,
              cap: float | None = None, *, failure: str) -> TaskResult:
    """Worst value of every metric and of the competition rules' figures of it: a failed task
    must not rank well on any column. train_seconds gets the budget in the scores file.
    ``failure``: the category (``runtime/failures.py``) the report and the log name first."""
    worst = {t.name: MetricResult(t.name, t.worst(cap), **rules.worst_metric_fields(t, cap))
             for t in task.score_types}
    if failures.known(failure) is None:
        raise ValueError(f"{failure!r} is not a failure category: {', '.join(failures.CODES)}")
    return TaskResult(task, worst, penalty=reason, train_seconds=train_seconds, failure=failure)


def run_failure(task: TaskConfig, run, cap: float | None = None) -> TaskResult | None:
    """The penalised result of a code run that delivered no prediction; None if it did, or
    for an uploaded results file (no run). ``cap``: the task's, for a metric without an upper
    bound (``penalised``)."""
    if run is None or run.has_prediction:
        return None
    return penalised(task, run_failure_text(run), run.train_seconds, cap,
                     failure=failures.of_run(run.status, run.failure))


def score_task(kind, task: TaskConfig, ref: Path, res: Path, run,
               rows: int | None = None) -> TaskResult:
    """One task scored with ``kind``'s parts (its ``runtime/scoring.py`` record): the
    reference read first, so that broken reference data stops the scorer whatever was
    submitted; ``rows``: only the first test rows scored (a rule's public part), the
    submission still checked whole, against the whole reference. A run that delivered no
    prediction, or a submission the kind's check refuses, gets the worst of every metric;
    never an exception."""
    reference = whole_reference = kind.read_reference(task, ref)
    whole = task
    if rows is not None:
        task, reference = kind.first_rows(task, reference, rows)
    cap = kind.cap(task, reference)
    failed = run_failure(task, run, cap)
    if failed is None:
        try:
            submission = kind.read_submission(whole, res, whole_reference)
        except SubmissionError as error:
            failed = penalised(task, str(error), run.train_seconds if run else None, cap,
                               failure=error.failure)
    if failed is not None:
        for metric in failed.metrics.values():
            metric.details.update(kind.penalty_details())
        return failed
    if rows is not None:
        submission = kind.first_submission_rows(submission, rows)
    return kind.evaluate(task, reference, submission, run)


def run_failure_text(run) -> str:
    return f"training run {run.status.replace('_', ' ')}" + (f": {run.message}" if run.message
                                                             else "")


def submission_file(task: TaskConfig, res: Path, names: list[str]) -> Path:
    """The one file of ``names`` at the root of the submission; SubmissionError when there is
    none, or several (which one would be scored is then unclear)."""
    present = [res / name for name in names if (res / name).is_file()]
    if len(present) != 1:
        raise SubmissionError(f"{task.name}: expected exactly one of {', '.join(names)} at the "
                              f"root of the submission, found {len(present)}",
                              failures.INVALID_OUTPUT if present else failures.NOTHING)
    return present[0]


def result_summary(result: TaskResult) -> dict:
    """The numbers of a task's result as plain JSON data (figures left out)."""
    return {
        "penalty": result.penalty, "failure": result.failure,
        "failure_title": result.failure and failures.title(result.failure),
        "traceback": result.traceback,
        "notes": list(result.notes),
        "train_seconds": result.train_seconds, "extras": result.extras,
        "metrics": {name: {"value": m.value, "se": m.se, "std": m.std, "capped": m.capped,
                           **m.details}
                    for name, m in result.metrics.items()},
        "blocks": {block.name: {"size": block.size, **block.metrics} for block in result.blocks},
    }

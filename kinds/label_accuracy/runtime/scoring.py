"""Label accuracy's side of the scoring seam: one file of predicted labels per task."""
from __future__ import annotations

from dataclasses import dataclass
from html import escape
from pathlib import Path

import numpy as np

from runtime import disclosure, uncertainty
from runtime.formats import MATRIX_EXTENSIONS, FormatError, read_matrix
from runtime.formats.json_files import config_field
from runtime.report import DASH, cell, metrics_table, table
from runtime.scoring import (MetricResult, ReferenceDataError, ScoreType, SubmissionError, TaskConfig,
                           TaskResult, TaskType, submission_file)

from .labels import expected_labels, wrong_labels

REPORT_INTRO = "Submitted labels compared with the hidden test labels, one section per task."
STANDARD_ERROR = ("for accuracy the standard error of a share of the test points, at least "
                  "the Wilson score interval's half-width (so an accuracy of 1 still has "
                  "one), for balanced accuracy a bootstrap over them "
                  f"({uncertainty.DRAWN}; {uncertainty.NONE_AT_BOUND})")


def accuracy(predicted: np.ndarray, labels: np.ndarray) -> float:
    """(1/N) sum_i 1[predicted_i = label_i]."""
    return float(np.mean(predicted == labels))


def correct(predicted: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """1[predicted_i = label_i] for every test point: the terms whose mean is the accuracy."""
    return (predicted == labels).astype(np.float64)


def balanced_accuracy(predicted: np.ndarray, labels: np.ndarray) -> float:
    """(1/K) sum_k accuracy on the points whose label is k (classes present in the labels)."""
    return float(np.mean([np.mean(predicted[labels == k] == k) for k in np.unique(labels)]))


ACCURACY = ScoreType("accuracy", "accuracy", "Share of test points whose label is right",
                     True, 0.0, 1.0, 4, accuracy, ("predicted", "labels"),
                     per_row=correct)
BALANCED = ScoreType("balanced_accuracy", "balanced accuracy",
                     "Accuracy averaged over the true classes", True, 0.0, 1.0, 4,
                     balanced_accuracy, ("predicted", "labels"))
TASK_TYPES = {"labels": TaskType("labels", (ACCURACY, BALANCED), ACCURACY)}


@dataclass(frozen=True)
class Settings:
    n_test: int
    num_classes: int
    submission_stem: str
    test_labels: str
    has_std: bool = False


def parse_settings(task_type: str, raw: dict, where: str) -> Settings:
    return Settings(*(config_field(raw, key, kind, where, ValueError) for key, kind in (
        ("n_test", int), ("num_classes", int), ("submission_stem", str), ("test_labels", str))))


def submission_files(task: TaskConfig) -> list[str]:
    return [task.settings.submission_stem + extension for extension in MATRIX_EXTENSIONS]


def _labels(path: Path, n_test: int, num_classes: int) -> np.ndarray:
    column = read_matrix(path, n_rows=n_test, n_cols=1)[:, 0]
    wrong = wrong_labels(column, num_classes)
    if len(wrong):
        raise FormatError(f"{path.name}: row {wrong[0] + 1} is {column[wrong[0]]!r}; "
                          f"{expected_labels(num_classes)} ({len(wrong)} rows wrong)")
    return column.astype(int)


def read_reference(task: TaskConfig, ref: Path) -> np.ndarray:
    try:
        return _labels(ref / task.settings.test_labels, task.settings.n_test,
                       task.settings.num_classes)
    except FormatError as error:
        raise ReferenceDataError(f"reference data of task {task.name}: {error}") from None


def read_submission(task: TaskConfig, res: Path, labels: np.ndarray) -> np.ndarray:
    path = submission_file(task, res, submission_files(task))
    try:
        return _labels(path, task.settings.n_test, task.settings.num_classes)
    except FormatError as error:
        raise SubmissionError(str(error).replace(str(res) + "/", "")) from None


def evaluate(task: TaskConfig, labels: np.ndarray, predicted: np.ndarray, run) -> TaskResult:
    arrays = {"predicted": predicted, "labels": labels}
    errors = uncertainty.row_errors(task.score_types, arrays, uncertainty.take_rows(arrays),
                                    labels.size)
    metrics = {t.name: MetricResult(t.name, t.evaluate(arrays), se=errors[t.name])
               for t in task.score_types}
    confusion = np.zeros((task.settings.num_classes,) * 2, int)
    np.add.at(confusion, (labels, predicted), 1)
    return TaskResult(task, metrics, train_seconds=run.train_seconds if run else None,
                      figures=confusion)


def task_summary(result: TaskResult) -> str:
    return (f"{result.task.settings.num_classes} classes, "
            f"{result.task.settings.n_test} test points")


def report_section(result: TaskResult) -> str:
    parts = [metrics_table(result)]
    if result.figures is not None:
        parts.append(_confusion_table(result.figures))
    return "\n".join(parts)


def _confusion_table(confusion: np.ndarray) -> str:
    """A predicted class's column is a group of rows the submission chose: one holding fewer
    than MIN_ROWS rows would give back their true labels (a single row predicted as a rare
    class shows its label), so its counts are left out (runtime/disclosure.py)."""
    classes = range(len(confusion))
    shown = confusion.sum(axis=0) >= disclosure.MIN_ROWS
    rows = ["<tr>" + cell(str(k)) + "".join(cell(str(v) if keep else DASH, True)
                                            for v, keep in zip(row, shown)) + "</tr>"
            for k, row in zip(classes, confusion)]
    note = ("" if shown.all() else
            f'<p class="muted">{DASH}: a predicted class given to fewer than '
            f"{disclosure.MIN_ROWS} test points; its counts would name their labels.</p>")
    return ("<h3>Confusion matrix (rows: true label, columns: predicted)</h3>"
            + table(["", *(escape(str(k)) for k in classes)], rows) + note)

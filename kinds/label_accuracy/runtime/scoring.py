"""Label accuracy's side of the scoring seam: one file of predicted labels per task."""
from __future__ import annotations

from dataclasses import dataclass
from html import escape
from pathlib import Path

import numpy as np

from runtime.formats import MATRIX_EXTENSIONS, FormatError, read_matrix
from runtime.formats.json_files import config_field
from runtime.report import cell, metric_label, metric_types, number, table
from runtime.scoring import (MetricResult, ReferenceDataError, ScoreType, SubmissionError, TaskConfig,
                           TaskResult, TaskType, penalised, run_failure, submission_file)

REPORT_INTRO = "Submitted labels compared with the hidden test labels, one section per task."


def accuracy(predicted: np.ndarray, labels: np.ndarray) -> float:
    """(1/N) sum_i 1[predicted_i = label_i]."""
    return float(np.mean(predicted == labels))


def balanced_accuracy(predicted: np.ndarray, labels: np.ndarray) -> float:
    """(1/K) sum_k accuracy on the points whose label is k (classes present in the labels)."""
    return float(np.mean([np.mean(predicted[labels == k] == k) for k in np.unique(labels)]))


ACCURACY = ScoreType("accuracy", "accuracy", "Share of test points whose label is right",
                     True, 0.0, 1.0, 4, accuracy, ("predicted", "labels"))
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
    wrong = np.flatnonzero((column != np.round(column)) | (column < 0) | (column >= num_classes))
    if len(wrong):
        raise FormatError(f"{path.name}: row {wrong[0] + 1} is {column[wrong[0]]!r}; expected a "
                          f"class label 0..{num_classes - 1} ({len(wrong)} rows wrong)")
    return column.astype(int)


def _submission(task: TaskConfig, res: Path) -> np.ndarray:
    path = submission_file(task, res, submission_files(task))
    try:
        return _labels(path, task.settings.n_test, task.settings.num_classes)
    except FormatError as error:
        raise SubmissionError(str(error).replace(str(res) + "/", "")) from None


def score_task(task: TaskConfig, ref: Path, res: Path, run) -> TaskResult:
    seconds = run.train_seconds if run else None
    try:
        labels = _labels(ref / task.settings.test_labels, task.settings.n_test,
                         task.settings.num_classes)
    except FormatError as error:
        raise ReferenceDataError(f"reference data of task {task.name}: {error}") from None
    failed = run_failure(task, run)
    if failed:
        return failed
    try:
        predicted = _submission(task, res)
    except SubmissionError as error:
        return penalised(task, str(error), seconds, failure=error.failure)
    arrays = {"predicted": predicted, "labels": labels}
    metrics = {t.name: MetricResult(t.name, t.evaluate(arrays)) for t in task.score_types}
    confusion = np.zeros((task.settings.num_classes,) * 2, int)
    np.add.at(confusion, (labels, predicted), 1)
    return TaskResult(task, metrics, train_seconds=seconds, figures=confusion)


def task_summary(result: TaskResult) -> str:
    return (f"{result.task.settings.num_classes} classes, "
            f"{result.task.settings.n_test} test points")


def report_section(result: TaskResult) -> str:
    rows = ["<tr>" + cell(metric_label(t)) + cell(number(result.metrics[t.name].value,
                                                             t.precision), True) + "</tr>"
            for t in metric_types(result)]
    parts = [table(["metric", "value"], rows)]
    if result.figures is not None:
        classes = range(len(result.figures))
        parts.append("<h3>Confusion matrix (rows: true label, columns: predicted)</h3>" + table(
            ["", *(escape(str(k)) for k in classes)],
            ["<tr>" + cell(str(k)) + "".join(cell(str(v), True) for v in row) + "</tr>"
             for k, row in zip(classes, result.figures)]))
    return "\n".join(parts)

"""Find and validate one task's submitted predictions in ``res/``.

Every problem becomes a ``SubmissionError`` whose message names the file, where in it,
what was expected and what was found; the task is then penalised, the others still scored.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from runtime import failures
from runtime.formats import MATRIX_EXTENSIONS, FormatError, describe_position
from runtime.formats.prediction_arrays import check_probability_rows
from runtime.scoring import SubmissionError, TaskConfig

from .formats import POINTS_BY_SAMPLES, read_classification_probs, read_regression_samples
from .score_types import CLASSIFICATION


@dataclass(frozen=True)
class Submission:
    path: Path
    predictions: np.ndarray          # (N, C) probabilities or (N, S) samples
    notes: tuple[str, ...] = ()


def expected_names(task: TaskConfig) -> list[str]:
    return [task.settings.submission_stem + extension for extension in MATRIX_EXTENSIONS]


def find_submission_file(task: TaskConfig, res: Path) -> Path:
    names = expected_names(task)
    present = [res / name for name in names if (res / name).is_file()]
    if len(present) == 1:
        return present[0]
    if len(present) > 1:
        raise SubmissionError(f"{task.name}: several prediction files "
                              f"({', '.join(p.name for p in present)}); submit exactly one")
    nested = sorted(p for name in names for p in res.rglob(name) if p.is_file())
    expected = f"{names[0]} (or {', '.join(names[1:])})"
    if nested:
        where = nested[0].relative_to(res).as_posix()
        raise SubmissionError(
            f"{task.name}: {expected} must be at the root of the submission zip, but it was "
            f"found at {where}: zip the files themselves, not the folder that holds them",
            failures.NOTHING)
    raise SubmissionError(f"{task.name}: no prediction file; expected {expected} at the root "
                          "of the submission zip", failures.NOTHING)


def _check_probabilities(path: Path, probs: np.ndarray) -> tuple[str, ...]:
    """The shared probability rule, with errors placed by file line and column."""
    return check_probability_rows(
        probs, lambda row, column=None: describe_position(path, row, column), path.name)


def load_submission(task: TaskConfig, res: Path) -> Submission:
    path = find_submission_file(task, res)
    settings = task.settings
    try:
        if settings.task_type == CLASSIFICATION:
            predictions = read_classification_probs(path, n_points=settings.n_test,
                                                    n_classes=settings.num_classes)
            return Submission(path, predictions, _check_probabilities(path, predictions))
        predictions = read_regression_samples(path, layout=POINTS_BY_SAMPLES,
                                              n_points=settings.n_test,
                                              n_samples=settings.num_samples)
        return Submission(path, predictions)
    except FormatError as error:
        raise SubmissionError(str(error).replace(str(res) + "/", "")) from None

"""The BDL kind's side of the scoring seam (its record, ``kinds.kind.ScoringRuntime``, says what it
provides; the shared types are in ``runtime/scoring.py``)."""
from __future__ import annotations

from pathlib import Path

from runtime.scoring import TaskConfig

from .evaluate import (STANDARD_ERROR, evaluate, first_rows, first_submission_rows,
                       penalty_details)
from .evaluate import wasserstein_cap as cap
from .predictions import Submission, expected_names, load_submission
from .references import load_references as read_reference
from .report import REPORT_INTRO, report_section, task_summary
from .score_types import TASK_TYPES
from .settings import parse_settings

__all__ = ["TASK_TYPES", "REPORT_INTRO", "STANDARD_ERROR", "parse_settings", "read_reference",
           "read_submission", "evaluate", "cap", "penalty_details", "submission_files",
           "report_section", "task_summary", "SCORES_PUBLIC_ROWS", "first_rows",
           "first_submission_rows"]
# A task may be scored on a prefix of its test rows (the 2021 evaluation phase's public part).
SCORES_PUBLIC_ROWS = True


def submission_files(task: TaskConfig) -> list[str]:
    return expected_names(task)


def read_submission(task: TaskConfig, res: Path, references) -> Submission:
    """The validated predictions (``predictions.Submission``), whatever the references."""
    return load_submission(task, res)

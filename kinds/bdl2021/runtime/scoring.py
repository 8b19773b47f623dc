"""The BDL kind's side of the scoring seam (its record, ``kinds.kind.ScoringRuntime``, says what it
provides; the shared types are in ``runtime/scoring.py``)."""
from __future__ import annotations

from pathlib import Path

from runtime.formats import TaskRun
from runtime.scoring import TaskConfig, TaskResult

from .evaluate import STANDARD_ERROR
from .evaluate import score_task as _score_task
from .predictions import expected_names, load_submission
from .references import load_references
from .report import REPORT_INTRO, report_section, task_summary
from .score_types import TASK_TYPES
from .settings import parse_settings

__all__ = ["TASK_TYPES", "REPORT_INTRO", "STANDARD_ERROR", "parse_settings", "score_task",
           "submission_files", "report_section", "task_summary", "SCORES_PUBLIC_ROWS"]
# A task may be scored on a prefix of its test rows (the 2021 evaluation phase's public part).
SCORES_PUBLIC_ROWS = True


def submission_files(task: TaskConfig) -> list[str]:
    return expected_names(task)


def score_task(task: TaskConfig, ref: Path, res: Path, run: TaskRun | None,
               rows: int | None = None) -> TaskResult:
    """``rows``: score the first ``rows`` test rows only (a public part)."""
    return _score_task(task, lambda: load_submission(task, res), load_references(task, ref), run,
                       rows)

"""The sd columns, worker side: a kind whose references have replicates (BDL's chains) gives
each metric a standard deviation, written as its own leaderboard column. The builder's half,
which adds the columns, is ``bundle/competition_rules/sd_columns.py``.

The kind says which tasks have one through its settings (``ScoringRuntime.has_std``) and
fills ``MetricResult.std``; a penalised task's is set here (``worst_metric_fields``).
"""
from __future__ import annotations

from kinds.kind import ScoringRuntime

from .records import WorkerRule

STATISTIC = "std"
COLUMN_STATISTICS = (STATISTIC,)


def column_problem(statistic: str, task) -> str | None:
    if not ScoringRuntime.has_std(task.settings):
        return f"task {task.name!r} has no sd to write (its reference has no replicates)"
    return None


def column_value(statistic: str, result, metric: str) -> float:
    # A kind that measured no spread (a single replicate scored) leaves None: 0 on the board.
    return result.metrics[metric].std or 0.0


def worst_metric_fields(score_type, cap: float | None) -> dict:
    """The metric's whole range. A standard deviation of values clipped to [minimum, maximum]
    is at most (maximum - minimum) * sqrt(K/(K-1)) / 2, which is below the range for any
    K >= 2, so no scored task can do worse."""
    upper = score_type.maximum if score_type.maximum is not None else float(cap)
    return {"std": upper - score_type.minimum}


RULE = WorkerRule(name="sd_columns", COLUMN_STATISTICS=COLUMN_STATISTICS,
                  column_problem=column_problem, column_value=column_value,
                  worst_metric_fields=worst_metric_fields)

"""Standard-error columns, worker side: where the spec asks (``standard_error_columns``), each
task metric's standard error (``MetricResult.se``, which every kind measures: see its
``STANDARD_ERROR``) is written as its own leaderboard column. The builder's half, which adds
the columns, is ``bundle/competition_rules/se_columns.py``.
"""
from __future__ import annotations

from .records import WorkerRule

STATISTIC = "se"
COLUMN_STATISTICS = (STATISTIC,)


def column_value(statistic: str, result, metric: str) -> float:
    figure = result.metrics[metric]
    if figure.se is not None:
        return figure.se
    return unmeasured_se(result.task.task_type.score_type(metric), figure.value)


def unmeasured_se(score_type, value: float) -> float:
    """The board's figure for a standard error the scorer could not measure (undefined on
    too many resamples, or 0 at an end of the range: the detailed results show n/a): the
    metric's whole range, as wide as a penalised task's, since a column needs a number and a
    0 would read as certainty (rank intervals then treat the entry as unknown, not exact).
    An unbounded metric's is its distance from its minimum."""
    upper = score_type.maximum if score_type.maximum is not None else value
    return upper - score_type.minimum


def worst_metric_fields(score_type, cap: float | None) -> dict:
    """The metric's whole range: no measured standard error of a scored task exceeds it (a
    spread, or a root mean square distance, of values within [minimum, maximum] is at most
    the range), and an unmeasured one is given no more (``unmeasured_se``)."""
    upper = score_type.maximum if score_type.maximum is not None else float(cap)
    return {"se": upper - score_type.minimum}


RULE = WorkerRule(name="se_columns", COLUMN_STATISTICS=COLUMN_STATISTICS,
                  column_value=column_value, worst_metric_fields=worst_metric_fields)

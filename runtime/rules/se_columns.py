"""Standard-error columns, worker side: where the spec asks (``standard_error_columns``), each
task metric's standard error (``MetricResult.se``, which every kind measures: see its
``STANDARD_ERROR``) is written as its own leaderboard column. The builder's half, which adds
the columns, is ``bundle/competition_rules/se_columns.py``.
"""
from __future__ import annotations

STATISTIC = "se"
COLUMN_STATISTICS = (STATISTIC,)


def column_value(statistic: str, result, metric: str) -> float:
    # A statistic undefined on too many resamples has no standard error: 0 on the board, and
    # the detailed results say it is unknown.
    return result.metrics[metric].se or 0.0


def worst_metric_fields(score_type, cap: float | None) -> dict:
    """The metric's whole range: no standard error of a scored task can reach it (a
    bootstrap's spread of values within [minimum, maximum] is at most half the range)."""
    upper = score_type.maximum if score_type.maximum is not None else float(cap)
    return {"se": upper - score_type.minimum}

"""The sd columns, worker side: a kind whose references have replicates (BDL's chains) gives
each metric a standard deviation, written as its own leaderboard column. The builder's half,
which adds the columns, is ``bundle/competition_rules/sd_columns.py``.

The kind says which tasks have one through its settings (``ScoringRuntime.has_std``) and
fills ``MetricResult.std``; a penalised task's is the metric's whole range (``worst_spread``).
"""
from __future__ import annotations

from kinds.kind import ScoringRuntime

STATISTIC = "std"
COLUMN_STATISTICS = (STATISTIC,)


def column_problem(statistic: str, task) -> str | None:
    if not ScoringRuntime.has_std(task.settings):
        return f"task {task.name!r} has no sd to write (its reference has no replicates)"
    return None


def column_value(statistic: str, result, metric: str) -> float:
    # A kind that measured no spread (a single replicate scored) leaves None: 0 on the board.
    return result.metrics[metric].std or 0.0

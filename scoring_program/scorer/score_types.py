"""The leaderboard columns the core adds to a kind's metrics: their direction and format.

A kind's metrics are ``runtime.scoring.ScoreType`` objects declared in its runtime; the
columns here (aggregate, training time, average rank) exist for every kind.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ColumnType:
    """A non-metric leaderboard column the scorer writes: its direction and format."""
    name: str
    label: str
    description: str
    higher_is_better: bool
    precision: int

    @property
    def sort(self) -> str:
        return "desc" if self.higher_is_better else "asc"

    def worst(self, bound: float) -> float:
        """The worst value within ``bound`` (for train_seconds: the task's budget)."""
        return bound if not self.higher_is_better else 0.0


AGGREGATE = ColumnType(
    "weighted_loss", "weighted loss",
    "Weighted average over tasks of each weighted metric as a loss (maximum minus value where "
    "higher is better, the value itself where lower is better)", False, 4)
TRAIN_SECONDS = ColumnType("train_seconds", "train s",
                           "Wall-clock seconds from the call of the participant's function to its "
                           "end (the budget's clock; the start-up before it is not counted)",
                           False, 1)
AVERAGE_RANK = ColumnType("average_rank", "average rank",
                          "Mean over tasks of the rank on each task's primary metric", False, 2)

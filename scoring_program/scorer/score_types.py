"""Score types: each metric declares its direction, bounds, precision and penalty once.

The leaderboard's sort order and number format (rendered by the builder) and the
penalty a failed task receives (applied by the scorer) all derive from these objects,
as ramp-workflow's score types do; nothing about a metric is typed twice.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import metrics

CLASSIFICATION = "classification"
REGRESSION = "regression"

# Wasserstein distances are unbounded; a failed task (and any submission farther away)
# gets this many standard deviations of the reference's samples, so missing a task is
# never better than submitting something, and one wild file cannot swamp the aggregate.
WASSERSTEIN_CAP_IN_REFERENCE_STD = 10.0


@dataclass(frozen=True)
class ScoreType:
    name: str                      # column key suffix: <task>_<name>
    label: str                     # short leaderboard label
    description: str
    kind: str                      # task kind it applies to
    higher_is_better: bool
    minimum: float
    maximum: float | None          # None: unbounded above (then capped per task)
    precision: int                 # decimals shown on the leaderboard
    function: Callable[[np.ndarray, np.ndarray], float]

    @property
    def sort(self) -> str:
        """CodaLab's column sort: desc ranks high values first."""
        return "desc" if self.higher_is_better else "asc"

    def worst(self, cap: float | None = None) -> float:
        if self.higher_is_better:
            return self.minimum
        return self.maximum if self.maximum is not None else float(cap)

    def worst_spread(self, cap: float | None = None) -> float:
        """The worst ``_std`` column value: the metric's whole range. A standard deviation of
        values clipped to [minimum, maximum] is at most (maximum - minimum) * sqrt(K/(K-1)) / 2,
        which is below the range for any K >= 2, so no scored task can do worse."""
        upper = self.maximum if self.maximum is not None else float(cap)
        return upper - self.minimum

    def as_loss(self, value: float) -> float:
        """Lower-is-better form used by the weighted aggregate (1 - agreement, TV, W)."""
        return (self.maximum - value) if self.higher_is_better else value

    def clip(self, value: float, cap: float | None = None) -> float:
        upper = self.maximum if self.maximum is not None else cap
        return float(min(max(value, self.minimum), upper)) if upper is not None else value


AGREEMENT = ScoreType(
    "agreement", "agreement", "Top-1 agreement with the HMC model average",
    CLASSIFICATION, True, 0.0, 1.0, 4, metrics.top1_agreement)
TOTAL_VARIATION = ScoreType(
    "total_variation", "TV", "Total variation distance to the HMC model average",
    CLASSIFICATION, False, 0.0, 1.0, 4, metrics.total_variation)
WASSERSTEIN2 = ScoreType(
    "w2", "W2", "Wasserstein-2 distance to the HMC predictive samples (sorted coupling)",
    REGRESSION, False, 0.0, None, 4, metrics.wasserstein2)
WASSERSTEIN1 = ScoreType(
    "w1", "W1 (2021 code)", "Wasserstein-1 distance: what the 2021 code computed as 'W2'",
    REGRESSION, False, 0.0, None, 4, metrics.wasserstein1)

SCORE_TYPES: dict[str, tuple[ScoreType, ...]] = {
    CLASSIFICATION: (AGREEMENT, TOTAL_VARIATION),
    REGRESSION: (WASSERSTEIN2, WASSERSTEIN1),
}
# The metric each task contributes to the average-rank column (the 2021 primary metrics).
PRIMARY = {CLASSIFICATION: AGREEMENT, REGRESSION: WASSERSTEIN2}


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
    "Weighted average over tasks of 1 - agreement, total variation and W2 (the proposal's score)",
    False, 4)
STD_SUFFIX = "std"
TRAIN_SECONDS = ColumnType("train_seconds", "train s", "Wall-clock seconds the training run took",
                           False, 1)
AVERAGE_RANK = ColumnType("average_rank", "average rank",
                          "Mean over tasks of the rank on each task's primary metric", False, 2)


def score_type(name: str) -> ScoreType:
    for types in SCORE_TYPES.values():
        for candidate in types:
            if candidate.name == name:
                return candidate
    known = ", ".join(t.name for types in SCORE_TYPES.values() for t in types)
    raise KeyError(f"unknown metric {name!r}; known: {known}")

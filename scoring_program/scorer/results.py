"""What scoring one task produces: numbers and curves as data, for scores.txt and the report."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .config import TaskConfig


@dataclass(frozen=True)
class MetricResult:
    name: str                         # score type name
    value: float                      # against the HMC model average (worst value if penalised)
    chain_std: float | None = None    # std over chains of the metric against each chain alone
    chain_values: tuple[float, ...] = ()
    expected: float | None = None     # exact-posterior expectation (exact_posterior.py)
    expected_spread: float | None = None   # its std over chain splits
    capped: bool = False              # the raw distance exceeded the cap and was clipped


@dataclass(frozen=True)
class BlockResult:
    name: str
    size: int
    metrics: dict[str, float]         # metric name -> value on this block


@dataclass(frozen=True)
class Curves:
    """Arrays the report draws; classification and regression fill different fields."""
    submission_spread: np.ndarray     # predictive entropy (classification) or std (regression)
    reference_spread: np.ndarray
    spread_label: str
    # classification: reliability (mean confidence, accuracy, count per bin) vs true labels
    submission_reliability: tuple | None = None
    reference_reliability: tuple | None = None
    # regression: coverage of central intervals at nominal levels vs true targets
    coverage_levels: np.ndarray | None = None
    submission_coverage: np.ndarray | None = None
    reference_coverage: np.ndarray | None = None


@dataclass(frozen=True)
class TaskResult:
    task: TaskConfig
    metrics: dict[str, MetricResult]
    blocks: tuple[BlockResult, ...] = ()
    penalty: str | None = None        # why the task got the worst values, if it did
    notes: tuple[str, ...] = ()       # e.g. rows renormalised, anytime prediction used
    train_seconds: float | None = None
    curves: Curves | None = None
    extras: dict[str, float] = field(default_factory=dict)   # e.g. ECE, shown not ranked

    @property
    def penalised(self) -> bool:
        return self.penalty is not None


def result_summary(result: TaskResult) -> dict:
    """The numbers of a task's result as plain JSON data (curves left out)."""
    return {
        "penalty": result.penalty, "notes": list(result.notes),
        "train_seconds": result.train_seconds, "extras": result.extras,
        "metrics": {name: {"value": m.value, "chain_std": m.chain_std,
                           "chain_values": list(m.chain_values),
                           "exact_posterior_expectation": m.expected,
                           "exact_posterior_expectation_spread": m.expected_spread,
                           "capped": m.capped}
                    for name, m in result.metrics.items()},
        "blocks": {block.name: {"size": block.size, **block.metrics} for block in result.blocks},
    }

"""Budgets stated in epochs: before the participant's code runs on a task, the kind times an
epoch of its reference training on this machine (its ingestion record's ``epoch_seconds``),
and the budget becomes seconds here, capped by the spec's ``budget_seconds``, the worst case
the platform's time limit was checked against. The figures go into the run record."""
from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

from .config import ConfigError, TaskSpec


def calibrate(task: TaskSpec, data: Path, contract) -> TaskSpec:
    """The task with its budget in seconds on this machine, and ``calibration`` saying how."""
    if task.budget_epochs is None:
        return task
    measure = contract.epoch_seconds
    if measure is None:
        raise ConfigError(f"task {task.name}: a budget in epochs, but the kind has no "
                          "reference training to time (rebuild the bundle)")
    samples = [float(seconds) for seconds in measure(task, data)]
    per_epoch = statistics.median(samples)
    converted = task.budget_epochs * per_epoch
    budget = max(round(min(converted, task.budget_seconds), 3), 0.001)
    calibration = {"epochs": task.budget_epochs, "seconds_per_epoch": per_epoch,
                   "samples": samples, "budget_seconds": budget,
                   "ceiling_seconds": task.budget_seconds,
                   "capped": converted > task.budget_seconds}
    return dataclasses.replace(task, budget_seconds=budget, calibration=calibration)


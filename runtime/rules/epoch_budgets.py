"""Budgets stated in epochs, worker side: before the participant's code runs on a task, the kind
times an epoch of its reference training on this machine (its ingestion record's
``epoch_seconds``), and the budget becomes seconds here, capped by the spec's
``budget_seconds``, the worst case the platform's time limit was checked against. The figures
go into the run record. The builder's half is ``bundle/competition_rules/epoch_budgets.py``."""
from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

from .records import RuleError, WorkerRule


def task_fields(raw_task: dict, where: str) -> dict:
    epochs = raw_task.get("budget_epochs")
    if epochs is not None and (not isinstance(epochs, (int, float)) or epochs <= 0):
        raise RuleError(f"{where}.budget_epochs: must be a positive number, found {epochs!r}")
    return {"budget_epochs": float(epochs) if epochs is not None else None}


def task_budget(task, data: Path, contract):
    """The task with its budget in seconds on this machine, and its ``rules["calibration"]``
    saying how (the kind's participant object reads it too: the epochs, the seconds of one)."""
    epochs = task.rules.get("budget_epochs")
    if epochs is None:
        return task
    measure = contract.epoch_seconds
    if measure is None:
        raise RuleError(f"task {task.name}: a budget in epochs, but the kind has no "
                        "reference training to time (rebuild the bundle)")
    measured = measure(task, data)
    # the kind's timings, or {"samples": timings, "timed_with": what ran them}
    about = {k: v for k, v in measured.items() if k != "samples"} \
        if isinstance(measured, dict) else {}
    samples = [float(seconds) for seconds in (
        measured["samples"] if isinstance(measured, dict) else measured)]
    per_epoch = statistics.median(samples)
    converted = epochs * per_epoch
    budget = max(round(min(converted, task.budget_seconds), 3), 0.001)
    calibration = {"epochs": epochs, "seconds_per_epoch": per_epoch,
                   "samples": samples, "budget_seconds": budget,
                   "ceiling_seconds": task.budget_seconds,
                   "capped": converted > task.budget_seconds, **about}
    return dataclasses.replace(task, budget_seconds=budget,
                               rules={**task.rules, "calibration": calibration})


def record_fields(task) -> dict:
    """The conversion, in the task's run record (where the scorer and the report read it)."""
    calibration = task.rules.get("calibration")
    return {"calibration": calibration} if calibration else {}


def task_notes(fields: dict) -> list[str]:
    calibration = fields.get("calibration")
    return [_calibration_text(calibration)] if calibration else []


def _calibration_text(calibration: dict) -> str:
    """A budget in epochs and how it became seconds, for the ingestion log and the report."""
    text = (f"budget {calibration['epochs']:g} epochs x {calibration['seconds_per_epoch']:.3g} s "
            f"per epoch on this machine (median of {len(calibration['samples'])} timed samples)"
            f" = {calibration['budget_seconds']:g} s")
    if calibration.get("timed_with"):
        text += f"; the epoch timed in {calibration['timed_with']}"
    if calibration["capped"]:
        text += (f", capped at the competition's ceiling of {calibration['ceiling_seconds']:g} s "
                 "(this machine is slower than the organizers' worst case)")
    return text


RULE = WorkerRule(name="epoch_budgets", task_fields=task_fields, task_budget=task_budget,
                  record_fields=record_fields, task_notes=task_notes)

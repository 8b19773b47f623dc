"""Budgets in epochs, build side: a task's budget stated in epochs of the kind's reference
training (spec key ``tasks.<task>.budget_epochs``), converted to seconds on the worker by the
rule's other half, ``runtime/rules/epoch_budgets.py``, with the spec's ``budget_seconds`` as
its ceiling.

The kind says what an epoch is (``Kind.EPOCH_UNIT``) and times one on the worker (its runtime
ingestion's ``epoch_seconds``: ``Kind.times_epochs``).
"""
from __future__ import annotations

import json
from pathlib import Path

from ingestion_program.ingest.supervisor import MIN_BUDGET_SECONDS, POLL_SECONDS
from kinds.kind import KINDS

from ..spec_key import Key, number
from .records import BuildRule

SPEC_KEYS = {"tasks.<task>": {
    "budget_epochs": Key(
        number(exclusive=0),
        "The budget in epochs of the kind's reference training (BDL: plain SGD on the "
        "declared model, as the 2021 rules stated it), instead of seconds: before the "
        "participant's code runs, the ingestion program times that training on the "
        "worker and converts, capped at `budget_seconds`, which is then the worst case "
        "the time limits are checked against. The run record, the log and the detailed "
        "results give the conversion.",
        default=None, shown="none: the budget is `budget_seconds`", example=3000),
}}


def spec_values(raw: dict) -> dict:
    """``epochs``: the tasks whose budget is stated in epochs (their budget_seconds: its ceiling)."""
    return {"epochs": {name: float(task["budget_epochs"]) for name, task in raw["tasks"].items()
                       if "budget_epochs" in task}}


def spec_epochs(spec) -> dict[str, float]:
    """The spec's tasks whose budget is stated in epochs, with it: the rule's state, as any
    build code reads it."""
    return spec.rules["epochs"]


def spec_problems(raw: dict, data_root, load_task) -> list[str]:
    """A budget in epochs needs a kind that times an epoch of its reference training."""
    epochs = [name for name, task in raw["tasks"].items() if "budget_epochs" in task]
    if not epochs or KINDS[raw["kind"]].times_epochs:
        return []
    return [f"tasks.{name}.budget_epochs: kind {raw['kind']} has no reference training to time "
            "an epoch of; state the budget in seconds only" for name in epochs]


def plan_task(spec, name: str, spec_budgets: bool) -> dict:
    # A budget given in seconds instead (tests, the kit's local runs) is no budget in epochs.
    return {"budget_epochs": spec_epochs(spec).get(name) if spec_budgets else None,
            "epoch_unit": KINDS[spec.kind].EPOCH_UNIT}


def seconds_budget(rules: dict) -> dict:
    return {**rules, "budget_epochs": None}


def budget_text(task) -> str | None:
    epochs = task.rules.get("budget_epochs")
    return f"{epochs:g} epochs (at most {task.budget_seconds:g} s)" if epochs else None


def budget_facts(tasks) -> list[str]:
    """What the epochs of these tasks' budgets are, once for a list; none where none has one."""
    units = sorted({task.rules["epoch_unit"] for task in tasks if task.rules.get("budget_epochs")})
    return [f"an epoch is {' or '.join(units)}, timed on the worker just before your code "
            "runs, and the epochs are converted to seconds there"] if units else []


def ingestion_task_entries(task) -> dict:
    # Without epochs the task keeps the entries it had before this rule, so its config is
    # the same for bundles that state budgets in seconds.
    epochs = task.rules.get("budget_epochs")
    return {"budget_epochs": epochs} if epochs else {}


def dry_run_notes(output: Path) -> list[str]:
    """A conversion this machine made too short to time well: the worker's may be too."""
    return [f"budget too short to time well: {line} (under {MIN_BUDGET_SECONDS:g} s, the "
            f"ingestion's clock, read every {POLL_SECONDS:g} s, is off by more than a tenth; "
            "raise budget_epochs)" for line in short_budgets(output, MIN_BUDGET_SECONDS)]


def short_budgets(output: Path, floor: float) -> list[str]:
    """'task: ...' for each budget in epochs whose conversion on this machine came out below
    ``floor`` seconds, from the scorer's detailed_results.json."""
    details = Path(output) / "detailed_results.json"
    try:
        tasks = json.loads(details.read_text(encoding="utf-8")).get("tasks", {})
    except (OSError, ValueError, AttributeError):
        return []
    found = []
    for name, entry in sorted(tasks.items()):
        calibration = entry.get("calibration") if isinstance(entry, dict) else None
        seconds = calibration.get("budget_seconds") if isinstance(calibration, dict) else None
        if isinstance(seconds, (int, float)) and seconds < floor:
            found.append(f"{name}: {calibration.get('epochs')} epochs came to {seconds:g} s here")
    return found


RULE = BuildRule(name="epoch_budgets", SPEC_KEYS=SPEC_KEYS, spec_values=spec_values,
                 spec_problems=spec_problems, plan_task=plan_task, seconds_budget=seconds_budget,
                 budget_text=budget_text, budget_facts=budget_facts,
                 ingestion_task_entries=ingestion_task_entries, dry_run_notes=dry_run_notes)

"""The data folders of a phase: hidden references, participants' inputs, public data.

The leakage check that proves no hidden byte reached a public folder is leakage.py's.
"""
from __future__ import annotations

from pathlib import Path

from kinds.kind import kind

from . import competition_rules
from .leakage import leakage_problems  # noqa: F401  (its home before leakage.py)
from .phase_plan import PhasePlan
from .record_key import write_record_key


def stage_input_data(plan: PhasePlan, destination: Path) -> Path:
    """The participants' input folder (what the ingestion program reads), as the kind stages it."""
    destination = Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    definition = kind(plan.kind)
    for task in (*competition_rules.extra_tasks(plan), *plan.tasks):
        definition.stage_inputs(task, destination)
    for folder, tasks in competition_rules.public_tasks_apart(plan).items():
        (destination / folder).mkdir(exist_ok=True)
        for task in tasks:
            definition.stage_inputs(task, destination / folder)
    return destination


def stage_reference_data(plan: PhasePlan, destination: Path) -> Path:
    """The hidden ref/ folder: each task's files as the kind stages them, and in a code phase
    the key that signs the ingestion record; the rules' public tasks apart in their folders."""
    destination = Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    definition = kind(plan.kind)
    for task in plan.tasks:
        definition.stage_reference(task, destination)
    for folder, tasks in competition_rules.public_tasks_apart(plan).items():
        (destination / folder).mkdir(exist_ok=True)
        for task in tasks:
            definition.stage_reference(task, destination / folder)
    if plan.code_submission:
        write_record_key(destination, plan)
    return destination


def stage_public_data(plan: PhasePlan, destination: Path) -> Path:
    """What anyone may download, as the kind stages it (the leakage check below proves no
    hidden file or array is among it)."""
    destination = Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    definition = kind(plan.kind)
    for task in plan.tasks:
        definition.stage_public(task, destination, plan.code_submission)
    return destination

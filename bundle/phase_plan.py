"""What one phase scores: its tasks (as declared next to their references) and weights.

The organizer spec will produce these; until it exists, ``embedded_phase`` builds the
default competition's phases from the committed task declarations.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from reference_data.task_files import DEFAULT_ROOT, TaskFiles, task_files

# The proposal's aggregate: 1 - agreement, total variation and W2, equally weighted; W1
# (the 2021 code's "W2") is reported but not aggregated.
DEFAULT_WEIGHTS = {"agreement": 1.0, "total_variation": 1.0, "w2": 1.0, "w1": 0.0}


@dataclass(frozen=True)
class PlannedTask:
    declaration: dict
    files: TaskFiles
    budget_seconds: float | None = None

    @property
    def name(self) -> str:
        return self.declaration["name"]

    @property
    def kind(self) -> str:
        return self.declaration["kind"]


@dataclass(frozen=True)
class PhasePlan:
    name: str
    tasks: tuple[PlannedTask, ...]
    code_submission: bool                      # training code run by the ingestion program
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))


def load_planned_task(name: str, root: Path = DEFAULT_ROOT,
                      budget_seconds: float | None = None) -> PlannedTask:
    declaration_path = Path(root) / name / f"{name}_task.json"
    if not declaration_path.is_file():
        raise FileNotFoundError(f"{declaration_path}: no declaration for task {name!r}")
    declaration = json.loads(declaration_path.read_text())
    return PlannedTask(declaration, task_files(root, name, declaration["kind"]), budget_seconds)


def embedded_phase(phase: str, root: Path = DEFAULT_ROOT, code_submission: bool | None = None,
                   budget_seconds: float | None = None) -> PhasePlan:
    """All committed tasks of a phase ('development' or 'evaluation')."""
    names = sorted(p.parent.name for p in Path(root).glob("*/*_task.json")
                   if json.loads(p.read_text())["phase"] == phase)
    if not names:
        raise ValueError(f"no embedded task belongs to phase {phase!r}")
    code = phase == "evaluation" if code_submission is None else code_submission
    return PhasePlan(phase, tuple(load_planned_task(n, root, budget_seconds if code else None)
                                  for n in names), code)

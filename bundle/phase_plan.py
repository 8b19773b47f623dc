"""What one phase (or track) scores: its tasks, as declared in the data root, with budgets
and weights: the one way a phase plan is made, from the organizer spec.

Each task comes from its declaration, ``<task>_task.json``; the kind names its task type.
``bundle/leaderboard.py`` derives the columns from the plan and the kind's score types, so
no column key is typed twice.

What a phase's kit scores a local run on is told here too (``local_scores``), and the plans
made of a phase besides, for its kit and for the rules: the kit's public stand-in of a phase
whose references are hidden (``stand_in_plan``) and a plan run on some tasks alone
(``tasks_alone``). A rule that holds tasks of its own is handed the core's ways of making them
(``planned``, ``stand_in``) and never imports this module, which calls it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from kinds.kind import KINDS, kind

from . import competition_rules
from .task_declarations import TaskDataError, declaration_path, read_declaration


@dataclass(frozen=True)
class PlannedTask:
    """A task of a phase plan: its declaration (as the organizer's file states it), its
    folder in the data root, its task type (the kind reads it from the declaration) and the
    budget of a code phase."""
    name: str
    task_type: str
    declaration: dict
    folder: Path
    budget_seconds: float | None = None
    # The competition rules' fields of this task, under their own names (competition_rules)
    rules: dict = field(default_factory=dict)

    def budget_text(self) -> str:
        """The budget as the pages state it (the rules' ``budget_facts`` say more of it)."""
        return competition_rules.budget_text(self) or f"{self.budget_seconds:g} s"


@dataclass(frozen=True)
class PhasePlan:
    name: str
    kind: str                                  # the competition kind (kinds/__init__.py)
    tasks: tuple[PlannedTask, ...]
    code_submission: bool                      # training code run by the ingestion program
    weights: dict[str, float] = field(default_factory=dict)
    # The competition rules' fields of this phase, under their own names (competition_rules),
    # tasks they run besides the phase's included
    rules: dict = field(default_factory=dict)


def load_planned_task(kind: str, name: str, root: Path,
                      budget_seconds: float | None = None) -> PlannedTask:
    """The task as declared in ``<root>/<name>/<name>_task.json``; a missing, truncated or
    untyped declaration raises TaskDataError naming the file (and line and column)."""
    path = declaration_path(root, name)
    declaration = read_declaration(path, name)
    try:
        task_type = KINDS[kind].task_type(declaration)
    except (KeyError, TypeError, ValueError) as error:
        raise TaskDataError([f"{path}: the declaration does not state its task type "
                             f"({type(error).__name__}: {error}); see docs/organizer_data.md"]) \
            from None
    return PlannedTask(name, task_type, declaration, path.parent, budget_seconds)


def task_data_problems(kind: str, name: str, root: Path,
                       budget_seconds: float | None = None) -> list[str]:
    """Everything wrong with one task's files: the core reads the declaration, then the kind
    checks its data (its ``task_problems(task) -> list[str]``)."""
    try:
        task = load_planned_task(kind, name, root, budget_seconds)
    except TaskDataError as error:
        return error.problems
    return list(KINDS[kind].task_problems(task))


def phase_plan(spec, phase_key: str, track_key: str | None = None, *,
               code_submission: bool | None = None,
               budget_seconds: float | None = None) -> PhasePlan:
    """The plan of a phase (or of one of its tracks). ``code_submission`` and
    ``budget_seconds`` override the spec (tests, and the kit's local code runs)."""
    phase = spec.phase(phase_key)
    names = spec.track(track_key).tasks if track_key else phase.tasks
    code = phase.code_submission if code_submission is None else code_submission

    def planned(names):
        return tuple(dataclasses.replace(
            load_planned_task(spec.kind, name, spec.data_root,
                              (budget_seconds or spec.budgets[name]) if code else None),
            rules=competition_rules.plan_task(spec, name, bool(code and not budget_seconds)))
                     for name in names)

    def stand_in(tasks, work: Path):
        made = stand_in_plan(spec, PhasePlan(phase_key, spec.kind, tasks, True), work)
        return None if made is None else (made[0].tasks, made[1])
    rules = {**competition_rules.plan_phase(spec, phase_key, bool(code)),
             **competition_rules.plan_phase_tasks(spec, phase_key, bool(code), planned,
                                                  stand_in)}
    return PhasePlan(phase_key, spec.kind, planned(names), code, dict(spec.weights), rules)


def tasks_alone(plan: PhasePlan, name: str, tasks) -> PhasePlan:
    """The plan run on these tasks alone, under a name of its own (so its record key is not
    the phase's): the rules' entries kept, the tasks they run besides a phase's dropped."""
    return dataclasses.replace(plan, name=name, tasks=tuple(tasks),
                               rules=competition_rules.replace_tasks(plan.rules, lambda tasks: ()))


def public_tasks(spec) -> list:
    """The spec's tasks whose references a kit publishes: those of its results phases where
    the kind's references are public (their kits score against them), as code tasks."""
    tasks = {}
    for phase in spec.phases:
        if phase.code_submission:
            continue
        plan = phase_plan(spec, phase.key, code_submission=True)
        definition = kind(plan.kind)
        tasks |= {task.name: (task, phase.key) for task in plan.tasks
                  if definition.has_public_references(task)}
    return list(tasks.values())


def references_in_kit(plan: PhasePlan) -> bool:
    """A results phase whose references the kind makes public: its kit holds them and a local
    run scores prediction files against them."""
    definition = kind(plan.kind)
    return not plan.code_submission and all(definition.has_public_references(task)
                                            for task in plan.tasks)


def local_scores(spec, plan: PhasePlan) -> str:
    """What a local run in the phase's kit scores on: "references" (public ones, in the kit),
    "stand_in" (hidden references; code is scored on a public stand-in, ``stand_in_plan``)
    or "none" (hidden references, and neither a stand-in of the kind nor a public task)."""
    if references_in_kit(plan):
        return "references"
    if kind(plan.kind).stand_in_task or public_tasks(spec):
        return "stand_in"
    return "none"


def stand_in_plan(spec, code_plan: PhasePlan, work: Path) -> tuple[PhasePlan, list[str]] | None:
    """What a kit whose references are hidden scores a local code run on instead, with a line
    per task saying what data it is: the kind's own stand-in of each task (its
    ``stand_in_task(task, folder)``, made of public data only), else the spec's public tasks;
    None where there is neither. Its own tasks only: those the rules run besides a phase's are
    hidden (``tasks_alone``)."""
    stand_in_task = kind(code_plan.kind).stand_in_task
    if stand_in_task:
        made = [stand_in_task(task, work / task.name) for task in code_plan.tasks]
        tasks, about = [task for task, _ in made], [text for _, text in made]
    else:
        found = public_tasks(spec)
        tasks = [task for task, _ in found]
        about = [f"{task.name}: the public task of phase {phase}, whose references that "
                 "phase's kit holds too" for task, phase in found]
    if not tasks:
        return None
    return tasks_alone(code_plan, f"{code_plan.name}-stand-in", tasks), about


def with_budget(plan: PhasePlan, seconds: float) -> PhasePlan:
    """Every task of the plan, those the rules run besides it included, with this budget
    (local runs, tests)."""
    def budgeted(tasks):
        return tuple(dataclasses.replace(task, budget_seconds=seconds,
                                         rules=competition_rules.seconds_budget(task.rules))
                     for task in tasks)
    return dataclasses.replace(plan, tasks=budgeted(plan.tasks),
                               rules=competition_rules.replace_tasks(plan.rules, budgeted))


def code_variant(spec, plan: PhasePlan) -> PhasePlan:
    """The phase's tasks run as code with the spec's budgets (the starting kit's local runs)."""
    return dataclasses.replace(plan, code_submission=True, tasks=tuple(
        dataclasses.replace(task, budget_seconds=spec.budgets[task.name],
                            rules=competition_rules.plan_task(spec, task.name, True))
        for task in plan.tasks))

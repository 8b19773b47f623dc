"""A phase's gate, build side (PGDL's final phase rule): a submission to a code phase first runs
on an earlier code phase's tasks (spec key ``phases.<phase>.gate``), under their budgets, and on
the phase's own only if it completes every one; otherwise the submission fails on both
platforms, and failed submissions do not count toward the limits. The gate's tasks are not
scored in the phase. The worker's half, ``runtime/rules/gate.py``, runs them and fails the
submission.

The phase plan holds the gate as ``PhasePlan.rules["gate"]``: a ``Gate`` (the earlier phase's
label and its planned tasks) or None. The ingestion config holds it as ``gate`` (its label and
its tasks, written as the phase's are), the scoring config as ``gated``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..spec_key import Key
from .held_tasks import replace_held_tasks
from .records import BuildRule

SPEC_KEYS = {"phases.<phase>": {
    "gate": Key(
        {"type": "string"},
        "An earlier code phase whose tasks a submission to this code phase runs first, "
        "under their budgets (PGDL's final phase rule); only if it completes every one "
        "of them does it run on this phase's tasks. Otherwise the submission fails on "
        "both platforms, and failed submissions do not count toward the limits. The "
        "gate's tasks are not scored here; `execution_time_limit` must cover them too. "
        "Not with `tracks`.", default=None, shown="no gate", example="phase1"),
}}


@dataclass(frozen=True)
class Gate:
    label: str                  # the earlier phase's, as participants see it
    tasks: tuple                # its PlannedTasks, run first, never scored in this phase


def spec_values(raw: dict) -> dict:
    """``gates``: each gated phase's gate, by phase key."""
    return {"gates": {key: phase["gate"] for key, phase in raw["phases"].items()
                      if phase.get("gate")}}


def spec_problems(raw: dict, data_root, load_task) -> list[str]:
    return [problem for key in raw["phases"] for problem in _problems(raw, key)]


def _problems(raw: dict, key: str) -> list[str]:
    """A gate is an earlier code phase, gating a code phase, with tasks of its own."""
    phases, gate = raw["phases"], raw["phases"][key].get("gate")
    if gate is None:
        return []
    where, order = f"phases.{key}.gate", list(phases)
    if phases[key]["submission"] != "code":
        return [f"{where}: only a code phase can have a gate (this phase scores uploaded files)"]
    if raw.get("tracks"):
        return [f"{where}: not with tracks (a track's code phases all run the track's tasks, "
                "so the gate would run them twice)"]
    if gate not in phases or order.index(gate) >= order.index(key):
        return [f"{where}: found {gate!r}, expected an earlier phase "
                f"({', '.join(order[:order.index(key)]) or 'there is none'})"]
    if phases[gate]["submission"] != "code":
        return [f"{where}: phase {gate!r} scores uploaded files; the gate runs code, so it "
                "must be a code phase"]
    shared = sorted(set(phases[gate]["tasks"]) & set(phases[key]["tasks"]))
    return [f"{where}: tasks {shared} are in both phases; the gate's tasks run first and are "
            "not scored here"] if shared else []


def spec_extra_tasks(raw: dict, phase_key: str) -> dict[str, list[str]]:
    """The gate's tasks, which a run of the phase includes (its time limit must cover them)."""
    gate = raw["phases"].get(raw["phases"][phase_key].get("gate"), {}).get("tasks", [])
    return {"the gate": list(gate)} if gate else {}


def plan_phase_tasks(spec, phase_key: str, code: bool, planned, stand_in) -> dict:
    gate = spec.rules["gates"].get(phase_key) if code else None   # never with tracks
    if gate is None:
        return {"gate": None}
    phase = spec.phase(gate)
    return {"gate": Gate(phase.label, planned(phase.tasks))}


def replace_tasks(rules: dict, change) -> dict:
    return replace_held_tasks(rules, "gate", change)


def extra_tasks(plan) -> tuple:
    gate = plan.rules.get("gate")
    return gate.tasks if gate else ()


def ingestion_config_tasks(plan, entry) -> dict:
    gate = plan.rules.get("gate")
    return {"gate": {"label": gate.label, "tasks": [entry(task) for task in gate.tasks]}} \
        if gate else {}


def ingestion_config_extra_tasks(config: dict) -> list[dict]:
    """The gate's task entries in a written ingestion config (an earlier phase's, run first)."""
    return config.get("gate", {}).get("tasks", [])


def scoring_config_entries(plan, config_of) -> dict:
    # A zip whose code never ran must fail in a gated phase: see runtime/rules/gate.py.
    return {"gated": True} if plan.rules.get("gate") else {}


def phase_facts(plan, budget_facts) -> list[tuple[str, str]]:
    """The same on both platforms: CodaLab fails the submission at the ingestion's exit
    status, Codabench at the scorer's, and neither counts failed submissions. The gate's
    tasks' budgets are worded as the phase's (``budget_facts``, the rules' words on them)."""
    gate = plan.rules.get("gate")
    if gate is None:
        return []
    tasks = ", ".join(f"{task.name} ({task.budget_text()})" for task in gate.tasks)
    tasks += "".join(f" ({fact})" for fact in budget_facts(gate.tasks))
    return [("Runs first",
             f"your code first runs on the tasks of {gate.label}: {tasks}, under the same "
             "rules; only if it completes every one of them is it run on this phase's tasks. "
             "Otherwise the submission fails and the log says why; failed submissions do not "
             f"count toward the limits. The tasks of {gate.label} are not scored here")]


RULE = BuildRule(name="gate", SPEC_KEYS=SPEC_KEYS, spec_values=spec_values,
                 spec_problems=spec_problems, spec_extra_tasks=spec_extra_tasks,
                 plan_phase_tasks=plan_phase_tasks, replace_tasks=replace_tasks,
                 extra_tasks=extra_tasks, ingestion_config_tasks=ingestion_config_tasks,
                 ingestion_config_extra_tasks=ingestion_config_extra_tasks,
                 scoring_config_entries=scoring_config_entries, phase_facts=phase_facts)

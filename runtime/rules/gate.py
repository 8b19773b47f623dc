"""A phase's gate, worker side (PGDL's final phase rule): before the phase's tasks, the ingestion
runs the gate's (an earlier phase's) the same way, writing nothing of them but the run record,
and runs the phase's only if the code completed every one: each ended ok with its final
output, nothing else the rules check went wrong (units: every unit done in time), and the
kind's own test passed (its ingestion record's ``gate_problem``; PGDL: every network
measured). Otherwise the submission fails on both platforms (CodaLab at the ingestion's exit
status, Codabench at the scorer's), since failed submissions do not count toward the limits
and a final phase allows one. The scorer fails it too when the code never ran at all.

The ingestion config's ``gate`` holds the earlier phase's label and tasks, the scoring config's
``gated`` says the phase has one, the run record's ``gate`` says what happened. The builder's
half is ``bundle/competition_rules/gate.py``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from runtime import failures

from .records import RuleError, Run, WorkerRule


@dataclass(frozen=True)
class Gate:
    label: str                  # the earlier phase's, as participants see it
    tasks: tuple                # its TaskSpecs, run first, never scored in this phase


def _error(message: str):
    return RuleError(message)


def config_tasks(raw: dict, where: str, parse_tasks) -> dict:
    gate = raw.get("gate")
    if gate is None:
        return {"gate": None}
    if not isinstance(gate, dict) or not isinstance(gate.get("label"), str) \
            or not isinstance(gate.get("tasks"), list):
        raise _error(f"{where}: gate must be an object with a string 'label' and a list "
                     f"'tasks', found {gate!r}")
    return {"gate": Gate(gate["label"], parse_tasks(gate["tasks"], f"{where}: gate.tasks"))}


def _say(message: str) -> None:
    print(message, flush=True)


def runs(config, submission) -> list[Run]:
    """The gate's tasks, run before the phase's as theirs are, writing nothing but the
    record's ``gate``; the phase's run only if they pass."""
    gate = config.rules.get("gate")
    if gate is None:
        return []
    names = ", ".join(task.name for task in gate.tasks)
    return [Run(name="gate", tasks=gate.tasks, scored=False, ranked=False,
                announcement=f"gate: your code first runs on the tasks of {gate.label} "
                f"({names}); it runs on this phase's tasks only if it completes every one of "
                "them", verdict=partial(_verdict, gate))]


def _verdict(gate: Gate, done, contract) -> tuple[dict, str | None]:
    """The record's ``gate`` from the gate's tasks as they ran, and why the submission fails."""
    problems = [problem for task, outcome, _, found in done
                for problem in [_task_problem(task, outcome, found, contract)] if problem]
    _say("gate: passed" if not problems else
         f"gate: NOT passed ({'; '.join(problems)}): this phase's tasks were not run")
    entry = {"label": gate.label, "passed": not problems, "reason": "; ".join(problems),
             "tasks": {task.name: run for task, _, run, _ in done}}
    return {"gate": entry}, _failure(entry)


def _task_problem(task, outcome, rules_problems: list[str], contract) -> str | None:
    """Why a gate task was not completed: it must end ok with its final output, pass the
    other rules' checks of its outcome (``rules_problems``, found by the core), and pass the
    kind's own test."""
    if outcome.status != "ok" or outcome.prediction != "final":
        how = (failures.title(outcome.failed_as) if outcome.failed_as     # what to act on
               else outcome.status.replace('_', ' '))
        return f"{task.name}: {how}" + (f" ({outcome.message})" if outcome.message else "")
    if rules_problems:
        return f"{task.name}: {'; '.join(rules_problems)}"
    problem = contract.gate_problem(outcome.predictions, task)
    return f"{task.name}: {problem}" if problem else None


def record_entries(raw: dict, where: str) -> dict:
    gate = raw.get("gate")
    if gate is not None and not (isinstance(gate, dict) and isinstance(gate.get("passed"), bool)):
        raise _error(f"{where}: 'gate' must be an object with a boolean 'passed'")
    return {"gate": gate} if gate is not None else {}


def _failure(gate: dict) -> str | None:
    """Why the code was not run on this phase's tasks, when its gate stopped it."""
    if gate.get("passed") is True:
        return None
    reason = str(gate.get("reason") or "it did not complete the gate's tasks")
    return (f"your code did not complete the tasks of {gate.get('label', 'the gate')}, which it "
            f"must before it runs on this phase's ({reason})")


def scoring_config_fields(raw: dict, where: str) -> dict:
    gated = raw.get("gated", False)
    if not isinstance(gated, bool):
        raise _error(f"{where}: gated must be true or false, found {gated!r}")
    return {"gated": gated}


def record_runs(config, entries: dict | None) -> list[Run]:
    """The gate's run as the record says it went (it fails the submission where the gate
    stopped the code); where the code never ran, a gated phase fails the submission too."""
    if entries is None:
        # A final phase allows one submission: a zip whose code never ran (CodaLab takes a zip
        # without metadata for results) must fail there, not finish with the worst scores.
        return ([Run(name="gate", scored=False, ranked=False, failure=_UNRUN_FAILURE)]
                if config.rules.get("gated") else [])
    gate = entries.get("gate")
    return ([] if gate is None else
            [Run(name="gate", scored=False, ranked=False, failure=_failure(gate))])


_UNRUN_FAILURE = ("In a phase with a gate the submission fails rather than finishing with the "
                  "worst scores, so it does not use up the phase's submissions")


RULE = WorkerRule(name="gate", config_tasks=config_tasks, runs=runs,
                  record_entries=record_entries, record_runs=record_runs,
                  scoring_config_fields=scoring_config_fields)

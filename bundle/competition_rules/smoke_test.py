"""A phase's smoke test, build side (spec key ``phases.<phase>.smoke_test``): participants may
send their code with an empty ``SMOKE_TEST`` file at the root of the zip (the kit's
``submission_zip.py --smoke``) to run it on a small public slice shaped like the phase's
tasks; it is scored but not ranked, and the submission fails so that it counts toward no
limit. The worker's half, ``runtime/rules/smoke_test.py``, runs and scores it.

The slice is never made of hidden rows: smoke submissions are unlimited, so scores on hidden
references would leak them. It is the kit's stand-in of the phase (``phase_plan.stand_in_plan``,
which the core hands ``plan_phase_tasks`` as ``stand_in``: the kind's ``stand_in_task`` of each
task, else the spec's public tasks) or public tasks named in the spec. The phase plan holds it
as ``PhasePlan.rules["smoke_test"]`` (a ``SmokeTest``, or None); its inputs and references are
staged under ``smoke/`` of the phase's input and reference data (public data: the leakage
check does not count them as hidden), the ingestion config holds its tasks as
``smoke_test.tasks``, the scoring config a whole scoring config of them as ``smoke_test`` (the
core's, handed in as ``config_of``).
"""
from __future__ import annotations

import atexit
import dataclasses
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ingestion_program.ingest.config import worst_case_seconds
from kinds.kind import kind
from runtime.rules.smoke_test import FOLDER, MARKER, SMOKE_TEST

from ..spec_key import Key, number
from ..task_declarations import TaskDataError
from .held_tasks import replace_held_tasks
from .records import BuildRule

_STAND_IN = "stand_in"
_DEFAULT_MAX_SECONDS = 30.0    # a smoke test finds crashes; it need not train for long

SPEC_KEYS = {"phases.<phase>": {
    "smoke_test": Key(
        {"type": "object"},
        "Lets participants of this code phase send a smoke test: their code, zipped with "
        "`submission_zip.py --smoke` (an empty `SMOKE_TEST` file at the zip's root), runs "
        "on a small public slice shaped like the phase's tasks instead of on them, and is "
        "scored but not ranked: the scorer prints the scores and writes the detailed "
        "results, then fails the submission, so that it counts toward no submission "
        "limit on either platform. Never made of hidden rows (smoke submissions are "
        "unlimited, so scores on hidden references would leak them). Code phases only.",
        default=None, shown="no smoke test", example={"tasks": _STAND_IN}, keys={
            "tasks": Key(
                {"oneOf": [{"enum": [_STAND_IN]},
                           {"type": "array", "minItems": 1, "uniqueItems": True,
                            "items": {"type": "string"}}]},
                f"`{_STAND_IN}`: the starting kit's public stand-in of the phase (the kind's "
                "stand-in of each task, made of its public data; else the spec's public "
                "tasks); or a list of public tasks: tasks of a results phase whose "
                "references the kind publishes.", default=_STAND_IN, example=_STAND_IN),
            "budget_seconds": Key(
                number(exclusive=0, maximum=86400),
                "Each smoke task's training budget, in seconds.",
                default=None,
                shown=f"the task's budget, at most {_DEFAULT_MAX_SECONDS:g} s", example=10)}),
}}


@dataclass(frozen=True)
class SmokeTest:
    about: tuple              # a line per task saying what data it is
    tasks: tuple              # its PlannedTasks, run instead of the phase's on request


def spec_values(raw: dict) -> dict:
    """``smoke_tests``: each phase's smoke test as the spec states it, by phase key."""
    return {"smoke_tests": {key: phase["smoke_test"] for key, phase in raw["phases"].items()
                            if phase.get("smoke_test")}}


def spec_problems(raw: dict, data_root, load_task) -> list[str]:
    return [problem for key in raw["phases"] for problem in _problems(raw, key, load_task)]


def _problems(raw: dict, key: str, load_task) -> list[str]:
    """A smoke test belongs to a code phase and is made of public data only."""
    smoke = raw["phases"][key].get("smoke_test")
    if smoke is None:
        return []
    where = f"phases.{key}.smoke_test"
    if raw["phases"][key]["submission"] != "code":
        return [f"{where}: only a code phase can have a smoke test (this phase scores "
                "uploaded files and runs no code)"]
    tasks = smoke.get("tasks", _STAND_IN)
    if tasks == _STAND_IN and raw.get("tracks") and _kind(raw).stand_in_task:
        return [f"{where}.tasks: {_STAND_IN} not with tracks where the kind makes a stand-in "
                "of each task (a track's phase runs the track's tasks, of which the smoke "
                "test would need a stand-in of its own); name public tasks instead"]
    public = _public_task_names(raw, load_task)
    if tasks == _STAND_IN:
        if not _kind(raw).stand_in_task and not public:
            return [f"{where}.tasks: {_STAND_IN} needs a stand-in: the kind has none of its "
                    "own and the spec no results phase whose references the kind publishes; "
                    "name public tasks or leave the smoke test out"]
        names = raw["phases"][key]["tasks"] if _kind(raw).stand_in_task else sorted(public)
        return _time_problems(raw, key, names, smoke.get("budget_seconds"))
    hidden = [name for name in tasks if name not in public]
    if hidden:
        return [f"{where}.tasks: {hidden} are not public tasks (a smoke test is never scored "
                "on hidden references, which unlimited smoke submissions would leak); public "
                f"tasks here: {sorted(public) or 'none'}"]
    return _time_problems(raw, key, tasks, smoke.get("budget_seconds"))


def _time_problems(raw: dict, key: str, names: list[str], seconds: float | None) -> list[str]:
    """A smoke run is a run of the phase: its time limit must cover it as it covers the
    phase's own (``bundle/spec.py``, with the same formula)."""
    budgets = [seconds if seconds is not None else min(budget, _DEFAULT_MAX_SECONDS)
               for name in names
               for budget in [raw["tasks"].get(name, {}).get("budget_seconds")] if budget]
    sandbox = raw["sandbox"]
    needed = worst_case_seconds(budgets, sandbox["grace_seconds"], sandbox["startup_seconds"]) \
        + raw["scoring_margin_seconds"]
    limit = raw["phases"][key]["execution_time_limit"]
    return [] if limit >= needed else [
        f"phases.{key}.smoke_test: its run needs up to {needed:.0f} s, more than "
        f"execution_time_limit {limit} s: fewer tasks or a smaller budget_seconds"]


def _kind(raw: dict):
    return kind(raw["kind"])


def _public_task_names(raw: dict, load_task) -> set[str]:
    """The tasks of the spec's results phases whose references the kind publishes (as
    ``phase_plan.public_tasks`` finds them in a loaded spec); ``load_task(name)``: the task as
    the core plans it."""
    names = {name for phase in raw["phases"].values() if phase["submission"] != "code"
             for name in phase["tasks"]}
    public = set()
    for name in names:
        try:
            task = load_task(name)
        except TaskDataError:
            continue                  # the spec's own checks name the task's files
        if _kind(raw).has_public_references(task):
            public.add(name)
    return public


def plan_phase_tasks(spec, phase_key: str, code: bool, planned, stand_in) -> dict:
    # Its tasks are the phase's whatever the track: a kind's stand-in is refused with
    # tracks, and public tasks are the spec's.
    given = spec.rules["smoke_tests"].get(phase_key) if code else None
    if given is None:
        return {"smoke_test": None}
    if given.get("tasks", _STAND_IN) == _STAND_IN:
        tasks, about = _stand_in(spec, phase_key, planned, stand_in)
    else:
        tasks = planned(given["tasks"])
        about = [f"{task.name}: the public task, whose references a results phase's kit "
                 "holds too" for task in tasks]
    return {"smoke_test": SmokeTest(tuple(about), tuple(
        _budgeted(task, given.get("budget_seconds")) for task in tasks))}


def _budgeted(task, seconds: float | None):
    """A smoke task keeps none of the phase task's rules: its budget is in seconds, and its
    rows, public, are scored whole (a public part of hidden rows means nothing here)."""
    return dataclasses.replace(task, rules={}, budget_seconds=(
        seconds if seconds is not None else min(task.budget_seconds, _DEFAULT_MAX_SECONDS)))


# The kind's stand-in writes its tasks' files; a plan is made many times in a build (pages,
# programs, data), and its tasks' files must outlive each making, so they are made once per
# process in a folder removed at exit.
_STAND_INS: dict = {}
_WORK: list[Path] = []


def _stand_in(spec, phase_key: str, planned, stand_in) -> tuple[list, list[str]]:
    phase_tasks = planned(spec.phase(phase_key).tasks)
    key = (spec.kind, tuple((task.name, str(task.folder)) for task in phase_tasks),
           tuple(task.budget_seconds for task in phase_tasks))
    if key not in _STAND_INS:
        if not _WORK:
            _WORK.append(Path(tempfile.mkdtemp(prefix="smoke-test-")))
            atexit.register(shutil.rmtree, _WORK[0], True)
        made = stand_in(phase_tasks, _WORK[0] / str(len(_STAND_INS)))
        if made is None:
            raise ValueError(f"phases.{phase_key}.smoke_test: there is no stand-in to make "
                             "it of")
        _STAND_INS[key] = (list(made[0]), made[1])
    return _STAND_INS[key]


def replace_tasks(rules: dict, change) -> dict:
    return replace_held_tasks(rules, "smoke_test", change)


def public_tasks_apart(plan) -> dict:
    smoke = plan.rules.get("smoke_test")
    return {FOLDER: smoke.tasks} if smoke else {}


def ingestion_config_tasks(plan, entry) -> dict:
    smoke = plan.rules.get("smoke_test")
    return {"smoke_test": {"tasks": [entry(task) for task in smoke.tasks]}} if smoke else {}


def scoring_config_entries(plan, config_of) -> dict:
    """The smoke tasks' whole scoring config, the core's of them alone as a phase of their own
    (nothing of the rules' tasks besides): the phase's own checks the record first."""
    smoke = plan.rules.get("smoke_test")
    return {"smoke_test": config_of(f"{plan.name}-smoke-test", smoke.tasks)} if smoke else {}


def _tasks_text(smoke) -> str:
    return "; ".join(f"{line} ({task.budget_text()})"
                     for line, task in zip(smoke.about, smoke.tasks))


def phase_facts(plan, budget_facts) -> list[tuple[str, str]]:
    """The same on both platforms: a non-zero scoring exit fails the submission, and
    neither counts failed submissions."""
    smoke = plan.rules.get("smoke_test")
    if smoke is None:
        return []
    return [("Smoke test",
             f"send your code zipped with python submission_zip.py <folder>/ smoke.zip --smoke "
             f"(which adds an empty {MARKER} file at the zip's root) to run it only on a small "
             "public slice shaped like this phase's tasks, never on the hidden ones: "
             f"{_tasks_text(smoke)}. It is scored but not ranked: the scores are in its log "
             "and detailed results, then the submission is marked Failed, so that it counts "
             "toward no submission limit")]


def kit_steps(plan, sample: str) -> list[dict]:
    if plan.rules.get("smoke_test") is None:
        return []
    return [{"command": f"python submission_zip.py {sample}/ smoke.zip --smoke",
             "does": f"or makes a smoke test of it (an empty {MARKER} file added at the zip's "
                     "root): uploaded, it runs on the phase's smoke tasks only, is scored but "
                     "not ranked, and counts toward no limit"}]


def dry_run_submissions(ingestion_config: dict) -> list[tuple[str, list[str], int]]:
    """The kit's sample code as a smoke test, which the scorer must fail with its own status."""
    return [("smoke test", ["--smoke"], SMOKE_TEST)] if ingestion_config.get("smoke_test") else []


NOT_CHECKED = (
    "a smoke test (where a phase has one): that the site shows its sender the scoring log and "
    "the detailed results of a submission it marks Failed; the dry run checks the scorer's "
    "exit status, its report and that no scores file is written",)


RULE = BuildRule(name="smoke_test", SPEC_KEYS=SPEC_KEYS, spec_values=spec_values,
                 spec_problems=spec_problems, plan_phase_tasks=plan_phase_tasks,
                 replace_tasks=replace_tasks, public_tasks_apart=public_tasks_apart,
                 ingestion_config_tasks=ingestion_config_tasks,
                 scoring_config_entries=scoring_config_entries, phase_facts=phase_facts,
                 kit_steps=kit_steps, dry_run_submissions=dry_run_submissions,
                 NOT_CHECKED=NOT_CHECKED)

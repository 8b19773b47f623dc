"""A phase's smoke test, worker side: a code submission whose zip holds an empty file
``SMOKE_TEST`` at its root runs on a small public slice shaped like the phase's tasks instead
of on them, so that participants find crashes before they spend a real submission.

The ingestion runs only the smoke tasks (never the phase's, nor what another rule would run
first), reading their inputs from ``$input/smoke`` and writing their predictions to
``$output/smoke``, and signs the record with ``smoke_test`` saying so. The scorer, reading
that entry of the signed record, scores ``ref/smoke`` against ``res/smoke`` with the smoke
test's own scoring config, writes the detailed results headed as a smoke test, prints the
scores on stderr (the log participants see), writes no scores file and exits ``SMOKE_TEST``:
both platforms then mark the submission Failed, so it is never ranked and counts toward no
submission limit (codalab_v1.md §4.7, codabench_v2.md §3.7). A folder of their own keeps the
smoke tasks apart from the phase's, whose names they may share (the kit's stand-in keeps them).

A marker in a phase without a smoke test is refused before anything runs (and fails the
submission the same way). The builder's half is ``bundle/competition_rules/smoke_test.py``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from runtime import failures

from .records import RuleError, Run, WorkerRule

MARKER = "SMOKE_TEST"         # an empty file at the root of the submission's zip
FOLDER = "smoke"              # the smoke tasks' inputs, references and predictions
SMOKE_TEST = 6                # the scorer's exit status after a smoke test
HEADING = "Smoke test: not ranked"


@dataclass(frozen=True)
class SmokeTest:
    tasks: tuple              # the smoke tasks' TaskSpecs, their inputs in $input/smoke


def _error(message: str):
    return RuleError(message)


def _asked(submission: Path) -> bool:
    return (Path(submission) / MARKER).is_file()


# ---- ingestion ------------------------------------------------------------------------------

def config_tasks(raw: dict, where: str, parse_tasks) -> dict:
    smoke = raw.get("smoke_test")
    if smoke is None:
        return {"smoke_test": None}
    if not isinstance(smoke, dict) or not isinstance(smoke.get("tasks"), list) \
            or not smoke["tasks"]:
        raise _error(f"{where}: smoke_test must be an object with a non-empty list 'tasks', "
                     f"found {smoke!r}")
    return {"smoke_test": SmokeTest(parse_tasks(smoke["tasks"], f"{where}: smoke_test.tasks"))}


def submission_refusal(config, submission: Path) -> tuple[str, str] | None:
    """A smoke test asked of a phase that has none: refused, so that nothing of the phase's
    hidden tasks runs for a submission its sender meant as a trial."""
    if not _asked(submission) or config.rules.get("smoke_test") is not None:
        return None
    return (f"your submission holds a {MARKER} file at its root, which asks for a smoke test, "
            "but this phase has none; remove the file to make a real submission "
            "(submission_zip.py without --smoke)", failures.WRONG_PHASE)


def runs(config, submission: Path | None) -> list[Run]:
    """The smoke tasks, where the submission asks for them: run instead of everything else."""
    smoke = config.rules.get("smoke_test")
    if smoke is None or submission is None or not _asked(submission):
        return []
    names = ", ".join(task.name for task in smoke.tasks)
    return [Run(name="smoke_test", instead=True, folder=FOLDER, ranked=False, tasks=smoke.tasks,
                announcement=f"smoke test: your code runs on the smoke tasks only ({names}), "
                "public data shaped like this phase's tasks; it is scored but not ranked, and "
                "the submission fails so that it counts toward no limit",
                entries={"smoke_test": {"tasks": [task.name for task in smoke.tasks]}})]


def output_folders(config) -> list[str]:
    """Where a phase with a smoke test writes its outputs, when one is asked for."""
    return [FOLDER] if config.rules.get("smoke_test") is not None else []


def record_entries(raw: dict, where: str) -> dict:
    smoke = raw.get("smoke_test")
    if smoke is None:
        return {}
    if not (isinstance(smoke, dict) and isinstance(smoke.get("tasks"), list)):
        raise _error(f"{where}: 'smoke_test' must be an object with a list 'tasks'")
    return {"smoke_test": smoke}


# ---- scorer ---------------------------------------------------------------------------------

def scoring_configs(raw: dict, where: str, parse_config) -> dict:
    """The smoke tasks' own scoring config, read by ``parse_config`` as the phase's is."""
    nested = raw.get("smoke_test")
    if nested is None:
        return {"smoke_test": None}
    if not isinstance(nested, dict):
        raise _error(f"{where}: smoke_test must be a scoring config, found {nested!r}")
    return {"smoke_test": parse_config(nested, f"{where}: smoke_test")}


def record_runs(config, entries: dict | None) -> list[Run]:
    """A run of the smoke tasks (the signed record says so) is scored on them, apart."""
    if not entries or entries.get("smoke_test") is None:
        return []
    nested = config.rules.get("smoke_test")
    if nested is None:
        raise _error("the run record says the code ran a smoke test, but this phase's scoring "
                     "config has none (rebuild the bundle)")
    return [Run(name="smoke_test", instead=True, folder=FOLDER, ranked=False, config=nested,
                heading=HEADING, exit_status=SMOKE_TEST,
                closing="smoke test: scored but not ranked; the submission fails so that it "
                "counts toward no limit")]


RULE = WorkerRule(name="smoke_test", config_tasks=config_tasks,
                  submission_refusal=submission_refusal, runs=runs,
                  output_folders=output_folders, record_entries=record_entries,
                  scoring_configs=scoring_configs, record_runs=record_runs)

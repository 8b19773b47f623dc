"""Organizers' local runs (python -m bundle.local_run: the phase's kit built, then its own
run_local.py), and the scores they print."""
import math
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_local(*args, timeout=600):
    """``python -m bundle.local_run`` with these arguments, from the repository's root."""
    return subprocess.run([sys.executable, "-m", "bundle.local_run", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def run_baseline(baseline: str, phase: str, out: Path, budget: float = 4):
    """A BDL baseline of the kit through a local run on a phase of the default spec."""
    return run_local("--baseline", baseline, "--phase", phase, "--budget", str(budget),
                     "--out", str(out))


def scores_of(stdout: str) -> dict:
    block = stdout.split("\nscores:\n")[1].split("\n\n")[0].splitlines()
    return {key: float(value) for key, value in (line.split(":") for line in block)}


# The default spec's tasks whose predictive takes milliseconds: a baseline's work past its
# share of the budget (its final predictive) fits the rest of a 4 s budget with room for a
# machine four times slower. Not so digits_shift's, 100 passes over 2,995 rows (0.4 s on 2
# cores: four times that after a 2 s share does not fit), nor digits_cnn's (a CNN on as many).
QUICK_PREDICTIVE_TASKS = ("breast_cancer", "diabetes_gap", "digits", "iris", "wine")
NOT_AS_INTENDED = "the platform would not score this as intended:\n"


def run_problems(stderr: str) -> list[str]:
    """The lines of run_local's error saying what the platform would not score as intended
    ('<task>: <status> (<message>)', 'penalised <task>: <reason>'), if it gave one."""
    if NOT_AS_INTENDED not in stderr:
        return []
    lines = stderr.split(NOT_AS_INTENDED, 1)[1].splitlines()
    return [line.strip() for line in lines if line.startswith("  ")]


def assert_scored_as_the_platform_would(result, tasks, budget: float | None = None,
                                        training_time: bool = True) -> None:
    """A local run of BDL code scored every task in ``tasks`` as the platform would: none
    penalised, the primary metric finite, and (``training_time``: a code phase's leaderboard)
    a training time recorded. A task whose predictive is slow may have run past its budget:
    the platform scores its last checkpoint, and run_local, which says so, then exits 1. With
    ``budget``, each task of QUICK_PREDICTIVE_TASKS trained within it."""
    problems = run_problems(result.stderr)
    assert all(map(slow_task_timed_out, problems)), result.stderr[-3000:]
    assert result.returncode == (1 if problems else 0), result.stderr[-3000:]
    scores = scores_of(result.stdout)
    for task in tasks:
        primary = f"{task}_w2" if task == "diabetes_gap" else f"{task}_agreement"
        assert math.isfinite(scores[primary]), (task, scores)
        if not training_time:
            continue
        assert scores[f"{task}_train_seconds"] > 0, (task, scores)
        if budget is not None and task in QUICK_PREDICTIVE_TASKS:
            assert scores[f"{task}_train_seconds"] < budget, (task, scores)


def slow_task_timed_out(problem: str) -> bool:
    """Whether a line of ``run_problems`` says only that a task whose predictive is slow ran
    past its budget (a penalty is a line of its own)."""
    task, _, status = problem.partition(": ")
    return task not in QUICK_PREDICTIVE_TASKS and status.startswith("timed_out")

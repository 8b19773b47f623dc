"""Run the assembled ingestion program exactly as the CodaLab v1.5 worker does (predict step).

Layout (codalab_v1.md §4.4): run/program = the participant's unzipped submission,
run/ingestion_program, run/input = the phase's input data, run/output (becomes res/),
and the hidden reference data in a folder beside the run, passed as $hidden.
"""
import dataclasses
import hashlib
import os
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest

from plans import embedded_phase
from kinds.kind import KINDS as KIND_RECORDS
from bundle.phase_data import stage_input_data, stage_reference_data
from bundle.phase_plan import phase_plan
from bundle.spec import load_spec
from bundle.programs import assemble_ingestion_program
from bundle.platforms.worker import program_command
from scoring_harness import image_python

BUDGET_SECONDS = 3.0
TEST_LIMITS = {"memory_bytes": 2 * 2**30, "max_file_bytes": 16 * 2**20, "disk_bytes": 48 * 2**20,
               "grace_seconds": 1.0, "output_bytes": 16 * 2**10}


def prepare(root: Path, phase: str = "development", budget=BUDGET_SECONDS, limits=None,
            kind: str = "bdl2021"):
    """The phase of ``kind``'s default competition run as a code phase: its ingestion program,
    input data and hidden references. ``kind``: BDL unless given, since the tests that name no
    kind submit BDL's code (FAST_BDL); a core test passes ``kind="label_accuracy"`` (plans.py)
    and submits FAST_LABELS where it needs any valid submission."""
    plan = embedded_phase(phase, code_submission=True, budget_seconds=budget, kind=kind)
    assemble_ingestion_program(plan, root / "ingestion_program", {**TEST_LIMITS, **(limits or {})})
    stage_input_data(plan, root / "input")
    stage_reference_data(plan, root / "hidden_ref")
    return plan


# The two ways a worker starts the ingestion: CodaLab's root, and Codabench's root without
# capabilities (SETPRIV below); the hostile-submission tests run in both.
SETTINGS = ("root", "no capabilities")
needs_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                reason="needs root and util-linux setpriv to drop capabilities")
# BDL's sample trains for seconds; a test that needs any valid submission takes this one.
FAST_BDL = """
import numpy as np
def predict(task, x_train, y_train, x_test, checkpoint):
    return np.full((task.n_test, task.num_classes), 1.0 / task.num_classes)
"""

# label_accuracy's fastest valid submission (the core tests' fixture, plans.py): every test
# point labelled 0, at once.
FAST_LABELS = """
import numpy as np
def predict(task, x_train, y_train, x_test):
    return np.zeros(task.n_test, dtype=np.int64)
"""

# Each kind's default competition and the code phase its hostile-submission tests run.
KIND_CODE_PHASES = {"bdl2021": "development", "pgdl2020": "phase1", "retina": "final"}
KINDS = tuple(KIND_CODE_PHASES)


def kind_plan(kind: str, budget=None):
    """The code phase of ``kind``'s default competition (tasks in name order): the one
    KIND_CODE_PHASES names, else (label_accuracy, the core tests' kind) its first code phase."""
    spec = load_spec(KIND_RECORDS[kind].DEFAULT_SPEC)
    phase = KIND_CODE_PHASES.get(kind) or next(p.key for p in spec.phases if p.code_submission)
    plan = phase_plan(spec, phase, code_submission=True, budget_seconds=budget)
    return dataclasses.replace(plan, tasks=tuple(sorted(plan.tasks, key=lambda t: t.name)))


def prepare_kind(root: Path, kind: str, budget=None, limits=None):
    """``prepare`` for any kind's code phase; the run's submission is the kind's sample."""
    plan = kind_plan(kind, budget)
    assemble_ingestion_program(plan, root / "ingestion_program", {**TEST_LIMITS, **(limits or {})})
    stage_input_data(plan, root / "input")
    stage_reference_data(plan, root / "hidden_ref")
    KIND_RECORDS[kind].sample_code_submission(root / "sample")
    return plan


def new_kind_run(prepared: Path, run: Path, files: dict[str, str] | None = None) -> Path:
    """A run of the kind's sample submission with ``files`` (relative path -> text) added
    or replaced: the hostile part."""
    new_run(prepared, run, None)
    submission = run / "run" / "program"
    shutil.copytree(prepared / "sample", submission, dirs_exist_ok=True)
    for name, text in (files or {}).items():
        (submission / name).parent.mkdir(parents=True, exist_ok=True)
        (submission / name).write_text(textwrap.dedent(text))
    return run


def new_run(prepared: Path, run: Path, submission_code: str | None) -> Path:
    shutil.copytree(prepared / "ingestion_program", run / "run" / "ingestion_program")
    shutil.copytree(prepared / "input", run / "run" / "input")
    shutil.copytree(prepared / "hidden_ref", run / "hidden_ref")
    submission = run / "run" / "program"
    submission.mkdir(parents=True)
    (submission / "metadata").write_text("description: test submission\n")
    if submission_code is not None:
        (submission / "submission.py").write_text(textwrap.dedent(submission_code))
    (run / "run" / "output").mkdir()
    (run / "run" / "temp").mkdir()
    return run


def worker_command(run: Path, python: str | None = None) -> list[str]:
    """``python``: the interpreter in place of the image's (a test whose code needs more)."""
    folder = run / "run"
    return program_command(folder / "ingestion_program", {
        "$ingestion_program": folder / "ingestion_program", "$submission_program": folder / "program",
        "$hidden": run / "hidden_ref", "$input": folder / "input", "$output": folder / "output",
        "$tmp": folder / "temp"}, python or image_python())


# As Codabench runs us: root, every capability dropped, no-new-privileges (util-linux setpriv).
SETPRIV = ["setpriv", "--no-new-privs", "--inh-caps=-all", "--ambient-caps=-all",
           "--bounding-set=-all", "--"]


def run_ingestion(run: Path, timeout: float = 300, unprivileged: bool = False,
                  env: dict | None = None, python: str | None = None
                  ) -> subprocess.CompletedProcess:
    """The staging folder goes under a TMPDIR named after ``run``, so every process of this run
    has it in its command line or working folder and can be told from anyone else's."""
    staging = staging_root(run)
    staging.mkdir(mode=0o755, exist_ok=True)
    os.chmod(staging, 0o755)       # the sandbox user must pass through (pytest's folders: 700)
    command = (SETPRIV if unprivileged else []) + worker_command(run, python)
    return subprocess.run(command, cwd=run / "run", capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "TMPDIR": str(staging), **(env or {})})


def run_then_score(tmp_path: Path, programs: Path, data: Path, submission: Path,
                   prepare=None) -> tuple:
    """The ingestion, then the scorer, in the CodaLab worker's layout: the programs
    ``programs/ingestion_program`` and ``programs/scoring_program`` over ``data/input`` and
    ``data/ref`` and a copy of the submission's folder, which ``prepare(folder)`` may change
    first (``folder``: the worker's, holding input/ and program/). Returns (ingestion,
    scoring, the scorer's output folder); the ingestion's output is in
    ``tmp_path/score/input/res``."""
    run = tmp_path / "run"
    shutil.copytree(programs / "ingestion_program", run / "run" / "ingestion_program")
    shutil.copytree(data / "input", run / "run" / "input")
    shutil.copytree(data / "ref", run / "hidden_ref")
    shutil.copytree(submission, run / "run" / "program")
    (run / "run" / "program" / "metadata").write_text("description: test\n")
    if prepare is not None:
        prepare(run / "run")
    (run / "run" / "output").mkdir()
    ingestion = run_ingestion(run, timeout=120)
    score = tmp_path / "score"
    shutil.copytree(programs / "scoring_program", score / "program")
    shutil.copytree(data / "ref", score / "input" / "ref")
    shutil.copytree(run / "run" / "output", score / "input" / "res")
    (score / "output").mkdir()
    scoring = subprocess.run([image_python(), str(score / "program" / "score.py"),
                              str(score / "input"), str(score / "output")],
                             capture_output=True, text=True, timeout=120)
    return ingestion, scoring, score / "output"


def staging_root(run: Path) -> Path:
    return (Path(tempfile.gettempdir())
            / f"bdl-ingestion-test-{hashlib.sha1(str(run).encode()).hexdigest()[:16]}")


def processes_of(run: Path) -> list[str]:
    """Command lines of live processes started for ``run`` (by command line or working folder)."""
    marks, found = (str(run), str(staging_root(run))), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as stream:
                cmdline = stream.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat", "rb") as stream:
                state = stream.read().rsplit(b")", 1)[1].split()[0]
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if state != b"Z" and any(m in cmdline or cwd.startswith(m) for m in marks):
            found.append(cmdline)
    return found


def assert_nothing_left_behind(run: Path) -> None:
    """No process of ``run`` survives it, and the ingestion removed its staging folder."""
    assert processes_of(run) == [], "processes left behind"
    staging = staging_root(run)
    if staging.exists():
        left = os.listdir(staging)
        shutil.rmtree(staging, ignore_errors=True)
        assert left == [], f"staging left behind: {left}"

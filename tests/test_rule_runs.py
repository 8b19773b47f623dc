"""What runs is one concept on the worker (``runtime/rules/records.Run``): a rule that adds runs
of the smoke test's shape is its own module and one registration in the registry each program
ships. The rule here lives only in this test: written into the assembled programs' copy of
``runtime/rules/`` and registered there (one line, its module's name, in ``RULES``), and
nothing else of the programs changed. It adds both shapes of run:

- first: the phase's first task under a name of its own, run before the phase's, writing
  nothing but the record's ``trial_first``, never scored; a failure there fails the
  submission (both programs exit ``RULE_FAILED``) and the phase's tasks never run;
- instead: on request (an empty ``TRIAL`` file in the submission), the phase's tasks from
  ``$input/trial`` into ``$output/trial``, scored apart against ``ref/trial``, never ranked
  (no scores file), the scorer exiting 7.

Both real programs run (label_accuracy's code phase), in the CodaLab worker's layout."""
import json
import shutil

import pytest

from bundle.phase_plan import phase_plan
from bundle.phase_data import stage_input_data, stage_reference_data
from bundle.programs import assemble_ingestion_program, assemble_scoring_program
from bundle.spec import load_spec
from ingestion_program.ingest.config import CONFIG_NAME, load_config
from kinds.kind import KINDS
from runtime.formats import RECORD_NAME
from runtime.rules import RULE_FAILED
from ingestion_harness import TEST_LIMITS, run_then_score
from local_runs import REPO

SPEC = REPO / "kinds" / "label_accuracy" / "default_spec.yaml"
CRASHES = "def predict(task, x_train, y_train, x_test):\n    raise ValueError('no model yet')\n"

TRIAL = '''"""A test rule: a run first that can fail the submission, a run instead scored apart."""
from dataclasses import replace
from pathlib import Path

from .records import Run, WorkerRule

MARKER, FOLDER, TRIAL_EXIT, HEADING = "TRIAL", "trial", 7, "Trial: not ranked"


def runs(config, submission):
    names = [task.name for task in config.tasks]
    if submission is not None and (Path(submission) / MARKER).is_file():
        return [Run(name="trial", instead=True, folder=FOLDER, ranked=False, tasks=config.tasks,
                    announcement=f"trial: your code runs on {', '.join(names)} apart",
                    entries={"trial": {"tasks": names}})]
    # a name of its own: two tasks of one name in one ingestion would share a staging folder
    first = replace(config.tasks[0], name=f"trial_{names[0]}")
    return [Run(name="trial", scored=False, ranked=False, tasks=(first,),
                announcement=f"trial first: {first.name}", verdict=_verdict)]


def _verdict(done, contract):
    passed = all(outcome.status == "ok" for _, outcome, _, _ in done)
    print(f"trial first: {'passed' if passed else 'NOT passed'}", flush=True)
    entry = {"passed": passed, "tasks": {task.name: run for task, _, run, _ in done}}
    return {"trial_first": entry}, None if passed else "the trial's first run failed"


def record_entries(raw, where):
    return {key: raw[key] for key in ("trial", "trial_first") if key in raw}


def record_runs(config, entries):
    if entries and "trial" in entries:
        return [Run(name="trial", instead=True, folder=FOLDER, ranked=False, config=config,
                    heading=HEADING, exit_status=TRIAL_EXIT, closing="trial: scored apart")]
    first = (entries or {}).get("trial_first")
    if first is None:
        return []
    return [Run(name="trial", scored=False, ranked=False,
                failure=None if first["passed"] else "the trial's first run failed")]


RULE = WorkerRule(name="trial", runs=runs, record_entries=record_entries,
                  record_runs=record_runs)
'''


def _register(program) -> None:
    """The rule's module beside the others, and its registration: one line in ``RULES``, the
    module's name, as docs/extending.md has a rule registered."""
    folder = program / "runtime" / "rules"
    (folder / "trial.py").write_text(TRIAL)
    registry = folder / "__init__.py"
    lines = registry.read_text().splitlines(keepends=True)
    closed = lines.index(")\n", lines.index("RULES = registered_modules(\n"))
    lines.insert(closed, '    "trial",\n')
    registry.write_text("".join(lines))


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """label_accuracy's code phase as the bundle holds it, the rule registered in both
    programs, and the phase's inputs and references copied into the trial's folder."""
    root = tmp_path_factory.mktemp("runs")
    plan = phase_plan(load_spec(SPEC), "evaluation")
    assemble_ingestion_program(plan, root / "ingestion_program", TEST_LIMITS)
    assemble_scoring_program(plan, root / "scoring_program")
    for program in ("ingestion_program", "scoring_program"):
        shutil.copytree(root / program, root / "unregistered" / program)
        _register(root / program)
    stage_input_data(plan, root / "input")
    stage_reference_data(plan, root / "ref")
    for data in ("input", "ref"):
        shutil.copytree(root / data, root / "apart", dirs_exist_ok=False)
        shutil.move(root / "apart", root / data / "trial")
    KINDS["label_accuracy"].sample_code_submission(root / "sample")
    return root, plan


def _files(prepared, folder: str) -> list[str]:
    """The phase's prediction files as the record names them, in ``folder``."""
    config = load_config(prepared[0] / "ingestion_program" / CONFIG_NAME)
    return sorted(f"{folder}{task.prediction_stem}.npy" for task in config.tasks)


def _run(prepared, tmp_path, marker=False, code=None, registered=True):
    """The ingestion, then the scorer; (ingestion, scoring, the record, the scorer's output).
    ``registered``: the programs with the rule registered, else as the bundle holds them."""
    root, _ = prepared

    def prepare(folder):
        if code is not None:
            (folder / "program" / "submission.py").write_text(code)
        if marker:
            (folder / "program" / "TRIAL").write_text("")
    ingestion, scoring, output = run_then_score(
        tmp_path, root if registered else root / "unregistered", root, root / "sample", prepare)
    record_file = tmp_path / "score" / "input" / "res" / RECORD_NAME
    record = json.loads(record_file.read_text()) if record_file.is_file() else None
    return ingestion, scoring, record, output


def test_a_run_first_that_passes_lets_the_phase_run_and_be_ranked(prepared, tmp_path):
    _, plan = prepared
    ingestion, scoring, record, output = _run(prepared, tmp_path)
    assert ingestion.returncode == 0, ingestion.stdout[-3000:] + ingestion.stderr[-3000:]
    first = f"trial_{plan.tasks[0].name}"
    assert f"trial first: {first}" in ingestion.stdout
    assert "trial first: passed" in ingestion.stdout
    assert record["trial_first"]["passed"] is True
    assert list(record["trial_first"]["tasks"]) == [first]          # run, not scored
    assert sorted(record["tasks"]) == sorted(task.name for task in plan.tasks)
    assert sorted(record["files"]) == _files(prepared, "")
    assert scoring.returncode == 0, scoring.stdout[-3000:] + scoring.stderr[-3000:]
    assert (output / "scores.txt").is_file()                          # ranked
    details = json.loads((output / "detailed_results.json").read_text())
    assert sorted(details["tasks"]) == sorted(task.name for task in plan.tasks)
    assert first not in scoring.stdout + scoring.stderr               # the first run unscored
    assert f"scored {len(plan.tasks)} of {len(plan.tasks)} task(s)" in scoring.stdout


def test_a_run_first_that_fails_fails_the_submission_and_stops_the_phase(prepared, tmp_path):
    ingestion, scoring, record, output = _run(prepared, tmp_path, code=CRASHES)
    assert ingestion.returncode == RULE_FAILED, ingestion.stdout[-3000:] + ingestion.stderr[-3000:]
    assert "trial first: NOT passed" in ingestion.stdout
    assert "the trial's first run failed. The submission fails" in ingestion.stderr
    assert record["trial_first"]["passed"] is False
    assert record["tasks"] == {} and record["files"] == {}           # the phase never ran
    assert scoring.returncode == RULE_FAILED, scoring.stderr[-3000:]
    assert "not scored: the trial's first run failed" in scoring.stderr
    assert not (output / "scores.txt").exists()
    assert "first run failed" in (output / "detailed_results.html").read_text()


def test_a_run_instead_is_scored_apart_never_ranked_and_exits_its_status(prepared, tmp_path):
    _, plan = prepared
    ingestion, scoring, record, output = _run(prepared, tmp_path, marker=True)
    assert ingestion.returncode == 0, ingestion.stdout[-3000:] + ingestion.stderr[-3000:]
    names = [task.name for task in plan.tasks]
    assert f"trial: your code runs on {', '.join(names)} apart" in ingestion.stdout
    assert "trial first" not in ingestion.stdout                     # instead of every run
    assert "trial_first" not in record and record["trial"] == {"tasks": names}
    assert sorted(record["files"]) == _files(prepared, "trial/")
    assert scoring.returncode == 7, scoring.stdout[-3000:] + scoring.stderr[-3000:]
    assert not (output / "scores.txt").exists() and not (output / "scores.json").exists()
    assert "Trial: not ranked" in (output / "detailed_results.html").read_text()
    assert f"Trial: not ranked: {len(names)} task(s)" in scoring.stderr
    assert scoring.stderr.rstrip().endswith("trial: scored apart")
    details = json.loads((output / "detailed_results.json").read_text())
    assert sorted(details["tasks"]) == sorted(names)                 # scored, apart


def test_without_its_registration_the_rule_runs_nothing(prepared, tmp_path):
    _, plan = prepared
    ingestion, scoring, record, output = _run(prepared, tmp_path, marker=True, registered=False)
    assert ingestion.returncode == 0, ingestion.stdout[-3000:] + ingestion.stderr[-3000:]
    assert "trial first" not in ingestion.stdout and "trial:" not in ingestion.stdout
    assert "trial" not in record and "trial_first" not in record
    assert sorted(record["files"]) == _files(prepared, "")
    assert scoring.returncode == 0 and (output / "scores.txt").is_file()

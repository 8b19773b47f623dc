"""Issue 31 part 3: every failed or penalised task ends in one named category
(``runtime/failures.py``), which the ingestion records and logs first, and the scorer's log
line, detailed results and report show first, followed by the participant's own traceback.

Each category is produced on every kind through its real programs, as the worker runs them.
To keep this cheap, one hostile submission fails each task of a run in a different way: its
module reads its task's name from its working folder (``<staging>/tasks/<task>/work``), so
even an import error can be aimed at one task. A kind's tasks are all the distinct tasks of
its default competition, run as one code phase, so few runs cover the categories.
"""
import dataclasses
import functools
import html
import json
import shutil
from pathlib import Path

import pytest
from markupsafe import escape      # the pages' escaping (Jinja2's)

from bundle.leaderboard import phase_columns
from bundle.phase_data import stage_input_data, stage_reference_data
from bundle.phase_plan import phase_plan
from bundle.programs import assemble_ingestion_program, assemble_scoring_program
from bundle.render import page_contexts, render_pages
from bundle.spec import load_spec
from ingestion_harness import TEST_LIMITS, new_run as new_ingestion_run, run_ingestion
from kinds.kind import KINDS, scoring_runtime
from runtime import failures
from runtime.formats import (FormatError, RunRecord, TaskRun, read_run_record,
                             write_run_record)
from scoring_harness import new_run as new_scoring_run, run_scoring
from scoring_program.scorer.config import CONFIG_NAME, load_config
from scoring_program.scorer.main import NOTHING_SCORED

pytestmark = pytest.mark.slow

KIND_NAMES = tuple(sorted(KINDS))


@functools.cache
def _default_spec(kind: str):
    """The kind's default spec, loaded once for this module (read only): the helpers below
    asked for it a dozen times a test, PGDL's at a fifth of a CPU second each."""
    return load_spec(KINDS[kind].DEFAULT_SPEC)


def _first_phase(kind: str, code: bool) -> str:
    """The key of the kind's default competition's first phase of code (``code``) or of
    prediction files, read from its spec: every default competition has one of each."""
    spec = _default_spec(kind)
    return next(phase.key for phase in spec.phases if phase.code_submission == code)


# What a run of code can end in; wrong phase's files is the scorer's alone (below).
RUN_CATEGORIES = (failures.TIMED_OUT, failures.DID_NOT_START, failures.IMPORT_ERROR,
                  failures.RAISED, failures.MEMORY, failures.SANDBOX, failures.INVALID_OUTPUT,
                  failures.NOTHING)
# PGDL's contract turns whatever complexity() returns for a network into a number or NaN,
# so code cannot "write nothing" there: None for every network is a value-less zoo, invalid
# output. Its results phase shows the category instead (a zoo with no .predict file).
CANNOT_ARISE = {("pgdl2020", failures.NOTHING)}
SHORT_BUDGET = 1.5      # the task that times out; the others fail at once, well within theirs
LONG_BUDGET = 60.0

HOSTILE = '''
import os
import socket
import time

CATEGORY = {chosen!r}.get(os.path.basename(os.path.dirname(os.getcwd())))
if CATEGORY == "import_error":
    import a_package_the_image_lacks


def _entry(*args):
    if CATEGORY == "raised_exception":
        raise RuntimeError("diverged on purpose")
    if CATEGORY == "timed_out":
        time.sleep(600)
    if CATEGORY == "exceeded_memory":
        return bytearray(2 ** 40)
    if CATEGORY == "refused_by_sandbox":
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(("192.0.2.1", 80))
    if CATEGORY == "invalid_output":
        return "not a number"
    return None


if CATEGORY != "did_not_start":
    {function} = _entry
'''


@functools.cache
def _all_tasks(kind: str):
    """Every distinct task of the kind's default competition, planned as one code phase
    (planned once for this module; read only)."""
    spec = _default_spec(kind)
    plans = [phase_plan(spec, phase.key, code_submission=True) for phase in spec.phases]
    tasks = {task.name: task for plan in plans for task in plan.tasks}
    base = next(plan for plan, phase in zip(plans, spec.phases)
                if phase.key == _first_phase(kind, code=True))
    return base, tuple(tasks[name] for name in sorted(tasks))


def _runs(kind: str) -> list[dict[str, str]]:
    """{task: category} per run: each category of RUN_CATEGORIES that can arise on the kind
    once, as many per run as the kind has tasks."""
    _, tasks = _all_tasks(kind)
    wanted = [code for code in RUN_CATEGORIES if (kind, code) not in CANNOT_ARISE]
    names = [task.name for task in tasks]
    return [dict(zip(names, wanted[start:start + len(names)]))
            for start in range(0, len(wanted), len(names))]


def _prepare(root: Path, kind: str, chosen: dict[str, str]):
    """The code phase of ``chosen``'s tasks: ingestion and scoring programs, data."""
    base, tasks = _all_tasks(kind)
    planned = tuple(dataclasses.replace(
        task, budget_seconds=SHORT_BUDGET if chosen[task.name] == failures.TIMED_OUT
        else LONG_BUDGET) for task in tasks if task.name in chosen)
    plan = dataclasses.replace(base, tasks=planned)
    assemble_ingestion_program(plan, root / "ingestion_program", TEST_LIMITS)
    assemble_scoring_program(plan, root / "scoring_program")
    stage_input_data(plan, root / "input")
    stage_reference_data(plan, root / "hidden_ref")
    return plan


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """``prepared(kind, number)``: the folder _prepare made for the kind's run ``number``
    (``_runs``), made once for this module and read only: the wrong phase's files are scored
    by the programs of the first run's phase."""
    made = {}

    def prepare(kind: str, number: int) -> Path:
        if (kind, number) not in made:
            root = tmp_path_factory.mktemp(f"phase-{kind}-{number}")
            _prepare(root, kind, _runs(kind)[number])
            made[kind, number] = root
        return made[kind, number]
    return prepare


def _score(root: Path, output: Path, ref: Path, tmp_path: Path):
    """The scorer on ``output`` as the worker runs it next; every task is penalised here, so
    it exits NOTHING_SCORED and writes its report and detailed results."""
    scoring = tmp_path / "scoring"
    shutil.copytree(root / "scoring_program", scoring / "program")
    shutil.copytree(ref, scoring / "input" / "ref")
    shutil.copytree(output, scoring / "input" / "res")
    for folder in ("output", "temp"):
        (scoring / folder).mkdir()
    result = run_scoring(scoring)
    log = result.stdout + result.stderr
    assert result.returncode == NOTHING_SCORED and "Traceback (most recent" not in \
        log.replace("| Traceback (most recent", ""), log[-4000:]
    details = json.loads((scoring / "output" / "detailed_results.json").read_text())["tasks"]
    return log, details, (scoring / "output" / "detailed_results.html").read_text()


def _assert_named(task: str, code: str, log: str, details: dict, report: str) -> None:
    """The category comes first in the log line, the detailed results and the report."""
    title = failures.title(code)
    assert f"task {task} penalised: {title}: " in log, (task, code, log[-4000:])
    assert details[task]["failure"] == code and details[task]["failure_title"] == title
    section = report.split(f'<section id="task-{task}">')[1].split("</section>")[0]
    assert f'<div class="penalty"><strong>{html.escape(title)}:</strong>' in section


def _entry_file(kind: str, chosen: dict[str, str]) -> dict[str, str]:
    module, function = KINDS[kind].ENTRY
    return {f"{module}.py": HOSTILE.format(chosen=chosen, function=function)}


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_each_way_code_fails_is_named_on_every_kind(kind, tmp_path, prepared):
    for number, chosen in enumerate(_runs(kind)):
        root = prepared(kind, number)
        run = new_ingestion_run(root, tmp_path / f"run{number}", None)
        for name, text in _entry_file(kind, chosen).items():
            (run / "run" / "program" / name).write_text(text)
        result = run_ingestion(run)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        output = run / "run" / "output"
        record = read_run_record(output / "ingestion_record.json")
        for task, code in chosen.items():
            assert record.tasks[task].failure == code, (task, record.tasks[task])
            assert f"[{task}]   {failures.title(code)}: " in result.stdout, result.stdout[-4000:]
        log, details, report = _score(root, output, run / "hidden_ref", tmp_path / f"s{number}")
        for task, code in chosen.items():
            _assert_named(task, code, log, details, report)
        raised = [task for task, code in chosen.items() if code == failures.RAISED]
        for task in raised:     # their traceback follows, their frames only
            assert f"task {task}:   | RuntimeError: diverged on purpose" in log, log[-4000:]
            assert "diverged on purpose" in details[task]["traceback"]
            assert "ingest_runtime" not in details[task]["traceback"]


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_prediction_files_in_a_code_phase_are_the_wrong_phases(kind, tmp_path, prepared):
    chosen = _runs(kind)[0]
    root = prepared(kind, 0)
    res = tmp_path / "res"
    res.mkdir()
    (res / "predictions.csv").write_text("0.5\n")
    log, details, report = _score(root, res, root / "hidden_ref", tmp_path)
    for task in chosen:
        _assert_named(task, failures.WRONG_PHASE, log, details, report)


def _results_phase(root: Path, kind: str):
    spec = _default_spec(kind)
    plan = phase_plan(spec, _first_phase(kind, code=False), code_submission=False)
    assemble_scoring_program(plan, root / "program")
    stage_reference_data(plan, root / "ref")
    config = load_config(root / "program" / CONFIG_NAME)
    return config.tasks, scoring_runtime(kind).submission_files


def _score_results(prepared: Path, run: Path, files: dict[str, str]):
    new_scoring_run(prepared, run)
    for name, text in files.items():
        (run / "input" / "res" / name).write_text(text)
    result = run_scoring(run)
    log = result.stdout + result.stderr
    assert result.returncode == NOTHING_SCORED and "Traceback" not in log, log[-4000:]
    details = json.loads((run / "output" / "detailed_results.json").read_text())["tasks"]
    return log, details, (run / "output" / "detailed_results.html").read_text()


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_each_way_prediction_files_fail_is_named_on_every_kind(kind, tmp_path):
    """A file that fails validation, no file for a task, and code sent to a phase that takes
    prediction files."""
    tasks, expected_files = _results_phase(tmp_path / "phase", kind)
    first, rest = tasks[0], tasks[1:]
    cases = [({expected_files(first)[0]: "this is not a prediction\n"},
              {first.name: failures.INVALID_OUTPUT} | {t.name: failures.NOTHING for t in rest}),
             (_entry_file(kind, {}), {t.name: failures.WRONG_PHASE for t in tasks})]
    if not rest:
        cases.append(({"notes.txt": "my predictions are elsewhere\n"},
                      {first.name: failures.NOTHING}))
    for number, (files, expected) in enumerate(cases):
        log, details, report = _score_results(tmp_path / "phase", tmp_path / f"run{number}", files)
        for task, code in expected.items():
            _assert_named(task, code, log, details, report)


def test_every_category_is_produced_by_a_test_here():
    """Each category of the module appears in the runs above, on each kind where it can."""
    produced = set(RUN_CATEGORIES) | {failures.WRONG_PHASE}
    assert produced == set(failures.CODES)
    for kind in KIND_NAMES:
        run = {code for chosen in _runs(kind) for code in chosen.values()}
        assert run | {code for k, code in CANNOT_ARISE if k == kind} == set(RUN_CATEGORIES)


@pytest.mark.parametrize("kind", KIND_NAMES)
@pytest.mark.parametrize("code", [True, False], ids=["code phase", "results phase"])
def test_the_evaluation_page_lists_the_categories_and_what_to_do(kind, code):
    """From the records themselves: a phase of prediction files lists only what an upload
    can get, since none of the participant's code runs there."""
    spec = _default_spec(kind)
    phase = next(phase for phase in spec.phases if phase.code_submission == code)
    plan = phase_plan(spec, phase.key)
    contexts = page_contexts(spec, [phase], [plan], phase_columns(plan), spec.title, None)
    page = render_pages(contexts, KINDS[kind].TEMPLATES)["evaluation.html"]
    listed = page.split("<h3>Why a task is penalised</h3>")[1].split("</table>")[0]
    for failure in failures.FAILURES:
        row = (f"<tr><td>{escape(failure.title)}</td><td>{escape(failure.meaning)}</td>"
               f"<td>{escape(failure.remedy)}</td></tr>")
        assert (row in listed) == (code or failure.code in failures.RESULTS_FAILURES), row


def test_a_record_older_than_the_categories_reads_by_its_status_and_a_bad_one_is_named(tmp_path):
    path = tmp_path / "ingestion_record.json"
    write_run_record(path, RunRecord({"iris": TaskRun("timed_out", 3.0)}))
    raw = json.loads(path.read_text())
    for key in ("failure", "traceback"):
        del raw["tasks"]["iris"][key]
    path.write_text(json.dumps(raw))
    run = read_run_record(path).tasks["iris"]
    assert run.failure is None and failures.of_run(run.status, run.failure) == failures.TIMED_OUT
    raw["tasks"]["iris"]["failure"] = "gremlins"
    path.write_text(json.dumps(raw))
    with pytest.raises(FormatError, match=r"tasks\.iris\.failure: expected one of .* found "
                                          r"'gremlins'"):
        read_run_record(path)


def test_a_gate_task_that_failed_is_named_by_its_category():
    """The gate (runtime/rules/gate.py) fails the submission naming how its task failed."""
    from types import SimpleNamespace
    from ingestion_program.ingest.supervisor import TaskOutcome
    from runtime.rules import gate
    outcome = TaskOutcome("failed", "importing complexity.py failed: ImportError: no", 0.2,
                          failure=failures.IMPORT_ERROR)
    assert gate._task_problem(SimpleNamespace(name="zoo"), outcome, [], None) == (
        "zoo: Import error (importing complexity.py failed: ImportError: no)")

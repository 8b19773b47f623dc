"""Issue 47 item 4: a submission that fails says why in its detailed results, on every path.

Codabench often shows the sender of a failed submission only "Child task failed or non-zero
return code" and no log, but its worker uploads ``detailed_results.html`` also when the
scoring step fails (codabench_v2.md §3.7, §3.8). So every exit of the scoring program but bad
arguments leaves that page, written anew: that the submission failed and counts toward no
limit, each failure category with its remedy, the reason, and where their code raised, their
own innermost line and the exception; never a reference's path, name or content.

Each path runs the real scoring program as the worker does (``scoring_harness``); the
refusal and the exception come from the real ingestion program. Some pages are also opened
in headless Chromium, as their sender sees them; screenshots go to
test-artifacts/failure_pages/.
"""
import dataclasses
import html
import json
import re
import shutil
from pathlib import Path

import pytest

from bundle.programs import assemble_scoring_program
from browser import Browser, browser_or_skip
from conftest import ARTIFACTS, report_artifacts
from ingestion_harness import new_run as new_ingestion_run, prepare as prepare_ingestion
from ingestion_harness import run_ingestion
from runtime import failures, rules
from runtime.formats import RECORD_NAME, RunRecord, TaskRun, read_run_record, write_run_record
from scoring_harness import new_run, prepare_phase, run_scoring
from scoring_program.scorer.main import NOTHING_SCORED, SUBMISSION_REFUSED
from scoring_program.scorer.report import (FAILED_NOTE, INTERNAL_FAULT, ORGANIZERS_FAULT,
                                           RULE_FAULT)

pytestmark = pytest.mark.slow
PAGES = ARTIFACTS / "failure_pages"
STALE = "<p>a page left in the output before the scoring step</p>"

# Their code raises two calls deep: the page names the innermost line of their own file.
RAISES = '''
def _fit(x):
    raise RuntimeError("diverged on purpose")


def predict(task, x_train, y_train, x_test, checkpoint):
    return _fit(x_train)
'''
# A gate task's traceback as the ingestion records it (their frames, then a library's).
GATE_TRACEBACK = '''Traceback (most recent call last):
  File "/tmp/staging/tasks/zoo/program/complexity.py", line 9, in complexity
    return _measure(model)
  File "/tmp/staging/tasks/zoo/program/complexity.py", line 5, in _measure
    return numpy.linalg.norm(model.weights[7])
  File "/usr/lib/python3/dist-packages/numpy/linalg/linalg.py", line 2511, in norm
    x = asarray(x)
IndexError: list index out of range'''
GATE_FAILURE = {"label": "Phase 1", "passed": False, "reason": "zoo: Raised an exception",
                "tasks": {"zoo": dataclasses.asdict(TaskRun(
                    "failed", 0.4, message="IndexError: list index out of range",
                    failure=failures.RAISED, traceback=GATE_TRACEBACK))}}


# -- what a page says ------------------------------------------------------------------------

def visible(page: str) -> str:
    """The page's text as a reader gets it: tags gone, entities decoded, spaces folded."""
    body = re.sub(r"<(style|title)\b.*?</\1>", " ", page, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def failure_page(run: Path) -> str:
    page = run / "output" / "detailed_results.html"
    assert page.is_file() and not page.is_symlink(), "the scorer wrote no page"
    assert not [p.name for p in (run / "output").iterdir() if p.suffix == ".part"]
    text = page.read_text(encoding="utf-8")
    assert STALE not in text, "the page left in the output was not replaced"
    return text


def assert_states(page: str, categories, reason: str, their_lines=(), ref: Path = None):
    """The failure, whether it counts, each category with its remedy, the reason, their
    lines; and nothing of the hidden references (their path; where no task is reported,
    none of their file names either)."""
    text = visible(page)
    assert "Your submission failed" in text and FAILED_NOTE in text, text[:2000]
    for failure in categories:
        assert f"{failure.title}: {failure.meaning}" in text, (failure.title, text[:3000])
        assert f"What to do: {failure.remedy}" in text, (failure.title, text[:3000])
    assert " ".join(reason.split()) in text, (reason, text[:3000])
    for line in their_lines:
        assert line in text, (line, text[:4000])
    if ref is None:
        return
    assert str(ref) not in page
    if '<section id="task-' not in page:      # a report may name the files a task accepts
        for path in ref.rglob("*"):
            assert path.name not in text, f"the page names the reference file {path.name}"


def with_stale_page(run: Path) -> Path:
    (run / "output" / "detailed_results.html").write_text(STALE)
    return run


# -- the phases ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def any_record(tmp_path_factory):
    """The evaluation phase, its scorer taking any run record (signed or not)."""
    root = tmp_path_factory.mktemp("any-record")
    prepare_phase(root, "evaluation")
    return root


@pytest.fixture(scope="module")
def code_phase(tmp_path_factory):
    """The evaluation phase as built: it scores only what its ingestion signed."""
    root = tmp_path_factory.mktemp("code-phase")
    prepare_phase(root, "evaluation", record=None)
    return root


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    """A code phase's ingestion and scoring programs, their data and their one key."""
    root = tmp_path_factory.mktemp("ingested")
    plan = prepare_ingestion(root, "development")
    assemble_scoring_program(plan, root / "scoring" / "program")
    shutil.copytree(root / "hidden_ref", root / "scoring" / "ref")
    return root


def ingest_then_score(prepared: Path, tmp_path: Path, code: str, metadata: str | None = None):
    """The real ingestion on ``code``, then the scorer on what it wrote, as the worker runs
    them one after the other; returns the scoring run and its result."""
    ingestion = new_ingestion_run(prepared, tmp_path / "ingestion", code)
    if metadata is not None:
        (ingestion / "run" / "program" / "metadata").write_text(metadata)
    ingested_run = run_ingestion(ingestion)
    output = ingestion / "run" / "output"
    assert (output / RECORD_NAME).is_file(), ingested_run.stdout[-3000:] + ingested_run.stderr[-3000:]
    run = with_stale_page(new_run(prepared / "scoring", tmp_path / "scoring"))
    shutil.copytree(output, run / "input" / "res", dirs_exist_ok=True)
    return run, run_scoring(run)


def gated(run: Path) -> Path:
    config = run / "program" / "scoring_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "gated": True}))
    return run


# -- each path -------------------------------------------------------------------------------

def test_a_submission_the_ingestion_refused(ingested, tmp_path):
    """Its metadata carries a command the platform would run outside the sandbox: nothing of
    it ran, the scorer exits SUBMISSION_REFUSED (Codabench scores whatever the ingestion's
    exit status)."""
    run, result = ingest_then_score(ingested, tmp_path, RAISES, "command: python3 evil.py\n")
    assert result.returncode == SUBMISSION_REFUSED, result.stderr
    record = read_run_record(run / "input" / "res" / RECORD_NAME)
    codes = {failures.of_run(task.status, task.failure) for task in record.tasks.values()}
    assert record.refused and len(codes) == 1
    assert_states(failure_page(run), [failures.BY_CODE[codes.pop()]],
                  f"the ingestion refused the submission: {record.refused}",
                  ref=run / "input" / "ref")


def test_code_that_raised_names_their_own_line(ingested, tmp_path):
    run, result = ingest_then_score(ingested, tmp_path, RAISES)
    assert result.returncode == NOTHING_SCORED, result.stderr[-3000:]
    page = failure_page(run)
    own = re.search(r'File "[^"]*submission\.py", line 3, in _fit', visible(page))
    assert own, visible(page)[:4000]
    assert_states(page, [failures.BY_CODE[failures.RAISED]], "no task could be scored",
                  [own.group(0), "RuntimeError: diverged on purpose"], ref=run / "input" / "ref")


@pytest.mark.parametrize("record", ["none", "unsigned"])
def test_a_record_refused_in_a_code_phase(code_phase, tmp_path, record):
    """Prediction files, or a record nobody signed, where the phase scores its own runs."""
    run = with_stale_page(new_run(code_phase, tmp_path / "run"))
    (run / "input" / "res" / "wine_probs.csv").write_text("0.5,0.5\n")
    if record == "unsigned":
        write_run_record(run / "input" / "res" / RECORD_NAME,
                         RunRecord({"wine": TaskRun("ok", 1.0, prediction="final")}))
    result = run_scoring(run)
    assert result.returncode == NOTHING_SCORED, result.stderr[-3000:]
    assert_states(failure_page(run), [failures.BY_CODE[failures.WRONG_PHASE]],
                  "no task could be scored", ref=run / "input" / "ref")


def test_files_whose_code_never_ran_in_a_gated_phase(code_phase, tmp_path):
    run = with_stale_page(gated(new_run(code_phase, tmp_path / "run")))
    (run / "input" / "res" / "wine_probs.csv").write_text("0.5,0.5\n")
    result = run_scoring(run)
    assert result.returncode == rules.RULE_FAILED, result.stderr[-3000:]
    assert_states(failure_page(run), [failures.BY_CODE[failures.WRONG_PHASE]],
                  "In a phase with a gate the submission fails rather than finishing with the "
                  "worst scores", ref=run / "input" / "ref")


def test_a_gate_not_passed_names_the_gate_tasks_own_line(any_record, tmp_path):
    run = with_stale_page(new_run(any_record, tmp_path / "run"))
    write_run_record(run / "input" / "res" / RECORD_NAME,
                     RunRecord({}, rules={"gate": GATE_FAILURE}))
    result = run_scoring(run)
    assert result.returncode == rules.RULE_FAILED, result.stderr[-3000:]
    assert_states(failure_page(run), [failures.BY_CODE[failures.RAISED]],
                  "your code did not complete the tasks of Phase 1",
                  ['File "/tmp/staging/tasks/zoo/program/complexity.py", line 5, in _measure',
                   "IndexError: list index out of range"], ref=run / "input" / "ref")
    assert "linalg.py" not in visible(failure_page(run))


def test_a_gate_not_passed_without_a_category_is_the_rules(any_record, tmp_path):
    """Every gate task ended, but the kind's own test of them failed: no category of a run
    applies, the rule's own does."""
    run = with_stale_page(new_run(any_record, tmp_path / "run"))
    ended = {"zoo": dataclasses.asdict(TaskRun("ok", 2.0, prediction="final"))}
    gate = {**GATE_FAILURE, "reason": "zoo: 3 networks not measured", "tasks": ended}
    write_run_record(run / "input" / "res" / RECORD_NAME, RunRecord({}, rules={"gate": gate}))
    result = run_scoring(run)
    assert result.returncode == rules.RULE_FAILED, result.stderr[-3000:]
    assert_states(failure_page(run), [RULE_FAULT], "zoo: 3 networks not measured")


def test_nothing_to_score_in_a_results_phase(any_record, tmp_path):
    run = with_stale_page(new_run(any_record, tmp_path / "run"))
    result = run_scoring(run)
    assert result.returncode == NOTHING_SCORED, result.stderr[-3000:]
    assert_states(failure_page(run), [failures.BY_CODE[failures.NOTHING]],
                  "no task could be scored", ref=run / "input" / "ref")


@pytest.mark.parametrize("broken", ["reference", "config"])
def test_an_organizers_error_says_they_must_fix_it_and_nothing_of_the_data(any_record,
                                                                          tmp_path, broken):
    run = with_stale_page(new_run(any_record, tmp_path / "run"))
    if broken == "reference":
        (run / "input" / "ref" / "wine_probs.npy").unlink()
    else:
        config = run / "program" / "scoring_config.json"
        raw = json.loads(config.read_text())
        raw["columns"][0]["statistic"] = "median"
        config.write_text(json.dumps(raw))
    result = run_scoring(run)
    assert result.returncode == 1 and "the organizer must fix" in result.stderr
    page = failure_page(run)
    assert_states(page, [ORGANIZERS_FAULT], "the scoring program stopped before it scored "
                  "your submission", ref=run / "input" / "ref")
    assert "wine_probs" not in page and "median" not in page and "Traceback" not in page


def test_an_internal_error_replaces_the_report_written_before_it(any_record, tmp_path):
    """The report is written, then writing the detailed results fails (a folder holds their
    name): the page says the program failed, not what the half-done report said."""
    run = new_run(any_record, tmp_path / "run")
    (run / "output" / "detailed_results.json").mkdir()
    result = run_scoring(run)
    assert result.returncode == 2 and "internal error in the scoring program" in result.stderr
    page = failure_page(run)
    assert_states(page, [INTERNAL_FAULT], "the scoring program stopped before it scored your "
                  "submission", ref=run / "input" / "ref")
    assert "penalised" not in visible(page) and "IsADirectoryError" not in page


@pytest.mark.parametrize("planted", ["link", "folder"])
def test_a_planted_page_is_replaced_not_written_through(any_record, tmp_path, planted):
    run = new_run(any_record, tmp_path / "run")
    elsewhere = tmp_path / "elsewhere.html"
    elsewhere.write_text(STALE)
    page = run / "output" / "detailed_results.html"
    if planted == "link":
        page.symlink_to(elsewhere)
    else:
        (page / "inner").mkdir(parents=True)
    assert run_scoring(run).returncode == NOTHING_SCORED
    failure_page(run)
    assert elsewhere.read_text() == STALE


# -- as participants see them ----------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    instance = browser_or_skip()
    yield instance
    instance.close()


@pytest.fixture(scope="module")
def screenshots(request) -> Path:
    shutil.rmtree(PAGES, ignore_errors=True)      # no stale pictures of older runs
    PAGES.mkdir(parents=True)
    report_artifacts(request.config, PAGES)
    return PAGES


def seen(browser: Browser, run: Path, picture: Path) -> str:
    """The page opened on its own (CodaLab's link, Codabench's frame), its text folded."""
    page = run / "output" / "detailed_results.html"
    return " ".join(browser.visit(page.as_uri(), picture).split())


def test_failure_pages_read_right_in_a_browser(browser, screenshots, ingested, any_record,
                                               tmp_path):
    raised, result = ingest_then_score(ingested, tmp_path / "raised", RAISES)
    assert result.returncode == NOTHING_SCORED
    gate = new_run(any_record, tmp_path / "gate")
    write_run_record(gate / "input" / "res" / RECORD_NAME,
                     RunRecord({}, rules={"gate": GATE_FAILURE}))
    organizers = new_run(any_record, tmp_path / "organizers")
    (organizers / "input" / "ref" / "wine_probs.npy").unlink()
    assert [run_scoring(run).returncode for run in (gate, organizers)] == [rules.RULE_FAILED, 1]
    cases = {"raised": (raised, failures.BY_CODE[failures.RAISED],
                        ["submission.py\", line 3, in _fit", "RuntimeError: diverged on purpose"]),
             "gate": (gate, failures.BY_CODE[failures.RAISED],
                      ["complexity.py\", line 5, in _measure",
                       "IndexError: list index out of range"]),
             "organizers": (organizers, ORGANIZERS_FAULT, [])}
    for name, (run, failure, their_lines) in cases.items():
        text = seen(browser, run, screenshots / f"{name}.png")
        for shown in ("Your submission failed", f"{failure.title}:", failure.remedy,
                      FAILED_NOTE, *their_lines):
            assert shown in text, (name, shown, text[:3000])
        assert "&#x27;" not in text and "&quot;" not in text and "<strong>" not in text

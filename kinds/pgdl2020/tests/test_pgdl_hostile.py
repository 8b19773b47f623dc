"""Issue 24 on PGDL 2020: hostile or broken participant code and files, through the real
programs. A ``.predict`` file that is not one flat object of float64 numbers (a huge integer,
nesting thousands deep) penalises its task with the file, line and expectation named, never a
traceback; a zoo where no network got a value is recorded failed, not ok, and penalised; and
whatever one call of ``complexity()`` raises (SystemExit, KeyboardInterrupt, any
BaseException) or returns (a boolean, a huge int, nan, inf, a string) costs that network
only. Each ingestion test runs as root and as Codabench runs it (no capabilities)."""
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from kinds.kind import kind
from bundle.phase_data import stage_input_data, stage_reference_data
from bundle.phase_plan import phase_plan
from bundle.programs import assemble_ingestion_program, assemble_scoring_program
from bundle.spec import load_spec
from ingestion_harness import TEST_LIMITS, kind_plan, new_kind_run, prepare_kind, run_ingestion
from test_pgdl_kind import own_spec, write_own_zoo
from kinds.pgdl2020.runtime.formats import read_model_configs
from scoring_harness import new_run, read_unscored, run_scoring
from scoring_program.scorer.main import NOTHING_SCORED

SETTINGS = [pytest.param(False, id="root"), pytest.param(True, id="no-capabilities")]
can_drop = os.geteuid() == 0 and shutil.which("setpriv")


def _setting(unprivileged: bool) -> None:
    if unprivileged and not can_drop:
        pytest.skip("needs root and util-linux setpriv to drop capabilities")


# --- the scorer on a results phase ----------------------------------------------------------

@pytest.fixture(scope="module")
def results_phase(tmp_path_factory):
    """The public phase's scoring program and references (one task, digits_mlp)."""
    root = tmp_path_factory.mktemp("pgdl-public")
    plan = phase_plan(load_spec(kind("pgdl2020").DEFAULT_SPEC), "public",
                      code_submission=False)
    assemble_scoring_program(plan, root / "program")
    stage_reference_data(plan, root / "ref")
    (task,) = plan.tasks
    return root, task.name, read_model_configs(next((root / "ref").glob("*model_configs.json")))


MARK = "__VALUE__"
DEPTH = 50_000          # far past Python's recursion limit
HOSTILE_FILES = {       # the value put in place of the second network's, and what is expected
    "an integer of 5000 digits": ("1" + "0" * 5000, r"model {model}: expected a finite "
                                  r"number, found 1000.*\(5001 characters\), beyond the range"),
    "an integer of 400 digits": ("9" * 400, r"model {model}: expected a finite number, found "
                                 r"9999.*\(400 characters\)"),
    "an array nested deep": ("[" * DEPTH + "]" * DEPTH, r"column \d+: expected a number as "
                             r"the value of '{model}', found an array"),
    "an object nested deep": ('{"a": ' * DEPTH + "1" + "}" * DEPTH, r"column \d+: expected a "
                              r"number as the value of '{model}', found an object"),
}


def _predict_text(ids, value: str) -> str:
    """A PGDL .predict file (sorted keys, indent 4), the second network's value replaced."""
    text = json.dumps({model: MARK if k == 1 else float(k) for k, model in enumerate(ids)},
                      indent=4, sort_keys=True)
    return text.replace(json.dumps(MARK), value)


def _score_results(results_phase, tmp_path, text: str):
    root, task, _ = results_phase
    run = new_run(root, tmp_path / "run")
    (run / "input" / "res" / f"{task}.predict").write_text(text)
    return run, run_scoring(run)


@pytest.mark.parametrize("case", HOSTILE_FILES)
def test_a_hostile_predict_file_penalises_its_task_naming_file_and_line(results_phase,
                                                                         tmp_path, case):
    _, task, zoo = results_phase
    value, expected = HOSTILE_FILES[case]
    text = _predict_text(zoo.ids, value)
    run, result = _score_results(results_phase, tmp_path, text)
    log = result.stdout + result.stderr
    # the phase's one task penalised: nothing scored, the submission fails
    assert result.returncode == NOTHING_SCORED and "Traceback" not in log, log[-3000:]
    line = text[:text.index(value)].count("\n") + 1
    pattern = (rf"task {task} penalised: Wrote invalid output: {task}\.predict: line {line}\b.*"
               + expected.format(model=zoo.ids[1]))
    assert re.search(pattern, log), log[-3000:]
    scores = read_unscored(run)
    assert scores[f"{task}_cmi"] == 0.0 and scores[f"{task}_kendall_tau"] == -1.0


def test_a_nested_file_instead_of_an_object_is_refused_at_line_one(results_phase, tmp_path):
    _, task, _ = results_phase
    run, result = _score_results(results_phase, tmp_path, "[" * DEPTH + "]" * DEPTH)
    log = result.stdout + result.stderr
    assert result.returncode == NOTHING_SCORED and "Traceback" not in log, log[-3000:]
    assert (f"task {task} penalised: Wrote invalid output: {task}.predict: line 1 column 1: "
            "expected a JSON object "
            "{model_id: value}, found '['") in log


# --- the ingestion of a code phase, then its scorer -----------------------------------------

@pytest.fixture(scope="module")
def code_phase(tmp_path_factory):
    """Phase 1's ingestion program, data and scoring program (one zoo of 32 networks)."""
    root = tmp_path_factory.mktemp("pgdl-phase1")
    plan = prepare_kind(root, "pgdl2020")
    assemble_scoring_program(kind_plan("pgdl2020"), root / "scoring_program")
    (task,) = plan.tasks
    return root, task.name


@pytest.fixture(scope="module")
def small_code_phase(tmp_path_factory):
    """code_phase's programs and data for a zoo of 4 networks (an organizer's own,
    test_pgdl_kind.py's, which the build takes): for what holds whatever a zoo's size where
    each network costs the ingestion a fresh process (every one dies), 4 processes, not 32."""
    root = tmp_path_factory.mktemp("pgdl-small")
    write_own_zoo(root / "data")
    plan = phase_plan(load_spec(own_spec(root), root / "data"), "only", code_submission=True)
    assemble_ingestion_program(plan, root / "ingestion_program", TEST_LIMITS)
    stage_input_data(plan, root / "input")
    stage_reference_data(plan, root / "hidden_ref")
    kind("pgdl2020").sample_code_submission(root / "sample")
    assemble_scoring_program(plan, root / "scoring_program")
    (task,) = plan.tasks
    return root, task.name


def _ingest(code_phase, tmp_path, code: str, unprivileged: bool):
    _setting(unprivileged)
    root, task = code_phase
    run = new_kind_run(root, tmp_path / "run", files={"complexity.py": code})
    result = run_ingestion(run, unprivileged=unprivileged)
    output = run / "run" / "output"
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    record = json.loads((output / "ingestion_record.json").read_text())["tasks"][task]
    return run, record, result.stdout + result.stderr


def _score_failed_ingestion(code_phase, run: Path, tmp_path: Path):
    """The real scorer on what the ingestion wrote, as the worker runs it next: the phase's
    one task failed, so nothing is scored and the submission fails; the report's values."""
    root, _ = code_phase
    scoring = tmp_path / "scoring"
    shutil.copytree(root / "scoring_program", scoring / "program")
    shutil.copytree(run / "hidden_ref", scoring / "input" / "ref")
    shutil.copytree(run / "run" / "output", scoring / "input" / "res")
    for folder in ("output", "temp"):
        (scoring / folder).mkdir()
    result = run_scoring(scoring)
    assert result.returncode == NOTHING_SCORED, result.stdout[-3000:] + result.stderr[-3000:]
    return read_unscored(scoring), result.stdout + result.stderr


def _zoo_ids(code_phase):
    root, task = code_phase
    return read_model_configs(next((root / "hidden_ref").glob("*model_configs.json"))).ids


EVERY_PROCESS_DIES = '''
import os
def complexity(model, dataset):
    os._exit(3)
'''


@pytest.mark.slow
@pytest.mark.parametrize("unprivileged", SETTINGS)
def test_a_zoo_where_every_network_crashed_is_recorded_failed(small_code_phase, tmp_path,
                                                               unprivileged):
    code_phase = small_code_phase       # a process a network: the 4-network zoo
    run, record, log = _ingest(code_phase, tmp_path, EVERY_PROCESS_DIES, unprivileged)
    ids = _zoo_ids(code_phase)
    assert record["units"]["failed"] == list(ids), log[-3000:]
    assert record["status"] == "failed" and record["prediction"] is None, record
    assert record["message"].startswith(
        f"none of the {len(ids)} units got a value ({len(ids)} failed); the first error: "
        f"{ids[0]}: exited with code 3 before returning predictions"), record["message"]
    _, task = code_phase
    assert not (run / "run" / "output" / f"{task}.npy").exists()
    scores, scored = _score_failed_ingestion(code_phase, run, tmp_path)
    assert (f"task {task} penalised: Raised an exception: training run failed: none of the "
            f"{len(ids)}") in scored
    assert scores[f"{task}_cmi"] == 0.0


def _some_die_the_rest_no_value(ids) -> str:
    """The first network's process dies; in the fresh one every call returns something that
    is not a finite number."""
    return f'''
import os
def complexity(model, dataset):
    if model.id == {ids[0]!r}:
        os._exit(3)
    return float("nan") if model.id == {ids[1]!r} else "big"
'''


@pytest.mark.parametrize("unprivileged", SETTINGS)
def test_a_zoo_split_between_processes_with_no_value_is_recorded_failed(code_phase, tmp_path,
                                                                          unprivileged):
    ids = _zoo_ids(code_phase)
    run, record, log = _ingest(code_phase, tmp_path, _some_die_the_rest_no_value(ids),
                               unprivileged)
    assert record["units"]["failed"] == [ids[0]], log[-3000:]
    assert record["status"] == "failed" and record["prediction"] is None, record
    assert record["message"].startswith(
        f"none of the {len(ids)} units got a value (1 failed, {len(ids) - 1} finished without "
        f"one); the first error: {ids[0]}: exited with code 3"), record["message"]
    _, task = code_phase
    scores, scored = _score_failed_ingestion(code_phase, run, tmp_path)
    assert (f"task {task} penalised: Raised an exception: training run failed: none of the "
            f"{len(ids)}") in scored
    assert scores[f"{task}_cmi"] == 0.0


# What complexity() does on one network -> what that network's line on stderr says.
HOSTILE_CALLS = {
    "sys.exit(4)": "raised SystemExit: 4",
    "raise KeyboardInterrupt": "raised KeyboardInterrupt",
    "raise Odd('odd one')": "raised Odd: odd one",
    "raise Unprintable()": "raised Unprintable",
    "return numpy.bool_(True)": "returned the boolean True, not a number",
    "return True": "returned the boolean True, not a number",
    "return 10 ** 5000": "returned an integer of about 5001 digits, which float() refused",
    "return math.inf": "returned inf, not a finite number",
    "return -math.inf": "returned -inf, not a finite number",
    "return math.nan": "returned nan, not a finite number",
    "return 'abc'": "returned str 'abc', not a number",
    "return NoFloat()": "returned an object of type NoFloat, which float() refused "
                        "(SystemExit: from __float__)",
}
PRELUDE = '''
import math, sys
import numpy
class Odd(BaseException):
    pass
class Unprintable(Exception):
    def __str__(self):
        raise Odd("from __str__")
class NoFloat:
    def __float__(self):
        raise SystemExit("from __float__")
'''


def _hostile_calls(ids) -> tuple[str, dict[str, str]]:
    """One hostile behaviour per network from the second on; the others measure normally."""
    chosen = dict(zip(ids[1:], HOSTILE_CALLS))
    branches = "".join(f"    if model.id == {model!r}:\n        {action}\n"
                       for model, action in chosen.items())
    code = (PRELUDE + "def complexity(model, dataset):\n" + branches
            + "    return float(sum((w ** 2).sum() for w in model.weights))\n")
    return code, {model: HOSTILE_CALLS[action] for model, action in chosen.items()}


@pytest.mark.parametrize("unprivileged", SETTINGS)
def test_sys_exit_and_bad_values_cost_only_their_network(code_phase, tmp_path, unprivileged):
    ids = _zoo_ids(code_phase)
    code, reasons = _hostile_calls(ids)
    run, record, log = _ingest(code_phase, tmp_path, code, unprivileged)
    _, task = code_phase
    assert record["status"] == "ok" and record["prediction"] == "final", log[-3000:]
    assert record["units"]["failed"] == [] and record["units"]["not_reached"] == []
    values = np.load(run / "run" / "output" / f"{task}.npy")
    unmeasured = {model for model, value in zip(ids, values) if np.isnan(value)}
    assert unmeasured == set(reasons) and np.isfinite(values).sum() == len(ids) - len(reasons)
    stderr = (run / "run" / "output" / f"{task}_stderr.txt").read_text()
    for model, reason in reasons.items():
        assert f"[{model}] complexity() {reason}" in stderr, (model, stderr[-3000:])
    assert f"{len(reasons)} of {len(ids)} networks have no measure" in record["message"]


# --- the .predict reader on its own ---------------------------------------------------------

IDS = ("model_1", "model_2")


@pytest.mark.parametrize("text, message", [
    ('{\n "model_1": 1,\n "model_2": 2,\n "model_1": 3\n}',
     r"line 4: keys 'model_1' and 'model_1' are the same model \(model_1; the first is on "
     r"line 2\)"),
    ('{\n "model_1": 1,\n "model_2": 2\n}\n{}', r"line 5 column 1: expected nothing after the "
     r"object's closing '}', found '{'"),
    ('{\n "model_1" 1,\n "model_2": 2\n}', r"line 2 column 12: expected ':' after the key "
     r"'model_1', found '1'"),
    ('{\n "model_1": 1\n "model_2": 2\n}', r"line 3 column 2: expected ',' or '}' after the "
     r"value of 'model_1', found '\"'"),
    ('{\n "model_1": 1,\n "model_2": 2,\n}', r"line 4 column 1: expected a model id in double "
     r"quotes, found '}'"),
    ('{\n "model_1": 1,\n "model_2": "2\n}', r"line 3 column 15: expected a number as the value "
     r"of 'model_2': Invalid control character$"),
    ('{\n "model_1": 1,\n "model_2": 1e999\n}', r"line 3: model model_2: expected a finite "
     r"number, found 1e999, beyond the range of a float64"),
    ('{\n "model_1": 1,\n "model_2": [2]\n}', r"line 3 column 13: expected a number as the "
     r"value of 'model_2', found an array"),
    ('', r"line 1 column 1: expected a JSON object \{model_id: value\}, found the end of the "
     r"file"),
])
def test_predict_errors_name_the_line(tmp_path, text, message):
    from runtime.formats import FormatError
    from kinds.pgdl2020.runtime.formats import read_predict
    path = tmp_path / "task.predict"
    path.write_text(text)
    with pytest.raises(FormatError, match=re.escape(str(path)) + ": " + message):
        read_predict(path, IDS)


def test_predict_reads_integers_as_float64_and_whitespace_anywhere(tmp_path):
    from kinds.pgdl2020.runtime.formats import read_predict
    path = tmp_path / "task.predict"
    path.write_text('\r\n\t{ "2" :\n-12 , "model_1":9007199254740993 }  \n')
    assert read_predict(path, IDS).tolist() == [9007199254740992.0, -12.0]

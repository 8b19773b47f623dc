"""The scoring program as a subprocess, with the worker's exact command and folder layout, on
label_accuracy's phases (the core tests' kind, plans.py). BDL's metrics, checks and sd columns
through the same program are kinds/bdl2021/tests/test_bdl_scoring_program.py's."""
import json
import re

import numpy as np
import pytest

from bundle.leaderboard import phase_columns
from runtime.formats import RECORD_NAME, RunRecord, TaskRun, write_matrix, write_run_record
from scoring_harness import new_run, prepare_phase, read_scores, run_scoring, submit
from scoring_program.scorer.main import NOTHING_SCORED

KIND = "label_accuracy"
SCORES_LINE = re.compile(r"[A-Za-z0-9_]+: -?[0-9]+\.[0-9]{10}")


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory):
    """The evaluation phase (code: a time column per task) with a budget of 60 s a task."""
    root = tmp_path_factory.mktemp("evaluation")
    return root, prepare_phase(root, "evaluation", kind=KIND)


def good_predictions(plan):
    """Each task's hidden test labels themselves: every metric at its best."""
    return {f"{task.name}_labels.csv":
            np.loadtxt(task.folder / f"{task.name}_test_labels.csv", ndmin=1).reshape(-1, 1)
            for task in plan.tasks}


@pytest.fixture
def run(evaluation, tmp_path):
    return new_run(evaluation[0], tmp_path / "run")


def test_good_submission_scores_every_column_of_the_spec(evaluation, run):
    root, plan = evaluation
    submit(run, good_predictions(plan))
    result = run_scoring(run)
    assert result.returncode == 0, result.stderr
    lines = (run / "output" / "scores.txt").read_text().splitlines()
    assert all(SCORES_LINE.fullmatch(line) for line in lines), lines
    expected_keys = [c.key for c in phase_columns(plan) if not c.computed]
    assert [line.split(":")[0] for line in lines] == expected_keys
    scores = read_scores(run)
    assert scores["wine_accuracy"] == 1.0 and scores["iris_balanced_accuracy"] == 1.0
    assert scores["weighted_loss"] == 0.0
    assert scores["wine_train_seconds"] == 60.0     # no ingestion record: the whole budget
    html = (run / "output" / "detailed_results.html").read_text()
    assert '<section id="task-wine">' in html and "Confusion matrix" in html


def test_same_inputs_give_byte_identical_scores(evaluation, run, tmp_path):
    root, plan = evaluation
    submit(run, good_predictions(plan))
    first = (run_scoring(run), (run / "output" / "scores.txt").read_bytes())
    second_run = new_run(root, tmp_path / "again")
    submit(second_run, good_predictions(plan))
    run_scoring(second_run)
    assert (second_run / "output" / "scores.txt").read_bytes() == first[1]


def test_a_missing_task_gets_worst_values_and_the_rest_is_scored(evaluation, run):
    root, plan = evaluation
    submit(run, good_predictions(plan), skip={"wine"})
    result = run_scoring(run)
    assert result.returncode == 0
    scores = read_scores(run)
    assert scores["wine_accuracy"] == 0.0 and scores["wine_balanced_accuracy"] == 0.0
    assert scores["iris_accuracy"] == 1.0
    assert ("task wine penalised: Wrote nothing: wine: expected exactly one of wine_labels.csv, "
            "wine_labels.txt, wine_labels.npy at the root of the submission, found 0"
            ) in result.stderr
    html = (run / "output" / "detailed_results.html").read_text()
    assert "expected exactly one of wine_labels.csv" in html


def test_files_nested_in_a_folder_are_not_scored(evaluation, run):
    """(BDL's scorer also says where it found them: its own test.)"""
    root, plan = evaluation
    res = run / "input" / "res"
    (res / "my_submission").mkdir()
    for name, array in good_predictions(plan).items():
        write_matrix(res / "my_submission" / name, array)
    result = run_scoring(run)
    # nothing at the root: no task scored, the submission fails (and uses up no submission)
    assert result.returncode == NOTHING_SCORED
    assert ("wine: expected exactly one of wine_labels.csv, wine_labels.txt, wine_labels.npy at "
            "the root of the submission, found 0" in result.stderr)
    assert not (run / "output" / "scores.txt").exists()
    details = json.loads((run / "output" / "detailed_results.json").read_text())
    assert "at the root of the submission, found 0" in details["tasks"]["wine"]["penalty"]


def _line(text: str, index: int, new: str) -> str:
    """``text`` with its line ``index`` (0-based) replaced by ``new``."""
    lines = text.splitlines()
    lines[index] = new
    return "\n".join(lines) + "\n"


# wine_labels.csv as write_matrix writes it: 53 rows of one number (e.g. 1.000000000000000000e+00);
# a first line that is not a number reads as a header, so the bad token is on line 2
@pytest.mark.parametrize("mutate, message", [
    (lambda text: _line(text, 1, text.splitlines()[1].replace("e+", "x+")), r"wine_labels\.csv, line 2, column 1: expected a number, found '[0-9.]+x\+[0-9]+'"),
    (lambda text: text.replace("\n", "\nabc ", 3), r"wine_labels\.csv, line 2, column 1: expected a number, found 'abc'"),
    (lambda text: "\n".join(text.splitlines()[:-1]) + "\n", r"wrong number of rows: expected 53 rows"),
    (lambda text: text.replace("\n", " 0.0\n", 1), r"line 2 has 1 column, expected 2 \(as on line 1\)"),
    (lambda text: _line(text, 1, "nan"), r"line 2, column 1: expected a finite number, found 'nan'"),
    (lambda text: _line(text, 0, "-inf"), r"line 1, column 1: expected a finite number, found '-inf'"),
    (lambda text: "\0\0binary", r"binary content"),
    (lambda text: "", r"is empty"),
])
def test_malformed_files_are_penalised_with_file_line_and_column(evaluation, run, mutate, message):
    root, plan = evaluation
    res = submit(run, good_predictions(plan))
    target = res / "wine_labels.csv"
    target.write_text(mutate(target.read_text()))
    result = run_scoring(run)
    assert result.returncode == 0
    assert re.search(message, result.stderr), result.stderr
    assert read_scores(run)["wine_accuracy"] == 0.0


def test_comma_separated_with_header_and_npy_are_accepted(evaluation, run):
    root, plan = evaluation
    predictions = good_predictions(plan)
    res = run / "input" / "res"
    wine = predictions["wine_labels.csv"]
    (res / "wine_labels.csv").write_text(
        "label\n" + "\n".join(f"{int(row[0])}" for row in wine))
    np.save(res / "iris_labels.npy", predictions["iris_labels.csv"])
    result = run_scoring(run)
    assert result.returncode == 0 and "penalised" not in result.stderr, result.stderr
    assert read_scores(run)["wine_accuracy"] == read_scores(run)["iris_accuracy"] == 1.0


def test_ingestion_record_failures_timeouts_and_times(evaluation, run, tmp_path):
    root, plan = evaluation
    res = submit(run, good_predictions(plan), skip={"wine"})
    write_run_record(res / RECORD_NAME, RunRecord({
        "wine": TaskRun("failed", 3.5, message="ZeroDivisionError in fit()", exit_code=1),
        "iris": TaskRun("timed_out", 60.2, prediction="anytime")}))
    result = run_scoring(run)
    assert result.returncode == 0
    # a record of before the categories: its status gives one
    assert ("task wine penalised: Raised an exception: training run failed: ZeroDivisionError "
            "in fit()") in result.stderr
    # iris ran out of time after writing its prediction: that prediction is scored (BDL's
    # report says so too: its own test)
    assert "task iris penalised" not in result.stderr
    scores = read_scores(run)
    assert scores["iris_accuracy"] == 1.0 and scores["wine_accuracy"] == 0.0
    # wine crashed after 3.5 s: no prediction, so the worst time (the 60 s budget), not the
    # best, on every column of the leaderboard (BDL's sd columns too: its own test)
    assert scores["wine_train_seconds"] == 60.0
    # a task that finished gets the time it took
    timed = new_run(root, tmp_path / "timed")
    res = submit(timed, good_predictions(plan))
    write_run_record(res / RECORD_NAME, RunRecord({
        "iris": TaskRun("ok", 12.25, prediction="final"),
        "wine": TaskRun("ok", 30.0, prediction="final")}))
    assert run_scoring(timed).returncode == 0
    assert read_scores(timed)["iris_train_seconds"] == 12.25


def test_nothing_usable_fails_the_submission_with_every_reason(evaluation, run):
    """No task scored: the scorer exits non-zero, so both platforms mark the submission
    Failed and it counts toward no limit; the report still gives every task's reason."""
    result = run_scoring(run)
    assert result.returncode == NOTHING_SCORED, result.stderr
    for task in ("iris", "wine"):
        assert f"task {task} penalised" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("not scored: no task could be scored")
    assert "failed submissions do not count toward the limits" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (run / "output" / "scores.txt").exists()
    assert not (run / "output" / "scores.json").exists()
    report = (run / "output" / "detailed_results.html").read_text()
    assert "no task could be scored" in report
    details = json.loads((run / "output" / "detailed_results.json").read_text())
    assert set(details["tasks"]) == {"iris", "wine"}
    assert all(entry["penalty"] for entry in details["tasks"].values())


def test_a_track_of_one_failed_task_is_penalised_as_a_whole_phase_would_be(tmp_path):
    """One task (a track's, as BDL's light track), and it failed: nothing is scored, so the
    submission fails, as a phase's would with every task failed; the report keeps the worst
    values and the reason."""
    prepare_phase(tmp_path / "light", "evaluation", tasks={"iris"}, kind=KIND)
    run = new_run(tmp_path / "light", tmp_path / "run")
    write_run_record(run / "input" / "res" / RECORD_NAME, RunRecord({
        "iris": TaskRun("failed", 0.13, message="ValueError in predict()", exit_code=1)}))
    result = run_scoring(run)
    assert result.returncode == NOTHING_SCORED, result.stderr
    assert ("task iris penalised: Raised an exception: training run failed: "
            "ValueError") in result.stderr
    assert not (run / "output" / "scores.txt").exists()
    details = json.loads((run / "output" / "detailed_results.json").read_text())
    assert set(details["tasks"]) == {"iris"}
    task = details["tasks"]["iris"]
    assert task["penalty"].startswith("training run failed")
    assert task["metrics"]["accuracy"]["value"] == 0.0
    assert task["metrics"]["balanced_accuracy"]["value"] == 0.0
    # no scores file to read the worst time from: a failed task's time column (the budget,
    # never 0.13 s) is checked where other tasks score, test_ingestion_record_failures_...


def test_broken_config_is_reported_for_the_organizer(evaluation, run):
    config = run / "program" / "scoring_config.json"
    raw = json.loads(config.read_text())
    raw["columns"][0]["statistic"] = "median"
    config.write_text(json.dumps(raw))
    result = run_scoring(run)
    assert result.returncode == 1
    assert "scoring stopped, the organizer must fix" in result.stderr
    assert "statistic: expected one of" in result.stderr and "Traceback" not in result.stderr


def test_missing_reference_is_reported_for_the_organizer(evaluation, run):
    (run / "input" / "ref" / "wine_test_labels.npy").unlink()
    result = run_scoring(run)
    assert result.returncode == 1
    assert "reference data of task wine" in result.stderr and "does not exist" in result.stderr


def test_wrong_arguments_print_usage(evaluation, run):
    import subprocess
    from scoring_harness import image_python
    result = subprocess.run([image_python(), str(run / "program" / "score.py")],
                            capture_output=True, text=True)
    assert result.returncode == 2 and "usage: score.py INPUT_DIR OUTPUT_DIR" in result.stderr


def test_development_phase_scores_its_own_columns(tmp_path):
    plan = prepare_phase(tmp_path / "dev", "development", kind=KIND)
    run = new_run(tmp_path / "dev", tmp_path / "run")
    submit(run, good_predictions(plan))
    assert run_scoring(run).returncode == 0
    assert list(read_scores(run)) == [c.key for c in phase_columns(plan) if not c.computed]
    assert "train_seconds" not in " ".join(read_scores(run))


def test_parallel_and_sequential_scoring_agree_to_the_byte(evaluation, run, tmp_path, monkeypatch):
    root, plan = evaluation
    submit(run, good_predictions(plan), skip={"wine"})
    assert run_scoring(run).returncode == 0
    parallel = (run / "output" / "scores.txt").read_bytes()
    sequential_run = new_run(root, tmp_path / "sequential")
    submit(sequential_run, good_predictions(plan), skip={"wine"})
    monkeypatch.setenv("SCORING_WORKERS", "1")
    assert run_scoring(sequential_run).returncode == 0
    assert (sequential_run / "output" / "scores.txt").read_bytes() == parallel


def test_two_files_for_one_task_are_refused(evaluation, run):
    root, plan = evaluation
    res = submit(run, good_predictions(plan))
    np.save(res / "wine_labels.npy", good_predictions(plan)["wine_labels.csv"])
    result = run_scoring(run)
    assert ("task wine penalised: Wrote invalid output: wine: expected exactly one of "
            "wine_labels.csv, wine_labels.txt, wine_labels.npy at the root of the submission, "
            "found 2") in result.stderr


def test_a_huge_prediction_file_is_penalised_without_being_read(evaluation, run):
    """1 GiB (sparse: no disk used) where 53 x 1 numbers are expected: the task is penalised
    from the file's size, the other task is scored, and the run ends normally."""
    root, plan = evaluation
    res = submit(run, good_predictions(plan), skip={"wine"})
    with open(res / "wine_labels.csv", "wb") as stream:
        stream.truncate(2**30)
    result = run_scoring(run)
    assert result.returncode == 0, result.stderr
    assert ("task wine penalised: Wrote invalid output: wine_labels.csv: 1,073,741,824 "
            "bytes") in result.stderr
    assert "refused without reading it" in result.stderr
    scores = read_scores(run)
    assert scores["wine_accuracy"] == 0.0 and scores["iris_accuracy"] == 1.0

"""The scoring program as a subprocess, with the worker's exact command and folder layout."""
import json
import re

import numpy as np
import pytest

from bundle.leaderboard import phase_columns
from runtime.formats import RECORD_NAME, RunRecord, TaskRun, write_matrix, write_run_record
from kinds.bdl2021.runtime.formats import read_chain_probs, read_chain_samples
from scoring_harness import new_run, prepare_phase, read_scores, run_scoring
from scoring_program.scorer.main import NOTHING_SCORED
from kinds.bdl2021.kind import files

SCORES_LINE = re.compile(r"[A-Za-z0-9_]+: -?[0-9]+\.[0-9]{10}")


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory):
    root = tmp_path_factory.mktemp("evaluation")
    return root, prepare_phase(root, "evaluation")


def good_predictions(plan):
    """Each task's first HMC chain: a submission as good as one more HMC run."""
    out = {}
    for task in plan.tasks:
        if task.task_type == "classification":
            out[f"{task.name}_probs.csv"] = read_chain_probs(files(task).chain_reference)[0]
        else:
            out[f"{task.name}_samples.csv"] = read_chain_samples(files(task).chain_reference)[0]
    return out


def submit(run, predictions, skip=(), replace=None):
    res = run / "input" / "res"
    for name, array in predictions.items():
        if name.split("_probs")[0].split("_samples")[0] in skip:
            continue
        write_matrix(res / name, array)
    for name, text in (replace or {}).items():
        (res / name).write_text(text)
    return res


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
    assert scores["wine_agreement"] > 0.95 and scores["digits_shift_total_variation"] < 0.05
    assert scores["diabetes_gap_w2"] >= scores["diabetes_gap_w1"] > 0
    assert scores["wine_train_seconds"] == 60.0     # no ingestion record: the whole budget
    html = (run / "output" / "detailed_results.html").read_text()
    assert "digits_shift" in html and "gaussian_noise_2" in html


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
    submit(run, good_predictions(plan), skip={"wine", "diabetes_gap"})
    result = run_scoring(run)
    assert result.returncode == 0
    scores = read_scores(run)
    assert scores["wine_agreement"] == 0.0 and scores["wine_total_variation"] == 1.0
    assert scores["diabetes_gap_w2"] > 1.0     # the cap: 10 reference standard deviations
    assert scores["breast_cancer_agreement"] > 0.95
    assert ("task wine penalised: Wrote nothing: wine: no prediction file; expected "
            "wine_probs.csv") in result.stderr
    html = (run / "output" / "detailed_results.html").read_text()
    assert "no prediction file" in html


def test_uniform_predictions_score_worse_than_hmc_chain(evaluation, run):
    root, plan = evaluation
    predictions = good_predictions(plan)
    for name, array in predictions.items():
        if name.endswith("_probs.csv"):
            predictions[name] = np.full_like(array, 1.0 / array.shape[1])
    submit(run, predictions)
    assert run_scoring(run).returncode == 0
    scores = read_scores(run)
    assert scores["digits_shift_total_variation"] > 0.5
    assert scores["weighted_loss"] > 0.3


def test_files_nested_in_a_folder_are_found_and_explained(evaluation, run):
    root, plan = evaluation
    res = run / "input" / "res"
    (res / "my_submission").mkdir()
    for name, array in good_predictions(plan).items():
        write_matrix(res / "my_submission" / name, array)
    result = run_scoring(run)
    # nothing at the root: no task scored, the submission fails (and uses up no submission)
    assert result.returncode == NOTHING_SCORED
    assert ("found at my_submission/wine_probs.csv: zip the files themselves, not the folder"
            in result.stderr)
    assert not (run / "output" / "scores.txt").exists()
    details = json.loads((run / "output" / "detailed_results.json").read_text())
    assert "found at my_submission/wine_probs.csv" in details["tasks"]["wine"]["penalty"]


@pytest.mark.parametrize("mutate, message", [
    (lambda text: text.replace("e-", "x-", 1), r"wine_probs\.csv, line 1, column 1: expected a number, found '[0-9.]+x-[0-9]+'"),
    (lambda text: text.replace("\n", "\nabc ", 3), r"wine_probs\.csv, line 2, column 1: expected a number, found 'abc'"),
    (lambda text: "\n".join(text.splitlines()[:-1]) + "\n", r"wrong number of rows: expected 60 rows"),
    (lambda text: text.replace("\n", " 0.0\n", 1), r"line 2 has 3 columns, expected 4|line 1 has 4 columns"),
    (lambda text: text.replace(text.split()[4], "nan", 1), r"line 2, column 2: expected a finite number, found 'nan'"),
    (lambda text: text.replace(text.split()[2], "-inf", 1), r"line 1, column 3: expected a finite number, found '-inf'"),
    (lambda text: "\0\0binary", r"binary content"),
    (lambda text: "", r"is empty"),
])
def test_malformed_files_are_penalised_with_file_line_and_column(evaluation, run, mutate, message):
    root, plan = evaluation
    res = submit(run, good_predictions(plan))
    target = res / "wine_probs.csv"
    target.write_text(mutate(target.read_text()))
    result = run_scoring(run)
    assert result.returncode == 0
    assert re.search(message, result.stderr), result.stderr
    assert read_scores(run)["wine_agreement"] == 0.0


def test_probability_checks(evaluation, run):
    root, plan = evaluation
    predictions = good_predictions(plan)
    wine = predictions["wine_probs.csv"].copy()
    wine[4] = [1.2, -0.2, 0.0]
    digits = predictions["digits_shift_probs.csv"].copy()
    digits[10] *= 1.01                              # off by 1e-2: rejected
    cancer = predictions["breast_cancer_probs.csv"].copy()
    cancer[:3] *= 1.0004                            # off by 4e-4: renormalised, with a note
    predictions.update({"wine_probs.csv": wine, "digits_shift_probs.csv": digits,
                        "breast_cancer_probs.csv": cancer})
    submit(run, predictions)
    result = run_scoring(run)
    assert "wine_probs.csv, line 5, column 2: expected a probability >= 0" in result.stderr
    assert "digits_shift_probs.csv, line 11: probabilities sum to 1.01" in result.stderr
    assert "breast_cancer_probs.csv: renormalised 3 rows" in result.stderr
    scores = read_scores(run)
    assert scores["breast_cancer_agreement"] > 0.95 and scores["wine_agreement"] == 0.0


def test_regression_with_wrong_sample_count(evaluation, run):
    root, plan = evaluation
    predictions = good_predictions(plan)
    predictions["diabetes_gap_samples.csv"] = predictions["diabetes_gap_samples.csv"][:, :100]
    submit(run, predictions)
    result = run_scoring(run)
    assert "expected 148 rows (test points) x 1000 columns (samples)" in result.stderr


def test_comma_separated_with_header_and_npy_are_accepted(evaluation, run):
    root, plan = evaluation
    predictions = good_predictions(plan)
    res = submit(run, {k: v for k, v in predictions.items() if not k.startswith(("wine", "breast"))})
    wine = predictions["wine_probs.csv"]
    (res / "wine_probs.csv").write_text(
        "class_0,class_1,class_2\n" + "\n".join(",".join(f"{v:.17g}" for v in row) for row in wine))
    np.save(res / "breast_cancer_probs.npy", predictions["breast_cancer_probs.csv"])
    result = run_scoring(run)
    assert result.returncode == 0 and "penalised" not in result.stderr, result.stderr


def test_ingestion_record_failures_timeouts_and_times(evaluation, run):
    root, plan = evaluation
    res = submit(run, good_predictions(plan), skip={"wine"})
    write_run_record(res / RECORD_NAME, RunRecord({
        "wine": TaskRun("failed", 3.5, message="ZeroDivisionError in fit()", exit_code=1),
        "digits_shift": TaskRun("timed_out", 60.2, prediction="anytime"),
        "breast_cancer": TaskRun("ok", 12.25, prediction="final"),
        "diabetes_gap": TaskRun("ok", 30.0, prediction="final")}))
    result = run_scoring(run)
    assert result.returncode == 0
    # a record of before the categories: its status gives one
    assert ("task wine penalised: Raised an exception: training run failed: ZeroDivisionError "
            "in fit()") in result.stderr
    assert "the last intermediate prediction it wrote was scored" in result.stderr
    scores = read_scores(run)
    assert scores["breast_cancer_train_seconds"] == 12.25
    assert scores["digits_shift_agreement"] > 0.9 and scores["wine_agreement"] == 0.0
    # wine crashed after 3.5 s: no prediction, so the worst time (the 60 s budget), not the
    # best, and the worst sd (the metric's range), on every column of the leaderboard.
    assert scores["wine_train_seconds"] == 60.0
    assert scores["wine_agreement_std"] == 1.0 and scores["wine_total_variation_std"] == 1.0


def test_nothing_usable_fails_the_submission_with_every_reason(evaluation, run):
    """No task scored: the scorer exits non-zero, so both platforms mark the submission
    Failed and it counts toward no limit; the report still gives every task's reason."""
    result = run_scoring(run)
    assert result.returncode == NOTHING_SCORED, result.stderr
    for task in ("breast_cancer", "digits_shift", "wine", "diabetes_gap"):
        assert f"task {task} penalised" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("not scored: no task could be scored")
    assert "failed submissions do not count toward the limits" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (run / "output" / "scores.txt").exists()
    assert not (run / "output" / "scores.json").exists()
    report = (run / "output" / "detailed_results.html").read_text()
    assert "no task could be scored" in report
    details = json.loads((run / "output" / "detailed_results.json").read_text())
    assert set(details["tasks"]) == {"breast_cancer", "digits_shift", "wine", "diabetes_gap"}
    assert all(entry["penalty"] for entry in details["tasks"].values())


def test_light_track_penalises_its_only_task_as_the_extended_track_does(tmp_path):
    """One task, and it failed: nothing is scored, so the submission fails, as the extended
    track's would with every task failed; the report keeps the worst values and the reason."""
    prepare_phase(tmp_path / "light", "evaluation", tasks={"breast_cancer"})
    run = new_run(tmp_path / "light", tmp_path / "run")
    write_run_record(run / "input" / "res" / RECORD_NAME, RunRecord({
        "breast_cancer": TaskRun("failed", 0.13, message="ValueError in predict()", exit_code=1)}))
    result = run_scoring(run)
    assert result.returncode == NOTHING_SCORED, result.stderr
    assert ("task breast_cancer penalised: Raised an exception: training run failed: "
            "ValueError") in result.stderr
    assert not (run / "output" / "scores.txt").exists()
    details = json.loads((run / "output" / "detailed_results.json").read_text())
    task = details["tasks"]["breast_cancer"]
    assert task["penalty"].startswith("training run failed")
    assert task["metrics"]["agreement"]["value"] == 0.0
    assert task["metrics"]["total_variation"]["value"] == 1.0
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
    (run / "input" / "ref" / "wine_probs.npy").unlink()
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
    plan = prepare_phase(tmp_path / "dev", "development")
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
    np.save(res / "wine_probs.npy", good_predictions(plan)["wine_probs.csv"])
    result = run_scoring(run)
    assert "wine: several prediction files (wine_probs.csv, wine_probs.npy); submit exactly one" \
        in result.stderr


def test_a_huge_prediction_file_is_penalised_without_being_read(evaluation, run):
    """1 GiB (sparse: no disk used) where 60 x 3 numbers are expected: the task is penalised
    from the file's size, the other tasks are scored, and the run ends normally."""
    root, plan = evaluation
    res = submit(run, good_predictions(plan), skip={"wine"})
    with open(res / "wine_probs.csv", "wb") as stream:
        stream.truncate(2**30)
    result = run_scoring(run)
    assert result.returncode == 0, result.stderr
    assert ("task wine penalised: Wrote invalid output: wine_probs.csv: 1,073,741,824 "
            "bytes") in result.stderr
    assert "refused without reading it" in result.stderr
    scores = read_scores(run)
    assert scores["wine_agreement"] == 0.0 and scores["breast_cancer_agreement"] > 0.9

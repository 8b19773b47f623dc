"""The scoring program as a subprocess, with the worker's exact command and folder layout, on
BDL's evaluation phase: its metrics against the HMC chains (one more chain scores as well as
HMC, a uniform prediction worse), its probability and sample-count checks, its sd columns
for a task that failed, the anytime prediction its report names, and how its reading of a
prediction file names one found in a folder or given twice. Everything else the scorer does
is tests/test_scoring_program.py's, on label_accuracy."""
import json
import re

import numpy as np
import pytest

from bundle.leaderboard import phase_columns
from scoring_program.scorer.main import NOTHING_SCORED
from runtime.formats import RECORD_NAME, RunRecord, TaskRun, write_matrix, write_run_record
from kinds.bdl2021.runtime.formats import read_chain_probs, read_chain_samples
from scoring_harness import new_run, prepare_phase, read_scores, run_scoring
from scoring_harness import submit as harness_submit
from kinds.bdl2021.kind import files

SCORES_LINE = re.compile(r"[A-Za-z0-9_]+: -?[0-9]+\.[0-9]{10}")


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory):
    root = tmp_path_factory.mktemp("evaluation")
    return root, prepare_phase(root, "evaluation", kind="bdl2021")


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
    """BDL's prediction files: <task>_probs (classification) or <task>_samples (regression)."""
    return harness_submit(run, predictions, skip, replace, suffixes=("_probs", "_samples"))


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


def test_two_files_for_one_task_are_refused(evaluation, run):
    root, plan = evaluation
    res = submit(run, good_predictions(plan))
    np.save(res / "wine_probs.npy", good_predictions(plan)["wine_probs.csv"])
    result = run_scoring(run)
    assert "wine: several prediction files (wine_probs.csv, wine_probs.npy); submit exactly one" \
        in result.stderr

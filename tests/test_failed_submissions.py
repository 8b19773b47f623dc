"""The workers' 2026 rule (issue 27, item 4): a scoring program that exits non-zero fails the
submission, and failed submissions count toward no limit (codabench_v2.md §3.7, codalab_v1.md
§4.7). A submission of which no task can be scored must fail rather than use a submission up
with the worst scores; one with a failed task among scored ones is Finished, that task
penalised. Shown on the dry run of the development phase, two tasks of prediction files."""
import sys
import zipfile
from pathlib import Path

import pytest

from bundle.platforms import platform as platform_named
from local_runs import run_local
from test_build import cli, kit_member, zip_without

REPO = Path(__file__).resolve().parents[1]
BUNDLES = {"codabench": "bdl-approx-inference-development-codabench.zip",
           "codalab": "bdl-approx-inference-development.zip"}


@pytest.fixture(scope="module")
def bundles(default_bundles):
    """The development phase's bundle per platform, from the test run's shared builds of the
    default spec (conftest.py)."""
    found = {platform: default_bundles[platform] / name for platform, name in BUNDLES.items()}
    for bundle in found.values():
        assert bundle.is_file(), bundle
    return found


def test_the_kits_sample_scores_every_task(bundles, tmp_path):
    """The premise of the two tests below: the sample holds one file per task, three tasks."""
    sample = kit_member(bundles["codabench"], "sample_result_submission.zip", tmp_path / "s.zip")
    assert sorted(zipfile.ZipFile(sample).namelist()) == [
        "digits_cnn_probs.csv", "digits_probs.csv", "iris_probs.csv"]


@pytest.mark.parametrize("platform, title", [("codabench", "Codabench"),
                                             ("codalab", "CodaLab v1.5")])
def test_nothing_scorable_fails_the_submission_in_the_dry_run(bundles, tmp_path, platform,
                                                               title):
    archive = tmp_path / "notes_only.zip"
    with zipfile.ZipFile(archive, "w") as opened:
        opened.writestr("notes.txt", "my predictions are elsewhere\n")
    result = cli("--check", str(bundles[platform]), "--submission", str(archive))
    assert result.returncode == 1 and "dry run FAILED" in result.stdout, result.stdout
    assert (f"scoring: failed\nexit 5: the submission fails on {title}, its scoring program "
            "having exited non-zero (failed submissions do not count toward the limits)"
            ) in result.stderr, result.stderr
    assert "not scored: no task could be scored" in result.stderr
    for task in ("digits", "digits_cnn", "iris"):     # every reason reaches the participant
        assert f"task {task} penalised: " in result.stderr
    assert "Traceback" not in result.stderr
    assert "leaderboard" not in result.stdout.split("-" * 62)[1].split("not reproduced")[0]


@pytest.mark.parametrize("platform", BUNDLES)
def test_a_failed_task_of_several_is_finished_with_that_task_penalised(bundles, tmp_path,
                                                                       platform):
    sample = kit_member(bundles[platform], "sample_result_submission.zip", tmp_path / "s.zip")
    without_iris = zip_without(sample, "iris_probs.csv", tmp_path / "without_iris.zip")
    result = cli("--check", str(bundles[platform]), "--submission", str(without_iris))
    assert result.returncode == 0 and "dry run passed" in result.stdout, \
        result.stdout + result.stderr
    table = result.stdout.split("-" * 62)[1].split("not reproduced")[0]
    assert "note: task iris: " in table and "iris_probs.csv" in table
    assert "the submission is Finished, this task with the worst value of every column" in table
    if platform == "codabench":                 # a Finished submission ranks
        assert "leaderboard" in table
    scores, full = (scored(bundles[platform], platform, zip_) for zip_ in (without_iris, sample))
    assert scores["iris_agreement"] == 0.0 and scores["iris_total_variation"] == 1.0
    assert full["iris_agreement"] > 0.0
    digits = {key: value for key, value in full.items() if key.startswith("digits_")}
    assert digits and {key: scores[key] for key in digits} == digits    # scored as ever


def scored(bundle: Path, platform: str, submission: Path) -> dict:
    """The scores of the dry run's one scoring step, which must be Finished."""
    steps = platform_named(platform).dry_run(bundle, sys.executable, submission)
    scoring = [step for step in steps if step.step == "scoring"]
    assert [step.status for step in scoring] == ["ok"], [step.detail for step in scoring]
    return scoring[0].scores


@pytest.mark.parametrize("platform", BUNDLES)
def test_a_local_run_with_nothing_scorable_ends_with_the_scorers_reason(tmp_path, platform):
    predictions = tmp_path / "predictions"
    predictions.mkdir()
    (predictions / "notes.txt").write_text("my predictions are elsewhere\n")
    result = run_local("--platform", platform, "--phase", "development", "--results",
                       str(predictions), "--out", str(tmp_path / "run"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert ("error: scoring failed (exit 5), so the platform would fail the submission: not "
            "scored: no task could be scored") in result.stderr, result.stderr
    for task in ("digits", "iris"):
        assert f"task {task} penalised: " in result.stderr
    assert "Traceback" not in result.stderr

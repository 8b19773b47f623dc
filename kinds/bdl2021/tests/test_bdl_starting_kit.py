"""The starting kit as a participant uses it: run_local on the baselines, zips, the results table.

The kit's run_local.py runs in the default competition's kit as ``python -m bundle.local_run``
runs it (local_runs.run_local): the phase's kit built by local_run's own ``build_kit``, then
the kit's run_local started in the kit's folder with this Python. Here the kit of a phase (and
budget, and platform) is built once for the module and every run takes its own --out folder:
local_run's command line, which builds a kit a run and costs a Python start and its imports,
has tests of its own (test_run_local_stop, test_custom_kit's spec runs)."""
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]
KIT = REPO / "starting_kit"
BDL_KIT = REPO / "kinds" / "bdl2021" / "kit"
EMBEDDED = REPO / "kinds" / "bdl2021" / "reference" / "embedded"
# The kit's tools import the worker model as their sibling, as in a built kit.
sys.path[:0] = [str(KIT), str(REPO / "bundle" / "platforms"), str(BDL_KIT)]

from baseline_results import METHODS, RESULTS_FILE  # noqa: E402
from submission_zip import SubmissionLayoutError, check_zip, make_zip  # noqa: E402

from bundle.local_run import KIT_RUN_LOCAL, build_kit, organizer_spec  # noqa: E402
from local_runs import assert_scored_as_the_platform_would, scores_of  # noqa: E402


@pytest.fixture(scope="module")
def kits(tmp_path_factory):
    """``kits(phase=None, platform="codabench", budget=None)``: the default competition's kit
    of ``phase`` (None: the spec's first) for ``platform``, every task's budget ``budget``
    seconds (None: the spec's), as ``python -m bundle.local_run [--phase P] [--platform X]
    [--budget B]`` builds it before running it: by local_run's ``build_kit``, once a module
    for each. Read only: a run writes in its own --out folder."""
    spec = organizer_spec()
    built = {}

    def kit(phase: str | None = None, platform: str = "codabench",
            budget: float | None = None) -> Path:
        key = (phase or spec.phases[0].key, platform, budget)
        if key not in built:
            built[key] = build_kit(spec, key[0], tmp_path_factory.mktemp("kit") / "kit",
                                   platform, budget)
        return built[key]

    return kit


def run_local(kit: Path, *args, timeout=600) -> subprocess.CompletedProcess:
    """``python run_local.py ARGS`` in ``kit``, as bundle.local_run starts it (its run_kit:
    this Python, the kit's folder), its output captured as local_runs.run_local captures
    local_run's."""
    return subprocess.run([sys.executable, KIT_RUN_LOCAL, *map(str, args)], cwd=kit,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
@pytest.mark.parametrize("baseline", ["deep_ensemble", "sgld"])
@pytest.mark.parametrize("phase, tasks", [
    ("development", ["digits", "iris"]),
    ("evaluation", ["breast_cancer", "diabetes_gap", "digits_shift", "wine"])])
def test_baselines_run_end_to_end_with_finite_scores(baseline, phase, tasks, tmp_path, kits):
    """The README's command (``python -m bundle.local_run --baseline B --phase P --budget 4``
    runs the kit's ``run_local.py --code baselines/B.py`` in the phase's kit built with 4 s
    budgets), with a short budget to keep CI fast: every task scored as the platform would
    score it (``local_runs.assert_scored_as_the_platform_would``: within the budget where the
    predictive is quick, from the last checkpoint if a slow one ran past it on a loaded
    machine). What the baselines learn is tested on a virtual clock (test_bdl_more_baselines)."""
    result = run_local(kits(phase, budget=4.0), "--code", f"baselines/{baseline}.py",
                       "--out", tmp_path)
    code_phase = phase == "evaluation"
    assert_scored_as_the_platform_would(result, tasks, 4, training_time=code_phase)
    if not code_phase:          # a results phase: its leaderboard has no training time
        assert not any(key.endswith("_train_seconds") for key in scores_of(result.stdout))
    assert "detailed results: " in result.stdout
    assert (tmp_path / "scoring" / "run" / "output" / "detailed_results.html").is_file()


def test_results_phase_files_are_scored_against_public_references(tmp_path, kits):
    """Scored with the phase's own scorer: exactly its leaderboard's keys, no training time."""
    from bundle.phase_plan import phase_plan
    from bundle.leaderboard import phase_columns
    from bundle.spec import DEFAULT_SPEC, load_spec
    predictions = tmp_path / "predictions"
    predictions.mkdir()
    for task in ("iris", "digits", "digits_cnn"):
        chains = np.load(REPO / "kinds" / "bdl2021" / "reference" / "embedded" / task / f"{task}_chain_probs.npy")
        np.savetxt(predictions / f"{task}_probs.csv", chains[2])
    result = run_local(kits(), "--results", predictions, "--out", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    scores = scores_of(result.stdout)
    assert scores["iris_agreement"] > 0.9 and scores["digits_total_variation"] < 0.05
    plan = phase_plan(load_spec(DEFAULT_SPEC), "development", None)
    assert set(scores) == {c.key for c in phase_columns(plan) if not c.computed}


def test_zipping_the_folder_instead_of_its_contents_is_caught(tmp_path):
    folder = tmp_path / "my_submission"
    folder.mkdir()
    (folder / "submission.py").write_text("def predict(*args):\n    pass\n")
    wrong = tmp_path / "wrong.zip"
    with zipfile.ZipFile(wrong, "w") as archive:
        archive.write(folder / "submission.py", "my_submission/submission.py")
    with pytest.raises(SubmissionLayoutError, match="every file is inside my_submission/"):
        check_zip(wrong)
    right = tmp_path / "right.zip"
    assert make_zip(folder, right) == ["submission.py", "metadata"]
    assert check_zip(right, required=("submission.py",)) == ["submission.py", "metadata"]


def test_run_local_explains_a_nested_submission(tmp_path, kits):
    nested = tmp_path / "outer" / "inner"
    nested.mkdir(parents=True)
    (nested / "submission.py").write_text("def predict(*args):\n    pass\n")
    result = run_local(kits(), "--code", tmp_path / "outer", "--out", tmp_path / "run")
    assert result.returncode == 2
    assert "submission.py is at inner/submission.py, not at the root" in result.stderr


def test_committed_results_table_shows_baselines_beating_the_trivial_submission():
    table = json.loads(RESULTS_FILE.read_text())
    assert set(table["methods"]) == set(METHODS)
    from bundle.spec import DEFAULT_SPEC, load_spec
    spec = load_spec(DEFAULT_SPEC)
    assert set(table["tasks"]) == {task for phase in spec.phases for task in phase.tasks}
    for task, entry in table["tasks"].items():
        trivial = entry["methods"]["trivial"]["metrics"]
        for method in (m for m in METHODS if m != "trivial"):
            metrics = entry["methods"][method]["metrics"]
            assert entry["methods"][method]["penalty"] is None
            if "agreement" in metrics:
                assert metrics["agreement"]["value"] > trivial["agreement"]["value"], (task, method)
                assert metrics["total_variation"]["value"] < trivial["total_variation"]["value"]
            else:
                assert metrics["w2"]["value"] < trivial["w2"]["value"], (task, method)
                assert metrics["w1"]["value"] < trivial["w1"]["value"]
        for expected in entry["exact_posterior_expectation"].values():
            assert np.isfinite(expected["value"])


def test_committed_table_has_a_baseline_within_three_times_exact_on_every_mlp_task():
    """Issue 32: on every classification task whose declared network is the MLP, the best
    baseline's total variation is within 3x of the exact posterior's expectation, inside
    the task's budget. The CNN task is the stated exception (kinds/bdl2021/README.md: its
    budget holds about 1,200 numpy gradients, where 3x needs tens of thousands)."""
    table = json.loads(RESULTS_FILE.read_text())
    checked = 0
    for task, entry in table["tasks"].items():
        declaration = json.loads(next((EMBEDDED / task).glob("*_task.json")).read_text())
        if declaration["kind"] != "classification" or declaration["model"]["type"] != "mlp":
            continue
        exact = entry["exact_posterior_expectation"]["total_variation"]["value"]
        best = min(entry["methods"][m]["metrics"]["total_variation"]["value"]
                   for m in METHODS if m != "trivial")
        assert best < 3 * exact, (task, best, exact)
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize("files, message", [
    ({}, "holds no file to submit"),
    ({"breast_cancer_probs.csv": "0.5 0.5\n"}, "iris: no prediction file"),
])
def test_results_that_the_platform_would_not_score_fail_the_local_run(tmp_path, files, message,
                                                                      kits):
    predictions = tmp_path / "predictions"
    predictions.mkdir()
    for name, text in files.items():
        (predictions / name).write_text(text)
    result = run_local(kits(), "--results", predictions, "--out", tmp_path / "run")
    assert result.returncode != 0 and message in result.stderr
    assert "Traceback" not in result.stderr


def test_code_zip_without_metadata_fails_locally_as_on_codalab(tmp_path, kits):
    archive = tmp_path / "hand_made.zip"
    with zipfile.ZipFile(archive, "w") as opened:
        opened.write(BDL_KIT / "baselines" / "trivial.py", "submission.py")
        opened.write(BDL_KIT / "baselines" / "training.py", "training.py")
    # CodaLab's rule: without metadata a zip is taken for prediction files (Codabench runs it)
    result = run_local(kits(platform="codalab"), "--code", archive, "--out", tmp_path / "run")
    assert result.returncode == 1
    assert "no file named 'metadata'" in result.stderr and "Traceback" not in result.stderr


def test_a_task_that_fails_makes_the_local_run_fail(tmp_path, kits):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "submission.py").write_text(
        "import numpy as np\n\ndef predict(task, x_train, y_train, x_test, checkpoint):\n"
        "    if task.name == 'wine':\n        raise ValueError('no wine today')\n"
        "    if task.task_type == 'regression':\n"
        "        return np.zeros((task.n_test, task.num_samples))\n"
        "    return np.full((task.n_test, task.num_classes), 1 / task.num_classes)\n")
    result = run_local(kits("evaluation", budget=5.0), "--code", folder,
                       "--out", tmp_path / "run")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "wine: failed" in result.stderr and "no wine today" in result.stderr
    problems = result.stderr.split("would not score this as intended")[1]
    assert not any(task in problems for task in ("breast_cancer", "diabetes_gap", "digits_shift"))


def test_code_that_imports_a_module_it_does_not_ship_fails_locally_as_on_the_platform(tmp_path,
                                                                                       kits):
    """Nothing is added to the zip locally: the import fails here as it would there."""
    archive = tmp_path / "no_model.zip"
    with zipfile.ZipFile(archive, "w") as opened:
        opened.writestr("metadata", "description: forgot declared_model.py\n")
        opened.writestr("submission.py", "from declared_model import MLP\n\n"
                                         "def predict(task, *args):\n    return None\n")
    result = run_local(kits("evaluation", budget=5.0), "--code", archive,
                       "--out", tmp_path / "run")
    assert result.returncode == 1
    assert "No module named 'declared_model'" in result.stderr


@pytest.mark.parametrize("phase", ["development", "evaluation"])
def test_default_kit_guide_is_rendered_for_its_phase_with_the_committed_table(phase,
                                                                            default_bundles):
    """The default competition's kit: its tasks, its phase's commands, its baselines' table.
    The phase's (and track's) bundle of the default platform, of those built once a test run
    for every phase and track (conftest.py's default_bundles, which other files read too)."""
    from bundle.phase_plan import phase_plan
    from bundle.platforms import DEFAULT_PLATFORM
    from bundle.spec import DEFAULT_SPEC, load_spec
    from kit_guides import kit_of
    spec = load_spec(DEFAULT_SPEC)
    track = "extended" if phase == "evaluation" else None
    plan = phase_plan(spec, phase, track)
    (path,) = default_bundles[DEFAULT_PLATFORM].glob(
        f"*-{phase}{f'-{track}' if track else ''}-{DEFAULT_PLATFORM}.zip")
    with zipfile.ZipFile(path) as bundle:
        kit = kit_of(bundle, "starting_kit.zip")
    guide = kit["README.md"].decode()
    assert all(f"`{task.name}`" in guide for task in plan.tasks)
    assert "baseline_results.json" in kit and "not available" not in guide
    code = phase == "evaluation"
    assert ("python run_local.py --code submission.zip" in guide) == code
    assert ("python run_local.py --results predictions.zip" in guide) == (not code)
    assert "kinds/bdl2021" not in guide and "starting_kit/" not in guide

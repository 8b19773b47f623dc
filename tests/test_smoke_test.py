"""A phase's smoke test: code zipped with an empty SMOKE_TEST file runs on a small public slice
shaped like the phase's tasks (here Retina's stand-in of its final phase), never on the
phase's hidden tasks; the scorer reports the scores, writes no scores file and exits
SMOKE_TEST, so that both platforms fail the submission: it ranks nowhere and counts toward no
limit. The spec refuses a smoke test that could not mean that. A smoke test of named public
tasks, in a track, needs a kind whose kit publishes some tasks' references (BDL):
kinds/bdl2021/tests/test_bdl_smoke_test.py."""
import json
import shutil
import subprocess
import sys
import zipfile

import pytest
import yaml

from bundle.phase_plan import phase_plan
from bundle.phase_data import stage_input_data, stage_reference_data
from bundle.programs import assemble_ingestion_program, assemble_scoring_program
from bundle.spec import SpecError, load_spec
from kinds.kind import KINDS
from runtime import failures
from runtime.formats import RECORD_NAME
from runtime.rules import smoke_test
from ingestion_harness import TEST_LIMITS, run_then_score
from local_runs import REPO

SPEC = REPO / "kinds" / "retina" / "default_spec.yaml"
SMOKE = {"tasks": "stand_in", "budget_seconds": 5}
# Crashes on every task: the report names its category.
CRASHES = "def predict(task, x_train, y_train, x_test):\n    raise ValueError('no model yet')\n"


def spec_with(tmp_path, phase="final", **keys):
    raw = yaml.safe_load(SPEC.read_text())
    shutil.copyfile(SPEC.parent / raw["logo"], tmp_path / raw["logo"])
    raw["phases"][phase].update(keys)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """The final phase with a smoke test: its programs and data as the bundle holds them."""
    root = tmp_path_factory.mktemp("smoke")
    plan = phase_plan(load_spec(spec_with(root, smoke_test=SMOKE)), "final")
    assemble_ingestion_program(plan, root / "ingestion_program", TEST_LIMITS)
    assemble_scoring_program(plan, root / "scoring_program")
    stage_input_data(plan, root / "input")
    stage_reference_data(plan, root / "ref")
    KINDS["retina"].sample_code_submission(root / "sample")
    return root, plan


def _run(prepared, tmp_path, marker=True, code=None, smoke_inputs_only=False):
    """The ingestion, then the scorer, in the CodaLab worker's layout; (ingestion, scoring,
    the scorer's output). ``smoke_inputs_only``: the phase's own inputs are taken away, so
    that staging any of them would fail the run."""
    root, _ = prepared

    def prepare(folder):
        if smoke_inputs_only:
            for path in (folder / "input").iterdir():
                if path.name != smoke_test.FOLDER:
                    shutil.rmtree(path) if path.is_dir() else path.unlink()
        if code is not None:
            (folder / "program" / "submission.py").write_text(code)
        if marker:
            (folder / "program" / smoke_test.MARKER).write_text("")
    return run_then_score(tmp_path, root, root, root / "sample", prepare)


def test_a_smoke_submission_runs_and_scores_only_the_smoke_tasks(prepared, tmp_path):
    _, plan = prepared
    ingestion, scoring, output = _run(prepared, tmp_path, smoke_inputs_only=True)
    assert ingestion.returncode == 0, ingestion.stdout[-3000:] + ingestion.stderr[-3000:]
    assert "ok: training" in ingestion.stdout and "failed" not in ingestion.stdout
    res = tmp_path / "score" / "input" / "res"
    record = json.loads((res / RECORD_NAME).read_text())
    names = [task.name for task in plan.rules["smoke_test"].tasks]
    assert record["smoke_test"] == {"tasks": names} and sorted(record["tasks"]) == sorted(names)
    assert sorted(record["files"]) == sorted(f"smoke/{name}_predictions.npy" for name in names)
    assert not list(res.glob("*.npy"))         # nothing in the phase's own place
    assert "smoke test: your code runs on the smoke tasks only" in ingestion.stdout
    assert ingestion.stdout.count("of its 5 s budget") == len(names)    # the smoke budget
    assert scoring.returncode == smoke_test.SMOKE_TEST, scoring.stderr[-3000:]
    assert not (output / "scores.txt").exists() and not (output / "scores.json").exists()
    report = (output / "detailed_results.html").read_text()
    assert smoke_test.HEADING in report
    assert f"{smoke_test.HEADING}: 2 task(s)" in scoring.stderr
    assert "severity_test_auroc_in:" in scoring.stderr
    assert "counts toward no limit" in scoring.stderr


def test_a_crash_in_a_smoke_test_is_reported_with_its_category(prepared, tmp_path):
    ingestion, scoring, output = _run(prepared, tmp_path, code=CRASHES)
    assert ingestion.returncode == 0, ingestion.stderr[-3000:]
    assert scoring.returncode == smoke_test.SMOKE_TEST, scoring.stderr[-3000:]
    title = failures.title(failures.RAISED)
    assert f"penalised: {title}" in scoring.stderr and "no model yet" in scoring.stderr
    report = (output / "detailed_results.html").read_text()
    assert title in report and "no model yet" in report


def test_the_marker_in_a_phase_without_a_smoke_test_is_refused(tmp_path):
    root = tmp_path / "plain"
    plan = phase_plan(load_spec(SPEC), "final")
    assert plan.rules["smoke_test"] is None
    assemble_ingestion_program(plan, root / "ingestion_program", TEST_LIMITS)
    assemble_scoring_program(plan, root / "scoring_program")
    stage_input_data(plan, root / "input")
    stage_reference_data(plan, root / "ref")
    KINDS["retina"].sample_code_submission(root / "sample")
    ingestion, scoring, output = _run((root, plan), tmp_path)
    assert ingestion.returncode == 4 and "but this phase has none" in ingestion.stderr
    assert scoring.returncode == 4 and "but this phase has none" in scoring.stderr
    assert not (output / "scores.txt").exists()


@pytest.mark.parametrize("phase, smoke, message", [
    ("development", SMOKE, "phases.development.smoke_test: only a code phase can have a smoke "
                           "test"),
    ("final", {"tasks": ["severity_test"]}, "phases.final.smoke_test.tasks: ['severity_test'] "
                                            "are not public tasks"),
    ("final", {"tasks": ["severity_val"]}, "phases.final.smoke_test.tasks: ['severity_val'] "
                                           "are not public tasks"),
    ("final", {"tasks": "all"}, "phases.final.smoke_test"),
    ("final", {"budget_seconds": 400}, "phases.final.smoke_test: its run needs up to"),
])
def test_a_smoke_test_the_spec_cannot_mean_is_refused_naming_the_key(tmp_path, phase, smoke,
                                                                     message):
    with pytest.raises(SpecError) as error:
        load_spec(spec_with(tmp_path, phase, smoke_test=smoke))
    assert message in str(error.value)


def test_the_kit_tool_adds_the_marker_the_ingestion_reads(tmp_path):
    kit = tmp_path / "kit"
    kit.mkdir()
    shutil.copyfile(REPO / "starting_kit" / "submission_zip.py", kit / "submission_zip.py")
    shutil.copyfile(REPO / "bundle" / "platforms" / "worker.py", kit / "worker.py")
    KINDS["retina"].sample_code_submission(kit / "code")

    def zipped(*options):
        return subprocess.run([sys.executable, "submission_zip.py", "code/", *options],
                              cwd=kit, capture_output=True, text=True)
    made = zipped("smoke.zip", "--smoke")
    assert made.returncode == 0, made.stderr
    with zipfile.ZipFile(kit / "smoke.zip") as archive:     # the very name the ingestion reads
        assert archive.read(smoke_test.MARKER) == b""
    refused = zipped("r.zip", "--results", "--smoke")
    assert refused.returncode == 1 and "--smoke is for code" in refused.stderr
    assert not (kit / "r.zip").exists()


@pytest.mark.parametrize("platform", ["codabench", "codalab"])
def test_a_spec_with_a_smoke_test_builds_and_its_dry_run_sends_one(tmp_path, platform):
    spec = spec_with(tmp_path, smoke_test=SMOKE)
    built = subprocess.run([sys.executable, "build_bundle.py", "--config", str(spec), "--phase",
                            "final", "--platform", platform, "--out", str(tmp_path / "out"),
                            "--check"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    assert "smoke test" in built.stdout and "scored, then failed by the scorer (exit 6)" \
        in built.stdout
    assert "leakage check" in built.stdout
    bundle = next((tmp_path / "out").glob("*.zip"))
    with zipfile.ZipFile(bundle) as outer:
        evaluation = next(outer.read(name).decode() for name in outer.namelist()
                          if name.endswith("evaluation.html"))
        kit = zipfile.ZipFile(outer.open(next(n for n in outer.namelist()
                                              if n.endswith("starting_kit.zip"))))
    assert "Smoke test" in evaluation and "--smoke" in evaluation
    assert "submission_zip.py sample_code_submission/ smoke.zip --smoke" \
        in kit.read("README.md").decode()

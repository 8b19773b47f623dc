"""Code or results: each platform's rule, the kit's zip helper, and the dry run that uses both."""
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from bundle.platforms.worker import CODABENCH, CODALAB, dispatch_submission, zip_problems

REPO = Path(__file__).resolve().parents[1]
KIT = REPO / "starting_kit"
# The kit's tools import the worker model as their sibling, as in a built kit.
sys.path[:0] = [str(KIT), str(REPO / "bundle" / "platforms")]

from submission_zip import SubmissionLayoutError, make_zip  # noqa: E402

PREDICT = "def predict(task, x_train, y_train, x_test, checkpoint):\n    return None\n"


def folder_with(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "submission"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize("platform, files, runs_ingestion, copies, problem", [
    # CodaLab v1 (codalab_v1.md §4.1): no root metadata = prediction files, code never runs
    (CODALAB, {"submission.py": PREDICT}, False, True, "no file named 'metadata'"),
    (CODALAB, {"submission.py": PREDICT, "metadata": "description: mine\n"}, True, False, None),
    (CODALAB, {"submission.py": PREDICT, "metadata": "command: python submission.py\n"},
     True, False, "has a 'command'"),
    (CODALAB, {"submission.py": PREDICT, "metadata": "description: x\nauthor: bob\n"},
     True, False, "downloads every such value as a URL"),
    (CODALAB, {"submission.py": PREDICT, "metadata": "description: [unclosed\n"},
     False, False, "not valid YAML"),
    # Codabench v1.27 on (codabench_v2.md §3.4): ingestion always runs; the files are copied
    # over its output before scoring, metadata or not
    (CODABENCH, {"submission.py": PREDICT}, True, True, None),
    (CODABENCH, {"submission.py": PREDICT, "metadata": "description: mine\n"}, True, True, None),
    (CODABENCH, {"submission.py": PREDICT, "metadata": "description: ok\n",
                 "metadata.yaml": "command: python x.py\n"}, True, True, "metadata.yaml has a 'command'"),
])
def test_code_phase_dispatch_follows_each_worker(tmp_path, platform, files, runs_ingestion,
                                                 copies, problem):
    dispatch = dispatch_submission(folder_with(tmp_path, files), platform, has_ingestion=True)
    copied = dispatch.copies_to_output or dispatch.copied_over_predictions
    assert (dispatch.runs_ingestion, copied) == (runs_ingestion, copies)
    if problem is None:
        assert dispatch.ok, dispatch.problem
    else:
        assert problem in dispatch.problem


@pytest.mark.parametrize("files, code, problems", [
    # CodaLab would take it for prediction files, but the zip gets its metadata: no problem
    ({"submission.py": PREDICT}, True, []),
    # both sites read the same bad file: said once
    ({"submission.py": PREDICT, "metadata": "description: [unclosed\n"}, True, ["not valid YAML"]),
    ({"submission.py": PREDICT, "metadata": "command: python submission.py\n"}, True,
     ["has a 'command'"]),
    # v1.27 on: a results zip is copied over the (empty) prediction output, metadata or not
    ({"iris_probs.csv": "1 0 0\n", "metadata": "description: x\n"}, False, []),
    ({"iris_probs.csv": "1 0 0\n", "metadata": "command: python x.py\n"}, False,
     ["older than v1.27 starts it"]),
])
def test_the_zip_helper_asks_every_site_and_skips_what_its_added_metadata_fixes(
        tmp_path, files, code, problems):
    found = zip_problems(folder_with(tmp_path, files), code)
    assert len(found) == len(problems)
    assert all(expected in problem for expected, problem in zip(problems, found))


@pytest.mark.parametrize("platform, ok", [(CODALAB, True), (CODABENCH, False)])
def test_results_with_a_metadata_command_are_refused_for_codabench_only(tmp_path, platform, ok):
    """A Codabench server older than v1.27 starts the command instead of scoring the files."""
    folder = folder_with(tmp_path, {"iris_probs.csv": "1 0 0\n",
                                    "metadata": "command: python x.py\n"})
    dispatch = dispatch_submission(folder, platform, has_ingestion=False)
    assert dispatch.ok is ok
    if not ok:
        assert "must not hold a command in 'metadata'" in dispatch.problem


def test_code_zip_gets_a_description_only_metadata(tmp_path):
    folder = folder_with(tmp_path, {"submission.py": PREDICT, "helper.py": "X = 1\n"})
    names = make_zip(folder, tmp_path / "code.zip")
    with zipfile.ZipFile(tmp_path / "code.zip") as archive:
        assert sorted(archive.namelist()) == sorted(names) == ["helper.py", "metadata", "submission.py"]
        metadata = archive.read("metadata").decode()
    assert metadata.startswith("description:") and "command" not in metadata
    assert not (folder / "metadata").exists()          # the participant's folder is untouched
    unzipped = tmp_path / "unzipped"
    zipfile.ZipFile(tmp_path / "code.zip").extractall(unzipped)
    for platform in (CODALAB, CODABENCH):
        dispatch = dispatch_submission(unzipped, platform, has_ingestion=True)
        assert dispatch.ok and dispatch.runs_ingestion


@pytest.mark.parametrize("files, code, message", [
    ({"submission.py": PREDICT, "metadata": "command: python submission.py\n"}, None,
     "has a 'command:'"),
    ({"iris_probs.csv": "1 0 0\n", "metadata": "command: python x.py\n"}, None,
     "must not hold a command in 'metadata'"),
    ({}, False, "holds no file to submit"),
    ({"notes.txt": "x"}, True, "no submission.py at the root"),
])
def test_zip_helper_refuses_and_leaves_nothing_behind(tmp_path, files, code, message):
    folder = folder_with(tmp_path, files)
    destination = tmp_path / "out.zip"
    with pytest.raises(SubmissionLayoutError, match=message):
        make_zip(folder, destination, code=code)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["submission"]


def test_zip_helper_cli_says_what_it_added_and_fails_cleanly(tmp_path):
    folder = folder_with(tmp_path, {"submission.py": PREDICT})
    kit = tmp_path / "kit"                  # the tool next to the worker model, as in a kit
    kit.mkdir()
    for tool in (KIT / "submission_zip.py", REPO / "bundle" / "platforms" / "worker.py"):
        shutil.copyfile(tool, kit / tool.name)
    command = [sys.executable, str(kit / "submission_zip.py")]
    done = subprocess.run([*command, str(folder), str(tmp_path / "ok.zip")], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "added 'metadata'" in done.stdout
    (folder / "metadata").write_text("command: python submission.py\n")
    refused = subprocess.run([*command, str(folder), str(tmp_path / "bad.zip")],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "nothing was written" in refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "bad.zip").exists()


def test_zip_helper_refuses_code_importing_a_kit_module_it_does_not_hold(tmp_path, monkeypatch):
    import submission_zip
    baselines = tmp_path / "kit" / "baselines"             # as in the BDL kit
    baselines.mkdir(parents=True)
    for name in ("declared_model.py", "training.py", "sgld.py"):
        (baselines / name).write_text("")
    monkeypatch.setattr(submission_zip, "KIT_BASELINES", baselines)
    folder = folder_with(tmp_path, {"submission.py": "from declared_model import MLP\n" + PREDICT})
    with pytest.raises(SubmissionLayoutError, match="copy the kit's baselines/declared_model.py"):
        make_zip(folder, tmp_path / "out.zip")
    (folder / "declared_model.py").write_text("MLP = object\n")
    assert "declared_model.py" in make_zip(folder, tmp_path / "out.zip")


LABEL_SPEC = REPO / "kinds" / "label_accuracy" / "default_spec.yaml"
IMAGE_PYTHON = str(REPO / ".venv-image" / "bin" / "python")


def test_a_code_zip_in_a_codabench_results_phase_is_scored_as_its_files(tmp_path):
    """codalab/codabench 88fa830b, compute_worker/compute_worker.py: without an ingestion
    program the prediction step runs nothing (its output holds only the worker's metadata),
    and Run._copy_submission_to_input_res copies the zip over it before scoring: the scorer
    reads the code's files as predictions and finds none of the tasks'. (At c7dbc756 the
    step failed instead: 'Metadata file not found', then 'Bad or empty zip file'.)"""
    from bundle.platforms import platform
    built = subprocess.run([sys.executable, str(REPO / "build_bundle.py"), "--config",
                            str(LABEL_SPEC), "--phase", "development", "--platform", "codabench",
                            "--out", str(tmp_path / "out")], cwd=REPO, capture_output=True,
                           text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    code = folder_with(tmp_path, {"submission.py": PREDICT})
    make_zip(code, tmp_path / "code.zip")
    steps = platform("codabench").dry_run(next((tmp_path / "out").glob("*.zip")), IMAGE_PYTHON,
                                          tmp_path / "code.zip")
    outcome = {step.step: (step.status, step.detail) for step in steps}
    assert outcome["submission"] == ("ok", "") and "output" not in outcome
    assert outcome["scoring"][0] == "failed", outcome
    assert not any(step.scores for step in steps)


@pytest.mark.parametrize("platform", [CODABENCH, CODALAB])
def test_run_local_trains_code_zipped_for_a_results_phase(tmp_path, platform):
    """The same worker model decides the kit's local run of a code zip, the file one would
    upload: both sites take it for prediction files (above), and run_local trains the code
    instead, saying to upload the prediction files."""
    baseline = LABEL_SPEC.parent / "kit" / "baselines" / "nearest_centroid.py"
    make_zip(folder_with(tmp_path, {"submission.py": baseline.read_text()}), tmp_path / "code.zip")
    done = subprocess.run([sys.executable, "-m", "bundle.local_run", "--config",
                           str(LABEL_SPEC), "--phase", "development", "--platform", platform,
                           "--code", str(tmp_path / "code.zip"), "--out", str(tmp_path / "run")],
                          cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert "Traceback" not in output
    assert done.returncode == 0 and "this run trains your code" in output, output[-2000:]


@pytest.mark.parametrize("platform", [CODABENCH, CODALAB])
def test_code_not_zipped_is_trained_in_a_results_phase_on_either_platform(tmp_path, platform):
    """A baseline file (or a folder) is code to try, not the upload: the run trains it on the
    phase's tasks and says to upload the prediction files predictions_zip.py makes."""
    done = subprocess.run([sys.executable, "-m", "bundle.local_run", "--config",
                           str(LABEL_SPEC), "--phase", "development", "--platform", platform,
                           "--baseline", "nearest_centroid", "--out", str(tmp_path / "run")],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "this run trains your code" in output, output[-2000:]
    assert "predictions_zip.py makes from it, not a code zip" in output
    assert "'Metadata file not found'" not in output

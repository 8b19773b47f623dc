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
    # Codabench (codabench_v2.md §3.4): ingestion always runs; no metadata = files copied too
    (CODABENCH, {"submission.py": PREDICT}, True, True, None),
    (CODABENCH, {"submission.py": PREDICT, "metadata": "description: mine\n"}, True, False, None),
    (CODABENCH, {"submission.py": PREDICT, "metadata": "description: ok\n",
                 "metadata.yaml": "command: python x.py\n"}, True, False, "metadata.yaml has a 'command'"),
])
def test_code_phase_dispatch_follows_each_worker(tmp_path, platform, files, runs_ingestion,
                                                 copies, problem):
    dispatch = dispatch_submission(folder_with(tmp_path, files), platform, has_ingestion=True)
    assert (dispatch.runs_ingestion, dispatch.copies_to_output) == (runs_ingestion, copies)
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
    ({"iris_probs.csv": "1 0 0\n", "metadata": "description: x\n"}, False,
     ["neither runs nor copies"]),
])
def test_the_zip_helper_asks_every_site_and_skips_what_its_added_metadata_fixes(
        tmp_path, files, code, problems):
    found = zip_problems(folder_with(tmp_path, files), code)
    assert len(found) == len(problems)
    assert all(expected in problem for expected, problem in zip(problems, found))


@pytest.mark.parametrize("platform, ok", [(CODALAB, True), (CODABENCH, False)])
def test_results_with_a_metadata_file_break_on_codabench_only(tmp_path, platform, ok):
    folder = folder_with(tmp_path, {"iris_probs.csv": "1 0 0\n", "metadata": "description: x\n"})
    dispatch = dispatch_submission(folder, platform, has_ingestion=False)
    assert dispatch.ok is ok
    if not ok:
        assert "must not contain 'metadata'" in dispatch.problem and not dispatch.copies_to_output


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
    ({"iris_probs.csv": "1 0 0\n", "metadata": "description: x\n"}, None,
     "must not contain 'metadata'"),
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


def test_a_code_zip_in_a_codabench_results_phase_fails_as_the_worker_fails_it(tmp_path):
    """codalab/codabench c7dbc756, compute_worker/compute_worker.py: _run_program_directory
    neither runs nor copies a program whose metadata has no command, so /app/output is never
    made; start() has set the status to Scoring (which queues the scoring job) before
    push_output fails to write output/metadata ("Metadata file not found"); the scoring job's
    _get_bundle then fails on the prediction result that never came ("Bad or empty zip
    file", after 10 tries 20 s apart). Nothing is scored."""
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
    assert outcome["output"] == ("failed", "Metadata file not found")
    assert outcome["scoring"][0] == "failed"
    assert outcome["scoring"][1].startswith("Bad or empty zip file")
    assert not any(step.scores for step in steps)


@pytest.mark.parametrize("platform, refused", [(CODABENCH, True), (CODALAB, False)])
def test_run_local_says_what_the_worker_does_with_code_in_a_results_phase(tmp_path, platform,
                                                                          refused):
    """The same worker model decides the kit's local run of a code zip, the file one would
    upload: Codabench fails the zip (above); CodaLab takes it for prediction files, and
    run_local trains the code instead."""
    baseline = LABEL_SPEC.parent / "kit" / "baselines" / "nearest_centroid.py"
    make_zip(folder_with(tmp_path, {"submission.py": baseline.read_text()}), tmp_path / "code.zip")
    done = subprocess.run([sys.executable, "-m", "bundle.local_run", "--config",
                           str(LABEL_SPEC), "--phase", "development", "--platform", platform,
                           "--code", str(tmp_path / "code.zip"), "--out", str(tmp_path / "run")],
                          cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert "Traceback" not in output
    if refused:
        assert done.returncode != 0
        assert "'Metadata file not found'" in output and "'Bad or empty zip file'" in output
    else:
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

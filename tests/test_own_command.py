"""A submission that carries its own command (issue 24, item 3).

CodaLab's worker (and Codabench's before v1.27) starts the ``command`` of a submission's
metadata in a container of its own, next to the ingestion and outside its sandbox, with the
output folder writable (codalab_v1.md G20; codabench_v2.md §3.4). Such a submission is refused before anything of it runs, the record
says why and is signed, and a record the command writes itself is never accepted: not by the
ingestion of any kind, as root or without capabilities, nor by either platform's dry run.
"""
import shutil
import zipfile
from pathlib import Path

import pytest

from bundle.platforms import platform as platform_named
from runtime.formats.run_record import importer_key
from runtime.formats import RECORD_KEY_NAME, read_record_key, read_run_record, \
    signature_problem
from ingestion_harness import (KINDS, SETTINGS, needs_root, new_kind_run, prepare_kind,
                               run_ingestion, staging_root)
from scoring_harness import image_python

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]

# Waits for the ingestion to finish, then puts a record of its own making in the output, with
# predictions whose digests it lists: what a command beside the ingestion could do.
FORGE = """
import hashlib, json, os, sys, time
import numpy as np
output = sys.argv[1]
record = os.path.join(output, "ingestion_record.json")
for _ in range(6000):
    if os.path.exists(record):
        break
    time.sleep(0.05)
time.sleep(0.5)
files = {}
for name in ("iris", "digits"):
    path = os.path.join(output, name + "_probs.npy")
    np.save(path, np.full((10, 3), 1 / 3))
    files[name + "_probs.npy"] = hashlib.sha256(open(path, "rb").read()).hexdigest()
tasks = {name: {"status": "ok", "wall_seconds": 1.0, "prediction": "final"}
         for name in ("iris", "digits", "breast_cancer", "wine")}
json.dump({"format": "ingestion-record/1", "hardware": {}, "tasks": tasks, "files": files},
          open(record, "w"))
print("FORGED")
"""


@pytest.fixture(scope="module", params=KINDS)
def prepared(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"own-command-{request.param}")
    prepare_kind(root, request.param)
    return root


@needs_root
@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("name", ["metadata", "metadata.yaml"])
def test_a_submission_with_a_command_is_refused_before_it_runs(prepared, tmp_path, setting,
                                                               name):
    run = new_kind_run(prepared, tmp_path, {
        name: "description: mine\ncommand: python3 $program/forge.py $output\n",
        "forge.py": FORGE})
    result = run_ingestion(run, unprivileged=setting != "root")
    shutil.rmtree(staging_root(tmp_path), ignore_errors=True)
    assert result.returncode == 4, result.stdout + result.stderr
    assert (f"submission refused: Refused by the sandbox: your submission's {name} has a "
            "'command:'") in result.stderr
    output = run / "run" / "output"
    record = read_run_record(output / "ingestion_record.json")
    assert record.refused and "outside its sandbox" in record.refused
    assert all(task.status == "failed" and not task.has_prediction
               for task in record.tasks.values())
    key = read_record_key(run / "hidden_ref")
    assert signature_problem(output / "ingestion_record.json", key) is None
    assert not any(line.startswith("[") for line in result.stdout.splitlines()), "a task ran"


@pytest.mark.parametrize("text", [
    "{command: python3 x.py}\n", "'command': python3 x.py\n", "description: a\ncommand: ''\n",
    "command:\n  python3 x.py\n"])
def test_every_spelling_of_a_command_is_found(tmp_path, text):
    from ingestion_program.ingest.submission_metadata import own_command_problem
    (tmp_path / "metadata").write_text(text)
    assert own_command_problem(tmp_path) is not None
    (tmp_path / "metadata").write_text("description: my command-line tool\n")
    assert own_command_problem(tmp_path) is None


def _with_command(sample: Path, destination: Path) -> Path:
    """The kit's sample code submission, plus a metadata command that forges the output."""
    with zipfile.ZipFile(sample) as source, zipfile.ZipFile(destination, "w") as copy:
        for member in source.namelist():
            if member not in ("metadata", "metadata.yaml"):
                copy.writestr(member, source.read(member))
        copy.writestr("metadata", "description: mine\ncommand: python3 $program/forge.py $output\n")
        copy.writestr("forge.py", FORGE)
    return destination


def _sample(bundle: Path, folder: Path) -> Path:
    with zipfile.ZipFile(bundle) as outer:
        outer.extract("starting_kit.zip", folder)
    with zipfile.ZipFile(folder / "starting_kit.zip") as kit:
        kit.extract("sample_code_submission.zip", folder)
    return folder / "sample_code_submission.zip"


@pytest.mark.parametrize("platform", ["codalab", "codabench"])
def test_the_dry_run_runs_the_command_where_the_worker_does_and_fails_it(
        default_bundles, tmp_path, platform):
    bundle = next(default_bundles[platform].glob("*evaluation-light*.zip"))
    submission = _with_command(_sample(bundle, tmp_path), tmp_path / "with_command.zip")
    steps = platform_named(platform).dry_run(bundle, image_python(), submission)
    by_step = {step.step: step for step in steps}
    assert "has a 'command'" in by_step["submission"].detail
    assert by_step["ingestion"].status == "failed"
    assert "submission refused" in by_step["ingestion"].detail
    if platform == "codabench":
        # v1.27 on starts no command of a submission (codabench_v2.md §3.4); the scoring step
        # runs whatever the ingestion's exit status, and the signed refusal fails it
        assert "command" not in by_step
        scoring = by_step["scoring"]
        assert scoring.status == "failed" and not scoring.scores
        assert "the ingestion refused the submission" in scoring.detail, scoring.detail
    else:                                # a failed predict step is never scored
        assert by_step["command"].status == "failed"
        assert "outside its sandbox" in by_step["command"].detail
        assert "scoring" not in by_step


def test_bundles_carry_the_key_only_where_no_participant_container_reads_it(default_bundles):
    """CodaLab: in the hidden reference data (the submission's own container shares the
    ingestion program's folder, which holds only the key derived for Codabench's importer,
    accepted in Codabench's layout alone: test_codabench_importer); Codabench: in the ingestion
    program (no reference data in the prediction step). Never in a starting kit or a public
    zip."""
    def keys(bundle: Path, inner: str) -> dict[str, bytes]:
        with zipfile.ZipFile(bundle) as outer, zipfile.ZipFile(outer.open(inner)) as nested:
            return {name: nested.read(name) for name in nested.namelist()
                    if name.endswith(RECORD_KEY_NAME)}
    for platform, in_program in (("codalab", False), ("codabench", True)):
        bundle = next(default_bundles[platform].glob("*evaluation-light*.zip"))
        phase_key = keys(bundle, "reference_data.zip")[RECORD_KEY_NAME]
        program_key = keys(bundle, "ingestion_program.zip")[RECORD_KEY_NAME]
        assert (program_key == phase_key) is in_program
        if not in_program:
            assert program_key.decode().strip() == \
                importer_key(bytes.fromhex(phase_key.decode().strip())).hex()
        for public in ("public_data.zip", "input_data.zip"):
            assert not keys(bundle, public)
        # the kit's only key is its public stand-in's, which signs nothing of the phase's
        kit_keys = keys(bundle, "starting_kit.zip")
        assert all(name.startswith("stand_in/") for name in kit_keys), list(kit_keys)
        assert phase_key not in kit_keys.values()

"""The Codabench compute worker as it runs from v1.27 on (issue 47, items 1 to 3).

compute_worker/compute_worker.py at 88fa830b (codabench_v2.md §3.4, §3.6, §3.7): the
prediction step runs the ingestion alone (no command of a submission is started); the
submission is mounted read-only at /app/ingested_program in the prediction and the scoring
step; it is copied over the prediction output before scoring (Run._copy_submission_to_input_res),
so a results zip is scored whatever metadata file it holds, and a code zip's file named like
an output of the ingestion would replace that output; a scoring step without an exit status
fails; the time limit's alarm stops nothing, Celery's soft limit (the limit plus 20 minutes)
does. Each test below fails on the model of c7dbc756 the dry run and kit followed before.
"""
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from bundle.platforms import platform
from scoring_harness import image_python

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "kinds" / "label_accuracy" / "default_spec.yaml"
REFUSAL = "Codabench copies your submission over the ingestion's output before scoring"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bundles(built_bundles) -> dict[str, Path]:
    """One phase's bundle each, built once a test run (conftest.py); read only."""
    def build(phase: str, site: str) -> Path:
        bundles = list(built_bundles(SPEC, site, phase).glob("*.zip"))
        assert len(bundles) == 1, (phase, site, bundles)
        return bundles[0]
    return {"code": build("evaluation", "codabench"), "results": build("development", "codabench"),
            "codalab": build("evaluation", "codalab")}


@pytest.fixture(scope="module")
def kit(bundles, tmp_path_factory) -> Path:
    """The code phase's starting kit, unzipped as a participant has it."""
    folder = tmp_path_factory.mktemp("kit")
    with zipfile.ZipFile(bundles["code"]) as outer:
        zipfile.ZipFile(io.BytesIO(outer.read("starting_kit.zip"))).extractall(folder)
    return folder


def outputs_of(kit: Path) -> list[str]:
    return json.loads((kit / "kit.json").read_text())["ingestion_outputs"]


def with_members(source: Path, target: Path, members: dict[str, bytes]) -> Path:
    """``source`` with ``members`` added or replaced."""
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(target, "w") as copy:
        for name in original.namelist():
            if name not in members:
                copy.writestr(name, original.read(name))
        for name, data in members.items():
            copy.writestr(name, data)
    return target


def wrapped_program(bundle: Path, member: str, wrapper: str, first: str = "") -> bytes:
    """The bundle's program zip ``member``, its command run through ``wrapper`` (wrap.py),
    which gets ``first`` (if any), then the original command's arguments after the
    interpreter."""
    with zipfile.ZipFile(bundle) as outer:
        program = outer.read(member)
    with zipfile.ZipFile(io.BytesIO(program)) as original:
        command = yaml.safe_load(original.read("metadata"))["command"].split(" ", 1)[1]
    metadata = yaml.safe_dump({"command": " ".join(
        filter(None, ["python3 $program/wrap.py", first, command]))}).encode()
    # both names: Codabench reads metadata.yaml first, CodaLab metadata (§3.4)
    return _replaced(program, {"metadata": metadata, "metadata.yaml": metadata,
                               "wrap.py": wrapper.encode()})


def _replaced(archive: bytes, members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(archive)) as original, zipfile.ZipFile(buffer, "w") as copy:
        for name in original.namelist():
            if name not in members:
                copy.writestr(name, original.read(name))
        for name, data in members.items():
            copy.writestr(name, data)
    return buffer.getvalue()


def steps_of(bundle: Path, submission: Path | None = None, site: str = "codabench") -> dict:
    return {step.step: step for step in platform(site).dry_run(bundle, image_python(),
                                                               submission)}


# ---- item 1: the submission is copied over the ingestion's output --------------------------

def test_the_kit_lists_every_output_the_ingestion_writes(kit):
    names = outputs_of(kit)
    tasks = json.loads((kit / "kit.json").read_text())["tasks"]
    assert "ingestion_record.json" in names
    for task in tasks:
        assert f"{task}_stdout.txt" in names and f"{task}_stderr.txt" in names
    assert len([name for name in names if name.endswith(".npy")]) == len(tasks)


@pytest.mark.parametrize("which", ["record", "prediction", "log"])
def test_a_code_zip_named_like_an_output_is_refused_before_anything_runs(bundles, kit,
                                                                         tmp_path, which):
    name = next(name for name in outputs_of(kit) if {
        "record": name.endswith(".json"), "prediction": name.endswith(".npy"),
        "log": name.endswith("_stdout.txt")}[which])
    submission = with_members(kit / "sample_code_submission.zip", tmp_path / "clash.zip",
                              {name: b"an honest file of mine"})
    steps = steps_of(bundles["code"], submission)
    assert list(steps) == ["submission"], list(steps)        # nothing ran, nothing scored
    assert steps["submission"].status == "failed"
    assert REFUSAL in steps["submission"].detail and name in steps["submission"].detail


def test_the_kits_tools_refuse_a_code_folder_named_like_an_output(kit, tmp_path):
    name = next(name for name in outputs_of(kit) if name.endswith(".npy"))
    folder = tmp_path / "mine"
    with zipfile.ZipFile(kit / "sample_code_submission.zip") as sample:
        sample.extractall(folder)
    (folder / name).write_bytes(b"kept from an earlier run")
    zipped = subprocess.run([sys.executable, "submission_zip.py", str(folder),
                             str(tmp_path / "out.zip")], cwd=kit, capture_output=True, text=True,
                            timeout=120)
    assert zipped.returncode == 1 and REFUSAL in zipped.stderr and name in zipped.stderr
    assert "Traceback" not in zipped.stderr and not (tmp_path / "out.zip").exists()
    archive = with_members(kit / "sample_code_submission.zip", tmp_path / "clash.zip",
                           {name: b"kept from an earlier run"})
    ran = subprocess.run([sys.executable, "run_local.py", "--code", str(archive), "--out",
                          str(tmp_path / "run")], cwd=kit, capture_output=True, text=True,
                         timeout=600)
    assert ran.returncode == 1 and REFUSAL in ran.stderr, ran.stdout[-2000:] + ran.stderr
    assert not (tmp_path / "run" / "ingestion").exists()          # refused before it ran


# ---- item 2: the worker's model -------------------------------------------------------------

MARK = """import pathlib, sys
pathlib.Path(sys.argv[1]).write_text("started")
"""


@pytest.mark.parametrize("site, started", [("codabench", False), ("codalab", True)])
def test_an_own_command_starts_on_codalab_only(bundles, kit, tmp_path, site, started):
    marker = tmp_path / "started"
    submission = with_members(kit / "sample_code_submission.zip", tmp_path / "command.zip", {
        "metadata": f"description: mine\ncommand: python3 $program/mark.py {marker}\n".encode(),
        "mark.py": MARK.encode()})
    steps = steps_of(bundles["code" if site == "codabench" else "codalab"], submission, site)
    assert marker.exists() is started
    assert ("command" in steps) is started
    assert "submission refused" in steps["ingestion"].detail     # the ingestion refuses it


# argv[1]: the submission's mount, as the worker's $submission_program names it in every
# container (§3.4); then the program's own command, run as it was
PROBE = """import os, subprocess, sys
mount = sys.argv[1]
names = sorted(os.listdir(mount))
readable = all(os.access(os.path.join(mount, name), os.R_OK) for name in names)
written = []
for attempt in (lambda: open(os.path.join(mount, "new.txt"), "w"),
                lambda: open(os.path.join(mount, names[0]), "a")):
    try:
        attempt().close()
        written.append(True)
    except OSError:
        written.append(False)
print(f"PROBE listed={bool(names)} readable={readable} written={written}", flush=True)
sys.exit(subprocess.run([sys.executable, *sys.argv[2:]]).returncode)
"""


def test_the_submission_is_read_only_at_ingested_program_in_both_steps(bundles, tmp_path):
    bundle = with_members(bundles["code"], tmp_path / "probed.zip", {
        member: wrapped_program(bundles["code"], member, PROBE, "$submission_program")
        for member in ("ingestion_program.zip", "scoring_program.zip")})
    steps = steps_of(bundle)
    for step in ("ingestion", "scoring"):
        lines = [line for line in steps[step].log.splitlines() if line.startswith("PROBE")]
        assert lines == ["PROBE listed=True readable=True written=[False, False]"], (
            step, steps[step].detail[-2000:])
    assert steps["scoring"].status == "ok" and steps["scoring"].scores


def test_a_results_zip_with_a_description_only_metadata_is_scored(bundles, tmp_path):
    with zipfile.ZipFile(bundles["results"]) as outer:
        kit = zipfile.ZipFile(io.BytesIO(outer.read("starting_kit.zip")))
        (tmp_path / "sample.zip").write_bytes(kit.read("sample_result_submission.zip"))
    submission = with_members(tmp_path / "sample.zip", tmp_path / "described.zip",
                              {"metadata": b"description: my predictions\n"})
    steps = steps_of(bundles["results"], submission)
    assert steps["submission"].status == "ok", steps["submission"].detail
    assert steps["scoring"].status == "ok" and steps["scoring"].scores, steps["scoring"].detail


KILLED = """import os, signal, subprocess, sys
subprocess.run([sys.executable, *sys.argv[1:]])
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_scoring_program_killed_without_an_exit_status_fails_the_step(bundles, tmp_path):
    bundle = with_members(bundles["code"], tmp_path / "killed.zip", {
        "scoring_program.zip": wrapped_program(bundles["code"], "scoring_program.zip", KILLED)})
    scoring = steps_of(bundle)["scoring"]
    assert scoring.status == "failed" and not scoring.scores
    assert "killed by SIGKILL, no exit status" in scoring.detail
    assert "the submission fails on Codabench" in scoring.detail


# ---- item 3: the time limit -----------------------------------------------------------------

SLOW = """import subprocess, sys, time
status = subprocess.run([sys.executable, *sys.argv[1:]]).returncode
time.sleep(3)
sys.exit(status)
"""


def test_a_run_over_the_phase_limit_is_not_stopped_but_noted(bundles, tmp_path):
    """The worker's alarm is lost while the logs stream; only Celery's soft limit (the
    phase's limit plus 20 minutes) stops a job: a slow ingestion finishes and is scored."""
    with zipfile.ZipFile(bundles["code"]) as outer:
        competition = yaml.safe_load(outer.read("competition.yaml"))
    for phase in competition["phases"]:
        phase["execution_time_limit"] = 1
    bundle = with_members(bundles["code"], tmp_path / "slow.zip", {
        "competition.yaml": yaml.safe_dump(competition, sort_keys=False).encode(),
        "ingestion_program.zip": wrapped_program(bundles["code"], "ingestion_program.zip",
                                                 SLOW)})
    steps = steps_of(bundle)
    ingestion = steps["ingestion"]
    assert ingestion.status == "ok", ingestion.detail
    assert any("over the phase limit of 1 s: the worker would not stop it" in note
               and "1201 s" in note for note in ingestion.notes), ingestion.notes
    assert steps["scoring"].status == "ok" and steps["scoring"].scores

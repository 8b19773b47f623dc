"""A participant stops a local run (Ctrl-C, ``kill``, ``timeout``): run_local passes the
signal to the ingestion, which stops the code's processes and removes its staging folder, and
exits with 128 + the signal's number, saying so. Before, a SIGTERM killed run_local alone and
left the participant's code running to the end of its budget."""
import io
import os
import shutil
import signal
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

from kinds.kind import KINDS

REPO = Path(__file__).resolve().parents[1]
IMAGE_PYTHON = REPO / ".venv-image" / "bin" / "python"
# Code that says it started (a file in its working folder, the one place it may write) and
# then works until it is stopped: its task's budget (10 s) is far longer than the test needs.
ENDLESS = """\
import time
from pathlib import Path

def predict(task, x_train, y_train, x_test):
    Path("started").write_text("yes")
    while True:
        time.sleep(0.05)
"""


def evaluation_kit(bundles: Path, destination: Path) -> Path:
    for bundle in sorted(bundles.glob("*.zip")):
        with zipfile.ZipFile(bundle) as outer:
            for name in (n for n in outer.namelist() if n.endswith("starting_kit.zip")):
                with zipfile.ZipFile(io.BytesIO(outer.read(name))) as kit:
                    kit.extractall(destination)
    return next(path.parent for path in destination.rglob("kit.json")
                if '"code_submission": true' in path.read_text())


def processes_naming(text: str) -> list[int]:
    """Processes whose command line names ``text`` (a folder only this test's run uses)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and text in (entry / "cmdline").read_bytes().decode(
                    "utf-8", "replace"):
                found.append(int(entry.name))
        except OSError:
            continue            # gone while we looked
    return found


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_local_run_stops_the_code_it_runs(stop, tmp_path, built_bundles):
    kit = evaluation_kit(built_bundles(KINDS["label_accuracy"].DEFAULT_SPEC, "codabench"),
                         tmp_path / "kit")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "submission.py").write_text(ENDLESS)
    # The ingestion stages each task under $TMPDIR: one of this test's own, which the
    # sandbox's user can pass through (pytest's tmp_path is root's alone)
    staging = Path(tempfile.mkdtemp(prefix="stop-test-"))
    staging.chmod(0o755)
    run_local = subprocess.Popen(
        [str(IMAGE_PYTHON), "run_local.py", "--code", str(tmp_path / "mine"), "--out",
         str(tmp_path / "run")], cwd=kit, env={**os.environ, "TMPDIR": str(staging)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not list(staging.glob("**/started")):
            assert run_local.poll() is None, run_local.communicate()
            assert time.monotonic() < deadline, "the code never started"
            time.sleep(0.1)
        assert processes_naming(str(staging)), "the task's process is not running"
        run_local.send_signal(stop)             # run_local alone, as `kill` does
        stdout, stderr = run_local.communicate(timeout=120)
    finally:
        if run_local.poll() is None:
            run_local.kill()
            run_local.wait()
        left = sorted(staging.iterdir())
        shutil.rmtree(staging, ignore_errors=True)
    assert run_local.returncode == 128 + stop, (run_local.returncode, stdout[-2000:],
                                                stderr[-2000:])
    assert f"stopped by {stop.name}" in stderr and "Traceback" not in stderr, stderr[-2000:]
    assert processes_naming(str(staging)) == []
    assert left == [], "the staging folder was left"


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_organizers_local_run_stops_the_kits_run_and_the_code(stop, tmp_path):
    """The organizer's ``python -m bundle.local_run`` runs the kit's run_local under it: a
    stop of the command is passed on, so the code stops too (before, a ``kill`` left both
    running). The command then ends as the signal would end it: by SIGTERM, or with 130 and
    no traceback after a Ctrl-C."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "submission.py").write_text(ENDLESS)
    staging = Path(tempfile.mkdtemp(prefix="stop-test-"))
    staging.chmod(0o755)
    command = subprocess.Popen(
        [str(REPO / ".venv" / "bin" / "python"), "-m", "bundle.local_run", "--config",
         str(KINDS["label_accuracy"].DEFAULT_SPEC), "--phase", "evaluation", "--code",
         str(tmp_path / "mine"), "--out", str(tmp_path / "run")], cwd=REPO,
        env={**os.environ, "TMPDIR": str(staging)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not list(staging.glob("**/started")):
            assert command.poll() is None, command.communicate()
            assert time.monotonic() < deadline, "the code never started"
            time.sleep(0.1)
        command.send_signal(stop)               # the command alone, as `kill` does
        stdout, stderr = command.communicate(timeout=120)
    finally:
        if command.poll() is None:
            command.kill()
            command.wait()
        left = [path for path in staging.iterdir() if path.name != "tmp"] if staging.exists() else []
        remaining = processes_naming(str(staging))
        shutil.rmtree(staging, ignore_errors=True)
    assert command.returncode == (-stop if stop == signal.SIGTERM else 128 + stop), (
        command.returncode, stdout[-2000:], stderr[-2000:])
    assert f"stopped by {stop.name}" in stderr and "Traceback" not in stderr, stderr[-2000:]
    # stopped then, not at the end of each task's budget (what a kill left running did)
    assert "within its budget" not in stderr, stderr[-2000:]
    assert remaining == [] and left == [], (remaining, left)

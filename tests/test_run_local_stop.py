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

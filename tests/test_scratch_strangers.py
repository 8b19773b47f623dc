"""The scratch sweep of an unconfined task (no Landlock) never removes another program's file.

Without Landlock a task's child can write /tmp, /var/tmp and /dev/shm, shared with every
other program of the machine (a participant's own, in run_local). A program the test starts
beside the ingestion, not the submission, makes a file there while the task runs: it must
survive the run. The task's own leftovers are removed where its user of its own marks them
(root with capabilities: CodaLab's nobody), and named but left where it runs as the
ingestion's own user (root without capabilities, as Codabench starts us). Each run has
private tmpfs scratch folders (a mount namespace), so no file of this machine is touched.
"""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ingestion_harness import SETPRIV, new_run, prepare, processes_of, staging_root, worker_command
from runtime.formats import read_run_record
from test_sandbox_unprivileged import keyless, private_scratch, submission

REPO = Path(__file__).resolve().parents[1]
STRANGER = "/tmp/stranger-file"
LEFT = "/tmp/left-iris"
SEEN = "STRANGER SEEN"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                       reason="needs root (mount namespaces, the sandbox user) and setpriv"),
]

# The task's child leaves a file in /tmp, then waits (a while, for a loaded machine) until
# the stranger has made its own, so that the stranger's file is new while the task runs.
TASK = submission(f"""
with open({LEFT!r}, "wb") as stream:
    stream.write(b"x" * 2**20)
for _ in range(400):
    if os.path.exists({STRANGER!r}):
        print({SEEN!r}, file=sys.stderr, flush=True)
        break
    time.sleep(0.05)
return uniform(task)""", prelude="import os, sys, time")

# Started beside the ingestion (its sibling, not its descendant): it waits for the task's
# file, then makes its own; bounded, so it never outlives the test.
STRANGER_SCRIPT = (f'( i=0; while [ ! -e {LEFT} ] && [ $i -lt 1500 ]; do sleep 0.02; '
                   f'i=$((i+1)); done; echo mine > {STRANGER} ) & ')


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A budget long enough for the task to wait for the stranger on a loaded machine."""
    root = tmp_path_factory.mktemp("scratch-strangers")
    prepare(root, budget=60.0)
    return root


@pytest.fixture
def run_root(tmp_path):
    """Outside /tmp, which each run replaces with a private tmpfs."""
    if subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs mount namespaces to give this test private scratch folders")
    root = Path(os.path.expanduser("~")) / f"bdl-scratch-strangers-{tmp_path.name}"
    yield root
    assert processes_of(root) == []
    shutil.rmtree(root, ignore_errors=True)


def ingest_beside_a_stranger(prepared: Path, root: Path, prefix: list[str]):
    """The ingestion, Landlock off, with the stranger beside it; then what /tmp holds."""
    run = new_run(prepared, root, TASK)
    keyless(run)
    listing = root / "tmp-after.txt"
    script = (private_scratch(root / "kept", [REPO]) + 'mkdir -p "$TMPDIR"; chmod 755 "$TMPDIR"; '
              + STRANGER_SCRIPT + f'"$@"; status=$?; wait; ls -A /tmp > "{listing}"; '
              'exit $status')
    command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
               *prefix, *worker_command(run)]
    result = subprocess.run(command, cwd=run / "run", capture_output=True, text=True,
                            timeout=300, env={**os.environ, "TMPDIR": str(staging_root(root)),
                                              "INGESTION_SANDBOX_DISABLE": "landlock"})
    assert result.returncode == 0, result.stdout + result.stderr
    iris = read_run_record(run / "run" / "output" / "ingestion_record.json").tasks["iris"]
    assert iris.status == "ok", iris.message
    assert SEEN in iris.stderr_tail, "the stranger's file was not made while the task ran"
    return result.stdout, listing.read_text().split()


def test_a_task_of_our_own_user_leaves_every_scratch_file_and_names_them(prepared, run_root):
    """Root without capabilities: the child is of our user, like the stranger. Nothing is
    removed, the stranger's file survives, and the log names the task's leftovers."""
    output, after = ingest_beside_a_stranger(prepared, run_root, SETPRIV)
    assert "stranger-file" in after, output
    assert "left-iris" in after, output
    notes = [line for line in output.splitlines() if line.startswith("[iris]   not removed: ")]
    assert notes and LEFT in notes[0] and STRANGER in notes[0], output


def test_a_task_of_a_user_of_its_own_has_only_its_files_removed(prepared, run_root):
    """Root with capabilities: the child runs as a user of its own; its file is removed, the
    stranger's (root's) survives."""
    output, after = ingest_beside_a_stranger(prepared, run_root, [])
    assert "stranger-file" in after, output
    assert "left-iris" not in after, output
    assert "[iris]   removed 1 file(s) or folder(s), 1.0 MiB" in output, output

"""The ingestion as Codabench runs it: root with an empty capability set and no-new-privileges
(util-linux setpriv), against submissions that attack the machine, the ingestion and its data.

Only the unprivileged layers (Landlock, seccomp, rlimits, process groups) can work there; each
test checks that the attack failed and that the ingestion still wrote its record.
"""
import hashlib
import json
import os
import shutil
import socket
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from runtime.formats import RECORD_KEY_NAME, read_run_record
from ingestion_harness import (SETPRIV, assert_nothing_left_behind, new_run, prepare,
                               processes_of, run_ingestion, staging_root, worker_command)
from ingestion_program.ingest import confine

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _landlock_abi() -> int:
    try:
        return confine.landlock_abi()
    except confine.Refused:
        return 0


ABI = _landlock_abi()
needs_setpriv = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                   reason="needs root and util-linux setpriv to drop capabilities")
needs_landlock = pytest.mark.skipif(ABI < 6, reason=f"kernel Landlock ABI {ABI}; these checks "
                                    "need 6 (files, TCP, signal scoping)")

UNIFORM = """
import numpy as np
def uniform(task):
    return np.full((task.n_test, task.num_classes), 1.0 / task.num_classes)
"""


def submission(iris_body: str, prelude: str = "", **paths) -> str:
    """A submission that misbehaves on iris only; ``@name`` in the body becomes repr(path)."""
    body = textwrap.indent(textwrap.dedent(iris_body).strip(), " " * 8)
    for name, value in paths.items():
        body = body.replace(f"@{name}", repr(value if isinstance(value, int) else str(value)))
    return f"{UNIFORM}\n{prelude}\ndef predict(task, x_train, y_train, x_test, checkpoint):\n" \
           f"    if task.name == 'iris':\n{body}\n    return uniform(task)\n"


PROBE = """
import ctypes, json, os, signal, socket, sys
results = {}
def attempt(name, action):
    try:
        action()
        results[name] = "allowed"
    except OSError as error:
        results[name] = type(error).__name__
"""


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("sandbox")
    prepare(root)
    return root


@pytest.fixture(scope="module")
def prepared_long(tmp_path_factory):
    """A budget no loaded machine runs out of before the test has stopped the ingestion."""
    root = tmp_path_factory.mktemp("sandbox-long")
    prepare(root, budget=120.0)
    return root


@pytest.fixture(autouse=True)
def nothing_left_behind(tmp_path):
    """No process of this test survives it, and the ingestion removed its staging folder."""
    yield
    assert_nothing_left_behind(tmp_path)


def probe_results(record) -> dict:
    line = next(line for line in record.tasks["iris"].stderr_tail.splitlines()
                if line.startswith("PROBE "))
    return json.loads(line[len("PROBE "):])


def ingest_unprivileged(prepared, tmp_path, code, **options):
    run = tmp_path if (tmp_path / "run").exists() else new_run(prepared, tmp_path, code)
    if "landlock" in (options.get("env") or {}).get("INGESTION_SANDBOX_DISABLE", ""):
        keyless(run)
    result = run_ingestion(run, unprivileged=True, **options)
    assert result.returncode == 0, result.stdout + result.stderr
    record = read_run_record(run / "run" / "output" / "ingestion_record.json")
    assert record.tasks["digits"].status == "ok"
    return run, result, record


def keyless(run: Path) -> None:
    """A run without a record key, as a starting kit's: where a key is, a worker without
    Landlock runs no code at all (tests/test_key_guard.py), so the fallbacks below matter
    for key-less runs (a participant's machine) only."""
    (run / "hidden_ref" / RECORD_KEY_NAME).unlink()


def digest(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@needs_setpriv
def test_the_child_really_has_no_capabilities(prepared, tmp_path):
    code = submission("""
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines()
              if ":\\t" in line)
print("PROBE", json.dumps({k: status[k].strip() for k in ("CapEff", "NoNewPrivs", "Uid")}),
      file=sys.stderr)
raise SystemExit("probe done")""", prelude="import json, sys")
    run, result, record = ingest_unprivileged(prepared, tmp_path, code)
    found = probe_results(record)
    assert found["CapEff"] == "0000000000000000" and found["NoNewPrivs"] == "1"
    assert found["Uid"].split()[0] == "0"
    assert "unprivileged user: NOT ACTIVE (setgroups: EPERM" in result.stdout
    assert "network namespace (no network): NOT ACTIVE (unshare(CLONE_NEWNET): EPERM)" \
        in result.stdout
    assert ("seccomp filter (no IP sockets, ptrace, io_uring, memfd or SysV shared memory, new "
            "sessions or process groups, signals to this program): active") in result.stdout
    assert "preexec_fn" not in result.stdout + result.stderr


@needs_setpriv
@needs_landlock
def test_hostile_submission_is_contained_without_capabilities(prepared, tmp_path):
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0)
    port = listener.getsockname()[1]
    unique = tmp_path.name
    run_dir = tmp_path / "run"
    code = submission(PROBE + """
attempt("tcp_loopback", lambda: socket.create_connection(("127.0.0.1", @port), timeout=2))
attempt("tcp_public", lambda: socket.create_connection(("1.1.1.1", 53), timeout=2))
attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
attempt("tmp", lambda: open("/tmp/bdl-probe-" + @unique, "w").write("x"))
attempt("var_tmp", lambda: open("/var/tmp/bdl-probe-" + @unique, "w").write("x"))
attempt("dev_shm", lambda: open("/dev/shm/bdl-probe-" + @unique, "w").write("x"))
attempt("hidden_read", lambda: open(os.path.join(@hidden, "iris_probs.npy"), "rb").read())
attempt("hidden_list", lambda: os.listdir(@hidden))
attempt("input_list", lambda: os.listdir(@input))
attempt("ingestion_environ", lambda: open(f"/proc/{os.getppid()}/environ", "rb").read())
fds = f"/proc/{os.getppid()}/fd"
attempt("ingestion_open_files", lambda: [os.readlink(f"{fds}/{n}") for n in os.listdir(fds)])
attempt("ingestion_reopen_fd", lambda: open(f"{fds}/1", "rb"))
attempt("ingestion_memory", lambda: open(f"/proc/{os.getppid()}/mem", "rb"))
attempt("output_write", lambda: open(os.path.join(@output, "iris_probs.npy"), "wb").write(b"x"))
attempt("program_append", lambda: open(os.path.join(@program, "ingestion.py"), "a").write("#"))
attempt("input_write", lambda: open(os.path.join(@input, "extra"), "w").write("x"))
attempt("hidden_write", lambda: open(os.path.join(@hidden, "extra"), "w").write("x"))
libc = ctypes.CDLL(None, use_errno=True)
results["ptrace"] = "allowed" if libc.ptrace(16, os.getppid(), 0, 0) == 0 else "refused"
attempt("kill_ingestion", lambda: os.kill(os.getppid(), signal.SIGKILL))
attempt("pidfd_from_proc", lambda: signal.pidfd_send_signal(
    os.open(f"/proc/{os.getppid()}", os.O_RDONLY), signal.SIGKILL))
print("PROBE", json.dumps(results), file=sys.stderr)
return uniform(task)""", port=port, unique=unique, hidden=tmp_path / "hidden_ref",
                      input=run_dir / "input", output=run_dir / "output",
                      program=run_dir / "ingestion_program")
    new_run(prepared, tmp_path, code)
    before = {name: digest(run_dir / name) for name in ("ingestion_program", "input")}
    before["hidden"] = digest(tmp_path / "hidden_ref")
    run, result, record = ingest_unprivileged(prepared, tmp_path, code)
    found = probe_results(record)
    assert {name: outcome for name, outcome in found.items()
            if outcome not in ("PermissionError", "refused")} == {}, found
    with pytest.raises(BlockingIOError):
        listener.accept()
    listener.close()
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        assert not os.path.exists(f"{folder}/bdl-probe-{unique}")
    after = {name: digest(run_dir / name) for name in ("ingestion_program", "input")}
    after["hidden"] = digest(tmp_path / "hidden_ref")
    assert after == before
    assert record.tasks["iris"].status == "ok"
    assert np.load(run_dir / "output" / "iris_probs.npy").shape == (50, 3)
    assert ("child confinement: Landlock files active; Landlock network active; "
            "Landlock scoping active; seccomp active") in result.stdout
    assert "output folder: written by this program only" in result.stdout


@needs_setpriv
def test_killing_the_ingestion_fails_even_without_landlock(prepared, tmp_path):
    """With Landlock switched off, seccomp alone must keep signals away from the ingestion, and
    its not being dumpable keeps its /proc files closed."""
    code = submission(PROBE + """
attempt("kill_parent", lambda: os.kill(os.getppid(), signal.SIGKILL))
attempt("kill_group", lambda: os.killpg(os.getpgid(os.getppid()), signal.SIGKILL))
attempt("term_parent", lambda: os.kill(os.getppid(), signal.SIGTERM))
attempt("pidfd_from_proc", lambda: signal.pidfd_send_signal(
    os.open(f"/proc/{os.getppid()}", os.O_RDONLY), signal.SIGKILL))
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", 9), timeout=1))
attempt("environ", lambda: open(f"/proc/{os.getppid()}/environ", "rb").read())
attempt("memory", lambda: open(f"/proc/{os.getppid()}/mem", "rb"))
print("PROBE", json.dumps(results), file=sys.stderr)
return uniform(task)""")
    run, result, record = ingest_unprivileged(prepared, tmp_path, code,
                                              env={"INGESTION_SANDBOX_DISABLE": "landlock"})
    assert probe_results(record) == {"kill_parent": "PermissionError",
                                     "kill_group": "PermissionError",
                                     "term_parent": "PermissionError",
                                     "pidfd_from_proc": "PermissionError",
                                     "tcp": "PermissionError", "environ": "PermissionError",
                                     "memory": "PermissionError"}   # not dumpable
    assert record.tasks["iris"].status == "ok"
    assert "Landlock files NOT ACTIVE (disabled for this run)" in result.stdout
    assert "output folder: NOT ACTIVE" in result.stdout
    assert "were NOT protected from this child's writes" in result.stdout


@needs_setpriv
@needs_landlock
def test_mode_000_folders_and_threads_left_running_do_not_hurt(prepared, tmp_path):
    code = submission("""
os.makedirs("locked/inner")
open("locked/inner/data", "w").write("x")
os.chmod("locked/inner", 0)
os.chmod("locked", 0)
threading.Thread(target=time.sleep, args=(3600,)).start()     # not a daemon
return uniform(task)""", prelude="import os, threading, time")
    run, result, record = ingest_unprivileged(prepared, tmp_path, code)
    iris = record.tasks["iris"]
    assert iris.status == "ok" and iris.prediction == "final", iris.message
    assert "could not be removed" not in result.stdout
    assert np.load(tmp_path / "run" / "output" / "iris_probs.npy").shape == (50, 3)


SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")


def private_scratch(kept: Path, visible: list[Path]) -> str:
    """Shell lines, for a private mount namespace, that put an empty tmpfs on each scratch
    folder while the ``visible`` paths (this checkout, wherever CI cloned it) stay reachable:
    their scratch folder is first bound aside under ``kept``, then each is bound back."""
    lines = []
    for index, folder in enumerate(SCRATCH):
        inside = [path.resolve() for path in visible if path.resolve().is_relative_to(folder)]
        aside = kept / str(index)
        if inside:
            lines.append(f'mkdir -p "{aside}" && mount --bind "{folder}" "{aside}"')
        lines.append(f'mount -t tmpfs tmpfs "{folder}"')
        lines += [f'mkdir -p "{path}" && mount --bind "{aside / path.relative_to(folder)}" "{path}"'
                  for path in inside]
    return " && ".join(lines) + "; "


@needs_setpriv
@pytest.mark.parametrize("setting, note", [
    ("root", "removed 4 file(s) or folder(s), 3.0 MiB, it left in /tmp, /var/tmp or /dev/shm"),
    ("no capabilities", "not removed: 4 file(s) or folder(s), 3.0 MiB, new in /tmp, /var/tmp "
                        "or /dev/shm since the task started: /dev/shm/left-iris, /tmp/left-iris, "
                        "/tmp/locked, /var/tmp/left-iris")])
def test_scratch_files_are_counted_without_landlock(prepared, tmp_path, setting, note):
    """Without Landlock the child can write /tmp, /var/tmp and /dev/shm: all of it is counted,
    mode-000 folders included. A child of a user of its own (root's run: nobody) has it
    removed; one of the ingestion's own user (Codabench's root without capabilities) has it
    named, not removed: nothing tells its files from other programs' of that user
    (tests/test_scratch_strangers.py). Private tmpfs mounts keep other users' files out of
    reach."""
    if subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs mount namespaces to give this test private scratch folders")
    root = Path(os.path.expanduser("~")) / f"bdl-sandbox-{tmp_path.name}"
    try:
        code = submission("""
for folder in ("/tmp", "/var/tmp", "/dev/shm"):
    with open(folder + "/left-" + task.name, "wb") as stream:
        stream.write(b"x" * 2**20)
os.makedirs("/tmp/locked/inner")
os.chmod("/tmp/locked/inner", 0)
os.chmod("/tmp/locked", 0)
return uniform(task)""", prelude="import os")
        run = new_run(prepared, root, code)
        keyless(run)
        staging = staging_root(root)
        script = (private_scratch(root / "kept", [REPO]) +
                  'mkdir -p "$TMPDIR"; chmod 755 "$TMPDIR"; exec "$@"')
        prefix = SETPRIV if setting == "no capabilities" else []
        command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                   *prefix, *worker_command(run)]
        result = subprocess.run(command, cwd=run / "run", capture_output=True, text=True,
                                timeout=300, env={**os.environ, "TMPDIR": str(staging),
                                                  "INGESTION_SANDBOX_DISABLE": "landlock"})
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"[iris]   {note}" in result.stdout, result.stdout
        assert "could not remove" not in result.stdout
        assert processes_of(root) == []
    finally:
        shutil.rmtree(root, ignore_errors=True)


@needs_setpriv
def test_dev_shm_filler_hits_the_disk_limit_without_landlock(prepared, tmp_path):
    """RAM-backed /dev/shm counts towards the disk limit (48 MiB here) like the working folder,
    though a child of the ingestion's own user has what it wrote there named, not removed
    (the private /dev/shm goes with the test's mount namespace)."""
    if subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs mount namespaces to give this test a private /dev/shm")
    code = submission("""
for index in range(200):
    with open(f"/dev/shm/fill{index}", "wb") as stream:
        stream.write(b"x" * 2**20)
    time.sleep(0.01)
return uniform(task)""", prelude="import time")
    run = new_run(prepared, tmp_path, code)
    keyless(run)
    staging = staging_root(tmp_path)
    staging.mkdir(mode=0o755)
    command = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount -t tmpfs tmpfs /dev/shm && exec "$@"', "sh", *SETPRIV, *worker_command(run)]
    result = subprocess.run(command, cwd=run / "run", capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TMPDIR": str(staging),
                                 "INGESTION_SANDBOX_DISABLE": "landlock"})
    assert result.returncode == 0, result.stdout + result.stderr
    record = read_run_record(run / "run" / "output" / "ingestion_record.json")
    assert record.tasks["iris"].status == "failed"
    assert "disk limit" in record.tasks["iris"].message


@needs_setpriv
def test_sigterm_to_the_ingestion_removes_its_child_and_staging(prepared_long, tmp_path):
    code = submission("time.sleep(600)", prelude="import time")
    run = new_run(prepared_long, tmp_path, code)
    staging = staging_root(tmp_path)
    staging.mkdir(mode=0o755)
    process = subprocess.Popen([*SETPRIV, *worker_command(run)], cwd=run / "run",
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "TMPDIR": str(staging)})
    for line in process.stdout:
        if line.startswith("[digits]   staging"):        # iris (sleeping) runs next
            break
    for _ in range(200):
        if len(processes_of(tmp_path)) > 1:             # the ingestion and its child
            break
        subprocess.run(["sleep", "0.05"])
    process.terminate()
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 2
    assert "ingestion stopped by SIGTERM" in stderr and "Traceback" not in stderr


@needs_setpriv
def test_a_staging_folder_left_by_a_killed_run_is_removed_by_the_next(prepared, tmp_path):
    gone = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True).stdout.strip()
    staging = staging_root(tmp_path)
    abandoned = staging / f"ingestion-{gone}-abcd1234"
    (abandoned / "locked").mkdir(parents=True)
    os.chmod(abandoned / "locked", 0)
    run, result, record = ingest_unprivileged(prepared, tmp_path, submission("return uniform(task)"))
    assert f"removed staging folders of earlier, killed runs: {abandoned.name}" in result.stdout
    assert not abandoned.exists()


@needs_setpriv
def test_files_a_child_plants_in_the_output_folder_do_not_survive(prepared, tmp_path):
    """Without Landlock the child (root, no capabilities) can write the output folder: it
    overwrites digits' predictions (written before iris runs), plants a file and a link."""
    output = tmp_path / "run" / "output"
    target = tmp_path / "victim.txt"
    target.write_text("intact")
    code = submission("""
numpy_file = os.path.join(@output, "digits_probs.npy")
os.remove(numpy_file)
os.symlink(@target, numpy_file)
open(os.path.join(@output, "planted.npy"), "wb").write(b"x")
return uniform(task)""", prelude="import os", output=output, target=target)
    run, result, record = ingest_unprivileged(prepared, tmp_path, code,
                                              env={"INGESTION_SANDBOX_DISABLE": "landlock"})
    assert record.tasks["iris"].status == "ok", record.tasks["iris"].message   # it did write
    assert "removed from the output folder what a child put there: planted.npy" in result.stdout
    assert not (output / "planted.npy").exists()
    assert not (output / "digits_probs.npy").is_symlink()
    assert np.load(output / "digits_probs.npy").shape == (599, 10)
    assert target.read_text() == "intact"

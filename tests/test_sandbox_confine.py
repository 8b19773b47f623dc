"""confine.py on its own: Landlock at every ABI this kernel can pretend to, and the seccomp
filter, each installed in a fresh interpreter that then tries what a submission would; and the
pieces of the supervisor that need no whole ingestion run."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ingestion_program.ingest import confine

REPO = Path(__file__).resolve().parents[1]
try:
    KERNEL_ABI = confine.landlock_abi()
except confine.Refused:
    KERNEL_ABI = 0

ATTEMPTS = """
import json, os, socket, sys
sys.path.insert(0, {ingest!r})
import confine
plan = {plan!r}
report = confine.install(plan)
found = {{}}
def attempt(name, action):
    try:
        action()
        found[name] = "allowed"
    except OSError as error:
        found[name] = type(error).__name__
attempt("write_inside", lambda: open(os.path.join(plan["write"][0], "f"), "w").write("x"))
attempt("truncate_dev_null", lambda: open("/dev/null", "w").write("x"))
attempt("write_outside", lambda: open(os.path.join({outside!r}, "f"), "w").write("x"))
attempt("read_forbidden", lambda: open(os.path.join(plan["forbidden"][0], "secret")).read())
attempt("import_numpy", lambda: __import__("numpy"))
attempt("inet_socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
attempt("unix_socket", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())
def name_a_new_thread():
    # as CUDA names the threads it starts: glibc writes /proc/self/task/<tid>/comm
    import ctypes, threading
    started, done = threading.Event(), threading.Event()
    thread = threading.Thread(target=lambda: (started.set(), done.wait()))
    thread.start()
    started.wait()
    try:
        refused = ctypes.CDLL(None).pthread_setname_np(ctypes.c_ulong(thread.ident), b"cuda-EvtHandlr")
    finally:
        done.set()
        thread.join()
    if refused:
        raise PermissionError(refused, os.strerror(refused))
attempt("name_own_thread", name_a_new_thread)
attempt("name_parent_thread", lambda: os.write(os.open(f"/proc/{{os.getppid()}}/comm", os.O_WRONLY), b"x"))
print(json.dumps({{"report": report, "found": found}}))
"""


def attempt(tmp_path, **plan_extra):
    work, outside, secret = (tmp_path / name for name in ("work", "outside", "secret"))
    for folder in (work, outside, secret):
        folder.mkdir()
    (secret / "secret").write_text("s")
    plan = {"read": [], "write": [str(work)], "forbidden": [str(secret)], **plan_extra}
    code = ATTEMPTS.format(ingest=str(REPO / "ingestion_program" / "ingest"), plan=plan,
                           outside=str(outside))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, cwd=work)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.skipif(KERNEL_ABI < 1, reason="the kernel offers no Landlock")
@pytest.mark.parametrize("abi", range(1, KERNEL_ABI + 1) if KERNEL_ABI else [1])
def test_landlock_at_each_abi_confines_files(tmp_path, abi):
    outcome = attempt(tmp_path, abi_at_most=abi)
    report = {name.split(" (")[0]: (on, detail) for name, on, detail in outcome["report"]}
    assert report["Landlock files"] == (True, f"ABI {abi}")
    assert report["Landlock network"][0] is (abi >= 4)
    assert report["Landlock scoping"][0] is (abi >= 6)
    if abi < 4:
        assert report["Landlock network"][1] == f"kernel Landlock ABI {abi}, needs 4"
    assert outcome["found"] == {"write_inside": "allowed", "truncate_dev_null": "allowed",
                                "write_outside": "PermissionError",
                                "read_forbidden": "PermissionError", "import_numpy": "allowed",
                                "inet_socket": "PermissionError", "unix_socket": "allowed",
                                "name_own_thread": "allowed",
                                "name_parent_thread": "PermissionError"}


def test_seccomp_alone_refuses_ip_sockets(tmp_path):
    outcome = attempt(tmp_path, disable=["landlock"])
    assert outcome["report"][-1] == [confine.SECCOMP, True, "filter installed"]
    assert outcome["report"][0][1:] == [False, "disabled for this run"]
    assert outcome["found"]["inet_socket"] == "PermissionError"
    assert outcome["found"]["unix_socket"] == "allowed"
    assert outcome["found"]["write_outside"] == "allowed"      # nothing but Landlock stops it


def test_refusals_name_the_call_and_the_errno():
    assert str(confine.Refused("landlock_create_ruleset", 38)) == "landlock_create_ruleset: ENOSYS"


def test_readable_paths_never_contain_a_forbidden_folder(tmp_path):
    plan = {"read": [str(tmp_path / "task")], "write": [], "forbidden": [str(tmp_path)]}
    paths = confine.readable_paths(plan)
    assert not any(str(tmp_path).startswith(path.rstrip("/") + "/") or path == str(tmp_path)
                   for path in paths)
    assert "/usr" in paths


def test_process_table_from_ps_matches_proc(monkeypatch):
    """Where there is no /proc (run_local on a Mac), ps(1) gives the same tree."""
    from ingestion_program.ingest import processes
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        from_proc = processes.descendants()
        monkeypatch.setattr(processes.os.path, "isdir", lambda path: False)
        from_ps = processes.descendants()
        assert child.pid in from_proc and child.pid in from_ps
        assert from_ps[child.pid] in "RSD" and from_proc[child.pid] in "RSD"   # alive
    finally:
        child.kill()
        child.wait()


def test_a_task_process_that_cannot_start_fails_that_task_only(tmp_path, monkeypatch):
    from ingestion_program.ingest import supervisor
    from ingestion_program.ingest.config import Limits, TaskSpec
    from ingestion_program.ingest.sandbox import Protections
    from kinds.kind import ingestion_runtime

    def refuse():
        raise OSError(1, "refused")
    monkeypatch.setattr(supervisor, "preexec", lambda protections, limits: refuse)
    task = TaskSpec("iris", "labels", "iris_inputs.npz", "iris_labels", 1.0,
                    {"n_test": 45, "num_classes": 3})
    limits = Limits(2**30, 2**20, 2**20, 64, 16, 1.0, 1024, 1)
    staging = supervisor.Staging(tmp_path, tmp_path, tmp_path / "data.npz", tmp_path)
    before = len(os.listdir("/proc/self/fd"))
    outcome = supervisor.run_task(task, staging, Protections(None, None, False, False), limits,
                                  ("submission", "predict"), ingestion_runtime("label_accuracy"))
    assert outcome.status == "failed"
    assert outcome.message.startswith("the ingestion could not start the task's process")
    assert len(os.listdir("/proc/self/fd")) == before          # no pipe left open

"""Participant files that try to run before the sandbox does (issue 24, items 1 and 2).

CodaLab's worker puts the submission folder on PYTHONPATH for the ingestion's container, and
the child used to put it on sys.path before confining itself. A submission's json.py,
sitecustomize.py, ctypes/ or platform.py then ran as root with every capability, outside
Landlock and seccomp. Each test runs such a submission through the real ingestion program,
as root and without capabilities (as Codabench starts containers), on every kind's code phase.
"""
import os
from pathlib import Path

import pytest

from runtime.formats import read_run_record
from ingestion_harness import (FAST_BDL, KINDS, SETTINGS, assert_nothing_left_behind,
                               needs_root, new_kind_run, prepare_kind, run_ingestion)
from ingestion_program.ingest.confine import SECCOMP
from ingestion_program.ingest.supervisor import kernel_checked

pytestmark = pytest.mark.slow


def hostile_module(name: str, marker: Path) -> str:
    """A module that, wherever it is imported, leaves a file and says so: it proves it ran,
    whether it could read the hidden data or not."""
    return f"""
import os as _os, sys as _sys
_sys.stderr.write("HOSTILE {name} imported as uid %d\\n" % _os.getuid())
try:
    with open({str(marker)!r} + "/{name}", "w") as _f:
        _f.write(repr(_sys.argv))
except OSError:
    pass
"""


@pytest.fixture(scope="module", params=KINDS)
def prepared(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"hostile-{request.param}")
    prepare_kind(root, request.param)
    return request.param, root


@pytest.fixture(autouse=True)
def nothing_left_behind(tmp_path):
    yield
    assert_nothing_left_behind(tmp_path)


def run_hostile(prepared, tmp_path, files: dict[str, str], setting: str, env=None):
    kind, root = prepared
    files = ({"submission.py": FAST_BDL} if kind == "bdl2021" else {}) | files
    run = new_kind_run(root, tmp_path, files)
    result = run_ingestion(run, unprivileged=setting != "root", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    record = read_run_record(run / "run" / "output" / "ingestion_record.json")
    outputs = "".join(path.read_text() for path in (run / "run" / "output").glob("*_std*.txt"))
    return run, result, record, outputs


def markers(tmp_path) -> Path:
    folder = tmp_path / "markers"
    folder.mkdir(mode=0o777)
    os.chmod(folder, 0o777)      # writable by anyone: only the sandbox may stop a write
    return folder


@needs_root
@pytest.mark.parametrize("setting", SETTINGS)
def test_the_workers_pythonpath_runs_nothing_of_the_submission_in_the_ingestion(
        prepared, tmp_path, setting):
    """CodaLab v1 starts the ingestion with PYTHONPATH=$PYTHONPATH:<run>/program
    (codalab_v1.md §4.5); the ingestion starts isolated (python3 -I), so none of these
    modules is imported by it."""
    found = markers(tmp_path)
    names = ("sitecustomize", "usercustomize", "json", "yaml", "hashlib", "hmac", "numpy")
    files = {f"{name}.py": hostile_module(name, found) for name in names}
    program = tmp_path / "run" / "program"
    run, result, record, outputs = run_hostile(prepared, tmp_path, files, setting,
                                               env={"PYTHONPATH": str(program)})
    assert os.listdir(found) == [], f"imported outside the sandbox: {os.listdir(found)}"
    assert "HOSTILE" not in result.stdout + result.stderr
    assert record.signature and all(run.status == "ok" for run in record.tasks.values()), \
        result.stdout
    assert "signed with the phase's key" in result.stdout


@needs_root
@pytest.mark.parametrize("setting", SETTINGS)
def test_no_submission_module_runs_before_the_child_is_confined(prepared, tmp_path, setting):
    """Modules the child's start-up imports (the confinement's own among them): a copy in
    the submission is never imported, the protections are reported as the kernel has them,
    and a harmless helper of the same name costs no task."""
    found = markers(tmp_path)
    files = {f"{name}.py": hostile_module(name, found)
             for name in ("json", "traceback", "platform", "struct", "importlib", "io", "time")}
    files["ctypes/__init__.py"] = hostile_module("ctypes", found) + (
        "\nclass CDLL:\n    def __init__(self, *a, **k):\n        pass\n"
        "    def __getattr__(self, name):\n        return lambda *a: 0\n")
    run, result, record, outputs = run_hostile(prepared, tmp_path, files, setting)
    assert os.listdir(found) == [], f"ran unconfined: {os.listdir(found)}"
    assert "HOSTILE" not in result.stdout + result.stderr + outputs
    for name, task in record.tasks.items():
        assert task.status == "ok", f"{name}: {task.message}"
        assert f"[{name}]   child confinement: Landlock files active; Landlock network " \
               "active; Landlock scoping active; seccomp active" in result.stdout
    assert "cannot be imported under that name" in outputs
    assert "ctypes" in outputs and "platform" in outputs


def test_a_seccomp_claim_the_kernel_does_not_confirm_is_reported_not_active():
    """This test process has no seccomp filter: a report saying it has one is corrected."""
    status = Path("/proc/self/status").read_text()
    assert "Seccomp:\t0" in status
    report = [("Landlock files", True, "ABI 7"), (SECCOMP, True, "filter installed")]
    checked = kernel_checked(report, os.getpid())
    assert checked[0] == report[0]
    assert checked[1][:2] == (SECCOMP, False) and "kernel shows no filter" in checked[1][2]

"""The record key is guarded, or no participant code runs (issue 46, items 3b).

On Codabench the child is root like the ingestion and the key is in the ingestion program's
folder: only Landlock keeps the child from reading it. Without Landlock (emulated with
``INGESTION_SANDBOX_DISABLE=landlock``, read from the ingestion's own environment), a child
used to find the program folder, print the key, and a record signed with it scored perfectly.
Refusing to sign that run would not be enough: the key is the phase's, so one leaked key forges
every later run. Now such a worker runs nothing of the submission. And every process of a task
must install what the run found available: a task run in units (PGDL) used to start its later
processes without the seccomp filter, unnoticed, since the log showed the first one's report.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ingestion_harness import (FAST_BDL, needs_root, new_kind_run, new_run, prepare,
                               prepare_kind, run_ingestion)
from runtime.formats import RECORD_KEY_NAME, RECORD_NAME, read_run_record, signature_problem

pytestmark = pytest.mark.slow

# The attack: find the key wherever the ingestion may keep it and print it.
KEY_HUNTER = FAST_BDL + '''
import json, os, sys
def _paths(value):
    if isinstance(value, str):
        try:
            yield from _paths(json.loads(value))
        except ValueError:
            if value.startswith("/"):
                yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _paths(item)
    elif isinstance(value, list):
        for item in value:
            yield from _paths(item)
def _hunt():
    """Every folder named in its own command line, and the folders around them."""
    folders = set()
    for path in _paths(sys.argv):
        for _ in range(4):
            folders.add(path)
            path = os.path.dirname(path)
    found = []
    for folder in folders:
        for name in ["ingestion_record.key"] + [os.path.join(n, "ingestion_record.key")
                                                for n in ("ingestion_program", "hidden_ref")]:
            try:
                found.append(open(os.path.join(folder, name)).read().strip())
            except OSError:
                pass
    return sorted(set(found))
_predict = predict
def predict(task, x_train, y_train, x_test, checkpoint):
    print("RAN", task.name, "KEYS", _hunt(), flush=True)
    return _predict(task, x_train, y_train, x_test, checkpoint)
'''


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("key-guard")
    prepare(root)
    return root


def _key_in_program(run: Path) -> bytes:
    """Codabench's layout: the key travels in the ingestion program, no hidden data."""
    hidden = run / "hidden_ref" / RECORD_KEY_NAME
    shutil.move(hidden, run / "run" / "ingestion_program" / RECORD_KEY_NAME)
    return bytes.fromhex((run / "run" / "ingestion_program" / RECORD_KEY_NAME).read_text())


def _everything_written(run: Path) -> str:
    output = run / "run" / "output"
    return "".join(path.read_text(errors="replace") for path in output.rglob("*") if path.is_file())


@needs_root
@pytest.mark.parametrize("where", ["program", "hidden"])
def test_without_landlock_a_root_child_runs_nothing_where_a_key_is(prepared, tmp_path, where):
    run = new_run(prepared, tmp_path, KEY_HUNTER)
    key = (_key_in_program(run) if where == "program" else
           bytes.fromhex((run / "hidden_ref" / RECORD_KEY_NAME).read_text()))
    result = run_ingestion(run, unprivileged=True, env={"INGESTION_SANDBOX_DISABLE": "landlock"})
    log = result.stdout + result.stderr
    assert result.returncode == 4, log[-3000:]
    assert "cannot keep the run record's signing key from participant code" in log
    assert "RAN" not in _everything_written(run) and key.hex() not in log
    record = read_run_record(run / "run" / "output" / RECORD_NAME)
    assert record.refused and "Landlock" in record.refused
    # signed, so the scorer fails it with the reason (nothing of theirs could reach the key)
    assert signature_problem(run / "run" / "output" / RECORD_NAME, key) is None
    assert "Traceback" not in log


@needs_root
def test_with_a_user_of_its_own_the_key_is_guarded_without_landlock(prepared, tmp_path):
    """CodaLab: the child runs as nobody and the hidden data is root-only; the run goes on,
    signed, and the child found no key."""
    run = new_run(prepared, tmp_path, KEY_HUNTER)
    key = bytes.fromhex((run / "hidden_ref" / RECORD_KEY_NAME).read_text())
    result = run_ingestion(run, env={"INGESTION_SANDBOX_DISABLE": "landlock"})
    log = result.stdout + result.stderr
    if "unprivileged user: active" not in log:
        pytest.skip("this machine cannot run the child as user nobody")
    assert result.returncode == 0, log[-3000:]
    written = _everything_written(run)
    assert "RAN iris KEYS []" in written and key.hex() not in written
    assert signature_problem(run / "run" / "output" / RECORD_NAME, key) is None


@needs_root
def test_with_landlock_a_root_child_runs_and_finds_no_key(prepared, tmp_path):
    run = new_run(prepared, tmp_path, KEY_HUNTER)
    key = _key_in_program(run)
    result = run_ingestion(run, unprivileged=True)
    log = result.stdout + result.stderr
    if "Landlock (files, TCP, signals): active" not in log:
        pytest.skip("this kernel has no Landlock")
    assert result.returncode == 0, log[-3000:]
    written = _everything_written(run)
    assert "RAN iris KEYS []" in written and key.hex() not in written
    assert signature_problem(run / "run" / "output" / RECORD_NAME, key) is None


# Every network reports which process measured it; model_3 crashes its process, so a fresh
# one goes on with model_4 (runtime/rules/units.py).
UNIT_PROBE = '''
import os
def complexity(model, dataset):
    print("MEASURED", model.id, "IN", os.getpid(), flush=True)
    if model.id == "model_3":
        os._exit(7)
    return float(sum((w ** 2).sum() for w in model.weights))
'''
# Emulates a later process of the task that comes up without the filter the first one had.
WEAKER_LATER = ('write_frame(fd, PROTECTIONS, json.dumps(install(spec["confine"])).encode())',
                'write_frame(fd, PROTECTIONS, json.dumps(install(dict(spec["confine"], disable='
                '["seccomp"]) if spec.get("first_unit") else spec["confine"])).encode())')


@needs_root
@pytest.mark.parametrize("unprivileged", [False, True], ids=["root", "no capabilities"])
def test_a_later_process_of_a_zoo_without_the_filter_is_stopped_first(tmp_path_factory, tmp_path,
                                                                      unprivileged):
    prepared = tmp_path_factory.mktemp("units")
    prepare_kind(prepared, "pgdl2020", budget=64)
    run = new_kind_run(prepared, tmp_path, {"complexity.py": UNIT_PROBE})
    child_main = run / "run" / "ingestion_program" / "ingest" / "child_main.py"
    text = child_main.read_text()
    assert WEAKER_LATER[0] in text
    child_main.write_text(text.replace(*WEAKER_LATER))
    result = run_ingestion(run, unprivileged=unprivileged)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    stdout = _everything_written(run)
    measured = [line.split()[1] for line in stdout.splitlines() if line.startswith("MEASURED")]
    assert measured[-1] == "model_3", measured          # nothing of theirs ran after it
    assert "could not install seccomp" in log, log[-3000:]
    confinement = [line for line in log.splitlines() if "child confinement:" in line]
    assert confinement and all("seccomp NOT ACTIVE" in line for line in confinement), confinement
    record = read_run_record(run / "run" / "output" / RECORD_NAME)
    (task,) = record.tasks.values()
    assert "model_4" in task.units["failed"] + task.units["not_reached"]


@needs_root
@pytest.mark.parametrize("platform, fails", [("codabench", True), ("codalab", False)])
def test_both_dry_runs_without_landlock(tmp_path, platform, fails):
    """The dry run stands for the worker: on Codabench (no capabilities, so no user of its own)
    a worker without Landlock fails the code phase with the reason; CodaLab's root runs the
    child as nobody, which guards the key, and the phase scores."""
    repo = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, str(repo / "build_bundle.py"), "--platform", platform, "--config",
         str(repo / "kinds" / "label_accuracy" / "default_spec.yaml"), "--phase", "all",
         "--check", "--out", str(tmp_path)],
        cwd=repo, capture_output=True, text=True, timeout=600,
        env={**os.environ, "INGESTION_SANDBOX_DISABLE": "landlock"})
    output = result.stdout + result.stderr
    if not fails and "cannot switch to user" in output:
        pytest.skip("this machine cannot run the child as user nobody")
    assert (result.returncode != 0) == fails, output[-3000:]
    assert ("cannot keep the run record's signing key" in output) == fails, output[-3000:]
    assert "Traceback" not in output

"""PGDL's per-network hard limit: the ingestion runs a zoo one network (unit) at a time; a
network whose call hangs is killed at its share of the budget, one that crashes its process
costs itself only, a fresh process goes on with the next network, and the run record and the
scorer say which networks went unmeasured and why."""
import json
import os
from pathlib import Path

import numpy as np
import pytest

from kinds.pgdl2020.runtime.formats import read_model_configs
from kit_runs import run_kit_locally
from local_runs import REPO

SPEC = REPO / "kinds" / "pgdl2020" / "default_spec.yaml"
ZOO = REPO / "kinds" / "pgdl2020" / "reference" / "embedded" / "breast_cancer_mlp"
TASK = "breast_cancer_mlp"          # phase1's one zoo: 32 networks

HOSTILE = '''
import os, time
def complexity(model, dataset):
    if model.id == "model_1":
        time.sleep(10_000)              # hangs: killed at its share of the budget
    if model.id == "model_3":
        os._exit(7)                     # leaves without a word
    if model.id == "model_5":
        os.kill(os.getpid(), 11)        # a segmentation fault
    return float(sum((w ** 2).sum() for w in model.weights))
'''

ALWAYS_HANGS = '''
import time
def complexity(model, dataset):
    time.sleep(10_000)
'''


def _run(tmp_path: Path, code: str, budget: float):
    (tmp_path / "complexity.py").write_text(code)
    # `python -m bundle.local_run --phase phase1 --budget ... --code ...`, its kit built in
    # this process (kit_runs.py)
    result = run_kit_locally(SPEC, "phase1", tmp_path / "run", code=tmp_path / "complexity.py",
                             budget=budget)
    output = tmp_path / "run" / "ingestion" / "run" / "output"
    record = json.loads((output / "ingestion_record.json").read_text())["tasks"][TASK]
    return result, record, output


def test_a_hung_or_crashing_network_costs_that_network_only(tmp_path):
    result, record, output = _run(tmp_path, HOSTILE, budget=64)      # 2 s per network
    log = result.stdout + result.stderr
    assert record["units"] == {"seconds": 2.0, "timed_out": ["model_1"],
                               "failed": ["model_3", "model_5"], "not_reached": []}, log[-3000:]
    assert record["status"] == "ok" and record["prediction"] == "final"   # the hang cost 2 s, not the budget
    ids = read_model_configs(ZOO / "model_configs.json").ids
    values = np.load(output / f"{TASK}.npy")
    unmeasured = {model for model, value in zip(ids, values) if np.isnan(value)}
    assert unmeasured == {"model_1", "model_3", "model_5"}
    assert np.isfinite(values).sum() == len(ids) - 3        # the fresh processes measured the rest
    assert "model_1: did not finish within its 2 s and was killed" in log
    assert "model_5: killed by SIGSEGV" in log and "model_3: exited with code 7" in log
    assert "1 timed out, 2 failed, 0 not reached" in log
    assert result.returncode == 1           # the task is penalised, with the reasons from the record
    assert "killed at the 2 s limit: model_1; process died: model_3, model_5" in log


@pytest.mark.slow
def test_the_task_budget_still_bounds_a_zoo_of_hung_networks(tmp_path):
    """Restarting a process costs time, so networks that each hang for their whole share run
    past the task's budget: the last ones are not reached, and the run is a timeout.

    On 8 s, 0.25 s per network: of 32 shares of b/32 s each, each after a restart of r s,
    about 32 / (1 + 32 r / b) are reached, so a smaller budget b leaves more unreached at any
    speed (restarts of 0.2 s here: 18 of 32 reached on 8 s, 22 on 16 s), in half the wall
    time."""
    result, record, output = _run(tmp_path, ALWAYS_HANGS, budget=8)    # 0.25 s per network
    units = record["units"]
    assert units["not_reached"] and not units["failed"], record
    assert len(units["timed_out"]) + len(units["not_reached"]) == 32
    assert record["status"] == "timed_out" and record["prediction"] is None   # none measured
    assert not (output / f"{TASK}.npy").exists()
    assert "the task's budget ended before every unit was tried" in result.stdout + result.stderr


SLOW_IMPORT = '''
import time
time.sleep(6)                           # three networks' shares: start-up, not the first's
def complexity(model, dataset):
    return float(sum((w ** 2).sum() for w in model.weights))
'''


def test_importing_the_module_is_not_on_the_first_networks_clock(tmp_path):
    result, record, output = _run(tmp_path, SLOW_IMPORT, budget=64)     # 2 s per network
    log = result.stdout + result.stderr
    assert record["units"] == {"seconds": 2.0, "timed_out": [], "failed": [],
                               "not_reached": []}, log[-3000:]
    assert record["status"] == "ok" and record["startup_seconds"] >= 6

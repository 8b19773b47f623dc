"""``python -m reference_data plan`` prints the expected cost of a reference run - wall time,
device-hours, checkpoint sizes - for every embedded task and for a ResNet-20-FRN declaration
at the 2021 scale (50,000 CIFAR-shaped rows, measured on a sample of them and scaled).

Every JAX computation runs in a child process (the ingestion tests fork this one later)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kinds.bdl2021.reference.tasks import TASKS
from kinds.bdl2021.runtime.formats import TaskInputs, write_task_inputs

REPO = Path(__file__).resolve().parents[3]
COST = re.compile(r"^(\w+): [\d,]+ parameters, [\d,]+ rows, \d+ chains x \(\d+ \+ \d+\); one "
                  r"gradient of every chain [\d.]+ ms.*: [\d.]+ (min|h|days) wall, [\d.]+ "
                  r"device-hours on \d+ device\(s\); checkpoint [\d.]+ \w?B at the start, "
                  r"[\d.]+ \w?B at the end")


def _plan(*args):
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
           "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "reference_data", "plan", *args], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_plan_prints_a_cost_for_every_embedded_task():
    result = _plan("--devices", "2")
    assert result.returncode == 0, result.stderr[-2000:]
    named = [COST.match(line).group(1) for line in result.stdout.splitlines()]
    assert named == [task.name for task in TASKS]


def _resnet_folder(root: Path, rows: int) -> Path:
    folder = root / "cifar_resnet"
    folder.mkdir(parents=True)
    x = np.random.default_rng(0).standard_normal((rows + 2, 32, 32, 3))
    y = np.arange(rows + 2) % 10
    write_task_inputs(folder / "cifar_resnet.npz",
                      TaskInputs(x[:rows], y[:rows], x[rows:], y[rows:]))
    (folder / "cifar_resnet_task.json").write_text(json.dumps({
        "kind": "classification",
        "model": {"type": "resnet20_frn", "input_shape": [32, 32, 3], "outputs": 10},
        "likelihood": {"name": "softmax"}, "prior": {"distribution": "normal", "variance": 0.2},
        "hmc": {"num_chains": 1, "num_warmup": 1000, "num_samples": 1000}}))
    return root


@pytest.mark.slow
@pytest.mark.extended
def test_plan_prices_resnet20_frn_on_fifty_thousand_cifar_images(tmp_path):
    result = _plan("--data-root", str(_resnet_folder(tmp_path, 2)), "--train-rows", "50000",
                   "--checkpoint-every", "100")
    assert result.returncode == 0, result.stderr[-2000:]
    line = result.stdout.strip()
    assert COST.match(line), line
    assert "cifar_resnet: 274,042 parameters, 50,000 rows" in line
    assert "scaled to 50000 rows" in line and "20 checkpoints" in line
    # 1000 kept draws of 274,042 float64 parameters: 2.2 GB in the last checkpoint
    assert "2.2 GB at the end" in line


def test_plan_refuses_a_device_count_below_one():
    result = _plan("--tasks", "iris", "--devices", "0")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: --devices and --train-rows must be positive counts"]

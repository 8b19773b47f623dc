"""Budgets in epochs on BDL, the kind that times an epoch (the 2021 rules bounded training by
SGD epochs): the ingestion times plain SGD on the declared model on the machine that runs the
code, converts the epochs to seconds, caps them at the spec's ceiling, stops the code at the
converted seconds, and the record, the log, the pages and the detailed results give the
conversion. The rule's conversion itself, and the spec's refusal for a kind that times no
epoch, are tests/test_epoch_budgets.py's."""
import json
import shutil

import numpy as np
import pytest
import yaml

from bundle.competition_rules.epoch_budgets import RULE as BUILD_RULE
from bundle.phase_plan import phase_plan
from bundle.programs import ingestion_config
from bundle.spec import load_spec
from kinds.bdl2021.runtime import calibration
from kinds.bdl2021.runtime.declared_model import MLP, walk_full_batches
from local_runs import REPO, run_local

BDL_SPEC = REPO / "kinds" / "bdl2021" / "default_spec.yaml"
WINE = REPO / "kinds" / "bdl2021" / "reference" / "embedded" / "wine"
EPOCHS = 3000

SLEEPS_THROUGH = '''
import time
def predict(task, x_train, y_train, x_test, checkpoint):
    print(f"budget {task.seconds} s = {task.epochs} epochs x {task.seconds_per_epoch}", flush=True)
    time.sleep(task.seconds)          # exactly its budget, then on: it is stopped there
    time.sleep(1000)
'''


def spec_with_epochs(tmp_path, kind_spec=BDL_SPEC, task="wine", epochs=EPOCHS, ceiling=30):
    raw = yaml.safe_load(kind_spec.read_text())
    shutil.copyfile(kind_spec.parent / raw["logo"], tmp_path / raw["logo"])
    for other in raw["tasks"]:          # the phase's other tasks: short, not under test
        raw["tasks"][other] = {"budget_seconds": 1}
    raw["tasks"][task] = {"budget_seconds": ceiling, "budget_epochs": epochs}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_the_reference_sgd_is_timed_in_epochs_or_scaled_steps_and_stops_at_its_cap():
    with np.load(WINE / "wine.npz") as arrays:
        x, y = arrays["x_train"], arrays["y_train"]
    samples = calibration.sgd_epoch_seconds(MLP((13, 16, 3)), "softmax", 0.2, x, y)
    assert len(samples) == calibration.SAMPLES and all(s > 0 for s in samples)
    ticks = iter(range(0, 10_000, 10))              # a clock where every epoch takes 10 s
    slow = calibration.sgd_epoch_seconds(MLP((13, 16, 3)), "softmax", 0.2, x, y,
                                         clock=lambda: float(next(ticks)))
    assert len(slow) == 1                           # over the time cap after one sample
    # so slow an epoch is timed in one minibatch step, scaled to the epoch's N / B steps
    assert slow[0] == pytest.approx(10.0 * len(x) / min(calibration.REFERENCE_BATCH, len(x)))
    regression = calibration.sgd_epoch_seconds(MLP((13, 8, 2)), "gaussian", 1.0, x, x[:, 0])
    assert all(np.isfinite(regression))


def test_a_long_epochs_samples_walk_fresh_full_minibatches():
    """Timing the same first minibatches again made an H200's figure for a CIFAR-10 epoch
    0.82 of a whole epoch's (benchmarks/bdl_torch_gpu.py): the samples walk on through the
    epoch's full batches, wrapping round, and skip the short last one."""
    batches = [np.arange(start, min(start + 4, 10)) for start in range(0, 10, 4)]
    walked = walk_full_batches(batches, 1, 3)
    assert [rows.tolist() for rows in walked] == [[4, 5, 6, 7], [0, 1, 2, 3], [4, 5, 6, 7]]
    assert [len(rows) for rows in walk_full_batches(batches, 0, 5)] == [4] * 5


def test_the_config_and_pages_state_the_epochs_and_the_ceiling(tmp_path):
    plan = phase_plan(load_spec(spec_with_epochs(tmp_path)), "evaluation")
    wine = next(task for task in plan.tasks if task.name == "wine")
    assert wine.budget_text() == "3000 epochs (at most 30 s)"
    assert BUILD_RULE.budget_facts(plan.tasks) == [
        "an epoch is one pass of plain SGD over the training data with the declared model "
        "(minibatches of 128; in PyTorch where the image installs it, on the GPU images' GPU, "
        "else in numpy), timed on the worker just before your code runs, and the epochs are "
        "converted to seconds there"]
    config = next(t for t in ingestion_config(plan)["tasks"] if t["name"] == "wine")
    assert config["budget_epochs"] == EPOCHS and config["budget_seconds"] == 30


def test_code_sleeping_its_budget_is_stopped_at_the_converted_seconds(tmp_path):
    (tmp_path / "submission.py").write_text(SLEEPS_THROUGH)
    result = run_local("--config", str(spec_with_epochs(tmp_path)), "--phase", "evaluation",
                       "--code", str(tmp_path / "submission.py"), "--out", str(tmp_path / "run"))
    output = tmp_path / "run" / "ingestion" / "run" / "output"
    run = json.loads((output / "ingestion_record.json").read_text())["tasks"]["wine"]
    calibrated = run["rules"]["calibration"]
    budget = calibrated["budget_seconds"]
    assert calibrated["epochs"] == EPOCHS and len(calibrated["samples"]) == calibration.SAMPLES
    assert budget == pytest.approx(EPOCHS * calibrated["seconds_per_epoch"], abs=1e-3)
    assert not calibrated["capped"] and budget < 30
    # Stopped at the conversion, not at the 30 s ceiling: the budget its clock ran against is
    # the record's and the message's (no upper bound on the time: a loaded machine is slow).
    assert run["status"] == "timed_out" and run["budget_seconds"] == budget
    assert run["training_seconds"] >= budget
    assert f"did not finish within its budget of {budget:g} s" in run["message"]
    stdout = (output / "wine_stdout.txt").read_text()
    assert f"budget {budget} s = {float(EPOCHS)} epochs" in stdout       # what the code was told
    log = result.stdout + result.stderr
    assert f"budget {EPOCHS} epochs x" in log and f"= {budget:g} s" in log
    details = json.loads((tmp_path / "run" / "scoring" / "run" / "output"
                          / "detailed_results.json").read_text())
    assert details["tasks"]["wine"]["calibration"] == calibrated
    report = (tmp_path / "run" / "scoring" / "run" / "output" / "detailed_results.html").read_text()
    assert f"budget {EPOCHS} epochs x" in report

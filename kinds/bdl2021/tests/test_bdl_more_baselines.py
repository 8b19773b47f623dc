"""The kit's numpy baselines: what they learn, the real path, their contract.

- What each learns: every numpy baseline runs in this process on every evaluation task on a
  virtual clock (tests/virtual_clock.py: each reading of the time moves it one tick), so it
  does the same steps on any machine at any speed, and its predictive, scored with the
  kind's primary metric against the committed reference, beats the trivial submission's on
  every task. (On wall time, what a 4 s budget bought depended on the machine's load: mean-field
  VI once reached only its MAP start on digits_shift in CI.)
- The real path: the baselines added after the first two (mean-field VI, MC dropout, SGHMC,
  MultiSWAG, HMC) run through python -m bundle.local_run (the code phase's kit and its
  sandboxed ingestion, 4 s per task; test_bdl_starting_kit runs the first two the same way) and
  every task is scored as the platform scores it (``local_runs.assert_scored_as_the_platform
  _would``): each within its budget where its predictive takes milliseconds, and a run past it
  on digits_shift scored from its last checkpoint. These five runs (100 s) are ``extended``
  (.ci/extended): in the README's test command every baseline takes the real path through a
  kit's run_local.py on image tasks (test_bdl_image_inputs_kit), and the first two on these
  tasks (test_bdl_starting_kit).
- Mean-field VI's and MC dropout's predictives have the contract's shapes, checkpoint, and
  repeat given the seed, on the virtual clock (SGHMC's and MultiSWAG's: test_bdl_sg_baselines;
  HMC's: test_bdl_hmc_baseline).
On the development phase's tasks (the CNN's among them), at their own budgets, every baseline's
committed results are checked instead (test_bdl_starting_kit, the table baseline_results.py makes
through the same local runs): the CNN's predictive alone, 100 passes over 2,995 images,
takes about 1.5 s, which leaves a baseline next to no training in 4 s on a loaded machine."""
import importlib
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from kinds.bdl2021.reference.task_files import DEFAULT_ROOT, task_files
from kinds.bdl2021.runtime.formats import (SAMPLES_BY_POINTS, read_classification_probs,
                                           read_regression_samples)
from kinds.bdl2021.runtime.ingestion import check_output
from kinds.bdl2021.runtime.score_types import TASK_TYPES
from local_runs import assert_scored_as_the_platform_would, run_baseline
from test_bdl_sg_baselines import FakeTask
from virtual_clock import VirtualClock

REPO = Path(__file__).resolve().parents[3]
BASELINES = REPO / "kinds" / "bdl2021" / "kit" / "baselines"
EVALUATION_TASKS = ["breast_cancer", "diabetes_gap", "digits_shift", "wine"]
BUDGET = 4                  # seconds per task in the local runs
TICK = 1e-3                 # virtual seconds per reading of the clock
# Each baseline's budget on the virtual clock, in readings: enough for the method's own
# phases after its start (MAP or warm start, then the sampling, VI or members), as few as that
# allows. A step of Adam, SGD or SG-MCMC reads the clock about once, an HMC transition twice
# (each of up to 128 full-batch gradients, hence its small budget), and mean-field VI and MC
# dropout count their predictive (100 passes) as 100 readings before training.
READINGS = {"deep_ensemble": 400,        # 20 Adam steps for each of 10 members
            "sgld": 3000,                # the warm start, then most of one cycle (samples kept)
            "sghmc": 3000,               # the warm start, burn-in, then samples
            "multi_swag": 1000,          # 5 members: Adam, then SWAG moments
            "mean_field_vi": 2000,       # the MAP start's 300 steps, then about 700 of VI
            "mc_dropout": 2000,          # about 900 steps
            "hmc": 100}                  # Adam, warm-up windows, about 30 transitions


def primary_score(task_name, prediction):
    """The task's primary metric of ``prediction`` against the committed reference, once the
    kind's own output check (shape, finite, probability rows) has passed it."""
    task = FakeTask(task_name)
    width = task.num_classes if task.task_type == "classification" else task.num_samples
    checked, _ = check_output(prediction, types.SimpleNamespace(
        task_type=task.task_type, contract={"n_test": task.n_test, "width": width}))
    files = task_files(DEFAULT_ROOT, task_name, task.task_type)
    reference = (read_classification_probs(files.reference)
                 if task.task_type == "classification"
                 else read_regression_samples(files.reference, layout=SAMPLES_BY_POINTS))
    primary = TASK_TYPES[task.task_type].primary
    return primary.function(checked, reference), primary.higher_is_better


def predict_on_a_virtual_clock(name, task_name, readings, tmp_path, monkeypatch):
    """The baseline's prediction on an embedded task whose budget is ``readings`` ticks."""
    module, clock = on_a_virtual_clock(name, tmp_path, monkeypatch)
    task = FakeTask(task_name)
    task.time_left = clock.budget(readings * TICK)
    with np.load(DEFAULT_ROOT / task_name / f"{task_name}.npz") as data:
        arrays = data["x_train"], data["y_train"], data["x_test"]
    return module.predict(task, *arrays, lambda _: None)


@pytest.fixture(scope="module")
def trivial_scores(tmp_path_factory):
    with pytest.MonkeyPatch.context() as monkeypatch:
        return {task: primary_score(task, predict_on_a_virtual_clock(
            "trivial", task, 1, tmp_path_factory.mktemp(f"trivial_{task}"), monkeypatch))[0]
            for task in EVALUATION_TASKS}


@pytest.mark.parametrize("task_name", EVALUATION_TASKS)
@pytest.mark.parametrize("baseline", list(READINGS))
def test_baseline_beats_trivial_on_a_virtual_clock(baseline, task_name, trivial_scores,
                                                   tmp_path, monkeypatch):
    prediction = predict_on_a_virtual_clock(baseline, task_name, READINGS[baseline], tmp_path,
                                            monkeypatch)
    score, higher_is_better = primary_score(task_name, prediction)
    trivial = trivial_scores[task_name]
    assert (score > trivial) if higher_is_better else (score < trivial), (score, trivial)


@pytest.mark.slow
@pytest.mark.extended
@pytest.mark.parametrize("baseline", ["mean_field_vi", "mc_dropout", "sghmc", "multi_swag", "hmc"])
def test_baseline_runs_every_task_through_the_local_run(baseline, tmp_path):
    result = run_baseline(baseline, "evaluation", tmp_path, BUDGET)
    assert_scored_as_the_platform_would(result, EVALUATION_TASKS, BUDGET)


def load_baseline_modules(name, tmp_path):
    """The baseline as a submission sees it (declared_model.py and networks.py next to
    training.py), and the kit's modules it imported: {module name: module}."""
    for module in ("declared_model", "networks"):
        (tmp_path / f"{module}.py").write_text(
            (REPO / "kinds" / "bdl2021" / "runtime" / f"{module}.py").read_text())
    names = ("declared_model", "networks", "training", "sgld", name)
    saved = {module: sys.modules.pop(module) for module in names if module in sys.modules}
    sys.path[:0] = [str(BASELINES), str(tmp_path)]
    try:
        importlib.import_module(name)
        return {module: sys.modules[module] for module in names if module in sys.modules}
    finally:                    # leave no trace for other tests' imports of the same names
        del sys.path[:2]
        for module in names:
            sys.modules.pop(module, None)
        sys.modules.update(saved)


def load_baseline(name, tmp_path):
    return load_baseline_modules(name, tmp_path)[name]


def on_a_virtual_clock(name, tmp_path, monkeypatch):
    """The baseline, it and the kit's modules it imported reading the time from a new
    virtual clock: (module, clock)."""
    modules = load_baseline_modules(name, tmp_path)
    clock = VirtualClock(TICK)
    clock.install(monkeypatch, *modules.values())
    return modules[name], clock


def toy_task(task_type, layer_sizes, time_left):
    classification = task_type == "classification"
    return types.SimpleNamespace(
        task_type=task_type, n_test=7, num_classes=3 if classification else None,
        num_samples=None if classification else 11,
        model={"type": "mlp", "activation": "tanh", "layer_sizes": list(layer_sizes)},
        likelihood={"name": "softmax" if classification else "gaussian"},
        prior={"variance": 0.2}, time_left=time_left)


@pytest.mark.parametrize("name", ["mean_field_vi", "mc_dropout"])
@pytest.mark.parametrize("task_type", ["classification", "regression"])
def test_predictive_shapes_and_finiteness(name, task_type, tmp_path, monkeypatch):
    """A budget of 1000 readings, a checkpoint due every 5 steps: the training steps after
    the start leave time for several checkpoints, on any machine."""
    module, clock = on_a_virtual_clock(name, tmp_path, monkeypatch)
    monkeypatch.setattr(module, "CHECKPOINT_EVERY", 5)
    rng = np.random.default_rng(0)
    x_train, x_test = rng.normal(size=(40, 4)), rng.normal(size=(7, 4))
    y_train = rng.integers(0, 3, 40) if task_type == "classification" else rng.normal(size=40)
    outputs = 3 if task_type == "classification" else 2
    checkpoints = []
    task = toy_task(task_type, (4, 6, 5, outputs), clock.budget(1000 * TICK))
    final = module.predict(task, x_train, y_train, x_test, checkpoints.append)
    assert len(checkpoints) > 1, "no anytime checkpoint"
    for prediction in checkpoints + [final]:
        assert np.all(np.isfinite(prediction))
        if task_type == "classification":
            assert prediction.shape == (7, 3)
            assert np.allclose(prediction.sum(axis=1), 1.0) and np.all(prediction >= 0)
        else:
            assert prediction.shape == (7, 11)


@pytest.mark.parametrize("name", ["mean_field_vi", "mc_dropout"])
def test_same_seed_same_steps_same_predictive(name, tmp_path, monkeypatch):
    """Deterministic given the seed: a fixed number of steps, far inside the budget on the
    virtual clock, repeats exactly."""
    module, clock = on_a_virtual_clock(name, tmp_path, monkeypatch)
    monkeypatch.setattr(module, "STEPS", 50)
    rng = np.random.default_rng(1)
    x_train, x_test = rng.normal(size=(30, 4)), rng.normal(size=(7, 4))
    y_train = rng.integers(0, 3, 30)
    first, second = (module.predict(toy_task("classification", (4, 6, 3), clock.budget(60.0)),
                                    x_train, y_train, x_test, lambda _: None)
                     for _ in range(2))
    assert np.array_equal(first, second)


def test_a_networks_gradient_is_summed_over_row_chunks(tmp_path):
    """A declared network's potential and gradient over 300 rows, in chunks of 128, are the
    whole batch's (ResNet-20 on 500 CIFAR images in one go needed 4 GiB: the slice run of
    benchmarks/bdl_cifar_size.py)."""
    from bdl_network_examples import example
    training = load_baseline("training", tmp_path)
    spec = {"type": "sequential", "input_shape": [6, 6, 1], "outputs": 3,
            "layers": [{"type": "conv", "channels": 2, "kernel": 3},
                       {"type": "activation", "name": "swish"}, {"type": "flatten"},
                       {"type": "dense", "units": 3}]}
    network, theta, x = example(spec, rows=300)
    y = np.random.default_rng(1).integers(0, 3, 300)
    chunked = training.potential_and_grad(network, "softmax", 0.5, theta, x, y, scale=2.0)
    assert training.GRADIENT_ROWS < 300
    output, vjp = network.output_and_vjp(theta, network.prepare_inputs(x))
    log_lik, output_grad = training.log_likelihood_and_output_grad("softmax", output, y)
    whole_grad = -2.0 * vjp(output_grad) + theta / 0.5
    assert np.isclose(chunked[0], -2.0 * log_lik + 0.5 * float(theta @ theta) / 0.5)
    assert np.allclose(chunked[1], whole_grad, rtol=1e-10, atol=1e-10)

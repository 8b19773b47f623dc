"""The BDL kit's PyTorch baselines (torch_deep_ensemble, torch_sghmc, torch_mc_dropout,
torch_mfvi) against the participant contract, on the CPU: each imported as a submission
folder holds it (beside torch_training.py, declared_model.py, declared_model_torch.py and
networks.py), given the real ``participant.Task`` of a small declared convolutional network;
each returns the contract's shape, finite, rows summing to 1, checkpoints early, stops within
its budget, and repeats itself given its seed when no deadline cuts it short. Skipped where
torch is not installed (the project's own venv)."""
import importlib
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kinds.bdl2021.runtime.participant import Task  # noqa: E402
from virtual_clock import VirtualClock  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
BASELINES = REPO / "kinds" / "bdl2021" / "kit" / "baselines"
RUNTIME = REPO / "kinds" / "bdl2021" / "runtime"
SUPPORT = (BASELINES / "torch_training.py", RUNTIME / "declared_model.py",
           RUNTIME / "declared_model_torch.py", RUNTIME / "networks.py")
NAMES = ("torch_deep_ensemble", "torch_sghmc", "torch_mc_dropout", "torch_mfvi")
MODULES = ("torch_training", "declared_model", "declared_model_torch", "networks") + NAMES
# Few steps, so that a run without a deadline takes a second or so.
QUICK = {"torch_deep_ensemble": {"MEMBERS": 2, "EPOCHS": 2},
         "torch_sghmc": {"STEPS": 60, "BURN_IN": 20, "KEEP_EVERY": 5, "CHECKPOINT_EVERY": 20,
                         "WARM_EPOCHS": 1, "CURVATURE_ITERATIONS": 5},
         "torch_mc_dropout": {"STEPS": 40, "CHECKPOINT_EVERY": 10},
         "torch_mfvi": {"STEPS": 40, "MAP_EPOCHS": 1, "CHECKPOINT_EVERY": 10}}
CONV_NET = {"type": "sequential", "input_shape": [8, 8, 1],
            "layers": [{"type": "conv", "channels": 4, "kernel": 3},
                       {"type": "activation", "name": "relu"},
                       {"type": "max_pool", "size": 2}, {"type": "flatten"},
                       {"type": "dense", "units": 16}, {"type": "activation", "name": "swish"},
                       {"type": "dense", "units": 3}]}


@pytest.fixture(scope="module")
def baselines(tmp_path_factory):
    """The modules as a submission folder holds them; no trace left in sys.modules."""
    folder = tmp_path_factory.mktemp("torch_submission")
    for path in SUPPORT + tuple(BASELINES / f"{name}.py" for name in NAMES):
        shutil.copyfile(path, folder / path.name)
    saved = {name: sys.modules.pop(name) for name in MODULES if name in sys.modules}
    sys.path.insert(0, str(folder))
    try:
        yield {name: importlib.import_module(name) for name in NAMES}
    finally:
        sys.path.remove(str(folder))
        for name in MODULES:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


@pytest.fixture(autouse=True)
def one_thread():
    """The suite's workers share two cores in CI: torch's threads spinning against each other
    made steps many times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def quick(module, monkeypatch):
    for key, value in QUICK[module.__name__].items():
        monkeypatch.setattr(module, key, value)


def problem(task_type, seed=0, n_train=150, n_test=23):
    """Random 8x8x1 images whose class (or value) is the brightness of a quadrant."""
    rng = np.random.default_rng(seed)
    x = rng.random((n_train + n_test, 8, 8, 1))
    quadrants = x.reshape(-1, 2, 4, 2, 4).mean(axis=(2, 4)).reshape(-1, 4)
    y = (quadrants.argmax(axis=1) % 3 if task_type == "classification"
         else 4 * (quadrants[:, 0] - quadrants[:, 3]))
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def task_of(task_type, seconds, n_test=23, model=CONV_NET):
    classification = task_type == "classification"
    outputs = 3 if classification else 2
    if model.get("layers"):
        model = {**model, "outputs": outputs,
                 "layers": model["layers"][:-1] + [{"type": "dense", "units": outputs}]}
    declaration = {"model": model,
                   "likelihood": {"name": "softmax" if classification else "gaussian"},
                   "prior": {"variance": 1.0}}
    spec = {"name": "toy", "task_type": task_type, "budget_seconds": seconds,
            "contract": {"n_test": n_test, "width": 3 if classification else 11,
                         "declaration": declaration}}
    return Task(spec, time.monotonic())


def check(prediction, task):
    assert np.all(np.isfinite(prediction))
    if task.task_type == "classification":
        assert prediction.shape == (task.n_test, task.num_classes)
        assert np.all(prediction >= 0) and np.allclose(prediction.sum(axis=1), 1.0)
    else:
        assert prediction.shape == (task.n_test, task.num_samples)


@pytest.mark.parametrize("task_type", ["classification", "regression"])
@pytest.mark.parametrize("name", NAMES)
def test_the_contracts_shapes_checkpoints_and_budget(baselines, name, task_type, monkeypatch):
    """A budget of 200 readings of a virtual clock (tests/virtual_clock.py) cuts every
    baseline short: each aims at its half, checkpoints on the way, and returns a prediction
    of the contract's shape, on any machine at any speed (on 2 s of wall time a loaded
    machine could spend the half before a first checkpoint). How long it takes on wall time
    is the ingestion's hard budget's to bound:
    test_the_torch_deep_ensemble_through_the_real_ingestion_program runs one under it."""
    clock = VirtualClock(0.01)
    clock.install(monkeypatch, baselines[name], sys.modules["torch_training"])
    x_train, y_train, x_test, _ = problem(task_type)
    task = task_of(task_type, seconds=2.0)
    task.time_left = clock.budget(2.0)
    saved = []
    final = baselines[name].predict(task, x_train, y_train, x_test, saved.append)
    assert saved, "no anytime checkpoint"
    for prediction in saved + [final]:
        check(prediction, task)


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_steps_same_predictive(baselines, name, monkeypatch):
    """Deterministic given the seed on the CPU: a fixed number of steps (no deadline)
    repeats exactly; the regression draws too."""
    quick(baselines[name], monkeypatch)
    for task_type in ("classification", "regression"):
        x_train, y_train, x_test, _ = problem(task_type, seed=1, n_train=60)
        first, second = (baselines[name].predict(task_of(task_type, 600.0), x_train, y_train,
                                                 x_test, lambda _: None) for _ in range(2))
        assert np.array_equal(first, second)
        check(first, task_of(task_type, 600.0))


def test_the_deep_ensemble_learns_the_toy_task(baselines, monkeypatch):
    """Not only shapes: a few epochs of the declared network beat chance (1/3) clearly."""
    monkeypatch.setattr(baselines["torch_deep_ensemble"], "MEMBERS", 2)
    monkeypatch.setattr(baselines["torch_deep_ensemble"], "EPOCHS", 30)
    monkeypatch.setattr(baselines["torch_deep_ensemble"], "LEARNING_RATE", 1e-2)
    x_train, y_train, x_test, y_test = problem("classification", n_train=400, n_test=200)
    p = baselines["torch_deep_ensemble"].predict(task_of("classification", 600.0, 200),
                                                 x_train, y_train, x_test, lambda _: None)
    assert (p.argmax(axis=1) == y_test).mean() > 0.6


def test_mc_dropout_drops_only_the_final_dense_layers_inputs(baselines):
    """With p = 0 the dropout network is the declared one; P passes at once are P x batch
    rows; the weight decay (1 - p) / sigma^2 is on the final dense weights only."""
    module = baselines["torch_mc_dropout"]
    training = sys.modules["torch_training"]
    task = task_of("classification", 600.0)
    x_train, y_train, x_test, _ = problem("classification")
    model = training.DeclaredModel(task, x_train, y_train)
    theta = model.initial(np.random.default_rng(0))
    layers = sum(map(module.is_dense_weight, model.network.parameters))
    assert layers == 2
    generator = training.seeded(0, model.device)
    plain = model.outputs(theta, model.x_train[:5])
    stacked = model.outputs(theta, model.x_train[:5], module.FinalDropout(layers, generator, 7))
    assert stacked.shape == (35, 3)
    assert not torch.allclose(stacked[:5], plain)       # some units dropped (p = 0.1)
    decay = module.decay_vector(model)
    names = [p.name for p in model.network.parameters]
    final = names.index("6.dense/w")
    start, end = model.network.offsets[final], model.network.offsets[final + 1]
    assert torch.all(decay[start:end] == 0.9) and torch.all(decay[:start] == 1.0)
    assert torch.all(decay[end:] == 1.0)
    module.DROP, drop = 0.0, module.DROP
    try:
        same = model.outputs(theta, model.x_train[:5], module.FinalDropout(layers, generator, 2))
    finally:
        module.DROP = drop
    assert torch.equal(same[:5], plain) and torch.equal(same[5:], plain)


@pytest.mark.parametrize("name", ["torch_mc_dropout", "torch_sghmc"])
def test_a_tanh_mlp_declaration_works_too(baselines, name, monkeypatch):
    """The embedded tasks' declared model, the tanh MLP (declared_model's own class)."""
    quick(baselines[name], monkeypatch)
    rng = np.random.default_rng(3)
    x_train, x_test = rng.normal(size=(40, 4)), rng.normal(size=(7, 4))
    y_train = rng.integers(0, 3, 40)
    task = task_of("classification", 600.0, 7, {"type": "mlp", "layer_sizes": [4, 6, 3]})
    check(baselines[name].predict(task, x_train, y_train, x_test, lambda _: None), task)


@pytest.mark.slow
def test_the_torch_deep_ensemble_through_the_real_ingestion_program(tmp_path):
    """The development phase of the default competition (iris and digits under tanh MLPs,
    digits_cnn under a CNN), the ingestion program assembled by the builder as for a GPU
    image (the resident-memory rule: CUDA's torch maps more address space than the CPU
    rule's RLIMIT_AS allows, which failed its import on an H200 machine) and run as the worker
    runs it, this Python (with torch) as the image's, the submission folder a torch baseline
    needs: submission.py beside torch_training.py, declared_model.py, declared_model_torch.py
    and networks.py. Every task ends ok with predictions of the contract's shape."""
    from ingestion_program.ingest.config import RESIDENT
    from runtime.formats import read_run_record
    from ingestion_harness import new_run, prepare, processes_of, run_ingestion
    root = tmp_path / "prepared"
    plan = prepare(root, budget=8.0, limits={"memory_rule": RESIDENT})
    run = new_run(root, tmp_path / "run", None)
    program = run / "run" / "program"
    shutil.copyfile(BASELINES / "torch_deep_ensemble.py", program / "submission.py")
    for path in SUPPORT:
        shutil.copyfile(path, program / path.name)
    result = run_ingestion(run, python=sys.executable)
    assert result.returncode == 0, result.stdout + result.stderr
    record = read_run_record(run / "run" / "output" / "ingestion_record.json")
    for task in plan.tasks:
        assert record.tasks[task.name].status == "ok", record.tasks[task.name].message
    assert processes_of(tmp_path) == []

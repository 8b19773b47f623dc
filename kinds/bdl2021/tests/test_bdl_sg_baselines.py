"""The SGHMC and MultiSWAG baselines' contract (shapes, finite values, determinism), called
directly on an embedded task; their local runs against the trivial floor are in
test_bdl_more_baselines with the other added baselines."""
import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]
BASELINES = REPO / "kinds" / "bdl2021" / "kit" / "baselines"
EMBEDDED = REPO / "kinds" / "bdl2021" / "reference" / "embedded"
METHODS = ("sghmc", "multi_swag")


class FakeTask:
    """The participant contract's task object for an embedded task, with a generous budget."""

    def __init__(self, name):
        declaration = json.loads((EMBEDDED / name / f"{name}_task.json").read_text())
        self.name = name
        self.task_type = declaration["kind"]
        self.n_test = declaration["n_test"]
        self.num_classes = declaration.get("num_classes")
        self.num_samples = declaration.get("num_samples")
        self.model, self.likelihood = declaration["model"], declaration["likelihood"]
        self.prior = declaration["prior"]

    def time_left(self):
        return 600.0


@pytest.fixture
def baseline_module(monkeypatch):
    """A baseline imported as in the kit, where the declared model sits next to it."""
    import importlib.util
    for name in ("networks", "declared_model"):        # declared_model imports networks
        spec = importlib.util.spec_from_file_location(
            name, REPO / "kinds" / "bdl2021" / "runtime" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name, module)
        spec.loader.exec_module(module)
    monkeypatch.syspath_prepend(str(BASELINES))

    def load(name, **settings):
        for stale in (name, "training", "sgld"):     # bound to this test's declared_model
            monkeypatch.delitem(sys.modules, stale, raising=False)
        module = importlib.import_module(name)
        for key, value in settings.items():
            monkeypatch.setattr(module, key, value)
        return module
    return load


SHORT = {"sghmc": {"STEPS": 300, "BURN_IN": 100, "KEEP_EVERY": 10, "CHECKPOINT_EVERY": 100},
         "multi_swag": {"MEMBERS": 2, "ADAM_STEPS": 100, "SWAG_STEPS": 100, "DRAWS_PER_MEMBER": 5}}


@pytest.mark.parametrize("task_name", ["iris", "diabetes_gap"])
@pytest.mark.parametrize("baseline", METHODS)
def test_predictions_have_the_contract_shape_and_repeat_given_the_seed(
        baseline, task_name, baseline_module):
    module = baseline_module(baseline, **SHORT[baseline])
    task = FakeTask(task_name)
    with np.load(EMBEDDED / task_name / f"{task_name}.npz") as data:
        arrays = data["x_train"], data["y_train"], data["x_test"]
    checkpoints = []
    first = module.predict(task, *arrays, checkpoints.append)
    second = module.predict(task, *arrays, lambda _: None)
    width = task.num_classes if task.task_type == "classification" else task.num_samples
    assert first.shape == (task.n_test, width) and np.all(np.isfinite(first))
    assert checkpoints and all(c.shape == first.shape for c in checkpoints)
    if task.task_type == "classification":
        assert np.allclose(first.sum(axis=1), 1.0)
    np.testing.assert_array_equal(first, second)


def test_the_curvature_search_stops_at_its_deadline(baseline_module):
    """The SG baselines and HMC size their steps by a power iteration of twenty full-batch
    gradients, which on a large network outlasted a short budget before any checkpoint (the
    organizer matrix's LeNet task, 3 s). Past its deadline it stops with the estimate so far;
    before it, all twenty run and give the same number as without a deadline."""
    import time
    sgld = baseline_module("sgld")
    hessian = np.diag([4.0, 1.0, 0.5])
    calls = []

    def gradient(theta):
        calls.append(1)
        return hessian @ theta

    theta = np.ones(3)
    unbounded = sgld.largest_curvature(gradient, theta, np.random.default_rng(0))
    assert len(calls) == 21 and abs(unbounded - 4.0) < 1e-3
    calls.clear()
    assert sgld.largest_curvature(gradient, theta, np.random.default_rng(0),
                                  deadline=time.monotonic() + 600) == unbounded
    calls.clear()
    passed = sgld.largest_curvature(gradient, theta, np.random.default_rng(0),
                                    deadline=time.monotonic() - 1)
    assert len(calls) == 2 and np.isfinite(passed) and passed > 0   # the base and one product


def test_the_trivial_baseline_cuts_its_prior_draws_to_its_time(baseline_module):
    """Regression: each of the 200 prior draws is a forward pass, too many for a large network
    on a short budget (the matrix's retinopathy CNN, 2 s, timed out with nothing). With time
    for all it gives the prediction it always gave; with almost none, one draw, after a
    checkpoint."""
    trivial = baseline_module("trivial")
    training = sys.modules["training"]
    task = FakeTask("diabetes_gap")
    inputs = np.load(EMBEDDED / "diabetes_gap" / "diabetes_gap.npz")
    x_train, y_train, x_test = inputs["x_train"], inputs["y_train"], inputs["x_test"]
    kept = []
    full = trivial.predict(task, x_train, y_train, x_test, kept.append)
    model, _, prepared = training.task_model_and_inputs(task, x_train, x_test)
    rng = np.random.default_rng(2)
    draws = [rng.normal(0.0, task.prior["variance"] ** 0.5, model.num_parameters)
             for _ in range(trivial.PRIOR_DRAWS)]
    np.testing.assert_array_equal(full, training.predictive(task, model, draws, prepared, rng))
    task.time_left = lambda: 1e-9
    short = trivial.predict(task, x_train, y_train, x_test, kept.append)
    rng = np.random.default_rng(2)
    [rng.normal(0.0, 1.0, model.num_parameters) for _ in range(trivial.PRIOR_DRAWS)]
    assert len(kept) == 2 and short.shape == full.shape and np.isfinite(short).all()
    np.testing.assert_array_equal(
        short, training.predictive(task, model, draws[:1], prepared, rng))

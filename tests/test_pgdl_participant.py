"""The PGDL 2020 child-side contract (kinds/pgdl2020/runtime/participant.py) and the kit's
baselines: the numpy MLP's forward and backward passes, the per-model loop of ``call`` and its
NaNs, and that each baseline gives a finite, deterministic number quickly."""
import importlib.util
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
KIND = REPO / "kinds" / "pgdl2020"
BASELINES = ("sum_of_squares", "sharpness", "margin")


def _load(path, name):
    """Loads a file as a lone module, as the sandbox does (no package, no repository imports)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


participant = _load(KIND / "runtime" / "participant.py", "pgdl_participant_under_test")

CONFIG = [{"layer_name": "Dense", "units": 6, "activation": "tanh"},
          {"layer_name": "Dropout", "rate": 0.3},
          {"layer_name": "Dense", "units": 5, "activation": "relu"},
          {"layer_name": "Dense", "units": 4, "activation": "linear"},
          {"layer_name": "Dense", "units": 3, "activation": "linear"}]


def _random_weights(layers, d, rng, scale=1.0):
    weights, fan_in = {}, d
    dense = [layer for layer in layers if layer["layer_name"] == "Dense"]
    for k, layer in enumerate(dense):
        weights[f"dense_{k}/kernel"] = (scale * rng.standard_normal((fan_in, layer["units"]))
                                        / np.sqrt(fan_in)).astype(np.float32)
        weights[f"dense_{k}/bias"] = (0.1 * rng.standard_normal(layer["units"])).astype(np.float32)
        fan_in = layer["units"]
    return weights


def make_model(folder, layers=CONFIG, d=4, seed=0, init=True):
    rng = np.random.default_rng(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_config": layers, "input_shape": [d]}))
    np.savez(folder / "weights.npz", **_random_weights(layers, d, rng))
    if init:
        np.savez(folder / "weights_init.npz", **_random_weights(layers, d, rng))
    return folder


def make_dataset(task, n=64, d=4, classes=3, seed=1):
    rng = np.random.default_rng(seed)
    folder = Path(task) / "dataset_1"
    folder.mkdir(parents=True, exist_ok=True)
    inputs = rng.standard_normal((n, d)).astype(np.float32)
    outputs = rng.integers(0, classes, size=n).astype(np.int32)
    np.savez(folder / "train.npz", inputs=inputs, outputs=outputs)
    return folder


@pytest.fixture
def task(tmp_path):
    for i in range(3):
        make_model(tmp_path / f"model_{i}", seed=10 + i)
    make_dataset(tmp_path)
    return tmp_path


def _batch(task, n=7):
    dataset = participant.Dataset(task / "dataset_1")
    return dataset.take(n)


def _flat_params(weights):
    return [array for pair in weights for array in pair]


def _rebuild(flat):
    return [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]


def test_model_description(task):
    model = participant.Model(task / "model_0")
    assert model.id == "model_0"
    assert [layer["name"] for layer in model.layers] == ["Dense", "Dropout", "Dense", "Dense",
                                                         "Dense"]
    assert model.layers[1]["rate"] == 0.3 and model.layers[0]["activation"] == "tanh"
    assert model.input_shape == (4,) and model.num_classes == 3
    shapes = [(k.shape, b.shape) for k, b in model.weights]
    assert shapes == [((4, 6), (6,)), ((6, 5), (5,)), ((5, 4), (4,)), ((4, 3), (3,))]
    assert model.num_parameters == sum(k.size + b.size for k, b in model.weights)
    assert model.num_parameters == 30 + 35 + 24 + 15
    assert all(k.dtype == np.float64 for k, _ in model.weights)
    assert model.initial_weights is not None
    assert not np.allclose(model.initial_weights[0][0], model.weights[0][0])
    with pytest.raises(ValueError):
        model.weights[0][0][0, 0] = 1.0          # read-only
    stored = np.load(task / "model_0" / "weights.npz")
    np.testing.assert_array_equal(model.weights[2][0], stored["dense_2/kernel"])


def test_no_initial_weights(tmp_path):
    model = participant.Model(make_model(tmp_path / "model_a", init=False))
    assert model.initial_weights is None


def test_forward_and_activations(task):
    model = participant.Model(task / "model_1")
    x, y = _batch(task)
    a = x.astype(np.float64)
    expected = []
    dense = iter(model.weights)
    for layer in model.layers:
        if layer["name"] == "Dense":
            kernel, bias = next(dense)
            z = a @ kernel + bias
            a = {"relu": np.maximum(z, 0), "tanh": np.tanh(z), "linear": z}[layer["activation"]]
            expected.append((z, a))
        else:
            expected.append((a, a))
    got = model.activations(x)
    assert len(got) == len(model.layers)
    for (pre, post), (pre_e, post_e) in zip(got, expected):
        np.testing.assert_allclose(pre, pre_e, rtol=1e-12)
        np.testing.assert_allclose(post, post_e, rtol=1e-12)
    np.testing.assert_allclose(model.logits(x), expected[-1][1], rtol=1e-12)
    np.testing.assert_allclose(model.predict(x), model.logits(x))
    assert model.logits(x).shape == (len(x), 3)
    probabilities = model.probabilities(x)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)
    loss = -np.mean(np.log(probabilities[np.arange(len(y)), y]))
    assert model.loss(x, y) == pytest.approx(loss, rel=1e-12)
    assert model.accuracy(x, y) == np.mean(model.logits(x).argmax(1) == y)


def test_dropout_is_identity(tmp_path):
    with_dropout = participant.Model(make_model(tmp_path / "model_d", seed=3))
    without = [layer for layer in CONFIG if layer["layer_name"] != "Dropout"]
    plain = participant.Model(make_model(tmp_path / "model_p", layers=without, seed=3))
    x = np.random.default_rng(0).standard_normal((9, 4))
    np.testing.assert_array_equal(with_dropout.logits(x), plain.logits(x))
    pre, post = with_dropout.activations(x)[1]
    np.testing.assert_array_equal(pre, post)
    np.testing.assert_array_equal(post, with_dropout.activations(x)[0][1])


def test_gradients_match_finite_differences(task):
    model = participant.Model(task / "model_2")
    x, y = _batch(task)
    analytic = _flat_params(model.gradients(x, y))
    flat = [np.array(array) for array in _flat_params(model.weights)]
    h = 1e-6
    for i, array in enumerate(flat):
        numeric = np.zeros_like(array)
        for index in np.ndindex(array.shape):
            plus = [a.copy() for a in flat]
            minus = [a.copy() for a in flat]
            plus[i][index] += h
            minus[i][index] -= h
            numeric[index] = (model.with_weights(_rebuild(plus)).loss(x, y)
                              - model.with_weights(_rebuild(minus)).loss(x, y)) / (2 * h)
        assert analytic[i].shape == array.shape
        np.testing.assert_allclose(analytic[i], numeric, rtol=1e-5, atol=1e-9)


def test_input_gradients_match_finite_differences(task):
    model = participant.Model(task / "model_0")
    x, y = _batch(task)
    x = np.array(x, dtype=np.float64)
    analytic = model.input_gradients(x, y)
    assert analytic.shape == x.shape
    numeric = np.zeros_like(x)
    h = 1e-6
    for index in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[index] += h
        minus[index] -= h
        numeric[index] = (model.loss(plus, y) - model.loss(minus, y)) / (2 * h)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-9)


def test_with_weights_leaves_the_model_alone(task):
    model = participant.Model(task / "model_0")
    x, _ = _batch(task)
    before = model.logits(x)
    doubled = model.with_weights([(2 * k, 2 * b) for k, b in model.weights])
    assert not np.allclose(doubled.logits(x), before)
    np.testing.assert_array_equal(model.logits(x), before)
    assert doubled.layers == model.layers and doubled.initial_weights is not None
    with pytest.raises(ValueError):
        model.with_weights(model.weights[:-1])


def test_dataset(task):
    dataset = participant.Dataset(task / "dataset_1")
    assert dataset.size == 64 and dataset.input_shape == (4,) and dataset.num_classes == 3
    x, y = dataset.take(10)
    assert x.shape == (10, 4) and x.dtype == np.float64 and y.dtype == np.int64
    batches = list(dataset.batches(30))
    assert [len(b[1]) for b in batches] == [30, 30, 4]
    np.testing.assert_array_equal(np.concatenate([b[0] for b in batches]), dataset.inputs)
    first = [b[1] for b in dataset.batches(16, shuffle=True, seed=5)]
    again = [b[1] for b in dataset.batches(16, shuffle=True, seed=5)]
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert sorted(np.concatenate(first).tolist()) == sorted(dataset.labels.tolist())
    with pytest.raises(ValueError):
        dataset.inputs[0, 0] = 1.0


def _spec(task, ids, seconds):
    return {"data": str(task), "contract": {"model_ids": ids, "seconds_per_model": seconds}}


def test_call_records_nan_for_bad_values_and_slow_models(task, capfd):
    seen = []

    def measure(model, dataset):
        seen.append((model.id, dataset.size))
        if model.id == "model_1":
            return "big"
        if model.id == "model_2":
            time.sleep(2.0)             # twice its limit: late however fast the machine
            return 1.0
        return np.float32(2.5)

    checkpoints = []
    values = participant.call(measure, _spec(task, ["model_0", "model_1", "model_2"], 1.0),
                              time.monotonic, lambda v: checkpoints.append(np.array(v)))
    assert seen == [("model_0", 64), ("model_1", 64), ("model_2", 64)]
    assert values.dtype == np.float64 and values[0] == 2.5
    assert math.isnan(values[1]) and math.isnan(values[2])
    assert len(checkpoints) == 3
    np.testing.assert_array_equal(checkpoints[0], [2.5, np.nan, np.nan])
    np.testing.assert_array_equal(checkpoints[1], [2.5, np.nan, np.nan])
    np.testing.assert_array_equal(checkpoints[2], values)
    err = capfd.readouterr().err
    assert "[model_1]" in err and "not a number" in err
    assert "[model_2]" in err and "per model" in err


def test_call_bare_ids_and_an_error_costs_one_model(task, capfd):
    def measure(model, dataset):
        if model.id == "model_0":
            raise RuntimeError("boom")
        return len(model.weights)

    checkpoints = []
    values = participant.call(measure, _spec(task, [0, 1, 2], 10), time.monotonic,
                              checkpoints.append)
    assert math.isnan(values[0]) and values[1:].tolist() == [4.0, 4.0]
    assert len(checkpoints) == 3
    assert "RuntimeError: boom" in capfd.readouterr().err


def test_call_raises_when_every_model_raises(task):
    def measure(model, dataset):
        raise KeyError("nothing works")

    checkpoints = []
    with pytest.raises(KeyError):
        participant.call(measure, _spec(task, ["model_0", "model_1"], 10), time.monotonic,
                         checkpoints.append)
    assert len(checkpoints) == 2


def test_a_later_process_leaves_the_judgement_to_the_ingestion(task):
    """A process started after another died saw part of the zoo only: it returns its NaNs."""
    def measure(model, dataset):
        raise KeyError("nothing works")

    spec = {**_spec(task, ["model_0", "model_1", "model_2"], 10), "first_unit": 1}
    values = participant.call(measure, spec, time.monotonic, lambda v: None)
    assert np.isnan(values).all()


def test_call_survives_base_exceptions_and_a_replaced_stderr(task, capfd, monkeypatch):
    def measure(model, dataset):
        monkeypatch.setattr(sys, "stderr", None)       # our messages must still get out
        if model.id == "model_0":
            raise SystemExit(2)
        if model.id == "model_1":
            raise KeyboardInterrupt
        return 1.0

    values = participant.call(measure, _spec(task, ["model_0", "model_1", "model_2"], 10),
                              time.monotonic, lambda v: None)
    assert np.isnan(values[:2]).all() and values[2] == 1.0
    err = capfd.readouterr().err
    assert "[model_0] complexity() raised SystemExit: 2; its value is NaN" in err
    assert "[model_1] complexity() raised KeyboardInterrupt; its value is NaN" in err
    assert "in _measure" not in err and "in measure" in err      # their frames only


def _trained(tmp_path, steps=150):
    """A small model and data it fits: a few steps of gradient descent with ``gradients``."""
    rng = np.random.default_rng(7)
    d, classes, n = 8, 3, 400
    centers = rng.standard_normal((classes, d)) * 2
    labels = rng.integers(0, classes, size=n)
    inputs = centers[labels] + rng.standard_normal((n, d))
    make_dataset(tmp_path, n=1, d=d)            # the folder; replaced below
    np.savez(tmp_path / "dataset_1" / "train.npz", inputs=inputs.astype(np.float32),
             outputs=labels.astype(np.int32))
    layers = [{"layer_name": "Dense", "units": 32, "activation": "relu"},
              {"layer_name": "Dropout", "rate": 0.1},
              {"layer_name": "Dense", "units": 32, "activation": "relu"},
              {"layer_name": "Dense", "units": classes, "activation": "linear"}]
    model = participant.Model(make_model(tmp_path / "model_7", layers=layers, d=d, seed=2))
    dataset = participant.Dataset(tmp_path / "dataset_1")
    first = model.loss(dataset.inputs, dataset.labels)
    for step in range(steps):
        for x, y in dataset.batches(100, shuffle=True, seed=step):
            model = model.with_weights([(k - 0.1 * gk, b - 0.1 * gb) for (k, b), (gk, gb)
                                        in zip(model.weights, model.gradients(x, y))])
            break
    assert model.loss(dataset.inputs, dataset.labels) < first
    np.savez(tmp_path / "model_7" / "weights.npz", **{
        f"dense_{k}/{part}": array.astype(np.float32) for k, pair in enumerate(model.weights)
        for part, array in zip(("kernel", "bias"), pair)})
    return model, dataset


@pytest.mark.parametrize("name", BASELINES)
def test_baseline_is_finite_deterministic_and_fast(tmp_path, name):
    model, dataset = _trained(tmp_path)
    assert model.accuracy(dataset.inputs, dataset.labels) > 0.8
    module = _load(KIND / "kit" / "baselines" / f"{name}.py", f"pgdl_baseline_{name}")
    began = time.process_time()         # CPU time: a loaded machine does not inflate it
    value = module.complexity(model, dataset)
    elapsed = time.process_time() - began
    assert isinstance(value, float) and math.isfinite(value)
    assert module.complexity(model, dataset) == value
    assert elapsed < 2.0, f"{name}: {elapsed:.2f} s"
    # through the contract, as the child runner calls it
    values = participant.call(module.complexity, _spec(tmp_path, ["model_7"], 30),
                              time.monotonic, lambda v: None)
    assert np.isfinite(values).all()

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

REPO = Path(__file__).resolve().parents[3]
KIND = REPO / "kinds" / "pgdl2020"
BASELINES = ("sum_of_squares", "sharpness", "margin", "davies_bouldin")


def _load(path, name):
    """Loads a file as a lone module, as the sandbox does (no package, no repository imports)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


from kinds.pgdl2020.runtime import layers as nn  # noqa: E402
from kinds.pgdl2020.runtime import participant  # noqa: E402 - a package, as in the child

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


CONV = [{"layer_name": "Conv2D", "filters": 3, "kernel_size": [3, 3], "padding": "same",
         "activation": "relu"},
        {"layer_name": "Conv2D", "filters": 4, "kernel_size": 2, "strides": 2, "use_bias": False},
        {"layer_name": "BatchNormalization"},
        {"layer_name": "Activation", "activation": "tanh"},
        {"layer_name": "MaxPooling2D", "pool_size": 2, "strides": 1, "padding": "same"},
        {"layer_name": "Dropout", "rate": 0.2},
        {"layer_name": "AveragePooling2D", "pool_size": 2},
        {"layer_name": "Flatten"},
        {"layer_name": "Dense", "units": 5, "activation": "sigmoid"},
        {"layer_name": "Dense", "units": 3}]
IMAGE = (6, 6, 2)


def make_conv_model(folder, seed=0, layers=CONV, shape=IMAGE):
    """A convolutional network with every kind of weight, moving statistics away from 0 and 1."""
    rng = np.random.default_rng(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_config": layers,
                                                    "input_shape": list(shape)}))
    stack = nn.network(layers, shape)
    for name in ("weights.npz", "weights_init.npz"):
        arrays = {}
        for index, param, key in nn.weight_keys(stack):
            size = stack[index].params[param]
            draw = rng.standard_normal(size)
            arrays[key] = (np.abs(draw) + 0.5 if param in ("moving_variance", "gamma")
                           else 0.5 * draw).astype(np.float32)
        np.savez(folder / name, **arrays)
    return folder


@pytest.fixture
def float64(monkeypatch):
    """The layers in float64, so that finite differences check the calculus to 1e-5 (the
    arithmetic is the same code; float32 rounding would hide a wrong term)."""
    monkeypatch.setattr(nn, "DTYPE", np.float64)


def test_model_description(task):
    model = participant.Model(task / "model_0")
    assert model.id == "model_0"
    assert [layer["class_name"] for layer in model.layers] == ["Dense", "Dropout", "Dense",
                                                               "Dense", "Dense"]
    assert [layer["name"] for layer in model.layers] == ["dense_0", "dropout_0", "dense_1",
                                                         "dense_2", "dense_3"]
    assert model.layers[1]["config"]["rate"] == 0.3
    assert model.layers[0]["config"]["activation"] == "tanh"
    assert model.input_shape == (4,) and model.num_classes == 3
    assert model.weight_names == [f"dense_{k}/{part}" for k in range(4)
                                  for part in ("kernel", "bias")]
    assert [w.shape for w in model.weights] == [(4, 6), (6,), (6, 5), (5,), (5, 4), (4,),
                                                (4, 3), (3,)]
    assert model.num_parameters == 30 + 35 + 24 + 15 and all(model.trainable)
    assert all(w.dtype == np.float32 for w in model.weights)
    assert model.initial_weights is not None
    assert not np.allclose(model.initial_weights[0], model.weights[0])
    with pytest.raises(ValueError):
        model.weights[0][0, 0] = 1.0          # read-only
    stored = np.load(task / "model_0" / "weights.npz")
    np.testing.assert_array_equal(model.weights[4], stored["dense_2/kernel"])


def test_a_convolutional_model_lists_keras_weights_in_keras_order(tmp_path):
    model = participant.Model(make_conv_model(tmp_path / "model_c"))
    assert model.weight_names == [
        "conv2d_0/kernel", "conv2d_0/bias", "conv2d_1/kernel", "batch_normalization_0/gamma",
        "batch_normalization_0/beta", "batch_normalization_0/moving_mean",
        "batch_normalization_0/moving_variance", "dense_0/kernel", "dense_0/bias",
        "dense_1/kernel", "dense_1/bias"]
    assert model.trainable == [True] * 5 + [False, False] + [True] * 4
    assert model.weights[0].shape == (3, 3, 2, 3) and model.weights[2].shape == (2, 2, 3, 4)
    assert model.layers[4]["output_shape"] == (3, 3, 4)
    assert model.layers[4]["config"]["padding"] == "same" and model.num_classes == 3
    x = np.random.default_rng(1).standard_normal((5, *IMAGE)).astype(np.float32)
    outputs = model.activations(x)
    assert [o.shape[1:] for o in outputs] == [layer["output_shape"] for layer in model.layers]
    np.testing.assert_array_equal(outputs[-1], model.logits(x))
    np.testing.assert_array_equal(outputs[5], outputs[4])          # Dropout: the identity
    np.testing.assert_allclose(model.logits(x.reshape(5, -1)), model.logits(x))
    np.testing.assert_allclose(model.logits(x[0]), model.logits(x[:1]))
    with pytest.raises(ValueError, match=r"inputs of shape \(5, 6, 6\); the network takes "
                                         r"\(n, 6, 6, 2\)"):
        model.logits(x[..., 0])


def test_no_initial_weights(tmp_path):
    model = participant.Model(make_model(tmp_path / "model_a", init=False))
    assert model.initial_weights is None


def test_forward_matches_a_float64_computation(task):
    model = participant.Model(task / "model_1")
    x, y = _batch(task)
    a, expected = x.astype(np.float64), []
    weights = iter(model.weights)
    for layer in model.layers:
        if layer["class_name"] == "Dense":
            z = a @ next(weights).astype(np.float64) + next(weights)
            a = {"relu": np.maximum(z, 0), "tanh": np.tanh(z),
                 "linear": z}[layer["config"]["activation"]]
        expected.append(a)
    got = model.activations(x)
    assert len(got) == len(model.layers)
    for output, reference in zip(got, expected):
        assert output.dtype == np.float32
        np.testing.assert_allclose(output, reference, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(model.predict(x), model.logits(x))
    assert model.logits(x).shape == (len(x), 3)
    probabilities = model.probabilities(x)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-6)
    loss = -np.mean(np.log(probabilities[np.arange(len(y)), y].astype(np.float64)))
    assert model.loss(x, y) == pytest.approx(loss, rel=1e-5)
    assert model.accuracy(x, y) == np.mean(model.logits(x).argmax(1) == y)


def _finite_differences(loss, arrays, h=1e-6):
    """d loss / d each array, by central differences of ``loss(list of arrays)``."""
    numeric = []
    for i, array in enumerate(arrays):
        grad = np.zeros_like(array)
        for index in np.ndindex(array.shape):
            plus, minus = [a.copy() for a in arrays], [a.copy() for a in arrays]
            plus[i][index] += h
            minus[i][index] -= h
            grad[index] = (loss(plus) - loss(minus)) / (2 * h)
        numeric.append(grad)
    return numeric


@pytest.mark.parametrize("network", ["mlp", "conv"])
def test_gradients_match_finite_differences(task, tmp_path, float64, network):
    if network == "mlp":
        model, (x, y) = participant.Model(task / "model_2"), _batch(task)
    else:
        model = participant.Model(make_conv_model(tmp_path / "model_c", seed=4))
        rng = np.random.default_rng(2)
        x, y = rng.standard_normal((4, *IMAGE)), rng.integers(0, 3, size=4)
    model.batch_size = 3                        # two chunks: their sum is the whole's mean
    loss, analytic = model.loss_and_gradients(x, y)
    assert loss == pytest.approx(model.loss(x, y), rel=1e-12)
    numeric = _finite_differences(lambda arrays: model.with_weights(arrays).loss(x, y),
                                  [np.array(w, np.float64) for w in model.weights])
    for name, got, expected in zip(model.weight_names, analytic, numeric):
        assert got.shape == expected.shape, name
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-8, err_msg=name)
    inputs = model.input_gradients(x, y)
    assert inputs.shape == np.shape(x)
    numeric = _finite_differences(lambda arrays: model.loss(arrays[0], y), [np.array(x)])[0]
    np.testing.assert_allclose(inputs, numeric, rtol=1e-5, atol=1e-8)


def test_results_do_not_depend_on_the_batch_size(tmp_path):
    model = participant.Model(make_conv_model(tmp_path / "model_c", seed=5))
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((50, *IMAGE)).astype(np.float32), rng.integers(0, 3, size=50)
    whole = model.with_weights(model.weights)
    whole.batch_size, model.batch_size = 50, 7
    np.testing.assert_allclose(model.logits(x), whole.logits(x), rtol=1e-6, atol=1e-6)
    assert model.loss(x, y) == pytest.approx(whole.loss(x, y), rel=1e-5)
    for part, full in zip(model.gradients(x, y), whole.gradients(x, y)):
        np.testing.assert_allclose(part, full, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(model.input_gradients(x, y), whole.input_gradients(x, y),
                               rtol=1e-4, atol=1e-7)


def test_the_batch_size_bounds_the_memory_of_a_pass(tmp_path):
    """numpy reports its allocations to tracemalloc: the peak of a gradient pass over 512
    examples grows with the batch size, not with the 512."""
    import tracemalloc
    model = participant.Model(make_conv_model(tmp_path / "model_c", seed=6))
    x = np.random.default_rng(4).standard_normal((512, *IMAGE)).astype(np.float32)
    y = np.zeros(512, int)
    peaks = {}
    for size in (16, 512):
        model.batch_size = size
        tracemalloc.start()
        model.gradients(x, y)
        peaks[size] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peaks[16] * 4 < peaks[512], peaks


def test_with_weights_leaves_the_model_alone(task):
    model = participant.Model(task / "model_0")
    x, _ = _batch(task)
    before = model.logits(x)
    doubled = model.with_weights([2 * w for w in model.weights])
    assert not np.allclose(doubled.logits(x), before)
    np.testing.assert_array_equal(model.logits(x), before)
    assert doubled.layers == model.layers and doubled.initial_weights is not None
    with pytest.raises(ValueError, match="holds 7 arrays; the network has 8"):
        model.with_weights(model.weights[:-1])
    with pytest.raises(ValueError, match=r"dense_0/kernel: shape \(6, 4\), expected \(4, 6\)"):
        model.with_weights([model.weights[0].T] + model.weights[1:])


def test_dataset(task):
    dataset = participant.Dataset(task / "dataset_1")
    assert dataset.size == 64 and dataset.input_shape == (4,) and dataset.num_classes == 3
    x, y = dataset.take(10)
    assert x.shape == (10, 4) and x.dtype == np.float32 and y.dtype == np.int64
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
    assert math.isnan(values[0]) and values[1:].tolist() == [8.0, 8.0]
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
            model = model.with_weights([w - 0.1 * g for w, g
                                        in zip(model.weights, model.gradients(x, y))])
            break
    assert model.loss(dataset.inputs, dataset.labels) < first
    np.savez(tmp_path / "model_7" / "weights.npz", **dict(zip(model.weight_names, model.weights)))
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


def test_every_baseline_measures_a_convolutional_zoo(tmp_path):
    """Each kit measure runs on every layer type (Conv2D, pooling, batch normalisation with its
    untrained moving statistics, Dense) through the contract, and tells two networks apart."""
    for index in range(2):
        make_conv_model(tmp_path / f"model_{index}", seed=20 + index)
    inputs = np.random.default_rng(9).standard_normal((60, *IMAGE)).astype(np.float32)
    labels = participant.Model(tmp_path / "model_0").logits(inputs).argmax(1)   # it fits them
    (tmp_path / "dataset_1").mkdir()
    np.savez(tmp_path / "dataset_1" / "train.npz", inputs=inputs,
             outputs=labels.astype(np.int32))
    for name in BASELINES:
        module = _load(KIND / "kit" / "baselines" / f"{name}.py", f"pgdl_conv_{name}")
        values = participant.call(module.complexity, _spec(tmp_path, ["model_0", "model_1"], 60),
                                  time.monotonic, lambda v: None)
        assert np.isfinite(values).all() and values[0] != values[1], name


def test_the_training_images_are_mapped_from_the_file_not_read_up_front(tmp_path):
    from kinds.pgdl2020.reference.npz import write_npz
    rng = np.random.default_rng(5)
    images = rng.standard_normal((40, 6, 6, 2)).astype(np.float32)
    labels = rng.integers(0, 3, 40).astype(np.int32)
    for name, write in (("stored", lambda p, a: write_npz(p, a)),
                        ("compressed", lambda p, a: np.savez_compressed(p, **a))):
        folder = tmp_path / name
        folder.mkdir()
        write(folder / "train.npz", {"inputs": images, "outputs": labels})
        dataset = participant.Dataset(folder)
        assert isinstance(dataset.inputs, np.memmap) == (name == "stored")
        np.testing.assert_array_equal(dataset.inputs, images)
        np.testing.assert_array_equal(dataset.labels, labels)
        x, y = next(dataset.batches(16, shuffle=True, seed=1))
        assert x.shape == (16, 6, 6, 2) and x.dtype == np.float32
        with pytest.raises(ValueError):
            dataset.inputs[0, 0, 0, 0] = 1.0


def test_a_forward_pass_holds_one_layers_windows_at_a_time(tmp_path):
    """tracemalloc's peak of ``logits`` stays under half of the same pass keeping every
    layer's cache (the gradient pass needs them; a forward pass does not)."""
    import tracemalloc
    deep = [{"layer_name": "Conv2D", "filters": 8, "kernel_size": 3, "padding": "same",
             "activation": "relu"}] * 4 + [{"layer_name": "GlobalAveragePooling2D"},
                                           {"layer_name": "Dense", "units": 3}]
    model = participant.Model(make_conv_model(tmp_path / "model_c", seed=6, layers=deep,
                                              shape=(8, 8, 8)))
    x = np.random.default_rng(4).standard_normal((256, 8, 8, 8)).astype(np.float32)
    model.batch_size = 256
    peaks = []
    for run in (model.logits, lambda x: nn.run(model._stack, model._params, x)):
        tracemalloc.start()
        run(x)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[0] * 2 < peaks[1], peaks

"""The layers of the 2020 zoos (kinds/pgdl2020/runtime/layers.py) against JAX, an independent
implementation (lax.conv_general_dilated, lax.reduce_window, jax.grad; the benchmark's
reference, benchmarks/pgdl_layers_speed.py): outputs, the gradient
with respect to the inputs and to every parameter, on the three network families of the 2020
tasks, each layer setting (strides, SAME and VALID padding, no bias, every activation)."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kinds.pgdl2020.runtime import layers as L

REPO = Path(__file__).resolve().parents[3]
# JAX runs in a process of its own (as in test_bdl_reference_engine): it starts threads, and
# this test worker forks later
REFERENCE = """
import json, sys
sys.path.insert(0, {benchmarks!r})
import pgdl_layers_speed
pgdl_layers_speed.write_reference(json.loads({configs!r}), {shape!r}, {given!r}, {out!r})
"""


def jax_reference(configs, input_shape, params, x, labels, work: Path) -> dict:
    given, out = work / "given.npz", work / "reference.npz"
    np.savez(given, x=x, labels=labels, **{f"{index}/{name}": value
                                          for index, layer in enumerate(params)
                                          for name, value in layer.items()})
    script = REFERENCE.format(benchmarks=str(REPO / "benchmarks"), configs=json.dumps(configs),
                              shape=tuple(input_shape), given=str(given), out=str(out))
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300)
    if ran.returncode != 0 and "No module named 'jax'" in ran.stderr:
        pytest.skip("JAX is not installed in this environment")
    assert ran.returncode == 0, ran.stderr[-3000:]
    with np.load(out) as stored:
        return {key: stored[key] for key in stored.files}

VGG = [{"layer_name": "Conv2D", "filters": 6, "kernel_size": [3, 3], "padding": "same",
        "activation": "relu"},
       {"layer_name": "Conv2D", "filters": 5, "kernel_size": 3, "activation": "tanh"},
       {"layer_name": "MaxPooling2D", "pool_size": [2, 2]},
       {"layer_name": "Conv2D", "filters": 4, "kernel_size": [2, 3], "strides": [1, 2],
        "padding": "same", "use_bias": False, "activation": "sigmoid"},
       {"layer_name": "MaxPooling2D", "pool_size": 2, "strides": 1, "padding": "same"},
       {"layer_name": "Flatten"},
       {"layer_name": "Dense", "units": 16, "activation": "relu"},
       {"layer_name": "Dropout", "rate": 0.5},
       {"layer_name": "Dense", "units": 7, "use_bias": False}]
NIN = [{"layer_name": "Conv2D", "filters": 8, "kernel_size": 3, "strides": 2, "padding": "same"},
       {"layer_name": "BatchNormalization", "epsilon": 0.001},
       {"layer_name": "Activation", "activation": "relu"},
       {"layer_name": "Conv2D", "filters": 8, "kernel_size": 1, "activation": "relu"},
       {"layer_name": "AveragePooling2D", "pool_size": 3, "strides": 2, "padding": "same"},
       {"layer_name": "Conv2D", "filters": 5, "kernel_size": 1},
       {"layer_name": "GlobalAveragePooling2D"}]
ALL_CONV = [{"layer_name": "Conv2D", "filters": 6, "kernel_size": 3, "use_bias": False},
            {"layer_name": "BatchNormalization", "center": False},
            {"layer_name": "Activation", "activation": "relu"},
            {"layer_name": "AveragePooling2D", "pool_size": [2, 2], "padding": "valid"},
            {"layer_name": "Conv2D", "filters": 4, "kernel_size": 3, "padding": "same"},
            {"layer_name": "BatchNormalization", "scale": False},
            {"layer_name": "GlobalAveragePooling2D"},
            {"layer_name": "Dense", "units": 4}]
NETWORKS = {"vgg": (VGG, (12, 11, 3)), "network_in_network": (NIN, (13, 13, 2)),
            "all_conv": (ALL_CONV, (10, 10, 1))}


def random_params(stack, rng):
    params = []
    for layer in stack:
        made = {}
        for name, shape in layer.params.items():
            if name == "moving_variance":
                made[name] = rng.uniform(0.5, 2.0, shape)
            elif name in ("gamma",):
                made[name] = rng.uniform(0.5, 1.5, shape)
            else:
                made[name] = rng.normal(0, 0.5, shape)
        params.append({k: v.astype(np.float32) for k, v in made.items()})
    return params


# ---- the tests ----------------------------------------------------------------------------

@pytest.mark.parametrize("family", list(NETWORKS))
def test_outputs_and_every_gradient_equal_jaxs(family, tmp_path):
    configs, input_shape = NETWORKS[family]
    stack = L.network(configs, input_shape)
    rng = np.random.default_rng(len(family))
    params = random_params(stack, rng)
    x = rng.normal(0, 1, (9, *input_shape)).astype(np.float32)
    classes = stack[-1].output_shape[0]
    labels = rng.integers(0, classes, 9)

    out, caches = L.run(stack, params, x)
    loss, dlogits = L.cross_entropy_gradient(out, labels)
    dx, grads = L.run_backward(stack, params, caches, dlogits)

    reference = jax_reference(configs, input_shape, params, x, labels, tmp_path)
    assert out.dtype == np.float32 and out.shape == (9, classes)
    np.testing.assert_allclose(out, reference["out"], rtol=1e-5, atol=1e-5)
    assert loss == pytest.approx(float(reference["loss"]), rel=1e-5)
    np.testing.assert_allclose(dx, reference["dx"], rtol=1e-4, atol=1e-6)
    for index, mine in enumerate(grads):
        assert set(mine) == set(stack[index].params), index
        for name in mine:
            np.testing.assert_allclose(mine[name], reference[f"{index}/{name}"], rtol=1e-4,
                                       atol=1e-6,
                                       err_msg=f"layer {index} {stack[index].kind} {name}")


def test_shapes_follow_keras():
    stack = L.network(VGG, (12, 11, 3))
    assert [layer.output_shape for layer in stack] == [
        (12, 11, 6), (10, 9, 5), (5, 4, 5), (5, 2, 4), (5, 2, 4), (40,), (16,), (16,), (7,)]
    assert stack[0].params == {"kernel": (3, 3, 3, 6), "bias": (6,)}
    assert stack[3].params == {"kernel": (2, 3, 5, 4)}
    assert L.network(NIN, (13, 13, 2))[4].output_shape == (4, 4, 8)


@pytest.mark.parametrize("configs, shape, message", [
    ([{"layer_name": "Conv3D"}], (8, 8, 1), "layer 0 (Conv3D): layer_name 'Conv3D' is not supported"),
    ([{"layer_name": "Conv2D", "filters": 4, "kernel_size": 3}, {"layer_name": "Dense", "units": 2}],
     (8, 8, 1), "layer 1 (Dense): Dense needs flat inputs"),
    ([{"layer_name": "Conv2D", "filters": 4, "kernel_size": 9}], (8, 8, 1),
     "a 9x9 kernel does not fit inputs of 8x8"),
    ([{"layer_name": "Conv2D", "filters": 4, "kernel_size": 3, "padding": "full"}], (8, 8, 1),
     "padding: expected one of valid, same, found 'full'"),
    ([{"layer_name": "MaxPooling2D"}], (16,), "MaxPooling2D needs (height, width, channels)"),
    ([{"layer_name": "Dense", "units": 3, "activation": "softplus"}], (16,),
     "activation: expected one of linear, relu, tanh, sigmoid, found 'softplus'"),
])
def test_a_stack_it_cannot_hold_is_named_by_layer(configs, shape, message):
    with pytest.raises(L.LayerError, match=None) as refused:
        L.network(configs, shape)
    assert message in str(refused.value)


def test_parameters_of_the_wrong_shape_are_named():
    (conv,) = L.network([{"layer_name": "Conv2D", "filters": 4, "kernel_size": 3}], (8, 8, 2))
    with pytest.raises(L.LayerError) as refused:
        L.check_params(conv, {"kernel": np.zeros((3, 3, 4, 2)), "bias": np.zeros(4)}, "model_3 conv2d")
    assert "model_3 conv2d.kernel: shape (3, 3, 4, 2), expected (3, 3, 2, 4)" in str(refused.value)
    with pytest.raises(L.LayerError, match="expected \\['bias', 'kernel'\\]"):
        L.check_params(conv, {"kernel": np.zeros((3, 3, 2, 4))}, "model_3 conv2d")


def test_max_pool_ties_send_the_gradient_to_the_first_maximum_only():
    (pool,) = L.network([{"layer_name": "MaxPooling2D", "pool_size": 2}], (2, 2, 1))
    x = np.ones((1, 2, 2, 1), np.float32)
    y, cache = L.forward(pool, {}, x)
    dx, _ = L.backward(pool, {}, cache, np.ones_like(y))
    assert dx[0, :, :, 0].tolist() == [[1, 0], [0, 0]]

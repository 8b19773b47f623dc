"""Convolutional zoos: VGG-like and Network-in-Network layer lists, their initialisation and a
minibatch SGD trainer built on the runtime's layers (``kinds/pgdl2020/runtime/layers.py``).

The runtime computes inference only; training needs two things it does not do, and they live
here: inverted dropout (a fresh mask per batch, scaled by 1 / keep) and BatchNormalization
with the statistics of the batch (forward and backward). Everything else (Conv2D, pooling,
Dense, activations) is the runtime's own forward and backward, so a trained network is the
network participants' code will load.

BatchNormalization's moving statistics are not running averages: whenever the weights are
checked or written, each BatchNormalization layer's ``moving_mean`` and ``moving_variance``
are set to the mean and the (biased) variance of its inputs over the whole training set, the
layers before it already in inference mode. Running averages (Keras's momentum 0.99) lag far
behind after the few hundred steps these zoos train for, and the stopping rule must hold for
the network as written, in inference mode.

Training runs in float32, as the runtime does, so the weights checked by the stopping rule
and written to ``weights.npz`` are the trained arrays themselves. ``logits`` and ``evaluate``
serve any config of the runtime's layers, the MLP zoos' included.

Training and inference hold BLAS to one thread: OpenBLAS's float32 products come out with
different last bits with two threads than with one, and a few hundred epochs of SGD turn that
into different weights, so the committed bytes would depend on the machine's core count. They
still depend on the BLAS kernels the CPU gets (``blas_kernels``; the generation log records
them).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from ..runtime import layers as L

F32 = np.float32
STATISTICS = ("moving_mean", "moving_variance")
BN_EPSILON = 0.001                  # Keras's default


def _one_blas_thread(function):
    @functools.wraps(function)
    def limited(*args, **kwargs):
        with threadpool_limits(limits=1, user_api="blas"):
            return function(*args, **kwargs)
    return limited


def blas_kernels() -> str:
    """The BLAS library, version and kernel family numpy runs on, e.g. "openblas 0.3.23 Zen"."""
    return ", ".join(f"{info['internal_api']} {info['version']} {info.get('architecture', '')}"
                     .strip() for info in threadpool_info() if info["user_api"] == "blas")


# ---- the architectures ------------------------------------------------------------------

def _conv(filters: int, size: int, batch_norm: bool) -> list[dict]:
    """A Conv2D with a ReLU; with batch_norm the ReLU comes after the normalisation, and the
    bias is dropped (beta takes its place)."""
    conv = {"layer_name": "Conv2D", "filters": filters, "kernel_size": [size, size],
            "strides": [1, 1], "padding": "same", "activation": "linear" if batch_norm
            else "relu", "use_bias": not batch_norm}
    if not batch_norm:
        return [conv]
    return [conv, {"layer_name": "BatchNormalization", "epsilon": BN_EPSILON},
            {"layer_name": "Activation", "activation": "relu"}]


def _pool_and_dropout(rate: float) -> list[dict]:
    pool = {"layer_name": "MaxPooling2D", "pool_size": [2, 2], "strides": [2, 2],
            "padding": "valid"}
    return [pool] + _dropout(rate)


def _dropout(rate: float) -> list[dict]:
    return [{"layer_name": "Dropout", "rate": rate}] if rate > 0 else []


def vgg_config(point: dict, num_classes: int) -> list[dict]:
    """[Conv 3x3, Conv 3x3, MaxPool] x blocks, Flatten, Dense layers with dropout, logits.
    Every block keeps the same number of filters: doubling them per block, as VGG does, would
    triple the committed size for little change on 8x8 inputs."""
    layers: list[dict] = []
    for _ in range(int(point["blocks"])):
        for _ in range(2):
            layers += _conv(int(point["filters"]), 3, bool(point["batch_norm"]))
        layers += _pool_and_dropout(0.0)
    layers.append({"layer_name": "Flatten"})
    for _ in range(int(point["dense_layers"])):
        layers.append({"layer_name": "Dense", "units": int(point["width"]),
                       "activation": "relu"})
        layers += _dropout(float(point["dropout"]))
    layers.append({"layer_name": "Dense", "units": num_classes, "activation": "linear"})
    return layers


def nin_config(point: dict, num_classes: int) -> list[dict]:
    """[Conv 3x3, Conv 1x1, Conv 1x1, MaxPool, Dropout] x blocks, then a linear 1x1 Conv to
    one map per class whose global average is the logits (no Dense layer)."""
    layers: list[dict] = []
    for _ in range(int(point["blocks"])):
        for size in (3, 1, 1):
            layers += _conv(int(point["filters"]), size, bool(point["batch_norm"]))
        layers += _pool_and_dropout(float(point["dropout"]))
    layers.append({"layer_name": "Conv2D", "filters": num_classes, "kernel_size": [1, 1],
                   "strides": [1, 1], "padding": "same", "activation": "linear",
                   "use_bias": True})
    layers.append({"layer_name": "GlobalAveragePooling2D"})
    return layers


ARCHITECTURES = {"vgg": vgg_config, "nin": nin_config}


def layer_list(point: dict, num_classes: int) -> list[dict]:
    return ARCHITECTURES[point["architecture"]](point, num_classes)


# ---- weights ------------------------------------------------------------------------------

def build(config: list[dict], input_shape) -> list[L.Layer]:
    return L.network(config, tuple(input_shape))


def params_from_weights(stack: list[L.Layer], weights: dict) -> list[dict]:
    params: list[dict] = [{} for _ in stack]
    for index, name, key in L.weight_keys(stack):
        params[index][name] = weights[key]
    return params


def weights_from_params(stack: list[L.Layer], params: list[dict]) -> dict[str, np.ndarray]:
    """The weights.npz arrays, keyed and ordered as the runtime names them."""
    return {key: np.asarray(params[index][name], F32)
            for index, name, key in L.weight_keys(stack)}


def initial_params(stack: list[L.Layer], rng: np.random.Generator) -> list[dict]:
    """He-normal kernels for the hidden layers (all ReLU here), Glorot-normal for the logits'
    layer, as mlp.py; zero biases and beta, unit gamma, moving statistics 0 and 1."""
    kernel_layers = [i for i, layer in enumerate(stack) if "kernel" in layer.params]
    params = []
    for index, layer in enumerate(stack):
        made = {}
        for name, shape in layer.params.items():
            if name == "kernel":
                fan_in = math.prod(shape[:-1])
                fan_out = math.prod(shape[:-2]) * shape[-1]
                scale = math.sqrt(2.0 / (fan_in + fan_out if index == kernel_layers[-1]
                                         else fan_in))
                made[name] = (rng.standard_normal(shape) * scale).astype(F32)
            elif name in ("gamma", "moving_variance"):
                made[name] = np.ones(shape, F32)
            else:
                made[name] = np.zeros(shape, F32)
        params.append(made)
    return params


# ---- inference ----------------------------------------------------------------------------

@_one_blas_thread
def logits(config: list[dict], input_shape, weights: dict, inputs: np.ndarray) -> np.ndarray:
    """The runtime's inference output of any stored network (Dropout is the identity,
    BatchNormalization uses the stored moving statistics)."""
    stack = build(config, input_shape)
    return L.run(stack, params_from_weights(stack, weights), inputs)[0]


def _accuracy_and_loss(outputs: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """Argmax accuracy (ties to the lowest class) and mean softmax cross-entropy."""
    loss, _ = L.cross_entropy_gradient(outputs, labels)
    return float(np.mean(np.argmax(outputs, axis=1) == labels)), loss


def evaluate(config: list[dict], input_shape, weights: dict, inputs: np.ndarray,
             labels: np.ndarray) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) of a stored network on a split."""
    return _accuracy_and_loss(logits(config, input_shape, weights, inputs), np.asarray(labels))


# ---- training mode ------------------------------------------------------------------------

def _axes(x: np.ndarray) -> tuple[int, ...]:
    return tuple(range(x.ndim - 1))


def _batch_norm_forward(layer, params, x, rng):
    mean, variance = x.mean(axis=_axes(x)), x.var(axis=_axes(x))
    inverse = 1 / np.sqrt(variance + F32(layer.settings["epsilon"]))
    normal = (x - mean) * inverse
    out = normal * params.get("gamma", F32(1)) + params.get("beta", F32(0))
    return out, (normal, inverse)


def _batch_norm_backward(layer, params, cache, dy):
    """The batch's mean and variance depend on every input of the batch: the gradient of a
    normalised value goes through them too (the two mean terms)."""
    normal, inverse = cache
    axes = _axes(dy)
    dnormal = dy * params.get("gamma", F32(1))
    dx = inverse * (dnormal - dnormal.mean(axis=axes)
                    - normal * (dnormal * normal).mean(axis=axes))
    grads = {}
    if "gamma" in params:
        grads["gamma"] = (dy * normal).sum(axis=axes)
    if "beta" in params:
        grads["beta"] = dy.sum(axis=axes)
    return dx, grads


def _dropout_forward(layer, params, x, rng):
    rate = layer.settings["rate"]
    if rng is None or rate == 0:
        return x, None
    keep = 1.0 - rate
    mask = (rng.random(x.shape) < keep).astype(F32) / F32(keep)
    return x * mask, mask


def _dropout_backward(layer, params, mask, dy):
    return (dy if mask is None else dy * mask), {}


def _runtime_forward(layer, params, x, rng):
    return L.forward(layer, params, x)


TRAINING = {"BatchNormalization": (_batch_norm_forward, _batch_norm_backward),
            "Dropout": (_dropout_forward, _dropout_backward)}
RUNTIME = (_runtime_forward, L.backward)


def loss_and_gradients(stack: list[L.Layer], params: list[dict], x: np.ndarray,
                       labels: np.ndarray, rng: np.random.Generator | None = None,
                       weight_decay: float = 0.0) -> tuple[float, list[dict]]:
    """(mean cross-entropy, gradients of it plus weight_decay / 2 * |kernels|^2) of one batch
    in training mode: BatchNormalization on the batch's statistics, dropout masks drawn from
    rng (none without one). The moving statistics get no gradient."""
    caches = []
    for layer, layer_params in zip(stack, params):
        x, cache = TRAINING.get(layer.kind, RUNTIME)[0](layer, layer_params, x, rng)
        caches.append(cache)
    loss, dy = L.cross_entropy_gradient(x, labels)
    grads: list[dict] = [{} for _ in stack]
    for index in range(len(stack) - 1, -1, -1):
        layer = stack[index]
        dy, grads[index] = TRAINING.get(layer.kind, RUNTIME)[1](layer, params[index],
                                                               caches[index], dy)
        for name in STATISTICS:
            grads[index].pop(name, None)
        if "kernel" in grads[index] and weight_decay:
            grads[index]["kernel"] = grads[index]["kernel"] \
                + F32(weight_decay) * params[index]["kernel"]
    return loss, grads


def with_population_statistics(stack: list[L.Layer], params: list[dict],
                               inputs: np.ndarray) -> list[dict]:
    """params whose moving statistics are those of the whole training set (see the module's
    docstring); unchanged when the stack has no BatchNormalization."""
    if not any(layer.kind == "BatchNormalization" for layer in stack):
        return params
    updated, x = [], np.asarray(inputs, F32)
    for layer, layer_params in zip(stack, params):
        if layer.kind == "BatchNormalization":
            layer_params = {**layer_params, "moving_mean": x.mean(axis=_axes(x)),
                            "moving_variance": x.var(axis=_axes(x))}
        updated.append(layer_params)
        x, _ = L.forward(layer, layer_params, x)
    return updated


# ---- the trainer --------------------------------------------------------------------------

@dataclass(frozen=True)
class TrainResult:
    init: dict[str, np.ndarray]
    final: dict[str, np.ndarray]
    epochs: int
    reached_target: bool


def _step(params, grads, velocity, learning_rate, momentum):
    for layer_params, layer_grads, layer_velocity in zip(params, grads, velocity):
        for name, grad in layer_grads.items():
            layer_velocity[name] = momentum * layer_velocity[name] - learning_rate * grad
            layer_params[name] = layer_params[name] + layer_velocity[name]


@_one_blas_thread
def train(config: list[dict], input_shape, inputs: np.ndarray, labels: np.ndarray, *,
          learning_rate: float, batch_size: int, weight_decay: float, max_epochs: int,
          seed: int, momentum: float = 0.9, loss_target: float = 0.0) -> TrainResult:
    """Minibatch SGD with momentum on softmax cross-entropy plus L2 on the kernels, as
    mlp.train, for any stack of the runtime's layers. Stops at the end of the first epoch
    whose weights, in inference mode, classify every training point correctly with a mean
    cross-entropy at most ``loss_target``, or after ``max_epochs``."""
    rng = np.random.default_rng(seed)
    stack = build(config, input_shape)
    params = initial_params(stack, rng)
    init = weights_from_params(stack, params)
    velocity = [{name: np.zeros_like(value) for name, value in layer.items()
                 if name not in STATISTICS} for layer in params]
    x, y = np.asarray(inputs, F32), np.asarray(labels)
    rate, decay = F32(learning_rate), F32(momentum)
    for epoch in range(1, max_epochs + 1):
        order = rng.permutation(len(x))
        for start in range(0, len(x), batch_size):
            batch = order[start:start + batch_size]
            _, grads = loss_and_gradients(stack, params, x[batch], y[batch], rng, weight_decay)
            _step(params, grads, velocity, rate, decay)
        final = weights_from_params(stack, with_population_statistics(stack, params, x))
        accuracy, loss = evaluate(config, input_shape, final, x, y)
        if accuracy == 1.0 and loss <= loss_target:
            return TrainResult(init, final, epoch, True)
    return TrainResult(init, final, max_epochs, False)

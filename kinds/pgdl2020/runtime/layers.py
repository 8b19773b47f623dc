"""The layers of the PGDL 2020 zoos, as pure numpy functions in float32 (issue 28, item 1).

Every network of the 2020 competition was a Keras model built from these layers (the
proposal, ``004_*`` in the seeds): VGG-like stacks of Conv2D and MaxPooling2D with Dense
layers, Network in Network with GlobalAveragePooling2D, fully convolutional networks with
BatchNormalization. Inputs are (N, H, W, C) as Keras holds them; kernels are Keras's
(kh, kw, in, out) and (in, out).

A layer is a value (``Layer``: its kind, its settings, its input and output shapes, the names
and shapes of its parameters); two pure functions run it:

    forward(layer, params, x)           -> (y, cache)
    backward(layer, params, cache, dy)  -> (dx, dparams)

``params`` maps each name of ``layer.params`` to an array. ``network`` checks a whole stack
against an input shape, naming the layer and the value at fault. A convolution is one matrix
product over the windows of its input (im2col); the windows stay in its cache for the
backward pass, so memory grows with the batch, which bounds it. Standard library and numpy
only: the participant's sandbox copies this file. Why BDL's numpy networks
(``kinds/bdl2021/runtime/networks.py``) are a stack of their own: that module's docstring.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy

DTYPE = numpy.float32
ACTIVATIONS = ("linear", "relu", "tanh", "sigmoid")
PADDINGS = ("valid", "same")
KINDS = ("Conv2D", "MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D",
         "BatchNormalization", "Activation", "Flatten", "Dropout", "Dense")
# Keras's own name for each kind (a layer is named ``<snake>_<k>``, k counting that kind's
# layers from 0): the keys of weights.npz, ``conv2d_0/kernel``, ``dense_1/bias``, ...
SNAKE = {"Conv2D": "conv2d", "MaxPooling2D": "max_pooling2d",
         "AveragePooling2D": "average_pooling2d",
         "GlobalAveragePooling2D": "global_average_pooling2d",
         "BatchNormalization": "batch_normalization", "Activation": "activation",
         "Flatten": "flatten", "Dropout": "dropout", "Dense": "dense"}
# Keras settings that would change what a layer computes, with the one value we compute;
# anything else Keras writes (names, initialisers, regularisers, momentum) does not matter
# at inference.
FIXED_SETTINGS = {"dilation_rate": ([1, 1], 1, (1, 1)), "groups": (1,),
                  "data_format": ("channels_last", None)}


class LayerError(ValueError):
    """A layer the stack cannot hold: names the layer and the value."""


@dataclass(frozen=True)
class Layer:
    kind: str                                   # one of KINDS
    settings: dict                              # normalised: see ``_SETTINGS``
    input_shape: tuple                          # one example's shape, (H, W, C) or (d,)
    output_shape: tuple
    params: dict = field(default_factory=dict)  # name -> shape


# ---- activations ----------------------------------------------------------------------

def activate(name: str, z):
    if name == "relu":
        return numpy.maximum(z, 0)
    if name == "tanh":
        return numpy.tanh(z)
    if name == "sigmoid":
        return DTYPE(0.5) * (1 + numpy.tanh(DTYPE(0.5) * z))     # no overflow for large |z|
    return z


def activation_gradient(name: str, z, a, da):
    """d loss / d z from d loss / d a, for a = activate(name, z)."""
    if name == "relu":
        return da * (z > 0)
    if name == "tanh":
        return da * (1 - a * a)
    if name == "sigmoid":
        return da * a * (1 - a)
    return da


# ---- shapes -----------------------------------------------------------------------------

def _pair(value, what: str) -> tuple[int, int]:
    values = (value, value) if isinstance(value, int) else tuple(value)
    if len(values) != 2 or not all(isinstance(v, int) and v >= 1 for v in values):
        raise LayerError(f"{what}: expected a positive integer or two, found {value!r}")
    return values


def _window_out(size: int, window: int, stride: int, padding: str) -> int:
    """Keras's output size of a window sliding over ``size`` (conv_utils.conv_output_length)."""
    if padding == "same":
        return math.ceil(size / stride)
    return (size - window) // stride + 1


def _same_padding(size: int, window: int, stride: int) -> tuple[int, int]:
    """TensorFlow's SAME padding: the extra element, if any, at the end."""
    total = max((math.ceil(size / stride) - 1) * stride + window - size, 0)
    return total // 2, total - total // 2


def _option(raw: dict, key: str, allowed: tuple, default, where: str):
    value = raw.get(key, default)
    value = default if value is None else value
    if value not in allowed:
        raise LayerError(f"{where}.{key}: expected one of {', '.join(allowed)}, found {value!r}")
    return value


def _windowed(raw: dict, where: str, kernel_key: str, default_stride) -> dict:
    window = _pair(raw.get(kernel_key, (2, 2)), f"{where}.{kernel_key}")
    stride = raw.get("strides")
    return {"window": window,
            "strides": _pair(default_stride(window) if stride is None else stride,
                             f"{where}.strides"),
            "padding": _option(raw, "padding", PADDINGS, "valid", where)}


def _spatial(shape: tuple, kind: str, where: str) -> tuple[int, int, int]:
    if len(shape) != 3:
        raise LayerError(f"{where}: {kind} needs (height, width, channels) inputs, found "
                         f"{shape}")
    return shape


def _conv_layer(raw, shape, where) -> Layer:
    h, w, c = _spatial(shape, "Conv2D", where)
    filters = raw.get("filters")
    if not isinstance(filters, int) or filters < 1:
        raise LayerError(f"{where}.filters: expected a positive integer, found {filters!r}")
    settings = _windowed(raw, where, "kernel_size", lambda window: (1, 1))
    settings |= {"filters": filters, "use_bias": bool(raw.get("use_bias", True)),
                 "activation": _option(raw, "activation", ACTIVATIONS, "linear", where)}
    (kh, kw), (sh, sw) = settings["window"], settings["strides"]
    out = (_window_out(h, kh, sh, settings["padding"]), _window_out(w, kw, sw, settings["padding"]))
    if min(out) < 1:
        raise LayerError(f"{where}: a {kh}x{kw} kernel does not fit inputs of {h}x{w}")
    params = {"kernel": (kh, kw, c, filters)} | ({"bias": (filters,)} if settings["use_bias"]
                                                   else {})
    return Layer("Conv2D", settings, shape, (*out, filters), params)


def _pool_layer(kind, raw, shape, where) -> Layer:
    h, w, c = _spatial(shape, kind, where)
    settings = _windowed(raw, where, "pool_size", lambda window: window)
    (ph, pw), (sh, sw) = settings["window"], settings["strides"]
    out = (_window_out(h, ph, sh, settings["padding"]), _window_out(w, pw, sw, settings["padding"]))
    if min(out) < 1:
        raise LayerError(f"{where}: a {ph}x{pw} pool does not fit inputs of {h}x{w}")
    return Layer(kind, settings, shape, (*out, c))


def _dense_layer(raw, shape, where) -> Layer:
    if len(shape) != 1:
        raise LayerError(f"{where}: Dense needs flat inputs (add a Flatten or a global "
                         f"pooling before it), found {shape}")
    units = raw.get("units")
    if not isinstance(units, int) or units < 1:
        raise LayerError(f"{where}.units: expected a positive integer, found {units!r}")
    settings = {"units": units, "use_bias": bool(raw.get("use_bias", True)),
                "activation": _option(raw, "activation", ACTIVATIONS, "linear", where)}
    params = {"kernel": (shape[0], units)} | ({"bias": (units,)} if settings["use_bias"] else {})
    return Layer("Dense", settings, shape, (units,), params)


def _batch_norm_layer(raw, shape, where) -> Layer:
    axis = raw.get("axis", -1)
    if axis not in (-1, len(shape)) and not (isinstance(axis, list) and axis in ([-1], [len(shape)])):
        raise LayerError(f"{where}.axis: only the channel axis (-1) is supported, found {axis!r}")
    epsilon = float(raw.get("epsilon", 1e-3))
    center, scale = bool(raw.get("center", True)), bool(raw.get("scale", True))
    channels = (shape[-1],)
    params = ({"gamma": channels} if scale else {}) | ({"beta": channels} if center else {}) \
        | {"moving_mean": channels, "moving_variance": channels}
    return Layer("BatchNormalization", {"epsilon": epsilon}, shape, shape, params)


def layer(raw: dict, input_shape: tuple, where: str = "layer") -> Layer:
    """One layer from its config entry (``{"layer_name": kind, ...}`` with Keras's keys) and
    the shape of one input example."""
    kind = raw.get("layer_name") or raw.get("class_name")
    shape = tuple(int(size) for size in input_shape)
    for key, allowed in FIXED_SETTINGS.items():
        if key in raw and raw[key] not in allowed:
            raise LayerError(f"{where}.{key}: only {allowed[0]!r} is supported, found "
                             f"{raw[key]!r}")
    if kind == "Conv2D":
        return _conv_layer(raw, shape, where)
    if kind in ("MaxPooling2D", "AveragePooling2D"):
        return _pool_layer(kind, raw, shape, where)
    if kind == "GlobalAveragePooling2D":
        return Layer(kind, {}, shape, (_spatial(shape, kind, where)[2],))
    if kind == "BatchNormalization":
        return _batch_norm_layer(raw, shape, where)
    if kind == "Activation":
        return Layer(kind, {"activation": _option(raw, "activation", ACTIVATIONS, None, where)},
                     shape, shape)
    if kind == "Flatten":
        return Layer(kind, {}, shape, (int(numpy.prod(shape)),))
    if kind == "Dropout":
        return Layer(kind, {"rate": float(raw.get("rate", 0.0))}, shape, shape)
    if kind == "Dense":
        return _dense_layer(raw, shape, where)
    raise LayerError(f"{where}: layer_name {kind!r} is not supported; the layers are "
                     f"{', '.join(KINDS)}")


def network(configs: list[dict], input_shape: tuple) -> list[Layer]:
    """The stack of layers, each checked against the shape the one before gives it."""
    layers, shape = [], tuple(input_shape)
    for index, raw in enumerate(configs):
        if not isinstance(raw, dict):
            raise LayerError(f"layer {index}: expected a mapping, found {raw!r}")
        built = layer(raw, shape, f"layer {index} ({raw.get('layer_name')})")
        layers.append(built)
        shape = built.output_shape
    return layers


def layer_names(layers: list[Layer]) -> list[str]:
    """Each layer's name, ``<snake>_<k>`` (``conv2d_0``, ``max_pooling2d_0``, ``dense_2``)."""
    counts: dict[str, int] = {}
    names = []
    for layer_ in layers:
        names.append(f"{SNAKE[layer_.kind]}_{counts.get(layer_.kind, 0)}")
        counts[layer_.kind] = counts.get(layer_.kind, 0) + 1
    return names


def weight_keys(layers: list[Layer]) -> list[tuple[int, str, str]]:
    """``(layer index, parameter, "<layer name>/<parameter>")`` of every weight, in Keras's
    ``get_weights()`` order: kernel then bias; gamma, beta, moving_mean, moving_variance."""
    return [(index, param, f"{name}/{param}")
            for index, (layer_, name) in enumerate(zip(layers, layer_names(layers)))
            for param in layer_.params]


def check_params(layer_: Layer, params: dict, where: str) -> None:
    """Every parameter the layer has, of its shape; nothing else."""
    names = set(params)
    if names != set(layer_.params):
        raise LayerError(f"{where}: parameters {sorted(names)}, expected "
                         f"{sorted(layer_.params)}")
    for name, shape in layer_.params.items():
        if tuple(numpy.shape(params[name])) != shape:
            raise LayerError(f"{where}.{name}: shape {tuple(numpy.shape(params[name]))}, "
                             f"expected {shape}")


# ---- convolution and pooling ----------------------------------------------------------

def _padded(x, layer_: Layer, fill):
    """x with Keras's SAME padding for the layer's window, or x itself (VALID)."""
    if layer_.settings["padding"] == "valid":
        return x
    (kh, kw), (sh, sw) = layer_.settings["window"], layer_.settings["strides"]
    top, bottom = _same_padding(x.shape[1], kh, sh)
    left, right = _same_padding(x.shape[2], kw, sw)
    return numpy.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=fill)


def _offsets(layer_: Layer, out_h: int, out_w: int):
    """Each window offset (i, j) with the slices of the padded input it reads."""
    (kh, kw), (sh, sw) = layer_.settings["window"], layer_.settings["strides"]
    for i in range(kh):
        for j in range(kw):
            yield i, j, (slice(None), slice(i, i + (out_h - 1) * sh + 1, sh),
                         slice(j, j + (out_w - 1) * sw + 1, sw))


def _columns(layer_, xp):
    """im2col: every window of the padded input as one row, (N, out_h, out_w, kh, kw, C), in
    the kernel's (kh, kw, C) order, so that the convolution is one matrix product."""
    (kh, kw), (out_h, out_w, _) = layer_.settings["window"], layer_.output_shape
    columns = numpy.empty((xp.shape[0], out_h, out_w, kh, kw, xp.shape[3]), DTYPE)
    for i, j, window in _offsets(layer_, out_h, out_w):
        columns[:, :, :, i, j, :] = xp[window]
    return columns


def _conv_forward(layer_, params, x):
    xp = _padded(x, layer_, 0)
    columns = _columns(layer_, xp)
    kernel = params["kernel"]
    z = columns.reshape(-1, kernel[..., 0].size) @ kernel.reshape(-1, kernel.shape[3])
    z = z.reshape(x.shape[0], *layer_.output_shape)
    if "bias" in params:
        z += params["bias"]
    a = activate(layer_.settings["activation"], z)
    return a, (x.shape, xp.shape, columns, z, a)


def _conv_backward(layer_, params, cache, da):
    shape, padded_shape, columns, z, a = cache
    dz = activation_gradient(layer_.settings["activation"], z, a, da)
    out_h, out_w, filters = layer_.output_shape
    kernel = params["kernel"]
    flat = dz.reshape(-1, filters)
    dkernel = (columns.reshape(-1, kernel[..., 0].size).T @ flat).reshape(kernel.shape)
    dxp = numpy.zeros(padded_shape, DTYPE)
    for i, j, window in _offsets(layer_, out_h, out_w):    # contiguous products, then the add
        dxp[window] += (flat @ kernel[i, j].T).reshape(dxp[window].shape)
    grads = {"kernel": dkernel} | ({"bias": flat.sum(axis=0)} if "bias" in params else {})
    return _unpadded(dxp, shape, layer_), grads


def _unpadded(dxp, shape, layer_):
    if layer_.settings["padding"] == "valid":
        return dxp
    (kh, kw), (sh, sw) = layer_.settings["window"], layer_.settings["strides"]
    top = _same_padding(shape[1], kh, sh)[0]
    left = _same_padding(shape[2], kw, sw)[0]
    return dxp[:, top:top + shape[1], left:left + shape[2], :]


def _max_pool_forward(layer_, params, x):
    xp = _padded(x, layer_, -numpy.inf)
    out_h, out_w, _ = layer_.output_shape
    best = None
    for _, _, window in _offsets(layer_, out_h, out_w):
        best = xp[window] if best is None else numpy.maximum(best, xp[window])
    return best, (x.shape, xp, best)


def _max_pool_backward(layer_, params, cache, dy):
    """The gradient goes to the first maximum of each window, in row-major order, as
    TensorFlow's MaxPoolGrad does."""
    shape, xp, best = cache
    out_h, out_w, _ = layer_.output_shape
    dxp = numpy.zeros_like(xp)
    taken = numpy.zeros(best.shape, bool)
    for _, _, window in _offsets(layer_, out_h, out_w):
        hit = (xp[window] == best) & ~taken
        dxp[window] += numpy.where(hit, dy, 0)
        taken |= hit
    return _unpadded(dxp, shape, layer_), {}


def _average_pool_forward(layer_, params, x):
    """SAME padding averages the elements inside the input only, as Keras does."""
    xp, ones = _padded(x, layer_, 0), _padded(numpy.ones((1, *x.shape[1:3], 1), DTYPE), layer_, 0)
    out_h, out_w, _ = layer_.output_shape
    total, count = 0, 0
    for _, _, window in _offsets(layer_, out_h, out_w):
        total, count = total + xp[window], count + ones[window]
    return total / count, (x.shape, xp.shape, count)


def _average_pool_backward(layer_, params, cache, dy):
    shape, padded_shape, count = cache
    out_h, out_w, _ = layer_.output_shape
    dxp = numpy.zeros(padded_shape, DTYPE)
    share = dy / count
    for _, _, window in _offsets(layer_, out_h, out_w):
        dxp[window] += share
    return _unpadded(dxp, shape, layer_), {}


# ---- the other layers -----------------------------------------------------------------

def _batch_norm_parts(layer_, params):
    channels = layer_.input_shape[-1]
    gamma = params.get("gamma", numpy.ones(channels, DTYPE))
    inverse = 1 / numpy.sqrt(params["moving_variance"] + DTYPE(layer_.settings["epsilon"]))
    return gamma, inverse


def _batch_norm_forward(layer_, params, x):
    gamma, inverse = _batch_norm_parts(layer_, params)
    normal = (x - params["moving_mean"]) * inverse
    return normal * gamma + params.get("beta", DTYPE(0)), (normal,)


def _batch_norm_backward(layer_, params, cache, dy):
    (normal,) = cache
    gamma, inverse = _batch_norm_parts(layer_, params)
    axes = tuple(range(dy.ndim - 1))
    dnormal = dy * gamma
    grads = {"moving_mean": -(dnormal.sum(axis=axes) * inverse),
             "moving_variance": -0.5 * (dnormal * normal).sum(axis=axes) * inverse ** 2}
    if "gamma" in params:
        grads["gamma"] = (dy * normal).sum(axis=axes)
    if "beta" in params:
        grads["beta"] = dy.sum(axis=axes)
    return dnormal * inverse, grads


def _dense_forward(layer_, params, x):
    z = x @ params["kernel"]
    if "bias" in params:
        z = z + params["bias"]
    a = activate(layer_.settings["activation"], z)
    return a, (x, z, a)


def _dense_backward(layer_, params, cache, da):
    x, z, a = cache
    dz = activation_gradient(layer_.settings["activation"], z, a, da)
    grads = {"kernel": x.T @ dz} | ({"bias": dz.sum(axis=0)} if "bias" in params else {})
    return dz @ params["kernel"].T, grads


def _activation_forward(layer_, params, x):
    a = activate(layer_.settings["activation"], x)
    return a, (x, a)


def _activation_backward(layer_, params, cache, da):
    z, a = cache
    return activation_gradient(layer_.settings["activation"], z, a, da), {}


def _global_average_forward(layer_, params, x):
    return x.mean(axis=(1, 2)), (x.shape,)


def _global_average_backward(layer_, params, cache, dy):
    (shape,) = cache
    return numpy.broadcast_to(dy[:, None, None, :] / DTYPE(shape[1] * shape[2]), shape).copy(), {}


def _flatten_forward(layer_, params, x):
    return x.reshape(x.shape[0], -1), (x.shape,)


def _flatten_backward(layer_, params, cache, dy):
    return dy.reshape(cache[0]), {}


def _identity_forward(layer_, params, x):
    return x, ()


def _identity_backward(layer_, params, cache, dy):
    return dy, {}


_RUN = {"Conv2D": (_conv_forward, _conv_backward),
        "MaxPooling2D": (_max_pool_forward, _max_pool_backward),
        "AveragePooling2D": (_average_pool_forward, _average_pool_backward),
        "GlobalAveragePooling2D": (_global_average_forward, _global_average_backward),
        "BatchNormalization": (_batch_norm_forward, _batch_norm_backward),
        "Activation": (_activation_forward, _activation_backward),
        "Flatten": (_flatten_forward, _flatten_backward),
        "Dropout": (_identity_forward, _identity_backward),      # inference: the identity
        "Dense": (_dense_forward, _dense_backward)}


def forward(layer_: Layer, params: dict, x):
    """(y, cache): the layer's output for inputs x (N, *input_shape), float32."""
    return _RUN[layer_.kind][0](layer_, params, numpy.asarray(x, DTYPE))


def backward(layer_: Layer, params: dict, cache, dy):
    """(dx, dparams): d loss / d input and d loss / d each parameter, from d loss / d output."""
    return _RUN[layer_.kind][1](layer_, params, cache, numpy.asarray(dy, DTYPE))


# ---- a stack ----------------------------------------------------------------------------

def run(layers: list[Layer], params: list[dict], x):
    """(output, caches) of the stack on x (N, *input_shape)."""
    caches = []
    for layer_, layer_params in zip(layers, params):
        x, cache = forward(layer_, layer_params, x)
        caches.append(cache)
    return x, caches


def run_backward(layers: list[Layer], params: list[dict], caches: list, dy):
    """(dx, dparams per layer) from d loss / d output, the caches of ``run``."""
    grads = [None] * len(layers)
    for index in range(len(layers) - 1, -1, -1):
        dy, grads[index] = backward(layers[index], params[index], caches[index], dy)
    return dy, grads


def cross_entropy_gradient(logits, labels):
    """(mean softmax cross-entropy, its gradient with respect to the logits)."""
    logits = numpy.asarray(logits, numpy.float64)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_p = shifted - numpy.log(numpy.exp(shifted).sum(axis=1, keepdims=True))
    n, rows = len(labels), numpy.arange(len(labels))
    grad = numpy.exp(log_p)
    grad[rows, labels] -= 1
    return float(-log_p[rows, labels].mean()), (grad / n).astype(DTYPE)

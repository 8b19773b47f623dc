"""The declared networks of the 2021 competition, each written once, run in numpy, JAX or
PyTorch (issue 30, item 1).

An architecture is a function ``(ops, take, x, spec) -> outputs`` written against a small set
of operations (``ops``): dense, conv2d (NHWC inputs, HWIO kernels, TensorFlow's SAME/VALID
padding), pooling (window = stride, VALID), activations, filter response normalisation,
residual sums, embeddings and an LSTM. ``take(name, shape, init, fan_in)`` hands it the next
parameter. The same function, run on three backends, is the network in three frameworks:

- ``NumpyOps`` (this file): float64 forward; ``TapeOps`` records every operation and returns
  the gradient of the parameters by reverse accumulation (the CPU image has numpy only);
- ``declared_model_jax.JaxOps`` and ``declared_model_torch.TorchOps``: the GPU images' forms,
  differentiated by their frameworks.

**One parameter layout.** A pass with ``ShapeOps`` (shapes only) records the parameters in the
order the architecture takes them: ``Network.parameters`` lists (name, shape); the parameter
vector theta is their concatenation, each row-major. So a vector drawn by HMC in JAX is the
same network in numpy and in PyTorch; ``kinds/bdl2021/tests/test_bdl_networks.py`` proves equal outputs,
log likelihoods and gradients.

Architectures (``ARCHITECTURES``), as the 2021 starting kit declared them:
- ``sequential``: a list of layers (conv, dense, activation, pools, flatten); the presets
  ``medmnist_lenet``, ``cifar_alexnet`` and ``retinopathy_cnn`` are such lists;
- ``resnet20_frn``: ResNet-20, width 16, filter response normalisation, ``relu`` or ``swish``;
- ``cnn_lstm``: token embedding, 1-d convolution, max pooling, an LSTM, a dense head (IMDB);
- the tanh MLP of ``declared_model.MLP`` (and ``mlp`` with another activation, as
  ``sequential`` dense layers, which have the MLP's layout).

PGDL's ``kinds/pgdl2020/runtime/layers.py`` is the other numpy stack with a backward pass; the
two stay apart on purpose. This one is float64 and must give JAX's and PyTorch's values for
one parameter vector (a convolution is a ``tensordot`` over (channels, rows, columns)); that
one is float32, Keras's layers with their caches, and is staged alone into participants'
sandboxes and Retina's kit (a convolution is one matrix product over (rows, columns,
channels)). One shared convolution would sum in one order for both and so change the floats
of one kind's references or trained zoos; what they could share is a few lines of padding
arithmetic.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

ACTIVATIONS = ("relu", "swish", "tanh", "sigmoid", "linear")
PADDINGS = ("same", "valid")
FRN_EPSILON = 1e-6
LSTM_FORGET_BIAS = 1.0      # added to the forget gate's input, as Haiku's LSTM does
FORWARD_ROWS = 1024


class NetworkError(ValueError):
    """A declaration no network can be built from: names the key and the value."""


@dataclass(frozen=True)
class Parameter:
    name: str
    shape: tuple
    init: str          # "fan_in": N(0, 2 / fan_in) (He); "zeros"; "ones"; "normal": N(0, 1)
    fan_in: int = 1

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def same_padding(size: int, window: int, stride: int) -> tuple[int, int]:
    """TensorFlow's SAME: out = ceil(size / stride), the extra row mostly after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + window - size, 0)
    return total // 2, total - total // 2


def conv_output(size: int, window: int, stride: int, padding: str) -> int:
    return -(-size // stride) if padding == "same" else (size - window) // stride + 1


# ---- the architectures ---------------------------------------------------------------------

def _conv(ops, take, x, name, channels, kernel, stride=1, padding="same"):
    cin = ops.shape(x)[-1]
    w = take(f"{name}/w", (kernel, kernel, cin, channels), "fan_in", kernel * kernel * cin)
    b = take(f"{name}/b", (channels,), "zeros")
    return ops.conv2d(x, w, b, stride, padding)


def _dense(ops, take, x, name, units):
    fan_in = ops.shape(x)[-1]
    return ops.dense(x, take(f"{name}/w", (fan_in, units), "fan_in", fan_in),
                     take(f"{name}/b", (units,), "zeros"))


def _frn(ops, take, x, name):
    channels = (ops.shape(x)[-1],)
    return ops.frn(x, take(f"{name}/gamma", channels, "ones"),
                   take(f"{name}/beta", channels, "zeros"), take(f"{name}/tau", channels, "zeros"))


def sequential(ops, take, x, spec):
    for index, layer in enumerate(spec["layers"]):
        kind, name = layer["type"], f"{index}.{layer['type']}"
        if kind == "conv":
            x = _conv(ops, take, x, name, layer["channels"], layer["kernel"],
                      layer.get("stride", 1), layer.get("padding", "same"))
        elif kind == "dense":
            x = _dense(ops, take, x, name, layer["units"])
        elif kind == "activation":
            x = ops.activation(x, layer["name"])
        elif kind in ("avg_pool", "max_pool"):
            x = ops.pool(x, kind, layer["size"])
        elif kind == "flatten":
            x = ops.reshape(x, (-1, math.prod(ops.shape(x)[1:])))
    return x


def resnet20_frn(ops, take, x, spec):
    """ResNet-20 (3 stacks of 3 residual blocks, width 16, 32, 64), each convolution followed
    by filter response normalisation; a 1x1 projection where a stack halves the size."""
    act = spec.get("activation", "swish")
    width = spec.get("width", 16)

    def layer(h, name, channels, kernel=3, stride=1, activation="linear"):
        h = _conv(ops, take, h, f"{name}/conv", channels, kernel, stride)
        return ops.activation(_frn(ops, take, h, f"{name}/frn"), activation)

    x = layer(x, "stem", width, activation=act)
    for stack in range(3):
        channels = width * 2 ** stack
        for block in range(3):
            stride = 2 if stack > 0 and block == 0 else 1
            name = f"stack{stack}.block{block}"
            y = layer(x, f"{name}/a", channels, stride=stride, activation=act)
            y = layer(y, f"{name}/b", channels)
            if stride == 2:
                x = layer(x, f"{name}/projection", channels, kernel=1, stride=stride)
            x = ops.activation(ops.add(x, y), act)
    size = ops.shape(x)[1:3]
    x = ops.pool(x, "avg_pool", list(size))
    x = ops.reshape(x, (-1, ops.shape(x)[-1]))
    return _dense(ops, take, x, "head", spec["outputs"])


def cnn_lstm(ops, take, tokens, spec):
    """IMDB's network: embedding, 1-d convolution (VALID) with relu, max pooling, an LSTM
    whose last state feeds a dense head."""
    table = take("embed/table", (spec["vocabulary"], spec["embedding"]), "normal")
    x = ops.embed(tokens, table)                                     # (N, T, E)
    steps, width = ops.shape(x)[1:]
    x = ops.reshape(x, (-1, 1, steps, width))
    kernel, filters = spec["kernel"], spec["filters"]
    w = take("conv/w", (1, kernel, width, filters), "fan_in", kernel * width)
    x = ops.activation(ops.conv2d(x, w, take("conv/b", (filters,), "zeros"), 1, "valid"),
                       "relu")
    x = ops.pool(x, "max_pool", [1, spec["pool"]])
    x = ops.reshape(x, (-1, ops.shape(x)[2], filters))               # (N, T', F)
    cell = spec["cell"]
    h = ops.lstm(x, take("lstm/w", (filters + cell, 4 * cell), "fan_in", filters + cell),
                 take("lstm/b", (4 * cell,), "zeros"))
    return _dense(ops, take, h, "head", spec["outputs"])


def _conv_layer(channels, kernel, padding="same"):
    return {"type": "conv", "channels": channels, "kernel": kernel, "padding": padding}


def _act(name):
    return {"type": "activation", "name": name}


def _pool(kind, size=2):
    return {"type": kind, "size": [size, size]}


FLATTEN = {"type": "flatten"}


def _dense_layer(units):
    return {"type": "dense", "units": units}


def _preset_layers(name: str, outputs: int) -> list[dict]:
    """The 2021 starting kit's sequential networks, as layer lists."""
    if name == "medmnist_lenet":
        return [_conv_layer(6, 5), _act("relu"), _pool("avg_pool"),
                _conv_layer(16, 5, "valid"), _act("relu"), _pool("avg_pool"), FLATTEN,
                _dense_layer(120), _act("relu"), _dense_layer(84), _act("relu"),
                _dense_layer(outputs)]
    if name == "cifar_alexnet":
        swish = _act("swish")
        return [_conv_layer(64, 3), swish, _pool("max_pool"), _conv_layer(128, 3), swish,
                _pool("max_pool"), _conv_layer(256, 2), swish, _conv_layer(128, 2), swish,
                _conv_layer(64, 2), swish, FLATTEN, _dense_layer(256), swish, _dense_layer(256),
                swish, _dense_layer(outputs)]
    relu = _act("relu")              # retinopathy_cnn
    return [_conv_layer(32, 3), relu, _conv_layer(32, 3), relu, _pool("max_pool"),
            _conv_layer(32, 3), relu, _conv_layer(32, 3), relu, _pool("max_pool"),
            _conv_layer(16, 3), relu, _pool("max_pool"), _conv_layer(16, 3), relu,
            _pool("max_pool"), FLATTEN, _dense_layer(128), relu, _dense_layer(outputs)]


PRESETS = ("medmnist_lenet", "cifar_alexnet", "retinopathy_cnn")
ARCHITECTURES = ("mlp", "sequential", "resnet20_frn", "cnn_lstm") + PRESETS
CNN_LSTM_DEFAULTS = {"vocabulary": 20000, "embedding": 128, "filters": 64, "kernel": 5,
                     "pool": 4, "cell": 128}


# ---- shapes only: the layout and the checks ------------------------------------------------

class ShapeOps:
    """Arrays are their shapes (batch first); every operation checks what it is given."""

    def __init__(self, where: str):
        self.where = where

    def fail(self, message: str):
        raise NetworkError(f"{self.where}: {message}")

    @staticmethod
    def shape(x):
        return x

    def dense(self, x, w, b):
        if len(x) != 2 or x[1] != w[0]:
            self.fail(f"a dense layer of {w[0]} inputs gets shape {x[1:]}; flatten first")
        return (x[0], w[1])

    def conv2d(self, x, w, b, stride, padding):
        if len(x) != 4:
            self.fail(f"a convolution needs (height, width, channels) inputs, found {x[1:]}")
        sizes = [conv_output(size, window, stride, padding) for size, window in zip(x[1:3], w[:2])]
        if min(sizes) < 1:
            self.fail(f"a {w[0]}x{w[1]} {padding} convolution does not fit a {x[1]}x{x[2]} input")
        return (x[0], *sizes, w[3])

    def pool(self, x, kind, size):
        if len(x) != 4 or x[1] < size[0] or x[2] < size[1]:
            self.fail(f"a {size[0]}x{size[1]} {kind} does not fit an input of shape {x[1:]}")
        return (x[0], x[1] // size[0], x[2] // size[1], x[3])

    @staticmethod
    def activation(x, name):
        return x

    @staticmethod
    def frn(x, gamma, beta, tau):
        return x

    def add(self, x, y):
        if x != y:
            self.fail(f"a residual sum of shapes {x[1:]} and {y[1:]}")
        return x

    @staticmethod
    def reshape(x, shape):
        size = math.prod(x)
        known = math.prod(n for n in shape if n != -1)
        return tuple(size // known if n == -1 else n for n in shape)

    @staticmethod
    def embed(tokens, table):
        return (*tokens, table[1])

    @staticmethod
    def lstm(x, w, b):
        return (x[0], w[1] // 4)


# ---- numpy: each operation returns its value and its vector-Jacobian product ---------------

def _activation(z, name):
    if name == "relu":
        a = np.maximum(z, 0.0)
        return a, lambda da: (da * (z > 0),)
    if name == "tanh":
        a = np.tanh(z)
        return a, lambda da: (da * (1.0 - a * a),)
    if name in ("sigmoid", "swish"):
        s = 0.5 * (1.0 + np.tanh(0.5 * z))
        if name == "sigmoid":
            return s, lambda da: (da * s * (1.0 - s),)
        return z * s, lambda da: (da * (s + z * s * (1.0 - s)),)
    return z, lambda da: (da,)


def _dense_np(x, w, b):
    return x @ w + b, lambda dy: (dy @ w.T, x.T @ dy, dy.sum(axis=0))


def _conv2d_np(x, w, b, stride, padding):
    kh, kw = w.shape[:2]
    pads = ((same_padding(x.shape[1], kh, stride), same_padding(x.shape[2], kw, stride))
            if padding == "same" else ((0, 0), (0, 0)))
    xp = np.pad(x, ((0, 0), *pads, (0, 0)))
    windows = sliding_window_view(xp, (kh, kw), axis=(1, 2))[:, ::stride, ::stride]
    out_h = conv_output(x.shape[1], kh, stride, padding)
    out_w = conv_output(x.shape[2], kw, stride, padding)
    windows = windows[:, :out_h, :out_w]                     # (N, OH, OW, C, kh, kw)
    y = np.tensordot(windows, w.transpose(2, 0, 1, 3), axes=3) + b

    def vjp(dy):
        dw = np.tensordot(windows, dy, axes=([0, 1, 2], [0, 1, 2])).transpose(1, 2, 0, 3)
        dxp = np.zeros_like(xp)
        for i in range(kh):
            for j in range(kw):
                dxp[:, i:i + stride * (out_h - 1) + 1:stride,
                    j:j + stride * (out_w - 1) + 1:stride] += dy @ w[i, j].T
        dx = dxp[:, pads[0][0]:pads[0][0] + x.shape[1], pads[1][0]:pads[1][0] + x.shape[2]]
        return dx, dw, dy.sum(axis=(0, 1, 2))
    return y, vjp


def pool_blocks(x, size):
    """The pooling windows (window = stride, VALID) as axes 2 and 4: a reshape, in numpy or
    in JAX."""
    (p, q), (n, h, w, c) = size, x.shape
    return x[:, :h // p * p, :w // q * q].reshape(n, h // p, p, w // q, q, c)


def _pool_np(x, kind, size):
    (p, q), (n, h, w, c) = size, x.shape
    out_h, out_w = h // p, w // q
    blocks = pool_blocks(x, size)
    if kind == "avg_pool":
        y = blocks.mean(axis=(2, 4))
        chosen = None
    else:
        flat = blocks.transpose(0, 1, 3, 5, 2, 4).reshape(n, out_h, out_w, c, p * q)
        first = flat.argmax(axis=-1)                         # ties: the first, as XLA's
        y = np.take_along_axis(flat, first[..., None], axis=-1)[..., 0]
        chosen = np.eye(p * q, dtype=x.dtype)[first]         # (N, OH, OW, C, p*q)

    def vjp(dy):
        if chosen is None:
            spread = np.broadcast_to(dy[:, :, None, :, None, :] / (p * q), blocks.shape)
        else:
            spread = (chosen * dy[..., None]).reshape(n, out_h, out_w, c, p, q) \
                .transpose(0, 1, 4, 2, 5, 3)
        dx = np.zeros_like(x)
        dx[:, :out_h * p, :out_w * q] = spread.reshape(n, out_h * p, out_w * q, c)
        return (dx,)
    return y, vjp


def _frn_np(x, gamma, beta, tau):
    """z = max(gamma * x / sqrt(mean_hw(x^2) + eps) + beta, tau), per example and channel."""
    nu2 = np.mean(x * x, axis=(1, 2), keepdims=True)
    r = 1.0 / np.sqrt(nu2 + FRN_EPSILON)
    xh = x * r
    y = gamma * xh + beta
    above = y >= tau
    z = np.where(above, y, tau)

    def vjp(dz):
        dy = dz * above
        dxh = dy * gamma
        dr = np.sum(dxh * x, axis=(1, 2), keepdims=True)
        area = x.shape[1] * x.shape[2]
        dx = dxh * r + dr * (-r ** 3) * x / area
        return (dx, np.sum(dy * xh, axis=(0, 1, 2)), dy.sum(axis=(0, 1, 2)),
                np.sum(dz * ~above, axis=(0, 1, 2)))
    return z, vjp


def _embed_np(tokens, table):
    def vjp(dy):
        dtable = np.zeros_like(table)
        np.add.at(dtable, tokens, dy)
        return (None, dtable)
    return table[tokens], vjp


def _sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _lstm_np(x, w, b):
    """Gates from [x_t, h] @ w + b split as (input, cell, forget, output); returns the last h."""
    n, steps, _ = x.shape
    cell = w.shape[1] // 4
    h, c = np.zeros((n, cell), x.dtype), np.zeros((n, cell), x.dtype)
    caches = []
    for t in range(steps):
        joined = np.concatenate([x[:, t], h], axis=1)
        z = joined @ w + b
        i, g = _sigmoid(z[:, :cell]), np.tanh(z[:, cell:2 * cell])
        f, o = _sigmoid(z[:, 2 * cell:3 * cell] + LSTM_FORGET_BIAS), _sigmoid(z[:, 3 * cell:])
        c_prev, c = c, f * c + i * g
        tc = np.tanh(c)
        h = o * tc
        caches.append((joined, i, g, f, o, c_prev, tc))

    def vjp(dh):
        dx, dw, db = np.zeros_like(x), np.zeros_like(w), np.zeros_like(b)
        dc = np.zeros_like(dh)
        for t in range(steps - 1, -1, -1):
            joined, i, g, f, o, c_prev, tc = caches[t]
            dc = dc + dh * o * (1.0 - tc * tc)
            dz = np.concatenate([dc * g * i * (1 - i), dc * i * (1 - g * g),
                                 dc * c_prev * f * (1 - f), dh * tc * o * (1 - o)], axis=1)
            dw += joined.T @ dz
            db += dz.sum(axis=0)
            djoined = dz @ w.T
            dx[:, t], dh = djoined[:, :x.shape[2]], djoined[:, x.shape[2]:]
            dc = dc * f
        return dx, dw, db
    return h, vjp


def _add_np(x, y):
    return x + y, lambda d: (d, d)


def _reshape_np(x, shape):
    return x.reshape(shape), lambda d: (d.reshape(x.shape),)


class NumpyOps:
    """Forward only, float64 (or the inputs' float type)."""
    shape = staticmethod(np.shape)

    @staticmethod
    def dense(x, w, b):
        return x @ w + b

    @staticmethod
    def conv2d(x, w, b, stride, padding):
        return _conv2d_np(x, w, b, stride, padding)[0]

    @staticmethod
    def pool(x, kind, size):
        return _pool_np(x, kind, size)[0]

    @staticmethod
    def activation(x, name):
        return _activation(x, name)[0]

    @staticmethod
    def frn(x, gamma, beta, tau):
        return _frn_np(x, gamma, beta, tau)[0]

    @staticmethod
    def add(x, y):
        return x + y

    @staticmethod
    def reshape(x, shape):
        return x.reshape(shape)

    @staticmethod
    def embed(tokens, table):
        return table[tokens]

    @staticmethod
    def lstm(x, w, b):
        return _lstm_np(x, w, b)[0]


class _Node:
    """A value on the tape and how its gradient reaches its inputs."""
    __slots__ = ("value", "inputs", "vjp", "grad")

    def __init__(self, value, inputs=(), vjp=None):
        self.value, self.inputs, self.vjp, self.grad = value, inputs, vjp, None


class TapeOps:
    """numpy with reverse accumulation: every operation's node goes on the tape, and
    ``backward`` walks it from the last node to the first."""

    def __init__(self):
        self.tape: list[_Node] = []

    def _record(self, function, *args, **settings):
        values = [a.value if isinstance(a, _Node) else a for a in args]
        value, vjp = function(*values, **settings)
        node = _Node(value, tuple(args), vjp)
        self.tape.append(node)
        return node

    def leaf(self, value) -> _Node:
        return _Node(value)

    @staticmethod
    def shape(x):
        return np.shape(x.value if isinstance(x, _Node) else x)

    def dense(self, x, w, b):
        return self._record(_dense_np, x, w, b)

    def conv2d(self, x, w, b, stride, padding):
        return self._record(_conv2d_np, x, w, b, stride=stride, padding=padding)

    def pool(self, x, kind, size):
        return self._record(_pool_np, x, kind=kind, size=size)

    def activation(self, x, name):
        return self._record(_activation, x, name=name)

    def frn(self, x, gamma, beta, tau):
        return self._record(_frn_np, x, gamma, beta, tau)

    def add(self, x, y):
        return self._record(_add_np, x, y)

    def reshape(self, x, shape):
        return self._record(_reshape_np, x, shape=shape)

    def embed(self, tokens, table):
        return self._record(_embed_np, tokens, table)

    def lstm(self, x, w, b):
        return self._record(_lstm_np, x, w, b)

    def backward(self, output: _Node, output_grad) -> None:
        output.grad = output_grad
        for node in reversed(self.tape):
            if node.grad is None:
                continue
            for source, grad in zip(node.inputs, node.vjp(node.grad)):
                if isinstance(source, _Node) and grad is not None:
                    grad = _unbroadcast(grad, source.value.shape)
                    source.grad = grad if source.grad is None else source.grad + grad
            node.grad = None if node is not output else node.grad


def _unbroadcast(grad, shape):
    """A gradient summed back to the shape of an input that was broadcast."""
    if grad.shape == shape:
        return grad
    while grad.ndim > len(shape):
        grad = grad.sum(axis=0)
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(axis=axes, keepdims=True) if axes else grad


# ---- the declared network ------------------------------------------------------------------

class Network:
    """One declared architecture: its parameter layout and its forward pass in any backend."""

    def __init__(self, spec: dict, where: str = "model"):
        self.spec = normalise(spec, where)
        self.architecture = _ARCHITECTURE_FUNCTIONS[self.spec["type"]]
        self.input_shape = tuple(self.spec["input_shape"])
        self.token_inputs = self.spec["type"] == "cnn_lstm"
        self.parameters: list[Parameter] = []

        def record(name, shape, init, fan_in=1):
            self.parameters.append(Parameter(name, tuple(shape), init, fan_in))
            return tuple(shape)
        shapes = ShapeOps(where)
        out = self.architecture(shapes, record, (1, *self.input_shape), self.spec)
        if out != (1, self.spec["outputs"]):
            shapes.fail(f"the network ends in shape {out[1:]}, expected ({self.spec['outputs']},)")
        self.offsets = np.cumsum([0] + [p.size for p in self.parameters])

    @property
    def num_parameters(self) -> int:
        return int(self.offsets[-1])

    def unpack(self, theta) -> dict:
        """name -> view of theta in the parameter's shape (any array type that slices)."""
        return {p.name: theta[start:start + p.size].reshape(p.shape)
                for p, start in zip(self.parameters, self.offsets)}

    def apply(self, ops, theta, x):
        """The network's outputs for inputs x (N, *input_shape) on the backend ``ops``."""
        views = iter(self.unpack(theta).values())
        return self.architecture(ops, lambda *_: next(views), x, self.spec)

    def prepare_inputs(self, x) -> np.ndarray:
        """x as the network reads it: (N, *input_shape), float64 (token ids: int64)."""
        x = np.asarray(x)
        x = x.reshape(len(x), *self.input_shape)
        return x.astype(np.int64 if self.token_inputs else np.float64, copy=False)

    def forward(self, theta, x) -> np.ndarray:
        """Outputs in numpy, FORWARD_ROWS examples at a time (a convolution's windows of
        50,000 images would not fit in memory at once); x may be a memory map."""
        parts = [self.apply(NumpyOps, theta, self.prepare_inputs(x[start:start + FORWARD_ROWS]))
                 for start in range(0, len(x), FORWARD_ROWS)]
        return np.concatenate(parts) if parts else np.zeros((0, self.spec["outputs"]))

    def output_and_vjp(self, theta, x):
        """Outputs and the map from their gradient to theta's gradient (numpy, one pass)."""
        tape = TapeOps()
        nodes = [tape.leaf(view) for view in self.unpack(theta).values()]
        it = iter(nodes)
        out = self.architecture(tape, lambda *_: next(it), self.prepare_inputs(x), self.spec)

        def vjp(output_grad):
            tape.backward(out, output_grad)
            return np.concatenate([(node.grad if node.grad is not None
                                    else np.zeros_like(node.value)).ravel() for node in nodes])
        return out.value, vjp

    def initial(self, rng: np.random.Generator) -> np.ndarray:
        """He-normal weights, zero biases, FRN scales 1, embeddings N(0, 1)."""
        parts = []
        for p in self.parameters:
            if p.init == "fan_in":
                parts.append(rng.normal(0.0, math.sqrt(2.0 / p.fan_in), p.size))
            elif p.init == "normal":
                parts.append(rng.normal(0.0, 1.0, p.size))
            else:
                parts.append(np.full(p.size, 1.0 if p.init == "ones" else 0.0))
        return np.concatenate(parts)

    def describe(self) -> str:
        spec = self.spec
        if spec["type"] == "resnet20_frn":
            return f"ResNet-20 with filter response normalisation and {spec['activation']}"
        if spec["type"] == "cnn_lstm":
            return (f"CNN-LSTM over token ids (vocabulary {spec['vocabulary']}, embedding "
                    f"{spec['embedding']}, LSTM {spec['cell']})")
        if spec.get("preset"):
            return spec["preset"]
        layers = spec["layers"]
        convs = sum(layer["type"] == "conv" for layer in layers)
        denses = sum(layer["type"] == "dense" for layer in layers)
        acts = sorted({layer["name"] for layer in layers if layer["type"] == "activation"})
        return (f"{convs} convolution(s) and {denses} dense layer(s), {'/'.join(acts) or 'linear'}"
                if convs else f"{'-'.join(map(str, spec.get('layer_sizes', ())))} MLP")


_ARCHITECTURE_FUNCTIONS = {"sequential": sequential, "resnet20_frn": resnet20_frn,
                           "cnn_lstm": cnn_lstm}


# ---- declarations --------------------------------------------------------------------------

def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _require(condition: bool, where: str, key: str, value, expected: str) -> None:
    if not condition:
        raise NetworkError(f"{where}: {key} is {value!r}; expected {expected}")


def _check_layer(layer, where: str, index: int) -> dict:
    key = f"layers[{index}]"
    _require(isinstance(layer, dict) and layer.get("type") in (
        "conv", "dense", "activation", "avg_pool", "max_pool", "flatten"), where, key, layer,
        "a layer {type: conv|dense|activation|avg_pool|max_pool|flatten, ...}")
    kind = layer["type"]
    if kind == "conv":
        for name in ("channels", "kernel"):
            _require(_int(layer.get(name)), where, f"{key}.{name}", layer.get(name),
                     "a positive integer")
        _require(_int(layer.get("stride", 1)), where, f"{key}.stride", layer.get("stride"),
                 "a positive integer")
        _require(layer.get("padding", "same") in PADDINGS, where, f"{key}.padding",
                 layer.get("padding"), "'same' or 'valid'")
    elif kind == "dense":
        _require(_int(layer.get("units")), where, f"{key}.units", layer.get("units"),
                 "a positive integer")
    elif kind == "activation":
        _require(layer.get("name") in ACTIVATIONS, where, f"{key}.name", layer.get("name"),
                 f"one of {', '.join(ACTIVATIONS)}")
    elif kind != "flatten":
        size = layer.get("size")
        size = [size, size] if _int(size) else size
        _require(isinstance(size, list) and len(size) == 2 and all(map(_int, size)), where,
                 f"{key}.size", layer.get("size"), "a positive integer or [rows, columns]")
        return {**layer, "size": size}
    return dict(layer)


def normalise(spec: dict, where: str = "model") -> dict:
    """The declaration with its defaults, checked; NetworkError names the key at fault."""
    _require(isinstance(spec, dict), where, "model", spec, "an object")
    kind = spec.get("type")
    _require(kind in ARCHITECTURES, where, "model.type", kind, f"one of {', '.join(ARCHITECTURES)}")
    if kind == "mlp":
        sizes = spec.get("layer_sizes")
        _require(isinstance(sizes, list) and len(sizes) >= 2 and all(map(_int, sizes)), where,
                 "model.layer_sizes", sizes, "[inputs, hidden sizes..., outputs]")
        activation = spec.get("activation", "tanh")
        _require(activation in ACTIVATIONS, where, "model.activation", activation,
                 f"one of {', '.join(ACTIVATIONS)}")
        layers = []
        for units in sizes[1:]:
            layers += [_dense_layer(units), _act(activation)]
        return {"type": "sequential", "input_shape": [sizes[0]], "outputs": sizes[-1],
                "layers": layers[:-1], "layer_sizes": list(sizes), "activation": activation}
    shape = spec.get("input_shape")
    _require(isinstance(shape, list) and shape and all(map(_int, shape)), where,
             "model.input_shape", shape, "one example's shape, e.g. [32, 32, 3]")
    _require(_int(spec.get("outputs")), where, "model.outputs", spec.get("outputs"),
             "the number of network outputs (classes, or 2 for a Gaussian likelihood)")
    base = {"type": kind, "input_shape": list(shape), "outputs": spec["outputs"]}
    if kind in PRESETS:
        _require(len(shape) == 3, where, "model.input_shape", shape, "[height, width, channels]")
        return {**base, "type": "sequential", "preset": kind,
                "layers": _preset_layers(kind, spec["outputs"])}
    if kind == "sequential":
        layers = spec.get("layers")
        _require(isinstance(layers, list) and layers, where, "model.layers", layers,
                 "a list of layers")
        return {**base, "layers": [_check_layer(layer, where, i) for i, layer in enumerate(layers)]}
    if kind == "resnet20_frn":
        _require(len(shape) == 3, where, "model.input_shape", shape, "[height, width, channels]")
        activation = spec.get("activation", "swish")
        _require(activation in ("relu", "swish"), where, "model.activation", activation,
                 "'relu' or 'swish'")
        width = spec.get("width", 16)
        _require(_int(width), where, "model.width", width, "a positive integer")
        return {**base, "activation": activation, "width": width}
    _require(len(shape) == 1, where, "model.input_shape", shape, "[sequence length]")
    settings = {**CNN_LSTM_DEFAULTS, **{k: spec[k] for k in CNN_LSTM_DEFAULTS if k in spec}}
    for key, value in settings.items():
        _require(_int(value), where, f"model.{key}", value, "a positive integer")
    return {**base, **settings}

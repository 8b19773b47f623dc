"""The declared networks in PyTorch: ``networks.py``'s operations on torch tensors, so
``Network(spec).apply(TorchOps, theta, x)`` is the same function of the same parameter vector
as the numpy and JAX forms, differentiated by autograd, on whatever device theta lives on.

    from networks import Network
    from declared_model_torch import TorchOps, log_likelihood, to_tensor
    network = Network(task.model)
    theta = to_tensor(network.initial(rng), device).requires_grad_()
    logits = network.apply(TorchOps, theta, to_tensor(network.prepare_inputs(x), device))

Why the interface stays NHWC/HWIO although PyTorch's convolutions are NCHW/OIHW: the
parameter layout is the competition's (one vector, row-major, HWIO kernels), shared with the
HMC references and the numpy image; each convolution and pooling permutes to NCHW and back
(cheap beside the convolution), so no parameter is ever re-laid out. TensorFlow's SAME
padding may put one more row after than before, which ``F.conv2d``'s symmetric ``padding``
cannot express: it is an explicit ``F.pad``. Pools are VALID with window = stride, as
PyTorch's default ``floor`` mode is.

Tensors keep the dtype they are given: the equality tests run in float64, the GPU baselines
and the epoch timing in float32. ``sgd_epoch_seconds`` is ``calibration.py``'s reference SGD
on this backend (its constants are arguments: the caller passes calibration's), for budgets
stated in epochs on a GPU worker.
"""
from __future__ import annotations

import math
import time

import numpy as np
import torch
import torch.nn.functional as F

try:                       # a package in the programs; files beside this one in the kit
    from .declared_model import walk_full_batches
    from .networks import FRN_EPSILON, LSTM_FORGET_BIAS, Network, same_padding
except ImportError:
    from declared_model import walk_full_batches
    from networks import FRN_EPSILON, LSTM_FORGET_BIAS, Network, same_padding


def _nchw(x):
    return x.permute(0, 3, 1, 2)


def _nhwc(x):
    return x.permute(0, 2, 3, 1)


class TorchOps:
    @staticmethod
    def shape(x):
        return tuple(x.shape)

    @staticmethod
    def dense(x, w, b):
        return x @ w + b

    @staticmethod
    def conv2d(x, w, b, stride, padding):
        kh, kw = w.shape[:2]
        x = _nchw(x)
        if padding == "same":
            (top, bottom), (left, right) = (same_padding(x.shape[2], kh, stride),
                                            same_padding(x.shape[3], kw, stride))
            if top or bottom or left or right:
                x = F.pad(x, (left, right, top, bottom))
        y = F.conv2d(x, w.permute(3, 2, 0, 1).to(x.dtype), b.to(x.dtype), stride)
        return _nhwc(y)

    @staticmethod
    def pool(x, kind, size):
        window = (int(size[0]), int(size[1]))
        pooling = F.avg_pool2d if kind == "avg_pool" else F.max_pool2d
        return _nhwc(pooling(_nchw(x), window, window))

    @staticmethod
    def activation(x, name):
        if name == "relu":
            return F.relu(x)
        if name == "swish":
            return F.silu(x)
        if name == "tanh":
            return torch.tanh(x)
        if name == "sigmoid":
            return torch.sigmoid(x)
        return x

    @staticmethod
    def frn(x, gamma, beta, tau):
        nu2 = torch.mean(x * x, dim=(1, 2), keepdim=True)
        return torch.maximum(gamma * x * torch.rsqrt(nu2 + FRN_EPSILON) + beta, tau)

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
        """Gates split (input, cell, forget, output), forget bias added; the last h."""
        cell = w.shape[1] // 4
        h = c = x.new_zeros((x.shape[0], cell))
        for t in range(x.shape[1]):
            z = torch.cat([x[:, t], h], dim=1) @ w + b
            i, g = torch.sigmoid(z[:, :cell]), torch.tanh(z[:, cell:2 * cell])
            f = torch.sigmoid(z[:, 2 * cell:3 * cell] + LSTM_FORGET_BIAS)
            c = f * c + i * g
            h = torch.sigmoid(z[:, 3 * cell:]) * torch.tanh(c)
        return h


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def to_tensor(array, device=None, dtype=None) -> torch.Tensor:
    """A numpy array (theta, inputs, labels) as a tensor on ``device``; integer arrays
    (token ids, class labels) stay int64 whatever ``dtype`` says."""
    array = np.asarray(array)
    if array.dtype.kind in "iub":
        return torch.as_tensor(array.astype(np.int64, copy=False), device=device)
    return torch.as_tensor(array, dtype=dtype, device=device)


def log_likelihoods(likelihood: str, output, y):
    """log p(y_i | f(x_i)) per row: softmax, or Normal(mu, softplus(r)^2) for f = (mu, r)."""
    if likelihood == "softmax":
        log_probs = F.log_softmax(output, dim=-1)
        return log_probs.gather(1, y.reshape(-1, 1).long())[:, 0]
    mean, scale = output[:, 0], F.softplus(output[:, 1])
    return -0.5 * math.log(2 * math.pi) - torch.log(scale) - 0.5 * ((y - mean) / scale) ** 2


def log_likelihood(likelihood: str, output, y):
    """sum_i log p(y_i | f(x_i))."""
    return log_likelihoods(likelihood, output, y).sum()


def as_network(model) -> Network:
    """A ``networks.Network`` from a declaration, a Network, or ``declared_model.MLP`` (the
    tanh MLP's hand-written form: the same layout as the ``mlp`` declaration)."""
    if isinstance(model, dict):
        return Network(model)
    if hasattr(model, "apply"):
        return model
    return Network({"type": "mlp", "layer_sizes": list(model.layer_sizes), "activation": "tanh"})


def _synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def sgd_epoch_seconds(network, likelihood: str, prior_variance: float, x, y, device=None,
                      seed: int = 0, clock=time.perf_counter, batch: int = 128,
                      step_size: float = 1e-5, samples: int = 5, sample_seconds: float = 0.05,
                      time_cap_seconds: float = 5.0, long_epoch_seconds: float = 1.0
                      ) -> list[float]:
    """Seconds per epoch of ``calibration.py``'s reference SGD in float32 on ``device``
    (CUDA when there is one), with the same sampling of the timings: one untimed step, one
    timed step that sizes the samples; an epoch shorter than ``long_epoch_seconds`` is timed
    in whole epochs (samples filling ``sample_seconds``, after an untimed epoch), a longer one
    in minibatch steps scaled to its N / B steps. Only the minibatches go to the device (x may
    be a memory map of 50,000 images). CUDA runs asynchronously: the device is synchronised
    before every reading of the clock, so a figure is the work done, not the work queued.
    The keyword defaults are calibration.py's constants."""
    network = as_network(network)
    device = torch.device(device) if device is not None else default_device()
    rng = np.random.default_rng(seed)
    y = np.asarray(y) if likelihood == "softmax" else np.asarray(y, np.float32)
    theta = to_tensor(network.initial(rng), device, torch.float32)
    n = len(x)

    def batches():
        order = rng.permutation(n)
        return [np.sort(order[start:start + batch]) for start in range(0, n, batch)]

    def run(work, theta):
        _synchronise(device)
        began = clock()
        for rows in work:
            theta = theta.detach().requires_grad_()
            output = network.apply(TorchOps, theta,
                                   to_tensor(network.prepare_inputs(x[rows]), device, torch.float32))
            potential = (-(n / len(rows)) * log_likelihood(likelihood, output,
                                                           to_tensor(y[rows], device, torch.float32))
                         + 0.5 * (theta * theta).sum() / prior_variance)
            grad, = torch.autograd.grad(potential, theta)
            theta = (theta - step_size * grad).detach()
        _synchronise(device)
        return theta, clock() - began

    epoch = batches()
    theta, _ = run(epoch[:1], theta)                  # allocations, kernels, caches
    theta, one_step = run(epoch[:1], theta)
    long_epochs = max(one_step, 1e-9) * len(epoch) > long_epoch_seconds
    repeats = max(1, math.ceil(sample_seconds / max(one_step if long_epochs
                                                    else one_step * len(epoch), 1e-9)))
    if not long_epochs:
        theta, _ = run(epoch, theta)
    figures: list[float] = []
    spent = 0.0
    while len(figures) < samples and (not figures or spent < time_cap_seconds):
        work = (walk_full_batches(epoch, len(figures) * repeats, repeats) if long_epochs
                else [rows for _ in range(repeats) for rows in batches()])
        theta, elapsed = run(work, theta)
        spent += elapsed
        figures.append(elapsed / repeats * (n / len(epoch[0]) if long_epochs else 1))
    return figures

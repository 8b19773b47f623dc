"""The declared networks in PyTorch: ``networks.py``'s operations on torch tensors, so
``network.apply(TorchOps, theta, x)`` is the same function of the same parameter vector as the
numpy and JAX forms, differentiated by autograd, on any device.

    from declared_model import task_network
    from declared_model_torch import TorchOps, log_likelihood
    network = task_network(task.model)
    theta = torch.tensor(network.initial(rng), device="cuda", requires_grad=True)
    logits = network.apply(TorchOps, theta, torch.as_tensor(x, device="cuda"))

The interface keeps the layout of the other forms (NHWC inputs, HWIO kernels); convolutions
and pooling permute to PyTorch's NCHW inside. The GPU image (``gpu310``) installs PyTorch, so
the ingestion program times a budget's epochs with this form there (``sgd_epoch_seconds``);
the CPU image does not, and nothing imports this file there.
"""
from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F

try:                       # a package in the programs; a file beside this one in the kit
    from .networks import FRN_EPSILON, LSTM_FORGET_BIAS, same_padding
except ImportError:
    from networks import FRN_EPSILON, LSTM_FORGET_BIAS, same_padding


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
        if padding == "same":
            (top, bottom), (left, right) = (same_padding(x.shape[1], kh, stride),
                                            same_padding(x.shape[2], kw, stride))
            x = F.pad(x, (0, 0, left, right, top, bottom))
        y = F.conv2d(_nchw(x), w.permute(3, 2, 0, 1), b, stride=stride)
        return _nhwc(y)

    @staticmethod
    def pool(x, kind, size):
        pooled = (F.avg_pool2d if kind == "avg_pool" else F.max_pool2d)(
            _nchw(x), kernel_size=tuple(size), stride=tuple(size))
        return _nhwc(pooled)

    @staticmethod
    def activation(x, name):
        if name == "relu":
            return torch.relu(x)
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
        cell = w.shape[1] // 4
        h = x.new_zeros((x.shape[0], cell))
        c = x.new_zeros((x.shape[0], cell))
        for t in range(x.shape[1]):
            z = torch.cat([x[:, t], h], dim=1) @ w + b
            i, g = torch.sigmoid(z[:, :cell]), torch.tanh(z[:, cell:2 * cell])
            f = torch.sigmoid(z[:, 2 * cell:3 * cell] + LSTM_FORGET_BIAS)
            c = f * c + i * g
            h = torch.sigmoid(z[:, 3 * cell:]) * torch.tanh(c)
        return h


def log_likelihoods(likelihood: str, output, y):
    """log p(y_i | f(x_i)) per row: softmax, or Normal(mu, softplus(r)^2) for f = (mu, r)."""
    if likelihood == "softmax":
        return torch.log_softmax(output, dim=-1).gather(1, y.long()[:, None])[:, 0]
    mean, scale = output[:, 0], F.softplus(output[:, 1])
    return -0.5 * math.log(2 * math.pi) - torch.log(scale) - 0.5 * ((y - mean) / scale) ** 2


def log_likelihood(likelihood: str, output, y):
    """sum_i log p(y_i | f(x_i))."""
    return log_likelihoods(likelihood, output, y).sum()


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def sgd_epoch_seconds(network, likelihood: str, prior_variance: float, x, y, *, device: str,
                      batch: int, step_size: float, samples: int, sample_seconds: float,
                      time_cap: float, long_epoch: float, seed: int = 0,
                      clock=time.perf_counter) -> list[float]:
    """Seconds per epoch of the reference SGD (``calibration.py``: minibatches of the same
    size, the same step, the same sampling of the timings) in float32 on ``device``; a CUDA
    device is synchronised before the clock is read."""
    import numpy as np
    rng = np.random.default_rng(seed)
    theta = torch.tensor(network.initial(rng), dtype=torch.float32, device=device,
                         requires_grad=True)
    targets = torch.as_tensor(np.asarray(y), device=device)
    n = len(x)
    order = rng.permutation(n)
    batches = [np.sort(order[start:start + batch]) for start in range(0, n, batch)]

    def step(rows):
        inputs = torch.as_tensor(network.prepare_inputs(x[rows]), device=device)
        inputs = inputs if network.token_inputs else inputs.float()
        output = network.apply(TorchOps, theta, inputs)
        rows_t = torch.as_tensor(rows, device=device)
        potential = (-(n / len(rows)) * log_likelihood(likelihood, output, targets[rows_t])
                     + 0.5 * (theta * theta).sum() / prior_variance)
        grad, = torch.autograd.grad(potential, theta)
        with torch.no_grad():
            theta.sub_(step_size * grad)

    def timed(work):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        began = clock()
        for rows in work:
            step(rows)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return clock() - began

    timed(batches[:1])                            # allocations, kernels, caches
    one_step = max(timed(batches[:1]), 1e-9)
    long_epochs = one_step * len(batches) > long_epoch
    repeats = max(1, math.ceil(sample_seconds / (one_step if long_epochs
                                                 else one_step * len(batches))))
    if not long_epochs:
        timed(batches)
    figures: list[float] = []
    spent = 0.0
    while len(figures) < samples and (not figures or spent < time_cap):
        work = ([batches[i % len(batches)] for i in range(repeats)] if long_epochs
                else [rows for _ in range(repeats) for rows in batches])
        elapsed = timed(work)
        spent += elapsed
        figures.append(elapsed / repeats * (n / len(batches[0]) if long_epochs else 1))
    return figures

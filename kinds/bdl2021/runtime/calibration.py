"""One epoch of plain SGD on a task's declared model, timed on the machine that runs it: the
unit of a budget stated in epochs.

The 2021 competition bounded training by a multiple of standard SGD training (the proposal:
3000 SGD epochs; the report: ten times standard training). Seconds on an unknown worker are
not that, so the ingestion program times this reference before the participant's code runs,
and converts the epochs to seconds on that worker.

The reference SGD step: the declared network and likelihood (``declared_model``, as the HMC
reference and the baselines compute them), a minibatch of ``REFERENCE_BATCH`` examples (the
whole training set when it is smaller) in a fresh random order each epoch, the gradient of
the minibatch potential U = -(N / B) log p(y_B | x_B, theta) - log p(theta), and
theta <- theta - STEP_SIZE * grad. One epoch is ceil(N / B) such steps.
"""
from __future__ import annotations

import math
import time

import numpy as np

from .declared_model import MLP, log_likelihood_and_output_grad

REFERENCE_BATCH = 128
SAMPLES = 5                # timed samples; the ingestion takes their median
# A sample runs whole epochs for at least this long: a small network's epoch takes well under
# a millisecond, too short to time alone on a busy machine.
SAMPLE_SECONDS = 0.05
TIME_CAP_SECONDS = 5.0     # stop sooner when epochs are slow; one sample at least
STEP_SIZE = 1e-5           # the values do not matter for timing; small keeps them finite


def _initial(model: MLP, rng: np.random.Generator) -> np.ndarray:
    theta = np.zeros(model.num_parameters)
    for weight, _ in model.unpack(theta):
        weight[...] = rng.normal(0.0, 1.0 / math.sqrt(weight.shape[0]), weight.shape)
    return theta


def _epoch(model: MLP, likelihood: str, prior_variance: float, theta: np.ndarray,
           x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    n = len(x)
    batch = min(REFERENCE_BATCH, n)
    order = rng.permutation(n)
    with np.errstate(all="ignore"):
        for start in range(0, n, batch):
            rows = order[start:start + batch]
            output, activations, layers = model.forward_with_activations(theta, x[rows])
            _, output_grad = log_likelihood_and_output_grad(likelihood, output, y[rows])
            grad = -(n / len(rows)) * model.backward(output_grad, activations, layers) \
                + theta / prior_variance
            theta = theta - STEP_SIZE * grad
    return theta


def sgd_epoch_seconds(layer_sizes, likelihood: str, prior_variance: float, x: np.ndarray,
                      y: np.ndarray, seed: int = 0, clock=time.perf_counter) -> list[float]:
    """Seconds per epoch of the reference SGD (see the module docstring), one figure per
    timed sample; a sample times as many whole epochs as fill ``SAMPLE_SECONDS``, after two
    untimed epochs that pay for allocations and caches and size the samples."""
    model = MLP(tuple(int(size) for size in layer_sizes))
    rng = np.random.default_rng(seed)
    x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    y = np.asarray(y) if likelihood == "softmax" else np.asarray(y, dtype=np.float64)
    theta = _initial(model, rng)
    theta = _epoch(model, likelihood, prior_variance, theta, x, y, rng)
    began = clock()      # the second epoch, warm, sizes the samples
    theta = _epoch(model, likelihood, prior_variance, theta, x, y, rng)
    epochs = max(1, math.ceil(SAMPLE_SECONDS / max(clock() - began, 1e-9)))
    samples: list[float] = []
    spent = 0.0
    while len(samples) < SAMPLES and (not samples or spent < TIME_CAP_SECONDS):
        began = clock()
        for _ in range(epochs):
            theta = _epoch(model, likelihood, prior_variance, theta, x, y, rng)
        elapsed = clock() - began
        spent += elapsed
        samples.append(elapsed / epochs)
    return samples


def task_epoch_seconds(declaration: dict, x_train: np.ndarray, y_train: np.ndarray
                       ) -> list[float]:
    """The reference SGD on a task as its declaration states it (model, likelihood, prior)."""
    return sgd_epoch_seconds(declaration["model"]["layer_sizes"],
                             declaration["likelihood"]["name"],
                             float(declaration["prior"]["variance"]), x_train, y_train)

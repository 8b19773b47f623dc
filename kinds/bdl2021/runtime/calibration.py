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

from .declared_model import log_likelihood_and_output_grad, task_network, walk_full_batches

REFERENCE_BATCH = 128
SAMPLES = 5                # timed samples; the ingestion takes their median
# A sample runs whole epochs for at least this long: a small network's epoch takes well under
# a millisecond, too short to time alone on a busy machine.
SAMPLE_SECONDS = 0.05
TIME_CAP_SECONDS = 5.0     # stop sooner when epochs are slow; one sample at least
# An epoch longer than this is timed in minibatch steps, not run whole: a numpy ResNet-20
# epoch over CIFAR-10 would take the better part of an hour.
LONG_EPOCH_SECONDS = 1.0
STEP_SIZE = 1e-5           # the values do not matter for timing; small keeps them finite


def _step(model, likelihood: str, prior_variance: float, theta: np.ndarray, x, y,
          rows: np.ndarray, n: int) -> np.ndarray:
    output, vjp = model.output_and_vjp(theta, model.prepare_inputs(x[np.sort(rows)]))
    _, output_grad = log_likelihood_and_output_grad(likelihood, output, y[np.sort(rows)])
    grad = -(n / len(rows)) * vjp(output_grad) + theta / prior_variance
    return theta - STEP_SIZE * grad


def _batches(n: int, rng: np.random.Generator) -> list[np.ndarray]:
    order = rng.permutation(n)
    batch = min(REFERENCE_BATCH, n)
    return [order[start:start + batch] for start in range(0, n, batch)]


def _run(model, likelihood, prior_variance, theta, x, y, batches) -> np.ndarray:
    with np.errstate(all="ignore"):
        for rows in batches:
            theta = _step(model, likelihood, prior_variance, theta, x, y, rows, len(x))
    return theta


def sgd_epoch_seconds(model, likelihood: str, prior_variance: float, x: np.ndarray,
                      y: np.ndarray, seed: int = 0, clock=time.perf_counter) -> list[float]:
    """Seconds per epoch of the reference SGD (see the module docstring), one figure per
    timed sample. One untimed step pays for allocations and caches; one timed step sizes
    the samples. Where an epoch is short (under ``LONG_EPOCH_SECONDS``), a sample times as
    many whole epochs as fill ``SAMPLE_SECONDS``, after an untimed one; where it is long (a
    CNN on 50,000 images in numpy), a sample times full minibatch steps filling
    ``SAMPLE_SECONDS`` and scales them to the epoch's N / B steps. x may be a memory map:
    only the minibatches are read."""
    rng = np.random.default_rng(seed)
    y = np.asarray(y) if likelihood == "softmax" else np.asarray(y, dtype=np.float64)
    n, theta = len(x), model.initial(rng)
    batches = _batches(n, rng)
    theta = _run(model, likelihood, prior_variance, theta, x, y, batches[:1])
    began = clock()
    theta = _run(model, likelihood, prior_variance, theta, x, y, batches[:1])
    step = max(clock() - began, 1e-9)
    long_epochs = step * len(batches) > LONG_EPOCH_SECONDS
    repeats = max(1, math.ceil(SAMPLE_SECONDS / (step if long_epochs else step * len(batches))))
    if not long_epochs:
        theta = _run(model, likelihood, prior_variance, theta, x, y, batches)
    samples: list[float] = []
    spent = 0.0
    while len(samples) < SAMPLES and (not samples or spent < TIME_CAP_SECONDS):
        work = (walk_full_batches(batches, len(samples) * repeats, repeats) if long_epochs
                else [rows for _ in range(repeats) for rows in _batches(n, rng)])
        began = clock()
        theta = _run(model, likelihood, prior_variance, theta, x, y, work)
        elapsed = clock() - began
        spent += elapsed
        samples.append(elapsed / repeats * (n / len(batches[0]) if long_epochs else 1))
    return samples


def task_epoch_seconds(declaration: dict, x_train: np.ndarray, y_train: np.ndarray,
                       framework: str | None = None) -> dict:
    """The reference SGD on a task as its declaration states it (model, likelihood, prior),
    in the image's framework: PyTorch where the image installs it (the GPU images; on the GPU
    when there is one), else numpy. ``{"samples": seconds per epoch, "timed_with": ...}``."""
    network = task_network(declaration["model"])
    settings = (declaration["likelihood"]["name"], float(declaration["prior"]["variance"]),
                x_train, y_train)
    framework = framework or ("torch" if _torch_installed() else "numpy")
    if framework == "torch":
        from .declared_model_torch import default_device
        from .declared_model_torch import sgd_epoch_seconds as torch_epoch_seconds
        device = default_device()
        samples = torch_epoch_seconds(network, *settings, device=device, batch=REFERENCE_BATCH,
                                      step_size=STEP_SIZE, samples=SAMPLES,
                                      sample_seconds=SAMPLE_SECONDS,
                                      time_cap_seconds=TIME_CAP_SECONDS,
                                      long_epoch_seconds=LONG_EPOCH_SECONDS)
        return {"samples": samples, "timed_with": f"PyTorch on {device.type}"}
    return {"samples": sgd_epoch_seconds(network, *settings), "timed_with": "numpy"}


def _torch_installed() -> bool:
    import importlib.util
    return importlib.util.find_spec("torch") is not None

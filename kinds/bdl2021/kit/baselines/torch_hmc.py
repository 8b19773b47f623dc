"""Baseline (PyTorch): full-batch Hamiltonian Monte Carlo with an adapted diagonal mass matrix
on the declared network, as ``hmc.py`` does it in numpy; its docstring describes the method.

The same constants, schedule and contract: an Adam warm start (its predictive the first
checkpoint), warm-up adapting the step size by dual averaging and the mass matrix in windows,
trajectories of random length, every draw in a running-mean predictive (regression: at most
2 * num_samples evenly spaced draws), TIME_SHARE of the time left, no transition started that
the longest yet would carry past it, a checkpoint every CHECKPOINT_SECONDS of sampling. On
the GPU when there is one. The point is more transitions in a budget: a full-batch gradient
of digits_cnn's CNN takes numpy 7.4 ms, PyTorch 1.8 ms on one CPU thread, and less on a GPU.
What differs:

- The network runs in float32 on every declared network, the CNN too (hmc.py: the MLP only);
  each pass's log-likelihood is summed in float64, and the prior, positions, momenta and
  energies are float64. The chain is then exact for the float32 potential, whose rounding is
  far below the Monte Carlo error (hmc.py's argument). That needs float32 products: TF32,
  cuDNN's default for convolutions on recent GPUs, rounds inputs to 10 bits (about 5e-4, not
  float32's 6e-8), so it is off while the baseline runs.
- The full batch goes through the network CHUNK_ROWS rows a pass, so a large training set
  fits in memory.
- The first step size comes from finite-difference Hessian-vector products of the full-batch
  gradient, as in numpy: 21 gradients. Autograd's exact product (double backward) costs a
  CNN far more on the CPU: on digits_cnn, one thread, 60 ms a product against 1.8 ms a
  gradient.
- A trajectory does not stop at a non-finite potential: checking each step would wait for
  the GPU each step. A non-finite end is rejected all the same.

One numpy generator makes every random draw. Repeatable on the CPU given its seed and the
clock's readings (the tests' virtual clock).
"""
import contextlib
import math
import time

import numpy as np
import torch

from declared_model_torch import log_likelihood
import hmc_adaptation
# named in this docstring, and read by the tests as this module's
from hmc_adaptation import (Point, RunningVariance, TARGET_ACCEPTANCE,  # noqa: F401
                            WARMUP_WINDOWS)
from torch_training import DTYPE, Adam, DeclaredModel, finite, predictive, sample_passes

TIME_SHARE = 0.9
WARMUP_SHARE = 0.2            # of the time after the warm start
TRAJECTORY_LENGTH = 2.0
MAX_LEAPFROG = 128
ADAM_STEPS = 300
ADAM_LEARNING_RATE = 3e-3
ADAM_SHARE = 0.1              # of the time: the most the warm start may take
CHECKPOINT_SECONDS = 2.0
CURVATURE_ITERATIONS = 20
CHUNK_ROWS = 4096             # training rows a pass of the full-batch potential
SEED = 4


@contextlib.contextmanager
def full_float32():
    """TF32 off (convolutions and matrix products), restored after."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


@full_float32()
def predict(task, x_train, y_train, x_test, checkpoint):
    model = DeclaredModel(task, x_train, y_train)
    rng = np.random.default_rng(SEED)
    started = time.monotonic()
    deadline = started + TIME_SHARE * task.time_left()
    potential_fn = full_batch_potential(model)
    theta = adam(potential_fn, model.initial(rng).double(),
                 started + ADAM_SHARE * (deadline - started))
    state = Point.at(theta, potential_fn)
    # the warm start's answer, before warm-up (hmc.py's reason: a large network, a short
    # budget); its generator is its own, so the draws below are those made without it
    first = Draws(task, model, x_test, np.random.default_rng(SEED + 1))
    first.add(theta)
    checkpoint(first.predictive())
    step_size = 0.5 / math.sqrt(largest_curvature(potential_fn, theta, rng, deadline))
    warmup_end = time.monotonic() + WARMUP_SHARE * (deadline - time.monotonic())
    state, step_size, inverse_mass = warm_up(state, potential_fn, step_size,
                                             torch.ones_like(theta), warmup_end, rng)
    return hmc_adaptation.sample_until(
        deadline, state,
        lambda point: transition(point, potential_fn, step_size, inverse_mass, rng),
        Draws(task, model, x_test, rng), checkpoint, CHECKPOINT_SECONDS,
        clock=lambda: time.monotonic())


def full_batch_potential(model):
    """theta (float64) -> (U(theta), grad U(theta)) on every training row, both float64
    tensors on the device: U is not read back, as reading it waits for the GPU."""
    chunks = [(model.x_train[start:start + CHUNK_ROWS], model.y_train[start:start + CHUNK_ROWS])
              for start in range(0, model.n, CHUNK_ROWS)]

    def potential_fn(theta):
        variable = theta.to(DTYPE).requires_grad_()
        log_lik = grad = 0.0
        for x, y in chunks:
            part = log_likelihood(model.likelihood, model.outputs(variable, x), y)
            grad = grad + torch.autograd.grad(part, variable)[0].double()
            log_lik = log_lik + part.detach().double()
        return (-log_lik + 0.5 * (theta @ theta) / model.prior_variance,
                -grad + theta / model.prior_variance)
    return potential_fn


def largest_curvature(potential_fn, theta, rng, deadline, delta=1e-4):
    """``sgld.largest_curvature``: power iteration on finite-difference Hessian-vector
    products, lambda_max of grad^2 U; past ``deadline`` the estimate so far."""
    direction = random_normal(rng, theta)
    direction /= direction.norm()
    base = potential_fn(theta)[1]
    curvature = 1.0
    for _ in range(CURVATURE_ITERATIONS):
        product = (potential_fn(theta + delta * direction)[1] - base) / delta
        curvature = float(product.norm())
        if not math.isfinite(curvature) or curvature == 0:
            return 1.0
        direction = product / curvature
        if time.monotonic() > deadline:
            break
    return curvature


def random_normal(rng, like):
    """Standard normal draws of numpy's generator, shaped and placed as ``like``."""
    return torch.as_tensor(rng.standard_normal(tuple(like.shape)), device=like.device)


def adam(potential_fn, theta, deadline):
    """Full-batch Adam from ``theta`` (updated in place): at most ADAM_STEPS steps, until
    ``deadline`` or a non-finite gradient (``training.adam``'s loop)."""
    optimiser = Adam([theta], ADAM_LEARNING_RATE)
    for _ in range(ADAM_STEPS):
        grad = potential_fn(theta)[1]
        if not finite(grad):
            break
        optimiser.step([grad])
        if time.monotonic() > deadline:
            break
    return theta


def transition(state, potential_fn, step_size, inverse_mass, rng):
    """One HMC transition with the mass matrix diag(1 / inverse_mass): (next point,
    acceptance probability)."""
    position, potential, gradient = state.position, state.potential, state.gradient
    momentum = random_normal(rng, position) / inverse_mass.sqrt()
    steps = max(1, math.ceil(rng.uniform() * min(MAX_LEAPFROG, TRAJECTORY_LENGTH / step_size)))
    end_momentum = momentum - 0.5 * step_size * gradient
    for step in range(steps):
        position = position + step_size * inverse_mass * end_momentum
        potential, gradient = potential_fn(position)
        end_momentum = end_momentum - (0.5 if step == steps - 1 else 1.0) * step_size * gradient
    energy_change = float(potential - state.potential
                          + 0.5 * (end_momentum @ (inverse_mass * end_momentum))
                          - 0.5 * (momentum @ (inverse_mass * momentum)))
    return hmc_adaptation.metropolis(state, Point(position, potential, gradient), energy_change,
                                     rng)


def warm_up(state, potential_fn, step_size, inverse_mass, deadline, rng):
    """hmc_adaptation.warm_up with this module's transitions and clock."""
    return hmc_adaptation.warm_up(
        state, lambda point, eps, mass: transition(point, potential_fn, eps, mass, rng),
        step_size, inverse_mass, deadline, clock=lambda: time.monotonic())


class Draws:
    """The predictive of every draw so far, each through the network in float32: a running
    mean of class probabilities, or for regression at most 2 * num_samples evenly spaced
    parameter draws (kept on the device), num_samples of them evenly spaced in the
    predictive."""

    def __init__(self, task, model, x_test, rng):
        self.task, self.model, self.x_test, self.rng = task, model, x_test, rng
        self.classification = task.task_type == "classification"
        self.count, self.total = 0, 0.0
        self.kept, self.keep_every = [], 1

    def add(self, theta):
        self.count += 1
        theta = theta.to(DTYPE)
        if self.classification:
            self.total = self.total + self.of([theta])
        elif self.count % self.keep_every == 0:
            self.kept.append(theta)
            if len(self.kept) >= 2 * self.task.num_samples:
                self.kept, self.keep_every = self.kept[1::2], 2 * self.keep_every

    def of(self, samples):
        return predictive(self.task, self.model, sample_passes(self.model, samples),
                          self.x_test, self.rng)

    def predictive(self):
        if self.classification:
            return self.total / self.count
        spread = np.linspace(0, len(self.kept) - 1, min(len(self.kept), self.task.num_samples))
        return self.of([self.kept[int(round(i))] for i in spread])

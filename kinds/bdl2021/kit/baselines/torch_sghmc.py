"""Baseline (PyTorch): stochastic-gradient Hamiltonian Monte Carlo (Chen, Fox & Guestrin 2014)
on the declared network, as ``sghmc.py`` does it in numpy.

With U_batch the declared model's potential on a minibatch (likelihood scaled by
N / batch size, plus the Gaussian prior), the momentum form of SGHMC (their eq. 15, the
noise estimate B taken as 0):

    v     <- (1 - alpha) v - eta grad U_batch(theta) + sqrt(2 alpha eta) xi
    theta <- theta + v

with friction alpha and learning rate eta = STEP_FRACTION / (largest curvature of the
potential at the warm start), so one setting serves every task. The curvature is found by
power iteration (at most CURVATURE_ITERATIONS steps and CURVATURE_SHARE of the time) on
exact Hessian-vector products (autograd's double backward) of the potential on a fixed
CURVATURE_ROWS-row minibatch scaled to N, not on the full batch as in numpy: a full-batch
pass of a declared CNN is many minibatches. The warm start is minibatch Adam towards the MAP
for at most WARM_EPOCHS epochs and WARM_SHARE of the time; its predictive is the first
checkpoint. Burn-in lasts BURN_IN steps or a third of the remaining time, whichever ends
first (so a short budget still keeps samples); then a sample is kept every KEEP_EVERY steps
(at most MAX_SAMPLES held, on the device: when full, every other one is dropped and the
thinning doubles, so the kept samples stay evenly spaced). At most half of the budget is
spent, the final predictive included (its cost per sample measured by the checkpoints);
checkpoints follow the warm start, the first kept sample and every CHECKPOINT_EVERY steps.
A step that makes theta non-finite restarts the chain from the last sample with zero
momentum. On the GPU when there is one; repeatable on the CPU given its seed when no
deadline cuts it short.
"""
import math
import time

import numpy as np
import torch

from torch_training import (Budget, DeclaredModel, finite, predictive, sample_passes, seeded,
                            warm_start)

STEPS = 20000
BURN_IN = 1000
BATCH = 128
FRICTION = 0.05           # alpha: the share of momentum lost per step
STEP_FRACTION = 0.1       # eta = STEP_FRACTION / largest Hessian eigenvalue
KEEP_EVERY = 20           # thinning; doubled whenever MAX_SAMPLES are held
MAX_SAMPLES = 30          # bounds the memory they take and the predictive's cost
CHECKPOINT_EVERY = 2000
WARM_EPOCHS = 5
WARM_SHARE = 0.25         # of the time, at most, for the warm start
WARM_LEARNING_RATE = 1e-3
CURVATURE_ROWS = 512
CURVATURE_ITERATIONS = 20
CURVATURE_SHARE = 0.1     # of the time left, at most, for the power iteration
TIME_SHARE = 0.5
SEED = 3


def largest_curvature(model, theta, rows, generator, stop, iterations=CURVATURE_ITERATIONS):
    """Power iteration on Hessian-vector products: |lambda|_max of grad^2 U on ``rows``,
    fewer iterations when ``stop()`` says so."""
    theta = theta.detach().requires_grad_()
    grad, = torch.autograd.grad(model.potential(theta, rows), theta, create_graph=True)
    direction = torch.randn(theta.shape, generator=generator, device=theta.device,
                            dtype=theta.dtype)
    direction /= direction.norm()
    curvature = 1.0
    for index in range(iterations):
        product, = torch.autograd.grad(grad, theta, direction,
                                       retain_graph=index < iterations - 1)
        curvature = float(product.norm())
        if not math.isfinite(curvature) or curvature == 0:
            return 1.0
        direction = product / curvature
        if stop():
            break
    return curvature


def predict(task, x_train, y_train, x_test, checkpoint):
    model = DeclaredModel(task, x_train, y_train)
    rng = np.random.default_rng(SEED)
    generator = seeded(SEED, model.device)
    budget = Budget(task, TIME_SHARE)
    batch = min(BATCH, model.n)
    theta = warm_start(model, rng, budget, WARM_SHARE, WARM_EPOCHS, WARM_LEARNING_RATE, batch)
    curvature_rows = torch.as_tensor(rng.permutation(model.n)[:CURVATURE_ROWS],
                                     device=model.device)
    budget.checkpoint(checkpoint, lambda: predictive(      # the warm start: an early one
        task, model, sample_passes(model, [theta]), x_test, rng), 1)
    curvature_deadline = time.monotonic() + CURVATURE_SHARE * budget.left()
    eta = STEP_FRACTION / largest_curvature(model, theta, curvature_rows, generator,
                                            lambda: time.monotonic() > curvature_deadline)
    noise_scale = math.sqrt(2 * FRICTION * eta)
    burn_in_ends = time.monotonic() + budget.left() / 3
    velocity = torch.zeros_like(theta)
    samples, keep_every, kept_from = [], KEEP_EVERY, None
    step, batches = 0, []

    def save():
        budget.checkpoint(checkpoint, lambda: predictive(
            task, model, sample_passes(model, samples), x_test, rng), len(samples))

    while step < STEPS and not budget.over(MAX_SAMPLES):
        if not batches:
            batches = model.batches(rng, batch)
        step += 1
        grad = model.gradient(theta, batches.pop())
        with torch.no_grad():
            velocity = ((1 - FRICTION) * velocity - eta * grad + noise_scale * torch.randn(
                theta.shape, generator=generator, device=theta.device, dtype=theta.dtype))
            theta = theta + velocity
        if not finite(theta):              # diverged: restart from the last sample
            if not samples:
                theta = theta - velocity
                if not finite(theta):
                    break
            else:
                theta = samples[-1].clone()
            velocity = torch.zeros_like(theta)
        if kept_from is None and (step >= BURN_IN or time.monotonic() > burn_in_ends):
            kept_from = step
        if kept_from is not None and (step - kept_from) % keep_every == 0:
            samples.append(theta.clone())
            if len(samples) >= MAX_SAMPLES:
                samples, keep_every = samples[1::2], 2 * keep_every
            if len(samples) == 1:
                save()
        if samples and step % CHECKPOINT_EVERY == 0:
            save()
    if not samples:
        samples = [theta] if finite(theta) else [model.initial(rng)]
    return predictive(task, model, sample_passes(model, samples), x_test, rng)

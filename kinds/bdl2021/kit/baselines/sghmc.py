"""Baseline: stochastic-gradient Hamiltonian Monte Carlo (Chen, Fox & Guestrin 2014).

With U_batch the declared model's potential on a minibatch (likelihood scaled by
N / batch size), the momentum form of SGHMC (their eq. 15, the noise estimate B taken as 0):

    v     <- (1 - alpha) v - eta grad U_batch(theta) + sqrt(2 alpha eta) xi
    theta <- theta + v

with friction alpha and learning rate eta = STEP_FRACTION / (largest curvature of the
potential at the warm start, by power iteration as in ``sgld.py``), so one setting serves
every task; eta / alpha is then the equivalent Langevin step. A short full-batch Adam run
towards the MAP is the warm start, the first BURN_IN steps are discarded, and a sample is
kept every KEEP_EVERY steps after that (at most MAX_SAMPLES are held: when full, every
other one is dropped and the thinning doubles, so the kept samples stay evenly spaced). At most half of the remaining budget is spent;
a checkpoint follows every block of CHECKPOINT_EVERY steps once there are samples, and the
last one is the answer when no sample was kept after it (computing it again after the
deadline doubled the time spent past it).
"""
import math
import time

import numpy as np

from sgld import largest_curvature
from training import (adam, initial_parameters, potential_and_grad, predictive,
                      task_model_and_inputs)

STEPS = 12000
BURN_IN = 1000
BATCH = 64
FRICTION = 0.05           # alpha: the share of momentum lost per step
STEP_FRACTION = 0.1       # eta = STEP_FRACTION / largest Hessian eigenvalue
KEEP_EVERY = 20           # thinning; doubled whenever MAX_SAMPLES are held
MAX_SAMPLES = 100         # bounds the predictive's cost on large test sets
CHECKPOINT_EVERY = 2000
TIME_SHARE = 0.5


def predict(task, x_train, y_train, x_test, checkpoint):
    model, x_train, x_test = task_model_and_inputs(task, x_train, x_test)
    likelihood, prior_variance = task.likelihood["name"], task.prior["variance"]
    rng = np.random.default_rng(3)
    deadline = time.monotonic() + TIME_SHARE * task.time_left()
    n = len(x_train)
    batch = min(BATCH, n)

    def full_gradient(parameters):
        return potential_and_grad(model, likelihood, prior_variance, parameters,
                                  x_train, y_train)[1]
    theta = adam(lambda t: (None, full_gradient(t)), initial_parameters(model, likelihood, rng),
                 300, 3e-3, deadline, time.monotonic)        # burn-in starts near a mode
    eta = STEP_FRACTION / largest_curvature(full_gradient, theta, rng, deadline=deadline)
    noise_scale = math.sqrt(2 * FRICTION * eta)
    velocity = np.zeros_like(theta)
    samples, keep_every = [], KEEP_EVERY
    kept, saved = 0, (None, None)     # samples kept so far; (that count, prediction) when saved
    for step in range(1, STEPS + 1):
        rows = rng.choice(n, batch, replace=False)
        _, grad = potential_and_grad(model, likelihood, prior_variance, theta,
                                     x_train[rows], y_train[rows], scale=n / batch)
        velocity = ((1 - FRICTION) * velocity - eta * grad
                    + noise_scale * rng.standard_normal(theta.shape))
        theta = theta + velocity
        if not np.all(np.isfinite(theta)):      # diverged: restart from the last sample
            theta = samples[-1].copy() if samples else theta - velocity
            velocity = np.zeros_like(theta)
            if not np.all(np.isfinite(theta)):
                break
        if step > BURN_IN and (step - BURN_IN) % keep_every == 0:
            samples.append(theta.copy())
            kept += 1
            if len(samples) >= MAX_SAMPLES:
                samples, keep_every = samples[1::2], 2 * keep_every
        if samples and step % CHECKPOINT_EVERY == 0:
            saved = (kept, predictive(task, model, samples, x_test, rng))
            checkpoint(saved[1])
        if time.monotonic() > deadline:
            break
    if saved[0] == kept:            # nothing kept since the last checkpoint: it is the answer
        return saved[1]
    if not samples:
        samples = [theta] if np.all(np.isfinite(theta)) else [
            initial_parameters(model, likelihood, rng)]
    return predictive(task, model, samples, x_test, rng)

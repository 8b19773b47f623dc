"""Baseline: cyclical stochastic-gradient Langevin dynamics (Zhang et al. 2020, cSG-MCMC).

theta <- theta - a_k grad U_batch(theta) + sqrt(2 a_k) xi, with U_batch the declared
model's potential on a minibatch (likelihood scaled by N / batch size) and a cosine step
size restarting every cycle. The first half of a cycle explores (no noise: plain SGD),
the second half samples; a sample is kept every few steps of the last 30%. The peak step
is a fraction of 1 / (largest curvature of the potential at the warm start), found by
power iteration, so one setting serves every task. Checkpoints after every cycle; the last
one is the answer (the samples have not changed since: computing it again after the
deadline doubled the time spent past it).
"""
import math
import time

import numpy as np

from training import (adam, initial_parameters, potential_and_grad, predictive,
                      task_model_and_inputs)

CYCLES = 6
STEPS_PER_CYCLE = 1500
BATCH = 64
STEP_FRACTION = 0.5        # peak step = STEP_FRACTION / largest Hessian eigenvalue
KEEP_EVERY = 25
TIME_SHARE = 0.5


def largest_curvature(gradient, theta, rng, iterations=20, delta=1e-4, deadline=None):
    """Power iteration on finite-difference Hessian-vector products: lambda_max of grad^2 U.
    Past ``deadline`` (time.monotonic) it stops with the estimate so far: on a large network
    twenty full-batch gradients can take longer than a short budget, and a run that never
    reached its first checkpoint would leave nothing to score."""
    direction = rng.standard_normal(theta.shape)
    direction /= np.linalg.norm(direction)
    base = gradient(theta)
    curvature = 1.0
    for _ in range(iterations):
        product = (gradient(theta + delta * direction) - base) / delta
        curvature = float(np.linalg.norm(product))
        if not math.isfinite(curvature) or curvature == 0:
            return 1.0
        direction = product / curvature
        if deadline is not None and time.monotonic() > deadline:
            break
    return curvature


def predict(task, x_train, y_train, x_test, checkpoint):
    model, x_train, x_test = task_model_and_inputs(task, x_train, x_test)
    likelihood, prior_variance = task.likelihood["name"], task.prior["variance"]
    rng = np.random.default_rng(1)
    deadline = time.monotonic() + TIME_SHARE * task.time_left()
    n = len(x_train)
    batch = min(BATCH, n)
    def full_gradient(parameters):
        return potential_and_grad(model, likelihood, prior_variance, parameters,
                                  x_train, y_train)[1]
    theta = adam(lambda t: (None, full_gradient(t)), initial_parameters(model, likelihood, rng),
                 300, 3e-3, deadline, time.monotonic)        # a sensible place to start
    peak_step = STEP_FRACTION / largest_curvature(full_gradient, theta, rng, deadline=deadline)
    samples, prediction = [], None
    for _ in range(CYCLES):
        for step in range(STEPS_PER_CYCLE):
            phase = step / STEPS_PER_CYCLE
            step_size = 0.5 * peak_step * (math.cos(math.pi * phase) + 1)
            rows = rng.choice(n, batch, replace=False)
            _, grad = potential_and_grad(model, likelihood, prior_variance, theta,
                                         x_train[rows], y_train[rows], scale=n / batch)
            theta = theta - step_size * grad
            if phase >= 0.5:
                theta = theta + math.sqrt(2 * step_size) * rng.standard_normal(theta.shape)
            if phase >= 0.7 and step % KEEP_EVERY == 0 and np.all(np.isfinite(theta)):
                samples.append(theta.copy())
            if time.monotonic() > deadline:
                break
        if samples:
            prediction = predictive(task, model, samples, x_test, rng)
            checkpoint(prediction)
        if time.monotonic() > deadline:
            break
    if prediction is None:          # no sample kept: the last point
        prediction = predictive(task, model, [theta], x_test, rng)
    return prediction

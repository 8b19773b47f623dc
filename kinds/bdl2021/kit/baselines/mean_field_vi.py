"""Baseline: mean-field Gaussian variational inference (Bayes by Backprop, Blundell et al. 2015).

q(theta) = N(mu, diag(sigma^2)) with sigma = exp(s), fitted by maximising the ELBO
E_q[log p(y | x, theta) + log p(theta)] + H(q) with the reparameterisation trick:
theta = mu + sigma * eps, eps ~ N(0, I), so for the declared model's potential U
(``training.potential_and_grad``: minibatch likelihood scaled by N / batch, plus the prior)
the negative ELBO's stochastic gradients are

    d/dmu = grad U(theta),    d/ds = grad U(theta) * eps * sigma - 1    (H = sum s + const).

The mean starts at a short full-batch Adam MAP run, the log scales at a small value (a
narrow q at a good mean, which the ELBO then widens); Adam on (mu, s). The predictive
samples q: classification averages the softmax probabilities over DRAWS draws, regression
draws y as ``training.predictive`` does. Training and the final predictive use at most
half the budget, and training leaves twice the predictive's cost (estimated from one draw's
timed passes before training, then each checkpoint's) before the budget's end; the MAP run
stops in time for the predictive of its q, a checkpoint, and the final one to fit in that
share too (on a network whose MAP steps take the share, that checkpoint and the final
predictive once came after it, and a slower machine overran the budget). A checkpoint of
the predictive at every CHECKPOINT_EVERY steps keeps it anytime.
"""
import math
import time

import numpy as np

from training import (adam, initial_parameters, potential_and_grad, predictive,
                      predictive_seconds, task_model_and_inputs, training_deadline)

MAP_STEPS = 300
MAP_LEARNING_RATE = 3e-3
BATCH = 64
STEPS = 20000
LEARNING_RATE = 3e-3
INITIAL_LOG_SCALE = math.log(1e-2)
DRAWS = 100                 # draws of q in the predictive
CHECKPOINT_EVERY = 1000
TIME_SHARE = 0.5


def sample_predictive(task, model, mean, log_scale, x_test, rng, draws=DRAWS):
    scale = np.exp(log_scale)
    samples = [mean + scale * rng.standard_normal(mean.shape) for _ in range(draws)]
    return predictive(task, model, samples, x_test, rng)


def predict(task, x_train, y_train, x_test, checkpoint):
    model, x_train, x_test = task_model_and_inputs(task, x_train, x_test)
    likelihood, prior_variance = task.likelihood["name"], task.prior["variance"]
    rng = np.random.default_rng(3)
    start = initial_parameters(model, likelihood, rng)
    cost = predictive_seconds(lambda: sample_predictive(
        task, model, start, np.zeros_like(start), x_test, np.random.default_rng(0), 1), DRAWS)
    deadline = training_deadline(task, TIME_SHARE, cost)
    n = len(x_train)
    batch = min(BATCH, n)
    mean = adam(lambda t: potential_and_grad(model, likelihood, prior_variance, t,
                                             x_train, y_train),
                start, MAP_STEPS, MAP_LEARNING_RATE, deadline - 2 * cost, time.monotonic)
    log_scale = np.full_like(mean, min(INITIAL_LOG_SCALE, 0.5 * math.log(prior_variance)))
    variational = np.concatenate([mean, log_scale])
    first, second = np.zeros_like(variational), np.zeros_like(variational)
    size = len(mean)
    last_good = variational.copy()
    started = time.monotonic()
    if started + cost < deadline:       # the MAP's q, at once: it and the final one fit
        checkpoint(sample_predictive(task, model, mean, log_scale, x_test, rng))
        cost = time.monotonic() - started
    for step in range(1, STEPS + 1):
        mean, log_scale = variational[:size], variational[size:]
        noise = rng.standard_normal(size)
        scale = np.exp(log_scale)
        rows = rng.choice(n, batch, replace=False) if batch < n else slice(None)
        _, grad = potential_and_grad(model, likelihood, prior_variance, mean + scale * noise,
                                     x_train[rows], y_train[rows], scale=n / batch)
        if not np.all(np.isfinite(grad)):
            variational = last_good.copy()     # a rare bad draw: skip it
            continue
        full_grad = np.concatenate([grad, grad * noise * scale - 1.0])
        first = 0.9 * first + 0.1 * full_grad
        second = 0.999 * second + 0.001 * full_grad * full_grad
        variational = variational - LEARNING_RATE * (first / (1 - 0.9 ** step)) / (
            np.sqrt(second / (1 - 0.999 ** step)) + 1e-8)
        if np.all(np.isfinite(variational)):
            last_good = variational.copy()
        if step % CHECKPOINT_EVERY == 0 and time.monotonic() + 2 * cost < deadline:
            started = time.monotonic()
            checkpoint(sample_predictive(task, model, last_good[:size], last_good[size:],
                                         x_test, rng))
            cost = time.monotonic() - started
        if time.monotonic() + cost > deadline:     # the final predictive fits in the share
            break
    return sample_predictive(task, model, last_good[:size], last_good[size:], x_test, rng)

"""Baseline: MultiSWAG (Wilson & Izmailov 2020) with diagonal SWAG members: a mixture of
diagonal Gaussians, one per independent run, in the spirit of the 2021 winners (all of
them used multi-modal approximations).

Each member starts from its own random initialisation, is trained towards a mode with
full-batch Adam on the declared model's potential, then runs constant-learning-rate
minibatch SGD (likelihood scaled by N / batch size; learning rate a fraction of
1 / largest curvature at the mode, by power iteration as in ``sgld.py``) while keeping the
running first and second moments of the iterates (every MOMENT_EVERY steps): SWAG-Diagonal,
N(mean, max(second moment - mean^2, 0)), without the low-rank part. The predictive draws
DRAWS_PER_MEMBER parameter vectors from each member's Gaussian and averages over all
members' draws. At most half of the remaining budget is spent, shared equally among the
members still to run; a checkpoint follows every member, so a timeout still leaves a
smaller mixture.
"""
import time

import numpy as np

from sgld import largest_curvature
from training import (adam, initial_parameters, potential_and_grad, predictive,
                      task_model_and_inputs)

MEMBERS = 5
ADAM_STEPS = 600
LEARNING_RATE = 3e-3       # Adam's, to reach a mode
SWAG_STEPS = 1200
BATCH = 64
SGD_FRACTION = 0.5         # SGD learning rate = SGD_FRACTION / largest Hessian eigenvalue
MOMENT_EVERY = 4
DRAWS_PER_MEMBER = 20
TIME_SHARE = 0.5


def swag_diagonal(model, likelihood, prior_variance, theta, x_train, y_train, rng, deadline):
    """Constant-rate SGD from theta; the mean and variance of its iterates (diagonal)."""
    n = len(x_train)
    batch = min(BATCH, n)

    def full_gradient(parameters):
        return potential_and_grad(model, likelihood, prior_variance, parameters,
                                  x_train, y_train)[1]
    learning_rate = SGD_FRACTION / largest_curvature(full_gradient, theta, rng,
                                                     deadline=deadline)
    first, second, count = np.zeros_like(theta), np.zeros_like(theta), 0
    for step in range(1, SWAG_STEPS + 1):
        rows = rng.choice(n, batch, replace=False)
        _, grad = potential_and_grad(model, likelihood, prior_variance, theta,
                                     x_train[rows], y_train[rows], scale=n / batch)
        updated = theta - learning_rate * grad
        if not np.all(np.isfinite(updated)):
            break
        theta = updated
        if step % MOMENT_EVERY == 0:
            count += 1
            first += (theta - first) / count
            second += (theta * theta - second) / count
        if time.monotonic() > deadline:
            break
    if count == 0:
        return theta, np.zeros_like(theta)
    return first, np.maximum(second - first * first, 0.0)


def predict(task, x_train, y_train, x_test, checkpoint):
    model, x_train, x_test = task_model_and_inputs(task, x_train, x_test)
    likelihood, prior_variance = task.likelihood["name"], task.prior["variance"]
    rng = np.random.default_rng(4)
    deadline = time.monotonic() + TIME_SHARE * task.time_left()
    draws, prediction = [], None
    for member in range(MEMBERS):
        member_deadline = time.monotonic() + (deadline - time.monotonic()) / (MEMBERS - member)
        adam_deadline = time.monotonic() + 0.4 * (member_deadline - time.monotonic())
        theta = adam(lambda t: potential_and_grad(model, likelihood, prior_variance, t,
                                                  x_train, y_train),
                     initial_parameters(model, likelihood, rng), ADAM_STEPS, LEARNING_RATE,
                     adam_deadline, time.monotonic)
        if not np.all(np.isfinite(theta)):
            continue
        mean, variance = swag_diagonal(model, likelihood, prior_variance, theta, x_train,
                                       y_train, rng, member_deadline)
        draws.extend(mean + np.sqrt(variance) * rng.standard_normal((DRAWS_PER_MEMBER, len(mean))))
        # the last checkpoint is the answer: computing it again could overrun the budget
        prediction = predictive(task, model, draws, x_test, rng)
        checkpoint(prediction)
        if time.monotonic() > deadline:
            break
    if prediction is None:          # no member trained: the prior's draw
        prediction = predictive(task, model, [initial_parameters(model, likelihood, rng)],
                                x_test, rng)
    return prediction

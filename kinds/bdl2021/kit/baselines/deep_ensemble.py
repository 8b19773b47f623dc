"""Baseline: deep ensemble (Lakshminarayanan et al. 2017) of MAP solutions.

Each member starts from its own random initialisation and is trained with full-batch Adam
on the declared model's log posterior (likelihood + Gaussian prior); the ensemble's
predictive is the average of the members'. A checkpoint after every member means a
timeout still leaves a usable, smaller ensemble; the last one is the answer (computing it
again after the deadline doubled the time spent past it).
"""
import time

import numpy as np

from training import (adam, initial_parameters, potential_and_grad, predictive,
                      task_model_and_inputs)

MEMBERS = 10
STEPS = 2000
LEARNING_RATE = 3e-3
TIME_SHARE = 0.5            # of the budget: the margin absorbs a slower machine


def predict(task, x_train, y_train, x_test, checkpoint):
    model, x_train, x_test = task_model_and_inputs(task, x_train, x_test)
    likelihood, prior_variance = task.likelihood["name"], task.prior["variance"]
    rng = np.random.default_rng(0)
    deadline = time.monotonic() + TIME_SHARE * task.time_left()
    members = []
    for member in range(MEMBERS):
        member_deadline = time.monotonic() + (deadline - time.monotonic()) / (MEMBERS - member)
        theta = adam(lambda t: potential_and_grad(model, likelihood, prior_variance, t,
                                                  x_train, y_train),
                     initial_parameters(model, likelihood, rng), STEPS, LEARNING_RATE,
                     member_deadline, time.monotonic)
        members.append(theta)
        prediction = predictive(task, model, members, x_test, rng)
        checkpoint(prediction)
        if time.monotonic() > deadline:
            break
    return prediction

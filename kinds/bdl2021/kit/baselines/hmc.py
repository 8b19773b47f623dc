"""Baseline: full-batch Hamiltonian Monte Carlo with an adapted diagonal mass matrix.

The reference's own kind of method, cut to the budget. With U the declared model's potential
on all training rows and M = diag(1 / inverse_mass), a transition draws a momentum
p ~ N(0, M), runs L leapfrog steps of size eps on H = U(theta) + p' M^-1 p / 2 and accepts the
end point with probability min(1, exp(-(H_end - H_start))). The draws therefore come from
the posterior itself, not from an approximation of it: the only error left is how few there
are, so the baseline spends its time on drawing as many as it can.

- Time, not a count of steps, divides the work (``task.time_left()``): a short full-batch
  Adam run towards a mode is the warm start; warm-up (WARMUP_SHARE of the time) adapts eps by
  dual averaging (Hoffman & Gelman 2014, Algorithm 5) to an acceptance rate of
  TARGET_ACCEPTANCE, and sets inverse_mass to the draws' variances in two windows (Stan's
  scheme, shrunk towards a small value on few draws); sampling then runs with eps frozen.
- A trajectory is up to TRAJECTORY_LENGTH long in time (about that many posterior standard
  deviations once M is adapted), its step count drawn uniformly up to
  TRAJECTORY_LENGTH / eps (at most MAX_LEAPFROG), so that no fixed length resonates with the
  posterior.
- On the MLP the potential is computed in float32 (twice as fast as float64 here). The chain
  is then exact for that float32 potential, which differs from the float64 one by rounding
  (about 1e-4 in U of about 1000), far below the Monte Carlo error.
- Every draw enters the predictive: a running mean of class probabilities (float32 on the
  MLP too), or for regression at most ``2 * task.num_samples`` evenly spaced parameter draws
  (when full, every other one is dropped), of which ``task.num_samples`` evenly spaced ones
  give the samples of y. So stopping costs nothing, and the baseline uses TIME_SHARE of its
  budget: it starts no transition it could not finish by then. The guide is the longest
  transition yet, not the last one: a transition's leapfrog steps are drawn anew each time,
  so one may take up to MAX_LEAPFROG times as long as the one before it, and the last
  one's time let a long one start too late to end within the budget on a slower machine.
  A checkpoint follows every CHECKPOINT_SECONDS of sampling, and a first one the warm start.
"""
import math
import time

import numpy as np

from declared_model import MLP, log_likelihood_and_output_grad, predictive_probabilities
from sgld import largest_curvature
import hmc_adaptation
# named in this docstring, and read by the tests as this module's
from hmc_adaptation import (Point, RunningVariance, TARGET_ACCEPTANCE,  # noqa: F401
                            WARMUP_WINDOWS)
from training import (adam, initial_parameters, potential_and_grad, predictive,
                      task_model_and_inputs)

TIME_SHARE = 0.9
WARMUP_SHARE = 0.2            # of the time after the warm start
TRAJECTORY_LENGTH = 2.0
MAX_LEAPFROG = 128
ADAM_STEPS = 300
ADAM_SHARE = 0.1              # of the time: the most the warm start may take
CHECKPOINT_SECONDS = 2.0


def predict(task, x_train, y_train, x_test, checkpoint):
    model, x_train, x_test = task_model_and_inputs(task, x_train, x_test)
    rng = np.random.default_rng(4)
    started = time.monotonic()
    deadline = started + TIME_SHARE * task.time_left()
    potential_fn = full_batch_potential(model, task.likelihood["name"],
                                        task.prior["variance"], x_train, y_train)
    theta = adam(potential_fn, initial_parameters(model, task.likelihood["name"], rng),
                 ADAM_STEPS, 3e-3, started + ADAM_SHARE * (deadline - started), time.monotonic)
    state = Point.at(theta, potential_fn)
    # a first answer at the warm start, before warm-up: on a large network and a short budget
    # the sampling's own first checkpoint may come too late (its generator is its own, so the
    # draws below are those the baseline always made)
    first = Draws(task, model, x_test, np.random.default_rng(5))
    first.add(theta)
    checkpoint(first.predictive())
    step_size = 0.5 / math.sqrt(largest_curvature(lambda t: potential_fn(t)[1], theta, rng,
                                                  deadline=deadline))
    warmup_end = time.monotonic() + WARMUP_SHARE * (deadline - time.monotonic())
    state, step_size, inverse_mass = warm_up(state, potential_fn, step_size,
                                             np.ones_like(theta), warmup_end, rng)
    return hmc_adaptation.sample_until(
        deadline, state,
        lambda point: transition(point, potential_fn, step_size, inverse_mass, rng),
        Draws(task, model, x_test, rng), checkpoint, CHECKPOINT_SECONDS,
        clock=lambda: time.monotonic())


def full_batch_potential(model, likelihood, prior_variance, x_train, y_train):
    """theta -> (U(theta), grad U(theta)) on every training row; on the MLP in float32."""
    if not isinstance(model, MLP):
        return lambda theta: potential_and_grad(model, likelihood, prior_variance, theta,
                                                x_train, y_train)
    inputs = model.prepare_inputs(x_train).astype(np.float32)

    def potential_fn(theta):
        with np.errstate(all="ignore"):
            output, vjp = model.output_and_vjp(theta.astype(np.float32), inputs)
            log_lik, output_grad = log_likelihood_and_output_grad(likelihood, output, y_train)
            grad = -vjp(output_grad.astype(np.float32)).astype(np.float64) + theta / prior_variance
        return -log_lik + 0.5 * float(theta @ theta) / prior_variance, grad
    return potential_fn


def transition(state, potential_fn, step_size, inverse_mass, rng):
    """One HMC transition with the mass matrix diag(1 / inverse_mass): (next point,
    acceptance probability)."""
    momentum = rng.standard_normal(state.position.shape) / np.sqrt(inverse_mass)
    steps = max(1, math.ceil(rng.uniform() * min(MAX_LEAPFROG, TRAJECTORY_LENGTH / step_size)))
    position, potential, gradient = state.position, state.potential, state.gradient
    end_momentum = momentum - 0.5 * step_size * gradient
    with np.errstate(all="ignore"):
        for step in range(steps):
            position = position + step_size * inverse_mass * end_momentum
            potential, gradient = potential_fn(position)
            if not math.isfinite(potential):
                return state, 0.0
            end_momentum = end_momentum - (0.5 if step == steps - 1 else 1.0) * step_size * gradient
        energy_change = (potential - state.potential
                         + 0.5 * float(end_momentum @ (inverse_mass * end_momentum))
                         - 0.5 * float(momentum @ (inverse_mass * momentum)))
    return hmc_adaptation.metropolis(state, Point(position, potential, gradient), energy_change,
                                     rng)


def warm_up(state, potential_fn, step_size, inverse_mass, deadline, rng):
    """hmc_adaptation.warm_up with this module's transitions and clock."""
    return hmc_adaptation.warm_up(
        state, lambda point, eps, mass: transition(point, potential_fn, eps, mass, rng),
        step_size, inverse_mass, deadline, clock=lambda: time.monotonic())


class Draws:
    """The predictive of every draw so far: a running mean of class probabilities (on the
    MLP computed in float32, as the potential), or for regression at most 2 * num_samples
    evenly spaced parameter draws, num_samples of them evenly spaced in the predictive."""

    def __init__(self, task, model, x_test, rng):
        self.task, self.model, self.x_test, self.rng = task, model, x_test, rng
        self.classification = task.task_type == "classification"
        if self.classification and isinstance(model, MLP):
            self.x_test = model.prepare_inputs(x_test).astype(np.float32)
        self.count, self.total = 0, 0.0
        self.kept, self.keep_every = [], 1

    def add(self, theta):
        self.count += 1
        if self.classification:
            if isinstance(self.model, MLP):
                probabilities = predictive_probabilities(self.model, theta.astype(np.float32),
                                                         self.x_test)
            else:
                probabilities = predictive(self.task, self.model, [theta], self.x_test, self.rng)
            self.total = self.total + probabilities.astype(np.float64)
        elif self.count % self.keep_every == 0:
            self.kept.append(theta)
            if len(self.kept) >= 2 * self.task.num_samples:
                self.kept, self.keep_every = self.kept[1::2], 2 * self.keep_every

    def predictive(self):
        if self.classification:
            return self.total / self.count
        spread = np.linspace(0, len(self.kept) - 1, min(len(self.kept), self.task.num_samples))
        return predictive(self.task, self.model, [self.kept[int(round(i))] for i in spread],
                          self.x_test, self.rng)

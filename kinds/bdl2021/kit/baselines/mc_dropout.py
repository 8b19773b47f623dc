"""Baseline: MC dropout (Gal & Ghahramani 2016) on the declared network.

Dropout acts on the hidden units: after each hidden layer's tanh, every unit is kept with
probability 1 - p (a Bernoulli mask z, no rescaling, as in the paper, so the weight matrix
M that reads the dropped units is the variational parameter and W = M diag(z) the
sampled weight). The network and its masks are implemented here (numpy only); the
likelihood is the declared one (``declared_model.log_likelihood_and_output_grad``).

Weight decay from the declared prior: Gal & Ghahramani's Bernoulli approximation to the
posterior under the prior N(0, sigma^2 I) (their l^-2 = sigma^2) has, for small mixture
components, the KL term (1 - p) / (2 sigma^2) ||M||^2 for the weights that read dropped units
and 1 / (2 sigma^2) ||b||^2 for biases (and for the first layer's weights, whose inputs are not
dropped). So the loss minimised is

    -(N / batch) sum_batch log p(y | x, M, z) + sum_l lambda_l ||M_l||^2 / 2 + ||b||^2 / (2 sigma^2),

lambda_l = (1 - p) / sigma^2 when layer l reads a dropped layer, else 1 / sigma^2: the
paper's lambda = (1 - p) l^2 / (2 N tau) times N (our likelihood is the unnormalised sum,
with its own noise scale for regression, so no tau). Adam on minibatches from a
prior-shaped initialisation, at most half the budget (the final predictive included), and
leaving twice the predictive's cost (one pass timed before training, then each checkpoint's)
before the budget's end; the predictive averages PASSES
stochastic forward passes with dropout on (classification: mean softmax; regression: one
draw of y per pass, round robin as ``training.predictive`` does). Checkpoints every
CHECKPOINT_EVERY steps keep it anytime.

A declared network other than the MLP (a CNN, ``networks.py``) gets dropout where the
2021 networks can take it without changing their layout: on the inputs of the dense head.
Dropping input unit j of the head is zeroing row j of its weight matrix M, so one mask per
minibatch (and per predictive pass) masks those rows; the same KL weighting applies, with
(1 - p) / sigma^2 on the head's weights and 1 / sigma^2 on everything else.
"""
import time

import numpy as np

from declared_model import MLP, log_likelihood_and_output_grad, log_softmax, softplus
from training import (initial_parameters, predictive, predictive_seconds,
                      task_model_and_inputs, training_deadline)

DROP = 0.05                 # p, on every hidden unit
BATCH = 64
STEPS = 30000
LEARNING_RATE = 3e-3
PASSES = 100                # stochastic forward passes in the predictive
CHECKPOINT_EVERY = 1000
TIME_SHARE = 0.5


def forward(layers, x, masks):
    """Output and the kept (masked) hidden activations; masks[l] multiplies hidden layer l."""
    hidden, kept = x, [x]
    for (weight, bias), mask in zip(layers[:-1], masks):
        hidden = np.tanh(hidden @ weight + bias) * mask
        kept.append(hidden)
    weight, bias = layers[-1]
    return hidden @ weight + bias, kept


def backward(output_grad, kept, layers, masks):
    """Gradient w.r.t. (W_1, b_1, ...) of a scalar whose output gradient is output_grad."""
    grads, delta = [], output_grad
    for index in range(len(layers) - 1, -1, -1):
        grads.append(((kept[index].T @ delta).ravel(), delta.sum(axis=0)))
        if index:
            hidden = kept[index]            # tanh * mask, the mask 0 or 1: the chain rule
            delta = (delta @ layers[index][0].T) * masks[index - 1] * (1.0 - hidden * hidden)
    return np.concatenate([part for pair in reversed(grads) for part in pair])


def draw_masks(model, rows, rng):
    return [(rng.random((rows, size)) >= DROP).astype(float) for size in model.layer_sizes[1:-1]]


def decay_vector(model, prior_variance):
    """Per-parameter precision of the L2 term: (1 - p) / sigma^2 on weights reading dropped units."""
    parts = []
    for index, ((n_in, n_out), _) in enumerate(model.shapes):
        weight_decay = (1.0 - DROP if index else 1.0) / prior_variance
        parts += [np.full(n_in * n_out, weight_decay), np.full(n_out, 1.0 / prior_variance)]
    return np.concatenate(parts)


def mc_predictive(task, model, theta, x_test, rng, passes=PASSES):
    layers = model.unpack(theta)
    with np.errstate(all="ignore"):
        if task.task_type == "classification":
            total = np.zeros((len(x_test), task.num_classes))
            for _ in range(passes):
                output, _ = forward(layers, x_test, draw_masks(model, len(x_test), rng))
                total += np.exp(log_softmax(output))
            return total / passes
        draws = np.empty((len(x_test), task.num_samples))
        outputs = [forward(layers, x_test, draw_masks(model, len(x_test), rng))[0]
                   for _ in range(min(passes, task.num_samples))]
        noise = rng.standard_normal((len(x_test), task.num_samples))
        for j in range(task.num_samples):
            output = outputs[j % len(outputs)]
            draws[:, j] = output[:, 0] + softplus(output[:, 1]) * noise[:, j]
        return draws


class HeadDropout:
    """Dropout on the inputs of a declared network's dense head (its last two parameters:
    weight (in, out), then bias), as masks on the weight's rows."""

    def __init__(self, model):
        weight = model.parameters[-2]
        self.start = model.num_parameters - model.parameters[-1].size - weight.size
        self.shape = weight.shape

    def mask(self, theta_size, rng):
        keep = np.ones(theta_size)
        rows = (rng.random(self.shape[0]) >= DROP).astype(float)
        keep[self.start:self.start + np.prod(self.shape)] = np.repeat(rows, self.shape[1])
        return keep

    def decay(self, model, prior_variance):
        decay = np.full(model.num_parameters, 1.0 / prior_variance)
        decay[self.start:self.start + np.prod(self.shape)] *= 1.0 - DROP
        return decay


def network_step(model, dropout, likelihood, theta, x, y, scale, decay, rng):
    """Gradient of the dropout loss at one mask (the masked rows get none from the data)."""
    keep = dropout.mask(len(theta), rng)
    output, vjp = model.output_and_vjp(theta * keep, model.prepare_inputs(x))
    _, output_grad = log_likelihood_and_output_grad(likelihood, output, y)
    return -scale * vjp(output_grad) * keep + decay * theta


def network_predictive(task, model, dropout, theta, x_test, rng, passes=PASSES):
    """PASSES masked forward passes, averaged as ``training.predictive`` averages samples."""
    samples = [theta * dropout.mask(len(theta), rng) for _ in range(passes)]
    return predictive(task, model, samples, x_test, rng)


def predict(task, x_train, y_train, x_test, checkpoint):
    model, x_train, x_test = task_model_and_inputs(task, x_train, x_test)
    likelihood, prior_variance = task.likelihood["name"], task.prior["variance"]
    n = len(x_train)
    batch = min(BATCH, n)
    if isinstance(model, MLP):
        decay = decay_vector(model, prior_variance)

        def gradient(theta, rows, rng):
            masks = draw_masks(model, batch, rng)
            layers = model.unpack(theta)
            output, kept = forward(layers, x_train[rows], masks)
            _, output_grad = log_likelihood_and_output_grad(likelihood, output, y_train[rows])
            return -(n / batch) * backward(output_grad, kept, layers, masks) + decay * theta

        def predictive_of(theta, rng, passes=PASSES):
            return mc_predictive(task, model, theta, x_test, rng, passes)
    else:
        dropout = HeadDropout(model)
        decay = dropout.decay(model, prior_variance)

        def gradient(theta, rows, rng):
            return network_step(model, dropout, likelihood, theta, x_train[rows],
                                y_train[rows], n / batch, decay, rng)

        def predictive_of(theta, rng, passes=PASSES):
            return network_predictive(task, model, dropout, theta, x_test, rng, passes)
    rng = np.random.default_rng(4)
    theta = initial_parameters(model, likelihood, rng)
    cost = predictive_seconds(lambda: predictive_of(theta, np.random.default_rng(0), 1), PASSES)
    deadline = training_deadline(task, TIME_SHARE, cost)
    return train(gradient, predictive_of, theta, n, batch, deadline, checkpoint, rng, cost)


def train(gradient, predictive_of, theta, n, batch, deadline, checkpoint, rng, cost=0.0):
    """Adam on minibatches with fresh masks, keeping the last finite parameters; checkpoints
    while a predictive fits before the deadline. ``cost``: a predictive's seconds, as
    estimated (each checkpoint then measures it)."""
    first, second = np.zeros_like(theta), np.zeros_like(theta)
    last_good = theta.copy()
    for step in range(1, STEPS + 1):
        rows = rng.choice(n, batch, replace=False) if batch < n else slice(None)
        with np.errstate(all="ignore"):
            grad = gradient(theta, rows, rng)
        if np.all(np.isfinite(grad)):
            first = 0.9 * first + 0.1 * grad
            second = 0.999 * second + 0.001 * grad * grad
            theta = theta - LEARNING_RATE * (first / (1 - 0.9 ** step)) / (
                np.sqrt(second / (1 - 0.999 ** step)) + 1e-8)
            if np.all(np.isfinite(theta)):
                last_good = theta.copy()
            else:
                theta = last_good.copy()
        if step % CHECKPOINT_EVERY == 0 and time.monotonic() + 2 * cost < deadline:
            started = time.monotonic()
            checkpoint(predictive_of(last_good, rng))
            cost = time.monotonic() - started
        if time.monotonic() + cost > deadline:     # the final predictive fits in the share
            break
    return predictive_of(last_good, rng)

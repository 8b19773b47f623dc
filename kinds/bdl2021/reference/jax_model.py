"""The declared model in JAX, for the samplers: the same potential and predictions as the
numpy model the programs and the kit ship (``runtime/declared_model.py``), in float64.

The parameter vector has the numpy model's layout (per layer: weight, in x out row-major,
then bias), so a sample drawn here is a sample there; ``tests/test_bdl_reference_engine.py``
checks that both give the same potential, gradient and predictions.
"""
from __future__ import annotations

import math
import os
import sys

# On a CPU, XLA runs the chains of one device in lockstep on one core; simulated host devices
# (one chain each, pmap) run them side by side: 2.4x faster for 4 chains on 2 cores. Set before
# jax starts; it changes nothing where accelerators are the default devices.
HOST_DEVICES = 8
if "jax" not in sys.modules and "host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + f" --xla_force_host_platform_device_count={HOST_DEVICES}").strip()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)      # before any array: references are float64

import jax.numpy as jnp  # noqa: E402

from ..runtime.declared_model import MLP  # noqa: E402


def forward(model: MLP, theta, x):
    h = x
    layers = model.unpack(theta)          # slicing and reshapes only: works on JAX arrays
    for weight, bias in layers[:-1]:
        h = jnp.tanh(h @ weight + bias)
    weight, bias = layers[-1]
    return h @ weight + bias


def log_likelihoods(likelihood: str, output, y):
    """log p(y_i | f(x_i)) per row: softmax, or Normal(mu, softplus(r)^2) for f = (mu, r)."""
    if likelihood == "softmax":
        log_probs = jax.nn.log_softmax(output, axis=-1)
        return jnp.take_along_axis(log_probs, y[:, None], axis=1)[:, 0]
    mean, scale = output[:, 0], jax.nn.softplus(output[:, 1])
    return -0.5 * math.log(2 * math.pi) - jnp.log(scale) - 0.5 * ((y - mean) / scale) ** 2


def log_likelihood(likelihood: str, output, y):
    """sum_i log p(y_i | f(x_i))."""
    return log_likelihoods(likelihood, output, y).sum()


def log_density(model: MLP, likelihood: str, prior_variance: float, x, y):
    """theta -> log p(y | x, theta) + log p(theta), up to the prior's constant: the negative of
    the numpy ``Posterior``'s potential U."""
    x = jnp.asarray(x, dtype=jnp.float64)
    y = jnp.asarray(y, dtype=jnp.int64 if likelihood == "softmax" else jnp.float64)

    def value(theta):
        return (log_likelihood(likelihood, forward(model, theta, x), y)
                - 0.5 * jnp.dot(theta, theta) / prior_variance)
    return value


def log_density_of_data(model: MLP, likelihood: str, prior_variance: float):
    """(theta, x, y, weights) -> sum_i weights_i log p(y_i | x_i, theta) + log p(theta): the
    data as arguments, so they can be split across devices (``sharded.py``); rows of weight 0
    are padding and count for nothing."""
    def value(theta, x, y, weights):
        return (jnp.sum(weights * log_likelihoods(likelihood, forward(model, theta, x), y))
                - 0.5 * jnp.dot(theta, theta) / prior_variance)
    return value


def predictive_probabilities(model: MLP, theta, x):
    return jax.nn.softmax(forward(model, theta, jnp.asarray(x, dtype=jnp.float64)), axis=-1)


def predictive_mean_and_scale(model: MLP, theta, x):
    output = forward(model, theta, jnp.asarray(x, dtype=jnp.float64))
    return output[:, 0], jax.nn.softplus(output[:, 1])

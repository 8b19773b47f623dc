"""The declared model in JAX, for the samplers: the same potential and predictions as the
numpy model the programs and the kit ship (``runtime/declared_model.py``), in float64.

The parameter vector has the numpy model's layout (per layer: weight, in x out row-major,
then bias), so a sample drawn here is a sample there; ``kinds/bdl2021/tests/test_bdl_reference_engine.py``
checks that both give the same potential, gradient and predictions.
"""
from __future__ import annotations

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
import numpy as np  # noqa: E402

from ..runtime.declared_model import MLP  # noqa: E402
from .declared_model_jax import JaxOps, log_likelihood, log_likelihoods  # noqa: E402,F401


def forward(model, theta, x):
    """The network's outputs: the tanh MLP as the references were made with it, any other
    declared network through ``networks.py``'s operations on JAX."""
    if not isinstance(model, MLP):
        return model.apply(JaxOps, theta, x)
    h = x
    layers = model.unpack(theta)          # slicing and reshapes only: works on JAX arrays
    for weight, bias in layers[:-1]:
        h = jnp.tanh(h @ weight + bias)
    weight, bias = layers[-1]
    return h @ weight + bias


def _inputs(model, x):
    """x as the network reads it (float64, or token ids), on the default device."""
    return jnp.asarray(model.prepare_inputs(np.asarray(x)))


def log_density(model, likelihood: str, prior_variance: float, x, y):
    """theta -> log p(y | x, theta) + log p(theta), up to the prior's constant: the negative of
    the numpy ``Posterior``'s potential U."""
    x = _inputs(model, x)
    y = jnp.asarray(y, dtype=jnp.int64 if likelihood == "softmax" else jnp.float64)

    def value(theta):
        return (log_likelihood(likelihood, forward(model, theta, x), y)
                - 0.5 * jnp.dot(theta, theta) / prior_variance)
    return value


def log_density_of_data(model, likelihood: str, prior_variance: float):
    """(theta, x, y, weights) -> sum_i weights_i log p(y_i | x_i, theta) + log p(theta): the
    data as arguments, so they can be split across devices (``sharded.py``); rows of weight 0
    are padding and count for nothing."""
    def value(theta, x, y, weights):
        return (jnp.sum(weights * log_likelihoods(likelihood, forward(model, theta, x), y))
                - 0.5 * jnp.dot(theta, theta) / prior_variance)
    return value


def predictive_probabilities(model, theta, x):
    return jax.nn.softmax(forward(model, theta, _inputs(model, x)), axis=-1)


def predictive_mean_and_scale(model, theta, x):
    output = forward(model, theta, _inputs(model, x))
    return output[:, 0], jax.nn.softplus(output[:, 1])

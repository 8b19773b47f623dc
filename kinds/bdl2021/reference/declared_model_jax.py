"""The declared networks in JAX: ``networks.py``'s operations on jax.numpy, so
``Network(spec).apply(JaxOps, theta, x)`` is the same function of the same parameter vector
as the numpy form, differentiable and jit-compilable.

    from declared_model import task_network
    from declared_model_jax import JaxOps, log_likelihood
    network = task_network(task.model)
    logits = network.apply(JaxOps, theta, x)        # x: (N, *input_shape)

It lives with the JAX samplers that make the references (``jax_model.py``), not in the
programs' ``runtime/``: no competition image installs JAX. The starting kit ships it beside
``declared_model.py`` and ``networks.py``.

The arrays keep the dtype they are given: float64 needs ``jax_enable_x64`` (the references
are float64; training in float32 is the participant's choice).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

try:                       # beside networks.py in the kit; in the package here
    from networks import FRN_EPSILON, LSTM_FORGET_BIAS, pool_blocks, same_padding
except ImportError:
    from ..runtime.networks import FRN_EPSILON, LSTM_FORGET_BIAS, pool_blocks, same_padding


def _conv2d_as_matmul(x, w, stride, pads):
    """The same convolution as one matrix product over the kernel's shifted windows: on a
    CPU, XLA's float64 convolution is 2x slower than this for the small networks HMC samples
    here; accelerators keep their own convolution."""
    kh, kw = w.shape[:2]
    xp = jnp.pad(x, ((0, 0), tuple(pads[0]), tuple(pads[1]), (0, 0)))
    out_h, out_w = (xp.shape[1] - kh) // stride + 1, (xp.shape[2] - kw) // stride + 1
    windows = [xp[:, i:i + stride * (out_h - 1) + 1:stride, j:j + stride * (out_w - 1) + 1:stride]
               for i in range(kh) for j in range(kw)]
    return jnp.concatenate(windows, axis=-1) @ w.reshape(-1, w.shape[-1]).astype(x.dtype)


class JaxOps:
    shape = staticmethod(jnp.shape)

    @staticmethod
    def dense(x, w, b):
        return x @ w + b

    @staticmethod
    def conv2d(x, w, b, stride, padding):
        kh, kw = w.shape[:2]
        pads = ([same_padding(x.shape[1], kh, stride), same_padding(x.shape[2], kw, stride)]
                if padding == "same" else [(0, 0), (0, 0)])
        if jax.default_backend() == "cpu":
            return _conv2d_as_matmul(x, w, stride, pads) + b
        y = lax.conv_general_dilated(x, w.astype(x.dtype), (stride, stride), pads,
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return y + b

    @staticmethod
    def pool(x, kind, size):
        """Windows = strides, VALID: a reshape and a reduction (XLA's reduce_window is
        several times slower on a CPU)."""
        blocks = pool_blocks(x, size)
        return blocks.mean(axis=(2, 4)) if kind == "avg_pool" else blocks.max(axis=(2, 4))

    @staticmethod
    def activation(x, name):
        if name == "relu":
            return jax.nn.relu(x)
        if name == "swish":
            return jax.nn.swish(x)
        if name == "tanh":
            return jnp.tanh(x)
        if name == "sigmoid":
            return jax.nn.sigmoid(x)
        return x

    @staticmethod
    def frn(x, gamma, beta, tau):
        nu2 = jnp.mean(jnp.square(x), axis=(1, 2), keepdims=True)
        return jnp.maximum(gamma * x * lax.rsqrt(nu2 + FRN_EPSILON) + beta, tau)

    @staticmethod
    def add(x, y):
        return x + y

    @staticmethod
    def reshape(x, shape):
        return jnp.reshape(x, shape)

    @staticmethod
    def embed(tokens, table):
        return jnp.take(table, tokens, axis=0)

    @staticmethod
    def lstm(x, w, b):
        cell = w.shape[1] // 4

        def step(carry, x_t):
            h, c = carry
            z = jnp.concatenate([x_t, h], axis=1) @ w + b
            i, g = jax.nn.sigmoid(z[:, :cell]), jnp.tanh(z[:, cell:2 * cell])
            f = jax.nn.sigmoid(z[:, 2 * cell:3 * cell] + LSTM_FORGET_BIAS)
            c = f * c + i * g
            return (jax.nn.sigmoid(z[:, 3 * cell:]) * jnp.tanh(c), c), None
        zeros = jnp.zeros((x.shape[0], cell), x.dtype)
        (h, _), _ = lax.scan(step, (zeros, zeros), jnp.swapaxes(x, 0, 1))
        return h


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

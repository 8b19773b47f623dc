"""NUTS with the training data split across devices: each device holds a slice of the rows,
computes its part of the full-batch log likelihood and gradient, and XLA sums the parts
(an all-reduce), as the 2021 references were made on TPU pods for data too big for one
device. The chains run vectorised on every device in step.

Rows are padded to a multiple of the device count with rows of weight 0, so the posterior is
exactly the unsplit one; ``kinds/bdl2021/tests/test_bdl_reference_engine.py`` checks the conjugate posterior on
four simulated devices and that the compiled program holds the all-reduce.
"""
from __future__ import annotations

import numpy as np

from . import jax_model  # noqa: F401  (float64 and host devices first)
from .nuts import MAX_TREE_DEPTH, TARGET_ACCEPTANCE, SampledChains, _chain, ticks

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402


def pad_rows(x: np.ndarray, y: np.ndarray, devices: int):
    """(x, y, weights) with as many rows as the next multiple of ``devices``; padded rows
    repeat row 0 with weight 0, so they add nothing to the log likelihood."""
    extra = (-len(x)) % devices
    weights = np.r_[np.ones(len(x)), np.zeros(extra)]
    return (np.concatenate([x, np.repeat(x[:1], extra, axis=0)]),
            np.concatenate([y, np.repeat(y[:1], extra, axis=0)]), weights)


def program(log_density_of_data, num_warmup: int, num_samples: int,
            target_acceptance: float = TARGET_ACCEPTANCE, max_tree_depth: int = MAX_TREE_DEPTH,
            make_chain=None, tick=None):
    """The jitted sampler of (keys, starts, x, y, weights): ``log_density_of_data(theta, x, y,
    weights)`` is the log posterior with the data as arguments, so the data keep their split.
    ``make_chain(log_density, tick)``: another sampler's chain (``fixed_hmc``); default NUTS's.
    ``tick`` as ``nuts._chain``'s: the partitioned program reports each step once."""
    def run(keys, starts, x, y, weights):
        log_density = lambda theta: log_density_of_data(theta, x, y, weights)  # noqa: E731
        chain = (make_chain(log_density, tick) if make_chain is not None else
                 _chain(log_density, num_warmup, num_samples, target_acceptance, max_tree_depth,
                        tick))
        return jax.vmap(chain)(keys, starts)
    return jax.jit(run)


def place(x, y, weights, devices: int):
    """The arrays on a one-axis mesh of ``devices``, rows split across it."""
    mesh = Mesh(np.array(jax.devices()[:devices]), ("data",))
    rows = NamedSharding(mesh, PartitionSpec("data"))
    return tuple(jax.device_put(jnp.asarray(a), rows) for a in (x, y, weights))


def sample(log_density_of_data, x, y, initial_positions: np.ndarray, seed: int,
           num_warmup: int, num_samples: int, devices: int | None = None,
           target_acceptance: float = TARGET_ACCEPTANCE, make_chain=None,
           progress=None) -> SampledChains:
    """K chains with the rows split over ``devices``; ``progress`` as ``nuts.sample``'s."""
    devices = devices or jax.device_count()
    x, y, weights = place(*pad_rows(np.asarray(x), np.asarray(y), devices), devices)
    starts = jnp.asarray(initial_positions, dtype=jnp.float64)
    keys = jax.random.split(jax.random.PRNGKey(seed), starts.shape[0])
    out = program(log_density_of_data, num_warmup, num_samples, target_acceptance,
                  make_chain=make_chain, tick=ticks(progress, 1))(keys, starts, x, y, weights)
    return SampledChains(*(np.asarray(part) for part in out), devices=devices)

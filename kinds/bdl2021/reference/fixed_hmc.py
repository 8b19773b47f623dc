"""Full-batch HMC with a fixed trajectory length on BlackJAX (``generate --sampler hmc``): the
recipe of the 2021 references (Izmailov et al. 2021, "What Are Bayesian Neural Network
Posteriors Really Like?", ICML; section 3 and table 3).

Each transition draws a fresh momentum (identity mass matrix, as in the paper), integrates
``num_steps = ceil(trajectory_length / step_size)`` leapfrog steps and accepts or rejects by
Metropolis. Unlike NUTS there is no tree doubling: every transition costs the same, known
number of gradients, which is what makes it the sampler for networks where NUTS's doublings
are too costly (and a run's cost exact in advance).

- Trajectory length: by default the paper's tau = pi * sqrt(prior variance) / 2. Under the
  Gaussian prior N(0, alpha^2) with identity mass, Hamilton's equations are a harmonic
  oscillator of period 2 pi alpha; after a quarter period, pi alpha / 2, the position no
  longer depends on where the trajectory started, so a longer one would only turn back.
- Step size: fixed where ``step_size`` is given (the paper fixed it by hand: 1e-5 for
  ResNet-20-FRN on CIFAR-10); else found during warm-up by dual averaging (Hoffman & Gelman
  2014) towards the task's target acceptance with the trajectory length held fixed, then
  frozen, so the kept draws come from one fixed, reversible kernel. A step size depends on
  the data set's size and the network, so one fixed figure does not carry over between tasks.

The chains and keys are laid out over the devices exactly as NUTS's (``nuts.on_devices``, or
the rows split with ``sharded.py``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import jax_model  # noqa: F401  (float64 switched on before any array exists)
from .nuts import SampledChains, default_devices, on_devices, report_transition, ticks

import blackjax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from blackjax.adaptation.step_size import (dual_averaging_adaptation,  # noqa: E402
                                           find_reasonable_step_size)

MAX_NUM_STEPS = 1023          # the same cap on gradients a transition as NUTS's 10 doublings
FIRST_STEP_SIZE_GUESS = 1.0   # where the search for a first step size starts (as NUTS's)


class SamplerError(ValueError):
    """A bad sampler setting: one line for the user, naming the flag."""


@dataclass(frozen=True)
class FixedHMC:
    """The sampler's settings as given on the command line (None: the default)."""
    trajectory_length: float | None = None
    step_size: float | None = None

    def __post_init__(self):
        for flag, value in (("--trajectory-length", self.trajectory_length),
                            ("--step-size", self.step_size)):
            if value is not None and not (math.isfinite(value) and value > 0):
                raise SamplerError(f"{flag} is {value}; expected a positive number")

    def trajectory_for(self, prior_variance: float) -> float:
        """The trajectory length: as given, else the paper's pi * sqrt(prior variance) / 2."""
        return (self.trajectory_length if self.trajectory_length is not None
                else math.pi * math.sqrt(prior_variance) / 2)

    def settings(self, prior_variance: float, target_acceptance: float) -> dict:
        """What a task's declaration states about the sampler (``generate.sampler_settings``)."""
        length = self.trajectory_for(prior_variance)
        return {"sampler": "hmc", "trajectory_length": length,
                "trajectory_length_rule": ("given (--trajectory-length)"
                                           if self.trajectory_length is not None else
                                           "pi * sqrt(prior variance) / 2 (Izmailov et al. "
                                           "2021)"),
                "step_size": self.step_size if self.step_size is not None else
                f"dual averaging during warm-up to acceptance {target_acceptance}, then fixed",
                "target_acceptance": target_acceptance, "max_num_steps": MAX_NUM_STEPS,
                "mass_matrix": "identity"}


def _num_steps(trajectory_length: float, step_size):
    """ceil(trajectory / step size), in [1, MAX_NUM_STEPS]; the quotient is rounded to 6 decimals
    first, so that 0.3 / 0.02 (15.000000000000002 in floating point) is 15 steps, not 16."""
    steps = jnp.ceil(jnp.round(trajectory_length / step_size, 6))
    return jnp.clip(steps, 1, MAX_NUM_STEPS).astype(jnp.int32)


def _chain(log_density, num_warmup: int, num_samples: int, trajectory_length: float,
           step_size: float | None, target: float, tick=None):
    """One chain as a pure function of (key, initial position), returning what
    ``nuts._chain`` returns, so that both fill the same ``SampledChains``; ``tick`` as
    ``nuts._chain``'s."""
    kernel = blackjax.hmc.build_kernel()

    def transition(key, state, eps, inverse_mass):
        report_transition(tick)
        return kernel(key, state, log_density, eps, inverse_mass,
                      _num_steps(trajectory_length, eps))

    def warm_fixed(state, keys, inverse_mass):
        def one(state, key):
            state, info = transition(key, state, step_size, inverse_mass)
            return state, info.is_divergent
        state, divergent = jax.lax.scan(one, state, keys)
        return state, jnp.asarray(step_size, jnp.float64), divergent

    def warm_adapted(state, keys, inverse_mass):
        da_init, da_update, da_final = dual_averaging_adaptation(target)
        first = find_reasonable_step_size(
            keys[0], lambda eps: lambda key, s: kernel(key, s, log_density, eps, inverse_mass, 1),
            state, FIRST_STEP_SIZE_GUESS)

        def one(carry, key):
            state, adaptation = carry
            state, info = transition(key, state, jnp.exp(adaptation.log_step_size),
                                     inverse_mass)
            return (state, da_update(adaptation, info.acceptance_rate)), info.is_divergent
        (state, adaptation), divergent = jax.lax.scan(one, (state, da_init(first)), keys[1:])
        return state, da_final(adaptation), divergent

    def run(key, position):
        warm_key, sample_key = jax.random.split(key)
        inverse_mass = jnp.ones_like(position)
        state = blackjax.hmc.init(position, log_density)
        # num_warmup + 1 keys when adapting: the first one seeds the search for a first step.
        warm_keys = jax.random.split(warm_key, num_warmup + (step_size is None))
        warm = warm_fixed if step_size is not None else warm_adapted
        state, eps, warm_divergent = warm(state, warm_keys, inverse_mass)

        def one(state, key):
            state, info = transition(key, state, eps, inverse_mass)
            return state, (state.position, state.logdensity, info.acceptance_rate,
                           info.num_integration_steps, info.is_divergent)

        _, trace = jax.lax.scan(one, state, jax.random.split(sample_key, num_samples))
        positions, log_densities, acceptance, steps, divergent = trace
        # float64 mean: one fixed count, stated exactly (a float32 mean of 2000 x 15 is 15.000001)
        return (positions, log_densities, acceptance.mean(), steps.astype(jnp.float64).mean(),
                divergent.sum(),
                warm_divergent.sum(), eps, inverse_mass)
    return run


def sample(log_density, initial_positions: np.ndarray, seed: int, num_warmup: int,
           num_samples: int, trajectory_length: float, step_size: float | None = None,
           target_acceptance: float = 0.8, devices: int | None = None,
           progress=None) -> SampledChains:
    """K chains of fixed-trajectory HMC from ``initial_positions`` (K x D), laid out over the
    devices as NUTS's are (``nuts.on_devices``); ``progress`` as ``nuts.sample``'s."""
    positions = jnp.asarray(initial_positions, dtype=jnp.float64)
    devices = devices or default_devices(positions.shape[0])
    chain = _chain(log_density, num_warmup, num_samples, trajectory_length, step_size,
                   target_acceptance, ticks(progress, devices))
    return on_devices(chain, positions, seed, devices)

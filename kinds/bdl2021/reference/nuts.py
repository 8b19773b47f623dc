"""Reference chains on BlackJAX: NUTS with Stan's window adaptation (step size and a diagonal
mass matrix), jit-compiled, in float64.

Chains are vectorised (``jax.vmap``) and split over every local device with ``jax.pmap``:
GPUs or TPUs where present, else the CPU (``XLA_FLAGS=--xla_force_host_platform_device_count=N``
makes N simulated CPU devices, which is how the multi-device path is tested). Several hosts
run ``distributed.py`` instead (docs/references.md, "On a cluster"). Every random number comes
from one seed, split per chain, so a run is reproducible on the same device kind and count.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from . import jax_model  # noqa: F401  (float64 switched on before any array exists)

import blackjax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

MAX_TREE_DEPTH = 10           # NUTS doublings: at most 1023 leapfrog steps a transition
TARGET_ACCEPTANCE = 0.8


@dataclass(frozen=True)
class SampledChains:
    """What the sampler returns for K chains of S kept draws each, as numpy data."""
    positions: np.ndarray            # (K, S, D)
    log_densities: np.ndarray        # (K, S): minus the potential energy, up to a constant
    acceptance_rates: np.ndarray     # (K,) mean over the kept transitions
    mean_num_steps: np.ndarray       # (K,) leapfrog steps per transition
    divergences: np.ndarray          # (K,) in the kept transitions
    warmup_divergences: np.ndarray   # (K,)
    step_sizes: np.ndarray           # (K,) adapted
    inverse_mass_diagonals: np.ndarray  # (K, D) adapted
    devices: int


class TransitionTicks:
    """Transitions reported from inside the compiled chains, added to a ``bundle.progress``
    bar. The chains run as one program a device (``on_devices``), each reporting every step
    of its scan once whatever number of chains it holds: ``programs`` reports make one
    transition of every chain. The reports come on XLA's threads, hence the lock."""

    def __init__(self, progress, programs: int):
        self.progress, self.programs = progress, programs
        self.lock, self.first = threading.Lock(), True

    def __call__(self) -> None:
        with self.lock:
            if self.first:          # the rate and ETA leave the compilation out
                self.progress.restart()
                self.first = False
            self.progress.advance(1 / self.programs)


def report_transition(tick) -> None:
    """In a scan body: one transition done. Without ``tick`` nothing is compiled in, so a
    run that shows no progress (stderr not a terminal) runs the very program it always did."""
    if tick is not None:
        jax.debug.callback(tick)


def _chain(log_density, num_warmup: int, num_samples: int, target: float, depth: int,
           tick=None):
    """One chain as a pure function of (key, initial position): warm-up, then sampling;
    ``tick``: told of each transition (``TransitionTicks``)."""
    def warmup_info(state, info, adaptation):
        report_transition(tick)
        return info.is_divergent

    warmup = blackjax.window_adaptation(
        blackjax.nuts, log_density, is_mass_matrix_diagonal=True,
        target_acceptance_rate=target, max_num_doublings=depth,
        adaptation_info_fn=warmup_info)

    def run(key, position):
        warm_key, sample_key = jax.random.split(key)
        (state, parameters), warm_divergent = warmup.run(warm_key, position, num_warmup)
        step = blackjax.nuts(log_density, **parameters).step

        def transition(state, key):
            state, info = step(key, state)
            report_transition(tick)
            return state, (state.position, state.logdensity, info.acceptance_rate,
                           info.num_integration_steps, info.is_divergent)

        _, trace = jax.lax.scan(transition, state, jax.random.split(sample_key, num_samples))
        positions, log_densities, acceptance, steps, divergent = trace
        return (positions, log_densities, acceptance.mean(), steps.mean(), divergent.sum(),
                warm_divergent.sum(), parameters["step_size"], parameters["inverse_mass_matrix"])
    return run


def sample(log_density, initial_positions: np.ndarray, seed: int, num_warmup: int,
           num_samples: int, target_acceptance: float = TARGET_ACCEPTANCE,
           max_tree_depth: int = MAX_TREE_DEPTH, devices: int | None = None,
           progress=None) -> SampledChains:
    """K chains from ``initial_positions`` (K x D), split evenly over ``devices`` (default:
    as many local devices as divide K); ``progress``: a ``bundle.progress.Progress`` over
    the ``num_warmup + num_samples`` transitions, advanced as they run."""
    positions = jnp.asarray(initial_positions, dtype=jnp.float64)
    chains = positions.shape[0]
    devices = devices or default_devices(chains)
    chain = _chain(log_density, num_warmup, num_samples, target_acceptance, max_tree_depth,
                   ticks(progress, devices))
    return on_devices(chain, positions, seed, devices)


def ticks(progress, devices: int) -> TransitionTicks | None:
    """What the chains report to: ``on_devices`` runs one program a device."""
    return None if progress is None else TransitionTicks(progress, devices)


def on_devices(chain, positions, seed: int, devices: int) -> SampledChains:
    """``chain(key, start)`` for every start, split over ``devices``: one chain a device with
    ``pmap`` where they match, else ``vmap`` within each device. Shared by every sampler of
    the engine (``fixed_hmc.py``), so each gets the same layout and per-chain keys."""
    chains = positions.shape[0]
    keys = jax.random.split(jax.random.PRNGKey(seed), chains)
    if devices == chains:          # one chain a device: no batching of the samplers' loops
        out = jax.pmap(chain)(keys, positions)
    elif devices > 1:
        shape = (devices, chains // devices)
        out = jax.pmap(jax.vmap(chain))(keys.reshape(*shape, *keys.shape[1:]),
                                        positions.reshape(*shape, positions.shape[1]))
        out = jax.tree.map(lambda a: a.reshape(chains, *a.shape[2:]), out)
    else:
        out = jax.jit(jax.vmap(chain))(keys, positions)
    out = [np.asarray(part) for part in out]
    return SampledChains(*out, devices=devices)


def default_devices(chains: int) -> int:
    """As many local devices as divide the number of chains."""
    return max(d for d in range(1, jax.local_device_count() + 1) if chains % d == 0)

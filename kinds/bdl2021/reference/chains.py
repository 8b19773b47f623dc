"""One HMC chain of one task, from its seed to its test-set predictions.

Everything random in a chain is derived from (task seed, chain index), so chains can run
in any order or process and still give the same bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .datasets import PreparedTask
from .hmc import ChainConfig, ProgressFn, run_chain
from ..runtime.declared_model import (MLP, Posterior, output_size, predictive_mean_and_scale,
                                      predictive_probabilities, task_network)
from .tasks import REGRESSION_SAMPLES, TaskDeclaration


def task_model(task: TaskDeclaration, prepared: PreparedTask):
    """The declared network: ``task.network``, else the tanh MLP of ``hidden_layers``."""
    if task.network is not None:
        return task_network(task.network, where=task.name)
    num_classes = int(prepared.y_train.max()) + 1 if task.kind == "classification" else None
    return MLP((prepared.x_train.shape[1], *task.hidden_layers,
                output_size(task.likelihood, num_classes)))


def chain_rng(task: TaskDeclaration, chain_index: int, stream: int) -> np.random.Generator:
    return np.random.default_rng([task.seed, chain_index, stream])


@dataclass(frozen=True)
class ChainPredictions:
    """Per-kept-sample test predictions plus the chain's sampler diagnostics (as data)."""
    chain_index: int
    draws: np.ndarray        # classification: (S, N, C) probabilities; regression: (S, N) means
    y_samples: np.ndarray | None   # regression only: (REGRESSION_SAMPLES, N) draws of y
    potentials: np.ndarray
    acceptance_rate: float
    step_size: float
    num_steps: int
    divergences: int
    warmup_divergences: int


def _regression_samples(model, samples, x_test, rng) -> tuple[np.ndarray, np.ndarray]:
    """Means per kept sample, and REGRESSION_SAMPLES draws of y (with noise).

    Draws follow the chain: draw j uses kept sample floor(j S / REGRESSION_SAMPLES), so every
    sample serves once or twice, and a stretch of draws is a stretch of the chain (what the
    reference's even share and the batches of the exact-posterior expectation rely on).
    """
    means, scales = zip(*(predictive_mean_and_scale(model, theta, x_test) for theta in samples))
    means, scales = np.array(means), np.array(scales)
    which = np.arange(REGRESSION_SAMPLES) * len(samples) // REGRESSION_SAMPLES
    y = means[which] + scales[which] * rng.standard_normal((REGRESSION_SAMPLES, x_test.shape[0]))
    return means, y


def initial_position(task: TaskDeclaration, model, chain_index: int) -> np.ndarray:
    """Over-dispersed start: a draw from the prior, far from where the chains end up."""
    return chain_rng(task, chain_index, 0).normal(0.0, np.sqrt(task.prior_variance),
                                                  model.num_parameters)


def chain_predictions(task: TaskDeclaration, prepared: PreparedTask, chain_index: int,
                      samples: np.ndarray, potentials: np.ndarray, **sampler) -> ChainPredictions:
    """A chain's kept samples as test-set predictions; ``sampler``: its diagnostics
    (acceptance_rate, step_size, num_steps, divergences, warmup_divergences)."""
    model = task_model(task, prepared)
    y_samples = None
    if task.kind == "classification":
        draws = np.array([predictive_probabilities(model, theta, prepared.x_test)
                          for theta in samples])
    else:
        draws, y_samples = _regression_samples(model, samples, prepared.x_test,
                                               chain_rng(task, chain_index, 2))
    return ChainPredictions(chain_index, draws, y_samples, np.asarray(potentials), **sampler)


def run_task_chain(task: TaskDeclaration, prepared: PreparedTask, chain_index: int,
                   progress: ProgressFn | None = None) -> ChainPredictions:
    """One chain of the numpy HMC engine (fixed trajectory length, adapted step size)."""
    model = task_model(task, prepared)
    posterior = Posterior(model, task.likelihood, task.prior_variance,
                          prepared.x_train, prepared.y_train)
    settings = task.hmc
    config = ChainConfig(settings.num_warmup, settings.num_samples, settings.trajectory_length,
                         settings.initial_step_size, settings.target_acceptance,
                         settings.max_num_steps)
    result = run_chain(initial_position(task, model, chain_index), posterior.potential_and_grad,
                       config, chain_rng(task, chain_index, 1), progress)
    return chain_predictions(task, prepared, chain_index, result.samples, result.potentials,
                             acceptance_rate=result.acceptance_rate, step_size=result.step_size,
                             num_steps=result.num_steps, divergences=result.divergences,
                             warmup_divergences=result.warmup_divergences)


def run_task_chains_nuts(task: TaskDeclaration, prepared: PreparedTask,
                         devices: int | None = None, shard_data: bool = False,
                         run_options=None, sampler=None,
                         progress=None) -> list[ChainPredictions]:
    """Every chain of a task at once on BlackJAX's NUTS, from the same prior draws as the
    numpy engine; the seed of the JAX random stream is the task's. The chains are split over
    the devices (``nuts.py``), or with ``shard_data`` the training rows are (``sharded.py``);
    with ``run_options`` (``distributed.RunOptions``) the rows are split over every device of
    every host, in checkpointed chunks (``distributed.py``). ``sampler``: None for NUTS, or
    ``fixed_hmc.FixedHMC`` for HMC with a fixed trajectory length, on the same layouts (not
    ``run_options``: the cluster path runs NUTS only). ``progress``: a
    ``bundle.progress.Progress`` the chains advance by transitions as they run, on the
    devices' layout or the data split (the cluster path prints its own lines)."""
    from . import jax_model, nuts, sharded
    model = task_model(task, prepared)
    starts = np.stack([initial_position(task, model, chain)
                       for chain in range(task.hmc.num_chains)])
    settings = (task.seed, task.hmc.num_warmup, task.hmc.num_samples)
    if run_options is not None:
        from . import distributed
        sampled = distributed.sample(
            task.name, jax_model.log_density_of_data(model, task.likelihood, task.prior_variance),
            prepared.x_train, _training_labels(task, prepared), starts, *settings,
            task.hmc.target_acceptance, run_options, distributed.task_fingerprint(task))
    elif shard_data:
        sampled = sharded.sample(
            jax_model.log_density_of_data(model, task.likelihood, task.prior_variance),
            prepared.x_train, _training_labels(task, prepared), starts, *settings, devices=devices,
            target_acceptance=task.hmc.target_acceptance,
            make_chain=None if sampler is None else _fixed_hmc_chain(task, sampler),
            progress=progress)
    elif sampler is not None:
        from . import fixed_hmc
        log_density = jax_model.log_density(model, task.likelihood, task.prior_variance,
                                            prepared.x_train, prepared.y_train)
        sampled = fixed_hmc.sample(log_density, starts, *settings,
                                   sampler.trajectory_for(task.prior_variance), sampler.step_size,
                                   task.hmc.target_acceptance, devices=devices,
                                   progress=progress)
    else:
        log_density = jax_model.log_density(model, task.likelihood, task.prior_variance,
                                            prepared.x_train, prepared.y_train)
        sampled = nuts.sample(log_density, starts, *settings, task.hmc.target_acceptance,
                              devices=devices, progress=progress)
    return [chain_predictions(
        task, prepared, chain, sampled.positions[chain], -sampled.log_densities[chain],
        acceptance_rate=float(sampled.acceptance_rates[chain]),
        step_size=float(sampled.step_sizes[chain]),
        num_steps=float(sampled.mean_num_steps[chain]),
        divergences=int(sampled.divergences[chain]),
        warmup_divergences=int(sampled.warmup_divergences[chain]))
        for chain in range(task.hmc.num_chains)]


def _fixed_hmc_chain(task: TaskDeclaration, sampler):
    """(log density, tick) -> one chain of fixed-trajectory HMC with the task's lengths."""
    from . import fixed_hmc
    return lambda log_density, tick: fixed_hmc._chain(
        log_density, task.hmc.num_warmup, task.hmc.num_samples,
        sampler.trajectory_for(task.prior_variance), sampler.step_size,
        task.hmc.target_acceptance, tick)


def _training_labels(task: TaskDeclaration, prepared: PreparedTask) -> np.ndarray:
    return (prepared.y_train.astype(np.int64) if task.kind == "classification"
            else prepared.y_train)

"""The cross-check of the embedded references: what another sampler gave for each task, kept
in ``numpy_hmc_crosscheck/<task>.npz``, and how far the two samplers' predictives are from each
other against the Monte Carlo spread of one chain. For the MLP tasks the other sampler is our
numpy HMC engine (kept when the references moved to NUTS); for ``digits_cnn``, whose numpy HMC
would take hours on this machine, it is NumPyro's NUTS (``numpyro_chains``: two chains from
other starts and another random stream, on the same JAX potential), the file saying which;
where the line benchmark was run with ``--save-crosscheck``, NumPyro's 8 chains of twice the
task's length.

Per task, per chain: classification, the predictive class probabilities (K, N, C);
regression, the mean and standard deviation of the predictive samples of y (K, N, 2).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from kinds.bdl2021.runtime.formats import read_chain_probs, read_chain_samples

from .task_files import task_files

CROSSCHECK_ROOT = Path(__file__).resolve().parent / "numpy_hmc_crosscheck"


def chain_summaries(root: Path, name: str, kind: str) -> np.ndarray:
    files = task_files(root, name, kind)
    if kind == "classification":
        return read_chain_probs(files.chain_reference)
    samples = read_chain_samples(files.chain_reference)                 # (K, N, S)
    return np.stack([samples.mean(axis=2), samples.std(axis=2)], axis=2)


def write_crosscheck(root: Path, name: str, kind: str, out: Path = CROSSCHECK_ROOT) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.npz"
    np.savez(path, chains=chain_summaries(root, name, kind), kind=np.array(kind))
    return path


FIRST_INDEPENDENT_CHAIN = 100      # prior draws the committed chains (0, 1, ...) never start from


def numpyro_chains(task, prepared, chains, seed=None) -> list:
    """NumPyro's NUTS (its window adaptation, diagonal mass matrix) on the task's JAX
    potential, one chain per index of ``chains``, started from those chains' prior draws."""
    import jax
    from numpyro.infer import MCMC, NUTS

    from . import jax_model
    from .chains import chain_predictions, initial_position, task_model
    model = task_model(task, prepared)
    log_density = jax_model.log_density(model, task.likelihood, task.prior_variance,
                                        prepared.x_train, prepared.y_train)
    starts = np.stack([initial_position(task, model, chain) for chain in chains])
    mcmc = MCMC(NUTS(potential_fn=lambda theta: -log_density(theta)),
                num_warmup=task.hmc.num_warmup, num_samples=task.hmc.num_samples,
                num_chains=len(starts), chain_method="parallel", progress_bar=False)
    mcmc.run(jax.random.PRNGKey(task.seed if seed is None else seed), init_params=starts,
             extra_fields=("potential_energy", "num_steps"))
    samples = np.asarray(mcmc.get_samples(group_by_chain=True))
    extra = mcmc.get_extra_fields(group_by_chain=True)
    energy, steps = np.asarray(extra["potential_energy"]), np.asarray(extra["num_steps"])
    return [chain_predictions(task, prepared, chain, samples[k], energy[k],
                              acceptance_rate=float("nan"), step_size=float("nan"),
                              num_steps=float(steps[k].mean()), divergences=0,
                              warmup_divergences=0) for k, chain in enumerate(chains)]


def write_independent_crosscheck(name: str, num_chains: int, num_warmup: int,
                                 num_samples: int, out: Path = CROSSCHECK_ROOT) -> Path:
    """NumPyro's chains of an embedded task, from chain indices FIRST_INDEPENDENT_CHAIN on
    and another seed, as the cross-check file."""
    from dataclasses import replace

    from .datasets import prepare
    from .generate import with_overrides
    from .tasks import task_by_name
    task = with_overrides(task_by_name(name), num_warmup, num_samples, num_chains)
    indices = range(FIRST_INDEPENDENT_CHAIN, FIRST_INDEPENDENT_CHAIN + num_chains)
    chains = numpyro_chains(task, prepare(task), indices, seed=task.seed + FIRST_INDEPENDENT_CHAIN)
    engine = (f"NumPyro NUTS, {num_chains} chains x ({num_warmup} warm-up + {num_samples} kept "
              f"draws), chain indices {FIRST_INDEPENDENT_CHAIN}+")
    return save_crosscheck(name, task.kind, chains, engine, out)


def save_crosscheck(name: str, kind: str, chains, engine: str, out: Path = CROSSCHECK_ROOT
                    ) -> Path:
    """Per chain, the predictive (classification) or the mean and sd of its draws of y."""
    if kind == "classification":
        summaries = np.stack([chain.draws.mean(axis=0) for chain in chains])
    else:
        summaries = np.stack([np.stack([chain.y_samples.mean(axis=0),
                                        chain.y_samples.std(axis=0)], axis=1)
                              for chain in chains])
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.npz"
    np.savez(path, chains=summaries, kind=np.array(kind), engine=np.array(engine))
    return path


def agreement_p_value(ours: np.ndarray, other: np.ndarray, draws: int = 4000,
                      seed: int = 0) -> tuple[float, float]:
    """Do two samplers' averages differ by more than their Monte Carlo errors? Each side comes
    as blocks whose means are independent estimates (batches or chains, (n, ...)); the
    statistic is the squared distance between the sides' means, T = sum_q (a_q - b_q)^2.

    Under agreement, a - b is Gaussian with each side's covariance over its number of blocks;
    ``draws`` simulated differences, each side's deviations from its mean mixed by standard
    normal weights (scaled by 1 / sqrt(n (n - 1))), give T's distribution with the errors'
    correlations across quantities kept (they are driven by a few posterior directions, so
    T is far from a sum of independent terms). Returns (T over its expected value under
    agreement, the share of simulated T at least as large: the p-value)."""
    rng = np.random.default_rng(seed)
    sides = [np.asarray(side, dtype=float).reshape(len(side), -1) for side in (ours, other)]
    means = [side.mean(axis=0) for side in sides]
    deviations = [(side - mean) / np.sqrt(len(side) * (len(side) - 1))
                  for side, mean in zip(sides, means)]
    observed = float(np.sum((means[0] - means[1]) ** 2))
    # each simulated T is |w @ stacked|^2 = w @ (stacked @ stacked.T) @ w: through the blocks'
    # Gram matrix, (n, n), instead of a (draws, quantities) product that is thousands of
    # times larger where the quantities are many (every test point times every class)
    weights = np.concatenate([rng.standard_normal((draws, len(d))) for d in deviations], axis=1)
    stacked = np.concatenate(deviations)
    totals = np.einsum("ij,jk,ik->i", weights, stacked @ stacked.T, weights)
    return observed / float(totals.mean()), float(np.mean(totals >= observed))

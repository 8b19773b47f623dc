"""The cross-check of the embedded references: what another sampler gave for each task, kept
in ``numpy_hmc_crosscheck/<task>.npz``, and how far the two samplers' predictives are from each
other against the Monte Carlo spread of one chain. For the MLP tasks the other sampler is our
numpy HMC engine (kept when the references moved to NUTS); for ``digits_cnn``, whose numpy HMC
would take hours on this machine, it is NumPyro's NUTS (``numpyro_chains``: two chains from
other starts and another random stream, on the same JAX potential), the file saying which.

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


def noise_ratio(ours: np.ndarray, other: np.ndarray, kind: str) -> float:
    """How far two samplers' averages are apart against their Monte Carlo errors:

        sum_q (mean_a,q - mean_b,q)^2 / sum_q (s_a,q^2 / K_a + s_b,q^2 / K_b)

    over every quantity q (classification: each probability; regression: each point's
    predictive mean), with s^2 the variance over each sampler's chains. About 1 when both
    sample the same posterior; a systematic difference d adds sum d^2 / (the denominator)."""
    if kind != "classification":
        ours, other = ours[..., 0], other[..., 0]            # (K, N, 2) summaries: the means
    apart = np.sum((ours.mean(axis=0) - other.mean(axis=0)) ** 2)
    noise = np.sum(ours.var(axis=0, ddof=1) / len(ours) + other.var(axis=0, ddof=1) / len(other))
    return float(apart / noise)


def distance(first: np.ndarray, second: np.ndarray, kind: str) -> float:
    """Classification: mean total variation between two predictives (N, C). Regression: mean
    over test points of |mean difference| / the average of the two predictive sds (N, 2)."""
    if kind == "classification":
        return float(0.5 * np.abs(first - second).sum(axis=1).mean())
    scale = 0.5 * (first[:, 1] + second[:, 1])
    return float(np.mean(np.abs(first[:, 0] - second[:, 0]) / scale))


def pooled(chains: np.ndarray, kind: str) -> np.ndarray:
    """The predictive of several chains together (regression: moments of the mixture)."""
    if kind == "classification":
        return chains.mean(axis=0)
    mean = chains[:, :, 0].mean(axis=0)
    second_moment = (chains[:, :, 1] ** 2 + chains[:, :, 0] ** 2).mean(axis=0)
    return np.stack([mean, np.sqrt(second_moment - mean ** 2)], axis=1)


def agreement(old: np.ndarray, new: np.ndarray, kind: str) -> dict[str, float]:
    """The two engines' model averages apart, and the Monte Carlo bar: the largest distance
    between one chain and the others pooled, over both engines' chains."""
    leave_one_out = [distance(chains[k], pooled(np.delete(chains, k, axis=0), kind), kind)
                     for chains in (old, new) for k in range(len(chains))]
    return {"engines_apart": distance(pooled(old, kind), pooled(new, kind), kind),
            "one_chain_apart": float(max(leave_one_out))}

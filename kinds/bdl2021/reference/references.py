"""From the chains of one task to its reference arrays and its convergence report.

Classification: the Bayesian model average (BMA) is the mean of the per-sample softmax
probabilities over every kept sample of every chain; a chain's own predictive is the same
mean over that chain alone, and its batch means (``BATCHES_PER_CHAIN`` consecutive stretches)
are what the exact-posterior expectation is estimated from. Regression: the BMA reference is
REGRESSION_SAMPLES draws of y, an equal share from each chain taken evenly along it; each
chain's predictive is REGRESSION_SAMPLES draws of its own, in chain order.

Every stored quantity comes with its Monte Carlo standard error (ArviZ's, from the bulk
ESS): classification, each probability of the model average; regression, the mean and the
standard deviation of the reference's draws of y at each test point.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .chains import ChainPredictions
from .convergence import (ESS_MINIMUM, RANK_RHAT_THRESHOLD, effective_sample_size,
                          rank_normalised, split_rhat)
from .datasets import PreparedTask
from .tasks import REGRESSION_SAMPLES, TaskDeclaration
from ..runtime.exact_posterior import BATCHES_PER_CHAIN

RHAT_THRESHOLD = 1.05
RHAT_PERCENTILE = 99
# The potential energy mixes slowest in these posteriors: its R-hat must meet the same bar, and
# its ESS reach 100 per chain (Vehtari et al. 2021's minimum for a reliable R-hat).
ENERGY_ESS_PER_CHAIN = 100


@dataclass(frozen=True)
class TaskReferences:
    bma: np.ndarray          # classification (N, C) probabilities; regression (N, S) samples of y
    chains: np.ndarray       # classification (K, N, C); regression (K, N, S)
    diagnostics: dict
    mcse: np.ndarray         # classification (N, C); regression (N, 2): of the mean and the sd
    batch_means: np.ndarray | None = None    # classification (K, B, N, C) float32


def _bma_draws(chains: list[ChainPredictions]) -> list[np.ndarray]:
    """Each chain's share of the REGRESSION_SAMPLES reference draws of y, taken evenly along
    the chain (its draws are in chain order): (count, N) per chain."""
    share = REGRESSION_SAMPLES // len(chains)
    counts = [share + (index < REGRESSION_SAMPLES % len(chains)) for index in range(len(chains))]
    return [chain.y_samples[np.arange(count) * len(chain.y_samples) // count]
            for chain, count in zip(chains, counts)]


def bma_samples(chains: list[ChainPredictions]) -> np.ndarray:
    """REGRESSION_SAMPLES draws of y, an equal share from each chain (N x S)."""
    return np.concatenate(_bma_draws(chains)).T


def batch_means(draws: np.ndarray, batches: int = BATCHES_PER_CHAIN) -> np.ndarray:
    """(K, S, ...) draws -> (K, B, ...) means of B consecutive, near-equal stretches."""
    return np.stack([np.stack([part.mean(axis=0) for part in np.array_split(chain, batches)])
                     for chain in draws]).astype(np.float32)


def _reference_mcse(task: TaskDeclaration, chains: list[ChainPredictions],
                    figures: dict) -> np.ndarray:
    """The Monte Carlo standard error of each stored reference quantity (module docstring);
    ``figures``: ``rank_normalised`` of the chains' draws."""
    if task.kind == "classification":
        return figures["mcse_mean"]
    shares = _bma_draws(chains)
    length = min(len(share) for share in shares)       # equal shares unless K does not divide S
    draws = np.stack([share[:length] for share in shares])                # (K, S/K, N)
    mean = rank_normalised(draws)
    # The sd's error through its square: d(sd) = d(var) / (2 sd), var estimated by E[(y-m)^2].
    squares = rank_normalised((draws - draws.mean(axis=(0, 1))) ** 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        sd_error = np.where(mean["sd"] > 0, squares["mcse_mean"] / (2 * mean["sd"]), 0.0)
    return np.stack([mean["mcse_mean"], sd_error], axis=1)


def _per_point(values: np.ndarray, reduce) -> np.ndarray:
    """Classification quantities are (N, C): reduce over classes to one number per point."""
    return reduce(values, axis=1) if values.ndim == 2 else values


def _summary(values: np.ndarray) -> dict:
    return {"min": float(values.min()), "median": float(np.median(values)),
            f"p{RHAT_PERCENTILE}": float(np.percentile(values, RHAT_PERCENTILE)),
            "max": float(values.max())}


def _fit_to_test_labels(task: TaskDeclaration, bma: np.ndarray, y_test: np.ndarray) -> dict:
    if task.kind == "classification":
        return {"accuracy": float(np.mean(bma.argmax(axis=1) == y_test))}
    return {"rmse_of_mean": float(np.sqrt(np.mean((bma.mean(axis=1) - y_test) ** 2)))}


def _reference_standard(figures: dict, energy: np.ndarray, chains) -> dict:
    """The reference-posterior standard's figures: rank-normalised R-hat and bulk and tail ESS
    of every predictive quantity (``figures``) and of the potential energy, and the
    divergences."""
    energy_figures = rank_normalised(energy)
    return {"method": "rank-normalised split R-hat, bulk and tail ESS (Vehtari et al. 2021, "
                      "ArviZ)",
            "quantity": "every predictive quantity of the reference, and the potential energy",
            "rhat_threshold": RANK_RHAT_THRESHOLD, "ess_minimum": ESS_MINIMUM,
            "rhat_max": float(figures["rhat"].max()),
            "rhat_p99": float(np.percentile(figures["rhat"], RHAT_PERCENTILE)),
            "ess_bulk_min": float(figures["ess_bulk"].min()),
            "ess_tail_min": float(figures["ess_tail"].min()),
            "ess_bulk_median": float(np.median(figures["ess_bulk"])),
            "energy_rhat": float(energy_figures["rhat"]),
            "energy_ess_bulk": float(energy_figures["ess_bulk"]),
            "energy_ess_tail": float(energy_figures["ess_tail"]),
            "divergences": int(sum(chain.divergences for chain in chains)),
            "warmup_divergences": int(sum(chain.warmup_divergences for chain in chains))}


def convergence_report(task: TaskDeclaration, prepared: PreparedTask,
                       chains: list[ChainPredictions], bma: np.ndarray,
                       figures: dict) -> dict:
    """``figures``: ``rank_normalised`` of the chains' predictive draws."""
    draws = np.stack([chain.draws for chain in chains])       # (K, S, N[, C])
    rhat = _per_point(split_rhat(draws), np.max)
    ess = _per_point(effective_sample_size(draws), np.min)
    quantity = ("predictive class probabilities (worst class per test point)"
                if task.kind == "classification" else "predictive mean per test point")
    blocks = {}
    for block in prepared.blocks:
        part = slice(block.start, block.stop)
        blocks[block.name] = {
            "test_points": block.stop - block.start,
            f"rhat_p{RHAT_PERCENTILE}": float(np.percentile(rhat[part], RHAT_PERCENTILE)),
            **_fit_to_test_labels(task, bma[part], prepared.y_test[part])}
    rhat_at_percentile = float(np.percentile(rhat, RHAT_PERCENTILE))
    energy = np.stack([chain.potentials for chain in chains])            # (K, S)
    energy_rhat, energy_ess = float(split_rhat(energy)), float(effective_sample_size(energy))
    energy_ess_minimum = ENERGY_ESS_PER_CHAIN * len(chains)
    return {
        "rhat": {"quantity": quantity, "method": "split R-hat (BDA3), per test point",
                 "threshold": RHAT_THRESHOLD, "percentile": RHAT_PERCENTILE,
                 "passed": rhat_at_percentile <= RHAT_THRESHOLD, **_summary(rhat)},
        "ess": {"quantity": quantity, "method": "multi-chain ESS, Geyer initial monotone sequence",
                **_summary(ess),
                "potential_energy": energy_ess},
        "energy": {"quantity": "potential energy U(theta) of the kept draws",
                   "rhat": energy_rhat, "rhat_threshold": RHAT_THRESHOLD,
                   "ess": energy_ess, "ess_minimum": energy_ess_minimum,
                   "passed": energy_rhat <= RHAT_THRESHOLD and energy_ess >= energy_ess_minimum},
        "reference_standard": _reference_standard(figures, energy, chains),
        "chains": [{"chain": chain.chain_index, "step_size": chain.step_size,
                    "num_steps": chain.num_steps, "acceptance_rate": chain.acceptance_rate,
                    "divergences": chain.divergences,
                    "warmup_divergences": chain.warmup_divergences,
                    "mean_potential_energy": float(chain.potentials.mean())}
                   for chain in chains],
        "test_blocks": blocks,
    }


def build_references(task: TaskDeclaration, prepared: PreparedTask,
                     chains: list[ChainPredictions]) -> TaskReferences:
    chains = sorted(chains, key=lambda chain: chain.chain_index)
    batches = None
    figures = rank_normalised(np.stack([chain.draws for chain in chains]))
    if task.kind == "classification":
        per_chain = np.stack([chain.draws.mean(axis=0) for chain in chains])
        bma = np.concatenate([chain.draws for chain in chains]).mean(axis=0)
        batches = batch_means(np.stack([chain.draws for chain in chains]))
    else:
        per_chain = np.stack([chain.y_samples.T for chain in chains])
        bma = bma_samples(chains)
    return TaskReferences(bma, per_chain,
                          convergence_report(task, prepared, chains, bma, figures),
                          _reference_mcse(task, chains, figures), batches)

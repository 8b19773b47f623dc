"""From the chains of one task to its reference arrays and its convergence report.

Classification: the Bayesian model average (BMA) is the mean of the per-sample softmax
probabilities over every kept sample of every chain; a chain's own predictive is the same
mean over that chain alone. Regression: the BMA reference is REGRESSION_SAMPLES draws of y
taken evenly from all chains; each chain's predictive is REGRESSION_SAMPLES draws of its own.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .chains import ChainPredictions
from .convergence import effective_sample_size, split_rhat
from .datasets import PreparedTask
from .tasks import REGRESSION_SAMPLES, TaskDeclaration

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


def _bma_samples(chains: list[ChainPredictions]) -> np.ndarray:
    """REGRESSION_SAMPLES draws of y, an equal share from each chain (N x S)."""
    share = REGRESSION_SAMPLES // len(chains)
    counts = [share + (index < REGRESSION_SAMPLES % len(chains)) for index in range(len(chains))]
    return np.concatenate([chain.y_samples[:count] for chain, count in zip(chains, counts)]).T


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


def convergence_report(task: TaskDeclaration, prepared: PreparedTask,
                       chains: list[ChainPredictions], bma: np.ndarray) -> dict:
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
    if task.kind == "classification":
        per_chain = np.stack([chain.draws.mean(axis=0) for chain in chains])
        bma = np.concatenate([chain.draws for chain in chains]).mean(axis=0)
    else:
        per_chain = np.stack([chain.y_samples.T for chain in chains])
        bma = _bma_samples(chains)
    return TaskReferences(bma, per_chain, convergence_report(task, prepared, chains, bma))

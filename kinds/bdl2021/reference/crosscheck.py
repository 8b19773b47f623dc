"""The cross-check of the embedded references: what our numpy HMC engine gave for each task,
kept in ``numpy_hmc_crosscheck/<task>.npz`` when the references moved to NUTS, and how far
the two engines' predictives are from each other against the Monte Carlo spread of one chain.

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

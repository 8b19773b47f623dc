"""Multi-chain convergence diagnostics: split R-hat and effective sample size.

Both take draws shaped ``(chains, draws, ...)`` and reduce over the first two axes, so
one call diagnoses every test point (and class) at once.
"""
from __future__ import annotations

import numpy as np

# Quantities whose within- and between-chain variances are both below this are constant
# (e.g. a probability pinned at 1.0 by every draw); they have converged by definition.
CONSTANT_VARIANCE = 1e-12


def _split_chains(draws: np.ndarray) -> np.ndarray:
    half = draws.shape[1] // 2
    return np.concatenate([draws[:, :half], draws[:, draws.shape[1] - half:]], axis=0)


def split_rhat(draws: np.ndarray) -> np.ndarray:
    """Split potential scale reduction factor (Gelman et al., BDA3 eq. 11.4).

    Each of the m chains is cut in half, giving M = 2m chains of n draws;
    W = mean of within-chain variances, B/n = variance of the chain means,
    var+ = (n - 1)/n * W + B/n, and R-hat = sqrt(var+ / W).
    """
    split = _split_chains(np.asarray(draws, dtype=float))
    n = split.shape[1]
    within = split.var(axis=1, ddof=1).mean(axis=0)
    between_over_n = split.mean(axis=1).var(axis=0, ddof=1)
    var_plus = (n - 1) / n * within + between_over_n
    with np.errstate(divide="ignore", invalid="ignore"):
        rhat = np.sqrt(var_plus / within)
    constant = (within < CONSTANT_VARIANCE) & (between_over_n < CONSTANT_VARIANCE)
    return np.where(constant, 1.0, np.where(within > 0, rhat, np.inf))


def _autocovariance(x: np.ndarray) -> np.ndarray:
    """Autocovariance along axis 1 via FFT (biased estimator, as Stan uses)."""
    n = x.shape[1]
    centred = x - x.mean(axis=1, keepdims=True)
    size = 2 ** int(np.ceil(np.log2(2 * n)))
    spectrum = np.fft.rfft(centred, n=size, axis=1)
    return np.fft.irfft(spectrum * np.conj(spectrum), n=size, axis=1)[:, :n] / n


# Columns per FFT batch: bounds the padded complex spectra (~30k test-point/class pairs
# of digits_shift would otherwise take gigabytes at once).
ESS_BATCH_COLUMNS = 2048


def effective_sample_size(draws: np.ndarray) -> np.ndarray:
    """Multi-chain ESS for every quantity in ``draws[:, :, ...]``, in column batches."""
    draws = np.asarray(draws, dtype=float)
    flat = draws.reshape(*draws.shape[:2], -1)
    ess = np.concatenate([_effective_sample_size(flat[:, :, start:start + ESS_BATCH_COLUMNS])
                          for start in range(0, flat.shape[2], ESS_BATCH_COLUMNS)])
    return ess.reshape(draws.shape[2:])


def _effective_sample_size(draws: np.ndarray) -> np.ndarray:
    """Multi-chain ESS with Geyer's initial monotone sequence (Stan reference manual 16.4).

    rho_t = 1 - (W - mean_chains(acov_t)) / var+, summed in pairs
    P_k = rho_{2k} + rho_{2k+1} while positive and non-increasing;
    ESS = m n / (-1 + 2 sum_k P_k).
    """
    m, n = draws.shape[:2]
    acov = _autocovariance(draws)                                       # (m, n, q)
    within = acov[:, 0].mean(axis=0) * n / (n - 1)
    chain_means = draws.mean(axis=1)
    between_over_n = chain_means.var(axis=0, ddof=1) if m > 1 else np.zeros_like(within)
    var_plus = (n - 1) / n * within + between_over_n
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (within - acov.mean(axis=0)) / var_plus             # (n, q)
    rho[0] = 1.0
    pairs = rho[: 2 * (n // 2)].reshape(n // 2, 2, -1).sum(axis=1)     # (n//2, q)
    positive = np.cumprod(pairs > 0, axis=0).astype(bool)
    monotone = np.minimum.accumulate(np.where(positive, pairs, np.inf), axis=0)
    tau = -1.0 + 2.0 * np.where(positive, monotone, 0.0).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ess = m * n / tau
    ess = np.where(var_plus < CONSTANT_VARIANCE, m * n, ess)
    return np.minimum(ess, m * n * np.log10(m * n))


# ---- the reference-posterior standard (posteriordb; Vehtari et al. 2021) ---------------------

# Every stored quantity and the potential energy must reach these (posteriordb's bar for a
# reference posterior; 400 = 100 per chain for 4 chains, Vehtari et al.'s minimum).
RANK_RHAT_THRESHOLD = 1.01
ESS_MINIMUM = 400


def rank_normalised(draws: np.ndarray) -> dict[str, np.ndarray]:
    """ArviZ's rank-normalised split R-hat, bulk and tail ESS, and the Monte Carlo standard
    error and standard deviation of the mean, per quantity of ``draws[:, :, ...]``.

    A quantity that is constant over every draw (a probability pinned at 1) has converged by
    definition: R-hat 1, ESS the number of draws, MCSE 0 (ArviZ gives NaN there); one nearly
    constant, where ArviZ's MCSE is NaN, gets its standard deviation as its MCSE. Columns go in
    batches, so the rank transforms of a large test set never sit in memory at once.
    """
    draws = np.asarray(draws, dtype=float)
    chains, length = draws.shape[:2]
    flat = draws.reshape(chains, length, -1)
    parts = [_rank_normalised(flat[:, :, start:start + ESS_BATCH_COLUMNS])
             for start in range(0, flat.shape[2], ESS_BATCH_COLUMNS)]
    return {name: np.concatenate([part[name] for part in parts]).reshape(draws.shape[2:])
            for name in parts[0]}


def _rank_normalised(draws: np.ndarray) -> dict[str, np.ndarray]:
    import warnings

    import arviz
    dataset = arviz.convert_to_dataset({"q": draws})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # constant columns: handled below
        figures = {"rhat": arviz.rhat(dataset, method="rank")["q"].values,
                   "ess_bulk": arviz.ess(dataset, method="bulk")["q"].values,
                   "ess_tail": arviz.ess(dataset, method="tail")["q"].values,
                   "mcse_mean": arviz.mcse(dataset, method="mean")["q"].values}
    figures["sd"] = draws.reshape(-1, draws.shape[2]).std(axis=0, ddof=1)
    constant = np.ptp(draws.reshape(-1, draws.shape[2]), axis=0) <= CONSTANT_VARIANCE
    size = float(draws.shape[0] * draws.shape[1])
    for name, value in (("rhat", 1.0), ("ess_bulk", size), ("ess_tail", size),
                        ("mcse_mean", 0.0)):
        figures[name] = np.where(constant, value, figures[name])
    # Nearly constant, not constant (a stuck chain's draws, a few units in the last place
    # apart): ArviZ's MCSE is NaN there. The most cautious finite error stands in, the
    # standard deviation itself (an effective sample size of 1), so that a reference file
    # never holds a NaN the build must refuse; the gate has failed such a run anyway.
    figures["mcse_mean"] = np.where(np.isfinite(figures["mcse_mean"]), figures["mcse_mean"],
                                    figures["sd"])
    return figures

"""Zoos trained again, for the standard errors of a zoo's scores: how far CMI and the taus
would move if every network of the grid were trained anew at the same hyperparameters.

The grid is fixed by design; what changes from one training of the zoo to the next is each
network's training noise, which moves its gap and the participant's measure of it together.
A bootstrap over the networks (reweighing the 16 or 32 trained ones) cannot reproduce that: on
zoos simulated with training noise its CMI standard error was 12-41% too small
(docs/intervals.md). So the zoo is modelled as the hyperparameters' effects plus noise and the
noise is resampled (a residual bootstrap over a fixed design):

1. gaps and measure become normal scores (rank-based: the scores depend on their orders only,
   so any increasing transform leaves them unchanged, and a measure of any scale fits);
2. each is fitted by the hyperparameters' main effects (grand mean plus one deviation per
   value: least squares on a complete grid), leaving n - p residuals' worth of noise,
   p = 1 + sum(values - 1);
3. each draw gives every network the residual pair (gap, measure) of a network drawn at
   random, scaled by sqrt(n / (n - p)) (the fit's lost degrees of freedom), so the gap's and
   the measure's noise stay as correlated as they are in the zoo;
4. the retrained zoo takes the zoo's own values back in the order drawn (its k-th smallest
   gap is the zoo's k-th smallest), so it has as many ties as the zoo: Kendall's tau counts
   a tie as neither order, and gaps measured on a finite test set tie often.

Interactions between hyperparameters count as noise, which makes the errors larger, never
smaller. The draws depend on the number of networks and the seed only, so every submission of
a task is scored on the same resamples. Standard library and numpy only (shipped).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import NormalDist

import numpy as np

from .metrics import hyperparameter_grid


def normal_scores(values: np.ndarray) -> np.ndarray:
    """Phi^-1((rank - 1/2) / n) of every value, tied values sharing their mean rank."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    sizes = np.diff(np.r_[starts, values.size])
    ranks = np.empty(values.size)
    ranks[order] = np.repeat(starts + (sizes + 1) / 2, sizes)
    normal = NormalDist()
    return np.array([normal.inv_cdf(p) for p in (ranks - 0.5) / values.size])


def main_effects_fit(values: np.ndarray, codes: Mapping[str, np.ndarray]) -> np.ndarray:
    """Least squares on the hyperparameters' main effects, for a complete grid: the grand
    mean plus, for each hyperparameter, the mean of the networks sharing its value minus the
    grand mean (the grid is balanced, so the effects are estimated apart)."""
    grand = float(values.mean())
    fit = np.full(values.size, grand)
    for code in codes.values():
        means = np.bincount(code, weights=values) / np.bincount(code)
        fit += means[code] - grand
    return fit


def retrained_zoos(gaps, measure, hparams: Mapping[str, Sequence], draws: int, seed: int
                   ) -> tuple[np.ndarray, np.ndarray] | None:
    """``draws`` zoos of the same grid trained again: (gaps, measure), each draws x n, made
    of the zoo's own values. None when the grid leaves fewer than two degrees of freedom for
    the noise (nothing to resample: a zoo of one network per main effect)."""
    gaps, measure = np.asarray(gaps, np.float64), np.asarray(measure, np.float64)
    names, codes, sizes = hyperparameter_grid(hparams, gaps.size)
    freedom = gaps.size - 1 - sum(sizes[name] - 1 for name in names)
    if freedom < 2:
        return None
    scale = np.sqrt(gaps.size / freedom)
    rows = np.random.default_rng(seed).integers(0, gaps.size, (draws, gaps.size))
    retrained = []
    for values in (gaps, measure):
        scores = normal_scores(values)
        fit = main_effects_fit(scores, codes)
        retrained.append(in_drawn_order(values, fit + scale * (scores - fit)[rows]))
    return retrained[0], retrained[1]


def in_drawn_order(values: np.ndarray, drawn: np.ndarray) -> np.ndarray:
    """Each row of ``drawn`` replaced by ``values`` in the row's order: the network drawn
    k-th smallest gets the k-th smallest of ``values`` (ties among ``values`` kept)."""
    ranks = np.argsort(np.argsort(drawn, axis=1, kind="stable"), axis=1, kind="stable")
    return np.sort(values)[ranks]

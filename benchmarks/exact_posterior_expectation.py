"""The exact-posterior expectation against independent HMC runs of the same tasks.

The builder estimates, from the 4 committed chains alone, what an exact-posterior
submission is expected to score against the reference (scoring_program/scorer/
exact_posterior.py). This checks that estimate against what such a submission does score:

- it runs 4 x R new chains per task with the task's own HMC settings and chain indices
  from 100 on, so they are independent of the committed chains 0-3 and of each other;
- every 4 of them make a replicate reference, as large as the committed one;
- for each replicate r, a stand-in for the exact posterior is made from the other R - 1
  replicates (classification: the model average of their 4 (R - 1) chains; regression:
  num_samples draws of y spread evenly over their chains), and scored against replicate
  r's reference: the realised score. The stand-in's own Monte Carlo error is taken out of
  the realised TV (divided by sqrt(1 + 1/(R - 1)), the same central-limit rate);
- the estimate is computed from each replicate's 4 chains, as the builder does.

Both are averaged over replicates and printed next to the committed reference's estimate
and the old "noise ceiling" (one chain against the mean of the others). Last, a stand-in
made from all the new chains is scored against the committed reference itself: the
realised counterpart of the figure the builder ships (one draw, so only roughly).
The spread of the realised scores over replicates (how far an exact submission lands
from the expectation by chance) is printed next to the estimate's spread (rms over
replicates), which the builder takes from the 3 ways to split 4 chains.

A fixed grouping of the new chains gives R realised scores, each of which moves by about
20% on a small task; so the last columns also draw 400 random groups of 4 of the new
chains as references (the rest as the stand-in) and compare the mean estimate with the
mean realised score over those: the ratio tests the estimator itself.

Usage: .venv/bin/python benchmarks/exact_posterior_expectation.py [--tasks iris wine]
       [--replicates 8] [--jobs N] [--keep DIR]   (DIR/<task>_chains.npy: the new chains)
       [--load DIR]   (reuse chains kept by --keep, when as many as needed are there)
About 1.5 minutes for iris and wine with 8 replicates on 2 cores; diabetes_gap with 4
replicates adds about 4 minutes.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import math
import multiprocessing
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kinds.bdl2021.reference.chains import run_task_chain  # noqa: E402
from kinds.bdl2021.reference.datasets import prepare  # noqa: E402
from kinds.bdl2021.reference.generate import SINGLE_THREAD_ENV, with_overrides  # noqa: E402
from kinds.bdl2021.reference.tasks import REGRESSION_SAMPLES, task_by_name  # noqa: E402
from kinds.bdl2021.runtime.exact_posterior import exact_posterior_expectation  # noqa: E402
from kinds.bdl2021.runtime.score_types import CLASSIFICATION, SCORE_TYPES  # noqa: E402

FIRST_INDEPENDENT_CHAIN = 100
DASH = "–"
EMBEDDED = REPO / "kinds" / "bdl2021" / "reference" / "embedded"


def _chain(name: str, index: int, num_samples: int | None = None) -> np.ndarray:
    """One chain's predictive: (N, C) model average, or (N, S) draws of y."""
    task = with_overrides(task_by_name(name), None, num_samples, None)
    result = run_task_chain(task, prepare(task), index)
    return result.draws.mean(axis=0) if task.kind == CLASSIFICATION else result.y_samples.T


def run_chains(name: str, count: int, jobs: int, num_samples: int | None = None) -> np.ndarray:
    """count new chains with the task's HMC settings, or fewer kept draws than it declares."""
    for key, value in SINGLE_THREAD_ENV.items():
        os.environ.setdefault(key, value)
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
        indices = range(FIRST_INDEPENDENT_CHAIN, FIRST_INDEPENDENT_CHAIN + count)
        return np.stack(list(pool.map(_chain, [name] * count, indices,
                                      [num_samples] * count)))


def reference_of(kind: str, chains: np.ndarray) -> np.ndarray:
    """As reference_data/references.py builds it: chain mean, or an equal share of draws."""
    if kind == CLASSIFICATION:
        return chains.mean(axis=0)
    share = REGRESSION_SAMPLES // len(chains)
    return np.concatenate([chain[:, :share] for chain in chains], axis=1)


def old_noise_ceiling(kind: str, chains: np.ndarray) -> dict[str, float]:
    """The figure this replaces: each chain against the pooled other chains, averaged."""
    values = {t.name: [] for t in SCORE_TYPES[kind]}
    for k in range(len(chains)):
        others = np.delete(chains, k, axis=0)
        target = (others.mean(axis=0) if kind == CLASSIFICATION
                  else np.concatenate(list(others), axis=1))
        for t in SCORE_TYPES[kind]:
            values[t.name].append(t.function(chains[k], target))
    return {name: float(np.mean(v)) for name, v in values.items()}


def exact_stand_in(kind: str, chains: np.ndarray) -> np.ndarray:
    if kind == CLASSIFICATION:
        return chains.mean(axis=0)
    per_chain = math.ceil(REGRESSION_SAMPLES / len(chains))
    return np.concatenate([chain[:, :per_chain] for chain in chains], axis=1)[:, :REGRESSION_SAMPLES]


def estimate(kind: str, chains: np.ndarray, field: str = "value") -> dict[str, float]:
    found = exact_posterior_expectation(kind, chains, REGRESSION_SAMPLES, REGRESSION_SAMPLES)
    return {name: getattr(e, field) for name, e in found.items()}


def committed_chains(name: str, kind: str) -> np.ndarray:
    if kind == CLASSIFICATION:
        return np.load(EMBEDDED / name / f"{name}_chain_probs.npy")
    return np.load(EMBEDDED / name / f"{name}_chain_samples.npy").transpose(0, 2, 1)


def regrouped(kind: str, chains: np.ndarray, k: int, groups: int = 400) -> dict[str, tuple]:
    """Mean estimate and mean realised score over random k-chain references (seeded)."""
    rng = np.random.default_rng(0)
    realised = {t.name: [] for t in SCORE_TYPES[kind]}
    estimated = {t.name: [] for t in SCORE_TYPES[kind]}
    for _ in range(groups):
        chosen = rng.choice(len(chains), k, replace=False)
        rest = np.delete(chains, chosen, axis=0)
        group = chains[chosen]
        own_error = math.sqrt(1 + k / len(rest)) if kind == CLASSIFICATION else 1.0
        stand_in, reference = exact_stand_in(kind, rest), reference_of(kind, group)
        for t in SCORE_TYPES[kind]:
            value = t.function(stand_in, reference)
            realised[t.name].append(value if t.higher_is_better else value / own_error)
        for metric, value in estimate(kind, group).items():
            estimated[metric].append(value)
    return {name: (np.mean(estimated[name]), np.mean(realised[name])) for name in realised}


def benchmark(name: str, replicates: int, jobs: int, keep: Path | None = None,
              load: Path | None = None) -> list[str]:
    task = task_by_name(name)
    kind, k = task.kind, task.hmc.num_chains
    started = time.perf_counter()
    kept = load / f"{name}_chains.npy" if load else None
    if kept and kept.is_file() and len(np.load(kept, mmap_mode="r")) >= k * replicates:
        chains, how = np.load(kept)[:k * replicates], f"loaded from {kept}"
    else:
        chains = run_chains(name, k * replicates, jobs)
        how = f"{time.perf_counter() - started:.0f} s"
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
        np.save(keep / f"{name}_chains.npy", chains)
    groups = [chains[r * k:(r + 1) * k] for r in range(replicates)]
    realised = {t.name: [] for t in SCORE_TYPES[kind]}
    estimates = {t.name: [] for t in SCORE_TYPES[kind]}
    spreads = {t.name: [] for t in SCORE_TYPES[kind]}
    old = {t.name: [] for t in SCORE_TYPES[kind]}
    own_error = math.sqrt(1 + 1 / (replicates - 1)) if kind == CLASSIFICATION else 1.0
    for r, group in enumerate(groups):
        others = np.concatenate([g for i, g in enumerate(groups) if i != r])
        reference, stand_in = reference_of(kind, group), exact_stand_in(kind, others)
        for t in SCORE_TYPES[kind]:
            value = t.function(stand_in, reference)
            realised[t.name].append(value if t.higher_is_better else value / own_error)
        for source, target in ((estimate(kind, group), estimates),
                               (estimate(kind, group, "spread"), spreads),
                               (old_noise_ceiling(kind, group), old)):
            for metric, value in source.items():
                target[metric].append(value)
    committed = committed_chains(name, kind)
    committed_estimate, committed_old = estimate(kind, committed), old_noise_ceiling(kind, committed)
    stand_in, reference = exact_stand_in(kind, chains), reference_of(kind, committed)
    own_error = math.sqrt(1 + k / len(chains)) if kind == CLASSIFICATION else 1.0
    random_groups = regrouped(kind, chains, k)
    lines = []
    for t in SCORE_TYPES[kind]:
        mean_realised = np.mean(realised[t.name])
        spread = np.std(realised[t.name], ddof=1)
        error = spread / math.sqrt(replicates)
        estimated_spread = (DASH if spreads[t.name][0] is None
                            else f"{np.sqrt(np.mean(np.square(spreads[t.name]))):.4f}")
        on_committed = t.function(stand_in, reference)
        on_committed = on_committed if t.higher_is_better else on_committed / own_error
        lines.append(
            f"| {name} | {t.name} | {committed_old[t.name]:.4f} | {committed_estimate[t.name]:.4f} "
            f"| {on_committed:.4f} | {np.mean(old[t.name]):.4f} | {np.mean(estimates[t.name]):.4f} "
            f"| {mean_realised:.4f} ± {error:.4f} | {spread:.4f} | {estimated_spread} "
            f"| {random_groups[t.name][0]:.4f} / {random_groups[t.name][1]:.4f} "
            f"| {replicates} x {k} chains, {how} |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["iris", "wine"])
    parser.add_argument("--replicates", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--keep", type=Path, help="save the new chains here")
    parser.add_argument("--load", type=Path, help="reuse chains saved by --keep")
    args = parser.parse_args(argv)
    if args.replicates < 2:
        parser.error("--replicates must be at least 2")
    print("| task | metric | old ceiling (committed) | expectation (committed) "
          "| realised on committed | old ceiling (replicates) | expectation (replicates) "
          "| realised on replicates (± s.e.) | sd of realised | estimated spread (rms) "
          "| 400 random groups: estimate / realised | independent run |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.tasks:
        for line in benchmark(name, args.replicates, args.jobs, args.keep, args.load):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The committed exact-posterior line against an independent near-exact posterior.

For each task, NumPyro's NUTS (``crosscheck.numpyro_chains``: its own window adaptation, other
chain starts, another random stream) runs ``--chains`` chains of ``--length`` times the task's
kept draws. What it gives stands for an exact submission, scored against the committed
reference exactly as a participant's file would be:

- classification: its model average. That average still carries its own Monte Carlo error,
  which adds to the reference's: the distances are divided by sqrt(1 + n_ref / n_new) (draw
  counts, the central-limit rate; TV is homogeneous in the error), so what is printed is what
  the exact average would score. Agreement is printed as found (a flip is not a distance).
- regression: ``num_samples`` draws of y taken evenly along its chains, which is what an exact
  submission is (HMC draws standing for independent ones): nothing to remove.

Each score is printed next to the committed line (``<task>_exact_posterior_expectation.json``)
and its interval; ``inside`` says whether the score falls in it. The interval holds an exact
submission's score 95% of the time, so over many tasks and metrics about one in twenty may
fall outside by chance.

Usage: .venv/bin/python benchmarks/exact_posterior_expectation.py [--tasks iris wine]
       [--chains 8] [--length 2] [--json FILE] [--save-crosscheck]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kinds.bdl2021.reference.crosscheck import (FIRST_INDEPENDENT_CHAIN, numpyro_chains,  # noqa: E402
                                                save_crosscheck)
from kinds.bdl2021.reference.datasets import prepare  # noqa: E402
from kinds.bdl2021.reference.generate import with_overrides  # noqa: E402
from kinds.bdl2021.reference.references import bma_samples  # noqa: E402
from kinds.bdl2021.reference.task_files import DEFAULT_ROOT, task_files  # noqa: E402
from kinds.bdl2021.reference.tasks import task_by_name  # noqa: E402
from kinds.bdl2021.runtime.exact_posterior import parse_expectation_document  # noqa: E402
from kinds.bdl2021.runtime.formats import (SAMPLES_BY_POINTS, read_classification_probs,  # noqa: E402
                                           read_regression_samples)
from kinds.bdl2021.runtime.score_types import CLASSIFICATION, SCORE_TYPES  # noqa: E402


def independent_run(name: str, chains: int, length: float):
    """NumPyro's chains of the task, from chain indices FIRST_INDEPENDENT_CHAIN on."""
    task = task_by_name(name)
    task = with_overrides(task, None, int(task.hmc.num_samples * length), chains)
    indices = range(FIRST_INDEPENDENT_CHAIN, FIRST_INDEPENDENT_CHAIN + chains)
    # Another random stream, the same data: the task's seed also makes its split.
    return task, numpyro_chains(task, prepare(task), indices,
                                seed=task.seed + FIRST_INDEPENDENT_CHAIN)


def stand_in(kind: str, chains) -> np.ndarray:
    """Classification: the model average (N, C); regression: REGRESSION_SAMPLES draws of y
    (N, S) taken as the reference takes them (``references.bma_samples``)."""
    if kind == CLASSIFICATION:
        return np.concatenate([chain.draws for chain in chains]).mean(axis=0)
    return bma_samples(chains)


def committed(name: str, kind: str):
    """The committed reference, its draw count (classification) and its expectation."""
    paths = task_files(DEFAULT_ROOT, name, kind)
    declaration = json.loads(paths.declaration.read_text())
    if kind == CLASSIFICATION:
        reference = read_classification_probs(paths.reference)
        draws = declaration["hmc"]["num_chains"] * declaration["hmc"]["num_samples"]
    else:
        reference = read_regression_samples(paths.reference, layout=SAMPLES_BY_POINTS)
        draws = reference.shape[1]
    line = parse_expectation_document(json.loads(paths.expectation.read_text()), name, kind,
                                      paths.expectation.name)
    return reference, draws, line


def benchmark(name: str, chains: int, length: float, save: bool = False) -> list[dict]:
    """``save``: keep the run as the task's cross-check file (``crosscheck.py``)."""
    kind = task_by_name(name).kind
    started = time.perf_counter()
    task, run = independent_run(name, chains, length)
    seconds = time.perf_counter() - started
    if save:
        save_crosscheck(name, kind, run, f"NumPyro NUTS, {chains} chains x "
                        f"({task.hmc.num_warmup} warm-up + {task.hmc.num_samples} kept draws), "
                        f"chain indices {FIRST_INDEPENDENT_CHAIN}+")
    reference, reference_draws, line = committed(name, kind)
    new_draws = chains * task.hmc.num_samples
    own_error = math.sqrt(1 + reference_draws / new_draws) if kind == CLASSIFICATION else 1.0
    submission = stand_in(kind, run)
    rows = []
    for score in SCORE_TYPES[kind]:
        found = float(score.function(submission, reference))
        exact = found if score.higher_is_better else found / own_error
        expected = line[score.name]
        rows.append({"task": name, "metric": score.name, "line": expected.value,
                     "low": expected.low, "high": expected.high, "independent": exact,
                     "inside": expected.low <= exact <= expected.high,
                     "run": f"NumPyro {chains} x {task.hmc.num_samples} draws, {seconds:.0f} s"})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["iris", "wine", "breast_cancer"])
    parser.add_argument("--chains", type=int, default=8)
    parser.add_argument("--length", type=float, default=2.0,
                        help="kept draws per chain, as a multiple of the task's")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--save-crosscheck", action="store_true",
                        help="keep each run as the task's cross-check file "
                             "(kinds/bdl2021/reference/numpy_hmc_crosscheck/)")
    args = parser.parse_args(argv)
    print("| task | metric | line | 95% interval | independent exact stand-in | inside | run |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for name in args.tasks:
        for row in benchmark(name, args.chains, args.length, args.save_crosscheck):
            rows.append(row)
            print(f"| {row['task']} | {row['metric']} | {row['line']:.5f} | "
                  f"{row['low']:.5f} - {row['high']:.5f} | {row['independent']:.5f} | "
                  f"{'yes' if row['inside'] else 'NO'} | {row['run']} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

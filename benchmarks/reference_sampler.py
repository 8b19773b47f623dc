"""Reference sampling speed: our BlackJAX engine against NumPyro's NUTS and our old numpy HMC,
on the same posterior, in one run on this machine.

For each task (breast_cancer and diabetes_gap by default: a classifier and a heteroscedastic
regression), each sampler runs 4 chains from the same prior draws with the same number of
warm-up and kept draws (NumPyro: NUTS with its default window adaptation and diagonal mass
matrix, 4 chains in parallel on the same simulated devices; numpy HMC: the task's declared
trajectory, one process per core). Wall time counts compilation. Prints, per sampler, the
effective sample size of the predictive (minimum over test points and classes) and of the
potential energy, and both per second; then the ratios of ours to NumPyro and to numpy HMC.

Goal (issue 16): ours / NumPyro >= 1.0 and ours / numpy HMC >= 50 in ESS per second.
Usage: .venv/bin/python benchmarks/reference_sampler.py [--tasks a,b] [--warmup W] [--samples S]
(each task's declared warm-up and kept draws unless --warmup and --samples say otherwise)
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kinds.bdl2021.reference import jax_model  # noqa: E402  (sets float64 and host devices)
from kinds.bdl2021.reference.chains import (chain_predictions, initial_position,  # noqa: E402
                                            run_task_chain, run_task_chains_nuts, task_model)
from kinds.bdl2021.reference.convergence import effective_sample_size  # noqa: E402
from kinds.bdl2021.reference.datasets import prepare  # noqa: E402
from kinds.bdl2021.reference.tasks import task_by_name  # noqa: E402

CHAINS = 4


def _ess(chains) -> tuple[float, float]:
    """(minimum ESS of the predictive over test points and classes, ESS of the energy)."""
    draws = np.stack([chain.draws for chain in chains])
    energy = np.stack([chain.potentials for chain in chains])
    return float(effective_sample_size(draws).min()), float(effective_sample_size(energy))


def ours(task, prepared):
    return run_task_chains_nuts(task, prepared)


def numpyro_nuts(task, prepared):
    from kinds.bdl2021.reference.crosscheck import numpyro_chains
    return numpyro_chains(task, prepared, range(CHAINS))


def numpy_hmc(task, prepared):
    import concurrent.futures
    import multiprocessing
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=context) as pool:
        return list(pool.map(_numpy_chain, [(task, chain) for chain in range(CHAINS)]))


def _numpy_chain(job):
    task, chain = job
    return run_task_chain(task, prepare(task), chain)


def measure(sampler, task, prepared) -> dict:
    started = time.perf_counter()
    chains = sampler(task, prepared)
    wall = time.perf_counter() - started
    predictive, energy = _ess(chains)
    return {"wall": wall, "predictive": predictive, "energy": energy,
            "steps": float(np.mean([chain.num_steps for chain in chains]))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="breast_cancer,diabetes_gap")
    parser.add_argument("--warmup", type=int, default=None,
                        help="warm-up iterations a chain (default: each task's declared)")
    parser.add_argument("--samples", type=int, default=None,
                        help="kept draws a chain (default: each task's declared)")
    parser.add_argument("--skip-numpy", action="store_true", help="leave the old sampler out")
    args = parser.parse_args(argv)
    samplers = {"ours (BlackJAX NUTS)": ours, "NumPyro NUTS": numpyro_nuts}
    if not args.skip_numpy:
        samplers["numpy HMC (old)"] = numpy_hmc
    print(f"{'task':14s} {'sampler':22s} {'wall s':>7s} {'steps':>6s} {'ESS pred':>9s} "
          f"{'ESS energy':>10s} {'pred/s':>8s} {'energy/s':>8s}")
    for name in args.tasks.split(","):
        task = task_by_name(name)
        task = replace(task, hmc=replace(
            task.hmc, num_chains=CHAINS, num_warmup=args.warmup or task.hmc.num_warmup,
            num_samples=args.samples or task.hmc.num_samples))
        prepared = prepare(task)
        figures = {label: measure(sampler, task, prepared) for label, sampler in samplers.items()}
        for label, f in figures.items():
            print(f"{name:14s} {label:22s} {f['wall']:7.1f} {f['steps']:6.1f} "
                  f"{f['predictive']:9.0f} {f['energy']:10.0f} {f['predictive'] / f['wall']:8.1f} "
                  f"{f['energy'] / f['wall']:8.1f}", flush=True)
        mine = figures["ours (BlackJAX NUTS)"]
        for other in list(figures)[1:]:
            theirs = figures[other]
            print(f"{name:14s} ours / {other}: predictive ESS/s x"
                  f"{(mine['predictive'] / mine['wall']) / (theirs['predictive'] / theirs['wall']):.2f}"
                  f", energy ESS/s x"
                  f"{(mine['energy'] / mine['wall']) / (theirs['energy'] / theirs['wall']):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Reference samplers against NumPyro's NUTS: effective draws per gradient and per second, on the
same posteriors, in one run on this machine.

For each task (breast_cancer and diabetes_gap by default: a classifier and a heteroscedastic
regression, each its declared network), each sampler runs 4 chains from the same prior draws
with the same number of warm-up and kept draws, on the same simulated devices:

- NumPyro NUTS, the baseline (its window adaptation, diagonal mass matrix);
- ours, BlackJAX NUTS (``generate``'s default sampler);
- ours, BlackJAX HMC with a fixed trajectory length (``generate --sampler hmc``: the 2021
  recipe, trajectory pi * sqrt(prior variance) / 2, step size by dual averaging in warm-up);
- BlackJAX's Metropolis-adjusted microcanonical sampler (MAMS, ``adjusted_mclmc_dynamic``,
  tuned by ``adjusted_mclmc_find_L_and_step_size`` over as many warm-up transitions, target
  acceptance 0.9, diagonal preconditioning), benchmark only;
- with ``--numpy-hmc``, our old numpy HMC (the task's declared trajectory, one process a core).

Prints per sampler the effective sample size of the predictive (minimum over test points and
classes) and of the potential energy; per 1000 gradients of the kept draws (what the algorithm
costs, whatever the machine: warm-up excluded, as no sampler reports its own; MAMS's McLachlan
integrator takes 2 gradients a step, leapfrog 1) and per second of wall time (compilation and
warm-up included); then each sampler's ratio to NumPyro's NUTS on both.
Usage: .venv/bin/python benchmarks/reference_sampler.py [--tasks a,b] [--warmup W] [--samples S]
[--numpy-hmc] [--quick]
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
from kinds.bdl2021.reference.fixed_hmc import FixedHMC  # noqa: E402
from kinds.bdl2021.reference.tasks import task_by_name  # noqa: E402

CHAINS = 4
DEFAULT_TASKS = "breast_cancer,diabetes_gap"
DEFAULT_LENGTH = 300          # warm-up and kept draws a chain: the default run takes minutes
QUICK = {"tasks": "iris", "warmup": 60, "samples": 60}
MAMS_TARGET = 0.9             # the acceptance BlackJAX's tuner is documented with
MAMS_TUNING_FRACTIONS = (0.1, 0.1, 0.1)
BASELINE = "NumPyro NUTS"


def _ess(chains) -> tuple[float, float]:
    """(minimum ESS of the predictive over test points and classes, ESS of the energy)."""
    draws = np.stack([chain.draws for chain in chains])
    energy = np.stack([chain.potentials for chain in chains])
    return float(effective_sample_size(draws).min()), float(effective_sample_size(energy))


def ours_nuts(task, prepared):
    return run_task_chains_nuts(task, prepared)


def ours_hmc(task, prepared):
    return run_task_chains_nuts(task, prepared, sampler=FixedHMC())


def numpyro_nuts(task, prepared):
    from kinds.bdl2021.reference.crosscheck import numpyro_chains
    return numpyro_chains(task, prepared, range(CHAINS))


def _mams_chain(log_density, num_warmup: int, num_samples: int):
    """One MAMS chain as a pure function of (key, start), returning what ``nuts._chain``
    returns. The tuner runs about ``num_steps`` x (frac1 + frac2 + 2 frac3) transitions
    (its third stage re-runs the first with L fixed): ``num_steps`` is set so that this is
    ``num_warmup``, the other samplers' warm-up."""
    import blackjax
    import jax
    import jax.numpy as jnp
    from blackjax.mcmc.adjusted_mclmc_dynamic import rescale
    frac1, frac2, frac3 = MAMS_TUNING_FRACTIONS
    tuning_steps = max(1, round(num_warmup / (frac1 + frac2 + 2 * frac3)))

    def steps_fn(average):        # a uniformly random trajectory of the given mean length
        return lambda key: jnp.ceil(jax.random.uniform(key) * rescale(average)).astype(jnp.int32)

    def tuning_kernel(rng_key, state, avg_num_integration_steps, step_size, inverse_mass_matrix):
        return blackjax.adjusted_mclmc_dynamic.build_kernel(
            integration_steps_fn=steps_fn(avg_num_integration_steps),
            inverse_mass_matrix=inverse_mass_matrix)(rng_key, state, log_density, step_size)

    def run(key, position):
        init_key, tune_key, sample_key = jax.random.split(key, 3)
        state = blackjax.adjusted_mclmc_dynamic.init(position, log_density, init_key)
        state, params, _ = blackjax.adjusted_mclmc_find_L_and_step_size(
            tuning_kernel, tuning_steps, state, tune_key, MAMS_TARGET, *MAMS_TUNING_FRACTIONS,
            diagonal_preconditioning=True)
        kernel = blackjax.adjusted_mclmc_dynamic.build_kernel(
            integration_steps_fn=steps_fn(params.L / params.step_size),
            inverse_mass_matrix=params.inverse_mass_matrix)

        def one(state, key):
            state, info = kernel(key, state, log_density, params.step_size)
            return state, (state.position, state.logdensity, info.acceptance_rate,
                           info.num_integration_steps, info.is_divergent)
        _, trace = jax.lax.scan(one, state, jax.random.split(sample_key, num_samples))
        positions, log_densities, acceptance, steps, divergent = trace
        return (positions, log_densities, acceptance.mean(), steps.mean(), divergent.sum(),
                jnp.zeros((), jnp.int32), params.step_size,
                jnp.broadcast_to(params.inverse_mass_matrix, position.shape))
    return run


def mams(task, prepared):
    from kinds.bdl2021.reference import nuts
    model = task_model(task, prepared)
    log_density = jax_model.log_density(model, task.likelihood, task.prior_variance,
                                        prepared.x_train, prepared.y_train)
    starts = np.stack([initial_position(task, model, chain) for chain in range(CHAINS)])
    sampled = nuts.on_devices(_mams_chain(log_density, task.hmc.num_warmup,
                                          task.hmc.num_samples),
                              np.asarray(starts, np.float64), task.seed,
                              nuts.default_devices(CHAINS))
    return [chain_predictions(task, prepared, chain, sampled.positions[chain],
                              -sampled.log_densities[chain],
                              acceptance_rate=float(sampled.acceptance_rates[chain]),
                              step_size=float(sampled.step_sizes[chain]),
                              num_steps=float(sampled.mean_num_steps[chain]),
                              divergences=int(sampled.divergences[chain]), warmup_divergences=0)
            for chain in range(CHAINS)]


def numpy_hmc(task, prepared):
    import concurrent.futures
    import multiprocessing
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=context) as pool:
        return list(pool.map(_numpy_chain, [(task, chain) for chain in range(CHAINS)]))


def _numpy_chain(job):
    task, chain = job
    return run_task_chain(task, prepare(task), chain)


# label: (sampler, gradients per integration step)
SAMPLERS = {BASELINE: (numpyro_nuts, 1), "ours, BlackJAX NUTS": (ours_nuts, 1),
            "ours, fixed HMC": (ours_hmc, 1), "BlackJAX MAMS": (mams, 2)}


def measure(sampler, per_step: int, task, prepared) -> dict:
    started = time.perf_counter()
    chains = sampler(task, prepared)
    wall = time.perf_counter() - started
    predictive, energy = _ess(chains)
    steps = float(np.mean([chain.num_steps for chain in chains]))
    gradients = per_step * sum(chain.num_steps for chain in chains) * task.hmc.num_samples
    return {"wall": wall, "predictive": predictive, "energy": energy, "steps": steps,
            "gradients": gradients,
            "acceptance": float(np.mean([chain.acceptance_rate for chain in chains]))}


def _row(name: str, label: str, f: dict) -> str:
    per_k = 1000 / f["gradients"]
    return (f"{name:13s} {label:20s} {f['wall']:7.1f} {f['steps']:6.1f} {f['acceptance']:5.2f} "
            f"{f['predictive']:8.0f} {f['energy']:8.0f} {f['predictive'] * per_k:9.2f} "
            f"{f['energy'] * per_k:9.2f} {f['predictive'] / f['wall']:8.1f} "
            f"{f['energy'] / f['wall']:8.1f}")


def _ratio(name: str, label: str, mine: dict, theirs: dict) -> str:
    def ratio(key, per):
        return (mine[key] / mine[per]) / (theirs[key] / theirs[per])
    return (f"{name:13s} {label} / {BASELINE}: ESS/s predictive x{ratio('predictive', 'wall'):.2f}"
            f", energy x{ratio('energy', 'wall'):.2f}; ESS/gradient predictive "
            f"x{ratio('predictive', 'gradients'):.2f}, energy x{ratio('energy', 'gradients'):.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=None, help=f"default: {DEFAULT_TASKS}")
    parser.add_argument("--warmup", type=int, default=None,
                        help=f"warm-up iterations a chain (default {DEFAULT_LENGTH}; 0: each "
                             "task's declared)")
    parser.add_argument("--samples", type=int, default=None,
                        help=f"kept draws a chain (default {DEFAULT_LENGTH}; 0: each task's "
                             "declared)")
    parser.add_argument("--numpy-hmc", action="store_true", help="add the old numpy sampler")
    parser.add_argument("--quick", action="store_true",
                        help=f"a smoke run: {QUICK['tasks']}, {QUICK['warmup']} warm-up and "
                             f"{QUICK['samples']} kept draws (figures too short to compare)")
    args = parser.parse_args(argv)
    for key in ("warmup", "samples"):
        if getattr(args, key) is not None and getattr(args, key) < 0:
            parser.error(f"--{key} is {getattr(args, key)}; expected a count (0: declared)")
    defaults = QUICK if args.quick else {"tasks": DEFAULT_TASKS, "warmup": DEFAULT_LENGTH,
                                         "samples": DEFAULT_LENGTH}
    tasks = args.tasks or defaults["tasks"]
    warmup = defaults["warmup"] if args.warmup is None else args.warmup
    samples = defaults["samples"] if args.samples is None else args.samples
    samplers = dict(SAMPLERS)
    if args.numpy_hmc:
        samplers["numpy HMC (old)"] = (numpy_hmc, 1)
    print(f"{'task':13s} {'sampler':20s} {'wall s':>7s} {'steps':>6s} {'acc':>5s} "
          f"{'ESS pred':>8s} {'ESS U':>8s} {'pred/kgr':>9s} {'U/kgr':>9s} {'pred/s':>8s} "
          f"{'U/s':>8s}", flush=True)
    ratios = []
    for name in tasks.split(","):
        task = task_by_name(name)
        task = replace(task, hmc=replace(
            task.hmc, num_chains=CHAINS, num_warmup=warmup or task.hmc.num_warmup,
            num_samples=samples or task.hmc.num_samples))
        prepared = prepare(task)
        figures = {}
        for label, (sampler, per_step) in samplers.items():
            figures[label] = measure(sampler, per_step, task, prepared)
            print(_row(name, label, figures[label]), flush=True)
        ratios += [_ratio(name, label, figures[label], figures[BASELINE])
                   for label in figures if label != BASELINE]
    print(f"\nagainst {BASELINE} in this run (ESS per second includes compilation and "
          "warm-up; per gradient, the kept draws' gradients):")
    print("\n".join(ratios))
    return 0


if __name__ == "__main__":
    sys.exit(main())

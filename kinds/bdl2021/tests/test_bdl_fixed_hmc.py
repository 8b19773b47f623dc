"""``generate --sampler hmc``: BlackJAX's HMC with a fixed trajectory length (the 2021
references' recipe) samples the exact posterior of a conjugate model on one device and on
several, writes references that pass the same convergence gate with the sampler and its
settings stated, refuses bad flags in one line; and the sampler benchmark prints one ratio to
NumPyro's NUTS per sampler.

JAX runs in child processes, as in ``test_bdl_reference_engine.py`` (why: its docstring)."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from test_bdl_reference_engine import run_cli, run_snippets, selected_snippets

REPO = Path(__file__).resolve().parents[3]

CONJUGATE = """
import io
import numpy as np, jax.numpy as jnp
from bundle.progress import Progress
from kinds.bdl2021.reference import fixed_hmc
from test_bdl_reference_engine import conjugate_data
from test_bdl_hmc import posterior_mismatches, NOISE_STD, PRIOR_VARIANCE
x, y, mean, covariance = conjugate_data()
x, y = jnp.asarray(x), jnp.asarray(y)

def log_density(w):
    residual = y - x @ w
    return -(0.5 * residual @ residual / NOISE_STD ** 2 + 0.5 * w @ w / PRIOR_VARIANCE)

starts = np.random.default_rng(1).normal(0, 2, (4, 3))
for step_size in (None, 0.01):          # dual averaging in warm-up; fixed
    # about a quarter period in the posterior's widest direction (sd 0.1), as the paper's rule
    # with the terminal's bar over the transitions (test_bdl_sampling_progress.py), counted
    bar = Progress(2300, "t", "transitions", stream=io.StringIO(), force=True)
    chains = fixed_hmc.sample(log_density, starts, 0, 300, 2000, trajectory_length=0.12,
                              step_size=step_size, devices=DEVICES, progress=bar)
    assert chains.positions.shape == (4, 2000, 3) and (chains.divergences == 0).all()
    if step_size is None:
        assert (abs(chains.acceptance_rates - 0.8) < 0.15).all(), chains.acceptance_rates
    else:
        # 0.12 / 0.01 is 11.999999999999998 in floating point: 12 steps all the same
        assert (chains.step_sizes == 0.01).all() and (chains.mean_num_steps == 12).all()
    print("devices", chains.devices, "step", step_size, "transitions", bar.done, "mismatches",
          posterior_mismatches(chains.positions, mean, covariance))
"""


@pytest.mark.parametrize("devices", [1, 4])
def test_fixed_hmc_matches_the_closed_form_posterior_with_the_chains_split_over_devices(
        fixed_hmc_snippets, devices):
    out = fixed_hmc_snippets[f"conjugate_{devices}"]
    # 300 + 2000 transitions counted once each, whether the 4 chains share a program or not
    assert f"devices {devices} step None transitions 2300.0 mismatches []" in out
    assert f"devices {devices} step 0.01 transitions 2300.0 mismatches []" in out, out[-3000:]


def test_fixed_hmc_writes_references_that_pass_the_gate_and_name_the_sampler(tmp_path):
    result = run_cli("generate", "--sampler", "hmc", "--tasks", "iris", "--out", str(tmp_path),
                     "--warmup", "300", "--samples", "500")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "iris: HMC (trajectory length 0.702, step size by dual averaging)" in result.stderr
    assert "transitions of" not in result.stderr    # the bar is a terminal's only
    assert "iris: convergence gate passed" in result.stdout
    tau = math.pi * math.sqrt(0.2) / 2               # the paper's rule at iris's prior variance
    declared = json.loads((tmp_path / "iris" / "iris_task.json").read_text())["hmc"]
    assert declared["sampler"] == "hmc" and declared["engine"].startswith("BlackJAX HMC")
    assert declared["trajectory_length"] == pytest.approx(tau)
    assert declared["step_size"].startswith("dual averaging") and "max_tree_depth" not in declared
    assert (declared["num_chains"], declared["num_warmup"], declared["num_samples"]) == (4, 300,
                                                                                          500)
    diagnostics = json.loads((tmp_path / "iris" / "iris_hmc_diagnostics.json").read_text())
    assert diagnostics["sampler"]["trajectory_length"] == pytest.approx(tau)
    for chain in diagnostics["chains"]:               # steps = ceil(trajectory / step size)
        assert chain["num_steps"] == math.ceil(round(tau / chain["step_size"], 6))
    log = json.loads((tmp_path / "generation_log.json").read_text())
    assert log["sampler"].startswith("BlackJAX HMC") and log["tasks"]["iris"]["gate_passed"]


@pytest.mark.parametrize("flags, message", [
    (["--trajectory-length", "1"], "--trajectory-length is for --sampler hmc only"),
    (["--trajectory-length", "1", "--step-size", "0.1"],
     "--trajectory-length and --step-size are for --sampler hmc only"),
    (["--sampler", "hmc", "--step-size", "0"], "--step-size is 0.0; expected a positive number"),
    (["--sampler", "hmc", "--trajectory-length", "-2"],
     "--trajectory-length is -2.0; expected a positive number"),
    (["--sampler", "hmc", "--engine", "numpy-hmc"],
     "--sampler hmc runs on the BlackJAX engine (--engine nuts)"),
    (["--sampler", "hmc", "--checkpoint", "CKPT"], "run NUTS only (--engine nuts, --sampler nuts)"),
])
def test_a_bad_sampler_flag_is_refused_in_one_line_naming_it(tmp_path, capsys, flags, message):
    # The command line's entry point in this process: each of these is refused from the
    # flags alone, before anything of JAX is imported (cli._sampler_problem, cli._start), so
    # a child interpreter would only add its start (0.2 s of CPU each). The other tests run
    # `python -m reference_data` itself.
    from reference_data.__main__ import main
    flags = [str(tmp_path / "ckpt") if flag == "CKPT" else flag for flag in flags]
    code = main(["generate", "--tasks", "iris", "--out", str(tmp_path / "refs"), *flags])
    stderr = capsys.readouterr().err
    assert code == 2, stderr[-2000:]
    assert stderr.startswith("error: ") and message in stderr
    assert stderr.strip().count("\n") == 0 and "Traceback" not in stderr
    assert not (tmp_path / "refs").exists()


# The benchmark's table and ratio lines, with stand-in samplers (seconds, not minutes).
STAND_INS = """
import sys, numpy as np
sys.path.insert(0, "benchmarks")
import reference_sampler as bench
from kinds.bdl2021.reference.chains import chain_predictions, initial_position, task_model

def stand_in(steps):
    def sampler(task, prepared):
        model = task_model(task, prepared)
        rng = np.random.default_rng(steps)
        theta = initial_position(task, model, 0)
        return [chain_predictions(task, prepared, k,
                                  theta + 0.01 * rng.standard_normal((task.hmc.num_samples,
                                                                      theta.size)),
                                  rng.standard_normal(task.hmc.num_samples), acceptance_rate=0.8,
                                  step_size=0.1, num_steps=steps, divergences=0,
                                  warmup_divergences=0) for k in range(bench.CHAINS)]
    return sampler

bench.SAMPLERS = {label: (stand_in(5 * (i + 1)), per_step)
                  for i, (label, (_, per_step)) in enumerate(bench.SAMPLERS.items())}
bench.main(["--quick", "--warmup", "5", "--samples", "30"])
"""


def _ratio_lines(out: str) -> dict:
    return {line.split(" / NumPyro NUTS")[0].split(maxsplit=1)[1]: line
            for line in out.splitlines() if " / NumPyro NUTS: ESS/s predictive x" in line}


def test_the_benchmark_prints_one_ratio_line_per_sampler_against_numpyro(fixed_hmc_snippets):
    out = fixed_hmc_snippets["stand_ins"]
    lines = _ratio_lines(out)
    assert sorted(lines) == ["BlackJAX MAMS", "ours, BlackJAX NUTS", "ours, fixed HMC"], out
    assert all("ESS/gradient predictive x" in line and "energy x" in line
               for line in lines.values())
    assert sum(line.startswith("iris ") for line in out.splitlines()) == 4 + 3   # rows, ratios


@pytest.fixture(scope="module")
def fixed_hmc_snippets(request) -> dict[str, str]:
    """What CONJUGATE on 1 and on 4 devices and STAND_INS printed, each run once for the
    selected tests of this file that need it, all in one child interpreter of 4 simulated
    devices (``run_snippets``): its start and JAX's import once, not three times. The
    1-device run takes the first of the 4 (``devices=``), as a process of 1 would: the same
    program on one device; the stand-ins use no device."""
    return run_snippets(selected_snippets(request, {
        "test_fixed_hmc_matches_the_closed_form_posterior_with_the_chains_split_over_devices":
            lambda params: {f"conjugate_{params['devices']}":
                            f"DEVICES = {params['devices']}\n{CONJUGATE}"},
        "test_the_benchmark_prints_one_ratio_line_per_sampler_against_numpyro":
            lambda params: {"stand_ins": STAND_INS}}), 4)


@pytest.mark.slow
@pytest.mark.extended
def test_the_benchmarks_quick_run_compares_every_sampler_with_numpyro():
    result = subprocess.run([sys.executable, "benchmarks/reference_sampler.py", "--quick"],
                            cwd=REPO, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = _ratio_lines(result.stdout)
    assert sorted(lines) == ["BlackJAX MAMS", "ours, BlackJAX NUTS", "ours, fixed HMC"]

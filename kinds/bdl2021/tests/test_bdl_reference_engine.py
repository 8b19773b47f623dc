"""The reference engine on BlackJAX: the JAX model is the shipped numpy model, NUTS samples the
exact posterior of a conjugate model on one device and on several, with the chains or the data
split across them, the convergence gate looks at the potential energy and stops the command
with the figures, and an organizer's own task folder gets its references.

Every JAX computation runs in a child process: JAX starts threads, and the ingestion tests
fork this process later (a fork of a multithreaded process can deadlock)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kinds.bdl2021.runtime.formats import (TaskInputs, read_chain_probs,
                                           read_classification_probs, read_task_inputs,
                                           write_task_inputs)
from test_bdl_hmc import NOISE_STD, PRIOR_VARIANCE, linear_regression_problem

REPO = Path(__file__).resolve().parents[3]


def run_python(code: str, devices: int = 8) -> str:
    """``code`` in a fresh interpreter with ``devices`` simulated host devices; its stdout.
    To read what a program that ran compiled to, lower the same jitted function again for
    arguments of the same types (DATA_SPLIT, test_bdl_distributed.py's CHAIN_GROUPS): JAX's
    caches in that process hold its trace and executable, so nothing compiles twice."""
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
           "PYTHONPATH": f"{REPO}:{REPO / 'tests'}:{Path(__file__).resolve().parent}"}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


SNIPPETS_DRIVER = """
import contextlib, io, json, traceback
printed = {}
for name, code in SNIPPETS.items():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            exec(compile(code, f"<snippet {name}>", "exec"), {"__name__": "__snippet__"})
        except BaseException:
            traceback.print_exc(file=out)
    printed[name] = out.getvalue()
print(json.dumps(printed))
"""


def run_snippets(snippets: dict[str, str], devices: int) -> dict[str, str]:
    """Each of ``snippets`` ({name: code}) in turn, in a namespace of its own, in one fresh
    interpreter with ``devices`` simulated host devices: {name: what it printed, or its
    traceback where it raised}. One interpreter for several: its start and the imports of
    JAX and BlackJAX (a second of CPU) are paid once."""
    if not snippets:
        return {}
    return json.loads(run_python(f"SNIPPETS = {snippets!r}\n{SNIPPETS_DRIVER}",
                                 devices).splitlines()[-1])


def selected_snippets(request, snippets_of_test: dict) -> dict[str, str]:
    """The snippets that the selected tests of the requesting module need:
    ``snippets_of_test`` maps a test function's name to a function of its parameters giving
    {snippet name: code}. A test selected alone (``-k``) runs its own snippets only."""
    wanted = {}
    for item in request.session.items:
        if getattr(item, "module", None) is request.module and \
                item.originalname in snippets_of_test:
            params = item.callspec.params if hasattr(item, "callspec") else {}
            wanted.update(snippets_of_test[item.originalname](params))
    return wanted


SAME_MODEL = """
import numpy as np, jax, jax.numpy as jnp
from kinds.bdl2021.reference import jax_model
from kinds.bdl2021.reference.sharded import pad_rows
from kinds.bdl2021.runtime.declared_model import (MLP, Posterior, predictive_mean_and_scale,
                                                  predictive_probabilities)
rng = np.random.default_rng(4)
for likelihood, outputs in (("softmax", 3), ("gaussian", 2)):
    model = MLP((5, 7, 6, outputs))
    x = rng.standard_normal((40, 5))
    y = rng.integers(0, 3, 40) if likelihood == "softmax" else rng.standard_normal(40)
    posterior = Posterior(model, likelihood, 0.3, x, y)
    # jitted, as the samplers run them: one compilation each, where op by op every operation
    # of each shape compiled on its own (3.2 s of CPU against 1.4)
    log_density = jax.jit(jax_model.log_density(model, likelihood, 0.3, x, y))
    gradient = jax.jit(jax.grad(jax_model.log_density(model, likelihood, 0.3, x, y)))
    of_data = jax.jit(jax_model.log_density_of_data(model, likelihood, 0.3))
    probabilities = jax.jit(lambda theta: jax_model.predictive_probabilities(model, theta, x))
    mean_and_scale = jax.jit(lambda theta: jax_model.predictive_mean_and_scale(model, theta, x))
    padded = [jnp.asarray(a) for a in pad_rows(x, y, 3)]       # 40 rows -> 42, two of weight 0
    for _ in range(3):
        theta = rng.normal(0, 0.8, model.num_parameters)
        potential, grad = posterior.potential_and_grad(theta)
        np.testing.assert_allclose(-float(log_density(jnp.asarray(theta))), potential, rtol=1e-12)
        np.testing.assert_allclose(-float(of_data(jnp.asarray(theta), *padded)), potential,
                                   rtol=1e-12)
        np.testing.assert_allclose(-np.asarray(gradient(jnp.asarray(theta))), grad,
                                   rtol=1e-10, atol=1e-10)
        if likelihood == "softmax":
            np.testing.assert_allclose(np.asarray(probabilities(jnp.asarray(theta))),
                                       predictive_probabilities(model, theta, x), rtol=1e-12)
        else:
            for ours, theirs in zip(mean_and_scale(jnp.asarray(theta)),
                                    predictive_mean_and_scale(model, theta, x)):
                np.testing.assert_allclose(np.asarray(ours), theirs, rtol=1e-12)
print("same model")
"""


def test_the_jax_model_gives_the_numpy_models_potential_gradient_and_predictions(
        engine_snippets):
    """Softmax and Gaussian likelihoods; the data-split form with padding rows too."""
    out = engine_snippets["same_model"]
    assert "same model" in out, out[-3000:]


def conjugate_data():
    _, mean, covariance = linear_regression_problem()
    rng = np.random.default_rng(0)     # the same draws as linear_regression_problem's
    x = rng.standard_normal((40, 3))
    y = x @ np.array([1.0, -0.5, 0.25]) + NOISE_STD * rng.standard_normal(40)
    return x, y, mean, covariance


CHAINS_SPLIT = """
import io
import numpy as np, jax.numpy as jnp
from bundle.progress import Progress
from kinds.bdl2021.reference import nuts
from test_bdl_reference_engine import conjugate_data
from test_bdl_hmc import posterior_mismatches, NOISE_STD, PRIOR_VARIANCE
x, y, mean, covariance = conjugate_data()
x, y = jnp.asarray(x), jnp.asarray(y)

def log_density(w):
    residual = y - x @ w
    return -(0.5 * residual @ residual / NOISE_STD ** 2 + 0.5 * w @ w / PRIOR_VARIANCE)

# with the terminal's bar over the transitions (test_bdl_sampling_progress.py), counted here
bar = Progress(2500, "t", "transitions", stream=io.StringIO(), force=True)
chains = nuts.sample(log_density, np.random.default_rng(1).normal(0, 2, (4, 3)), 0, 500, 2000,
                     devices=DEVICES, progress=bar)
assert chains.positions.shape == (4, 2000, 3) and (chains.divergences == 0).all()
assert (abs(chains.acceptance_rates - 0.8) < 0.15).all()
np.testing.assert_allclose(chains.log_densities[0, :5],
                           [float(log_density(jnp.asarray(p))) for p in chains.positions[0, :5]])
print("devices", chains.devices, "transitions", bar.done, "mismatches",
      posterior_mismatches(chains.positions, mean, covariance))
"""


@pytest.mark.parametrize("devices", [1, 4])
def test_nuts_matches_the_closed_form_posterior_with_the_chains_split_over_devices(
        engine_snippets, devices):
    """On 1 device the 4 chains are one vectorised program; on 4, one program each: either
    way the bar counts each of the 500 + 2000 transitions once."""
    out = engine_snippets[f"chains_split_{devices}"]
    assert f"devices {devices} transitions 2500.0 mismatches []" in out, out[-3000:]


def conjugate_log_density_of_data(w, x, y, weights):
    """The conjugate posterior's log density with the rows as arguments (rows of weight 0
    add nothing), for the data-split layouts; JAX is imported in the child that calls it."""
    import jax.numpy as jnp
    residual = y - x @ w
    return -(0.5 * jnp.sum(weights * residual ** 2) / NOISE_STD ** 2
             + 0.5 * w @ w / PRIOR_VARIANCE)


DATA_SPLIT = """
import numpy as np, jax, jax.numpy as jnp
from kinds.bdl2021.reference import sharded
from test_bdl_reference_engine import conjugate_data, conjugate_log_density_of_data as log_density
from test_bdl_hmc import posterior_mismatches
x, y, mean, covariance = conjugate_data()

# the jitted program that sharded.sample makes and runs, kept to read what it compiled to
programs, program = [], sharded.program

def kept(*args, **kwargs):
    programs.append(program(*args, **kwargs))
    return programs[-1]

sharded.program = kept
try:
    chains = sharded.sample(log_density, x, y, np.random.default_rng(1).normal(0, 2, (4, 3)),
                            0, 500, 2000, devices=3)
finally:
    sharded.program = program
placed = sharded.place(*sharded.pad_rows(x, y, 3), 3)
# the program that sampled above, lowered again for arguments of the same types and layout:
# JAX's caches hold its trace and executable, so nothing is compiled a second time
compiled = programs[0].lower(
    jax.random.split(jax.random.PRNGKey(0), 4), jnp.zeros((4, 3)), *placed).compile().as_text()
print("devices", chains.devices, "rows per device", placed[0].addressable_shards[0].data.shape[0],
      "all-reduce", "all-reduce" in compiled,
      "mismatches", posterior_mismatches(chains.positions, mean, covariance))
"""


def test_rows_split_over_devices_sample_the_same_posterior_with_an_all_reduce(engine_snippets):
    # 40 rows padded to 42: 14 a device; the gradient's sum crosses devices
    out = engine_snippets["data_split"]
    assert "devices 3 rows per device 14 all-reduce True mismatches []" in out, out[-3000:]


@pytest.fixture(scope="module")
def engine_snippets(request) -> dict[str, str]:
    """What SAME_MODEL, CHAINS_SPLIT on 1 and on 4 devices and DATA_SPLIT printed, each run
    once for the selected tests of this file that need it, all in one child interpreter of 4
    simulated devices (``run_snippets``): its start and JAX's import once, not four times
    (3 s of CPU). The 1- and 3-device runs take the first of the 4 (``devices=``), as in a
    process of 1 or 3: the same programs on the same number of devices."""
    return run_snippets(selected_snippets(request, {
        "test_the_jax_model_gives_the_numpy_models_potential_gradient_and_predictions":
            lambda params: {"same_model": SAME_MODEL},
        "test_nuts_matches_the_closed_form_posterior_with_the_chains_split_over_devices":
            lambda params: {f"chains_split_{params['devices']}":
                            f"DEVICES = {params['devices']}\n{CHAINS_SPLIT}"},
        "test_rows_split_over_devices_sample_the_same_posterior_with_an_all_reduce":
            lambda params: {"data_split": DATA_SPLIT}}), 4)


def run_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "reference_data", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)


def run_cli_on_a_terminal(*args, env=None) -> tuple[int, str, str]:
    """(exit code, stdout, what a terminal on stderr showed, as text)."""
    import pty
    leader, follower = pty.openpty()
    try:
        result = subprocess.run([sys.executable, "-m", "reference_data", *args], cwd=REPO,
                                env=env, stdout=subprocess.PIPE, stderr=follower, text=True,
                                timeout=900)
        os.close(follower)
        shown = b""
        while chunk := _read_terminal(leader):
            shown += chunk
    finally:
        os.close(leader)
    return result.returncode, result.stdout, shown.decode(errors="replace")


def _read_terminal(leader: int) -> bytes:
    try:
        return os.read(leader, 65536)
    except OSError:         # the other end is closed and all it wrote is read
        return b""


@pytest.mark.slow
def test_short_chains_fail_the_energy_gate_with_the_figures(tmp_path):
    result = run_cli("generate", "--tasks", "iris", "--out", str(tmp_path / "refs"),
                     "--warmup", "100", "--samples", "40")
    assert result.returncode == 1
    assert "the convergence gate is not met" in result.stderr
    assert "iris: bulk ESS of the potential energy is" in result.stderr and "< 400" in result.stderr
    energy = json.loads((tmp_path / "refs.failed" / "iris" / "iris_hmc_diagnostics.json")
                        .read_text())["energy"]
    assert not energy["passed"] and energy["ess"] < energy["ess_minimum"] == 400


def organizer_task(root: Path, model_type="mlp") -> Path:
    """A small three-class task in the documented format, made here."""
    rng = np.random.default_rng(7)
    centres = np.array([[0.0, 2.0], [2.0, -1.0], [-2.0, -1.0]])
    labels = rng.integers(0, 3, 90)
    points = centres[labels] + rng.standard_normal((90, 2))
    folder = root / "blobs"
    folder.mkdir(parents=True)
    write_task_inputs(folder / "blobs.npz", TaskInputs(points[:60], labels[:60], points[60:],
                                                       labels[60:]))
    declaration = {"name": "blobs", "phase": "evaluation", "kind": "classification",
                   "num_classes": 3, "n_train": 60, "n_test": 30, "input_shape": [2],
                   "test_blocks": [{"name": "all", "start": 0, "stop": 30}],
                   "model": {"type": model_type, "activation": "tanh", "layer_sizes": [2, 8, 3]},
                   "likelihood": {"name": "softmax"},
                   "prior": {"distribution": "normal", "variance": 1.0},
                   "hmc": {"num_chains": 4, "num_warmup": 400, "num_samples": 600},
                   "summary": "three Gaussian blobs"}
    (folder / "blobs_task.json").write_text(json.dumps(declaration))
    return folder


@pytest.mark.slow
def test_generate_writes_an_organizers_references_next_to_their_inputs(tmp_path, capsys):
    from kinds.bdl2021.reference.cli import main
    folder = organizer_task(tmp_path)
    result = run_cli("generate", "--data-root", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "blobs: NUTS, 4 chains x (400 warm-up + 600 kept draws)" in result.stderr
    bma = read_classification_probs(folder / "blobs_probs.csv")
    chains = read_chain_probs(folder / "blobs_chain_probs.npy")
    assert bma.shape == (30, 3) and chains.shape == (4, 30, 3)
    np.testing.assert_allclose(chains.mean(axis=0), bma, atol=1e-6)
    diagnostics = json.loads((folder / "blobs_hmc_diagnostics.json").read_text())
    assert diagnostics["energy"]["passed"] and diagnostics["rhat"]["passed"]
    assert diagnostics["test_blocks"]["all"]["accuracy"] > 0.7
    summary = next(line for line in result.stdout.splitlines() if line.startswith("blobs:"))
    assert "convergence gate passed" in summary and "R-hat" in summary and "ESS" in summary
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blobs"]     # nothing staged is left
    # the organizer's own data root; verify imports nothing of JAX, so it runs in this process
    code, verified = main(["verify", "--root", str(tmp_path)]), capsys.readouterr()
    assert code == 0, verified.out + verified.err
    assert "problem" not in verified.err and "1 task(s) verified" in verified.out


@pytest.mark.parametrize("model_type, message", [
    ("alexnet", "model.type is 'alexnet'; expected one of mlp, sequential, resnet20_frn"),
    # a convolutional network needs images: the declaration does not say their shape
    ("cifar_alexnet", "model.input_shape is None; expected one example's shape")])
def test_generate_refuses_a_network_it_cannot_build_with_the_key_named(tmp_path, capsys,
                                                                        model_type, message):
    # the command line's entry point in this process, as generate_errors below: the task is
    # refused as it is loaded, before anything of JAX is imported (a child interpreter would
    # only add its start, half a second of CPU)
    from reference_data.__main__ import main
    organizer_task(tmp_path, model_type=model_type)
    code = main(["generate", "--data-root", str(tmp_path)])
    stderr = capsys.readouterr().err
    assert code == 2
    assert f"blobs_task.json: {message}" in stderr
    assert "Traceback" not in stderr


def short_chain_references(root: Path):
    """The organizer task's references from one chain of ten kept draws: too few for the
    energy's ESS minimum whatever the draws (the numpy engine, in this process)."""
    from dataclasses import replace

    from kinds.bdl2021.reference.chains import run_task_chain
    from kinds.bdl2021.reference.organizer import load_task
    from kinds.bdl2021.reference.references import build_references
    task, prepared = load_task(root, "blobs", {"num_chains": 1, "num_warmup": 10,
                                               "num_samples": 10})
    task = replace(task, hmc=replace(task.hmc, trajectory_length=1.0))
    return task, build_references(task, prepared, [run_task_chain(task, prepared, 0)])


def test_a_failed_gate_leaves_an_organizers_references_as_they_were(tmp_path):
    from kinds.bdl2021.reference.generate import write_organizer_references
    folder = organizer_task(tmp_path)
    previous = {"blobs_probs.csv": b"previous model average\n",
                "blobs_hmc_diagnostics.json": b"{}\n"}
    for name, content in previous.items():
        (folder / name).write_bytes(content)
    task, references = short_chain_references(tmp_path)
    problems, kept = write_organizer_references(tmp_path, task, references)
    assert problems and any("blobs: bulk ESS of the potential energy is" in p for p in problems)
    assert {name: (folder / name).read_bytes() for name in previous} == previous
    assert not (folder / "blobs_chain_probs.npy").exists()
    assert kept == tmp_path / "blobs.failed"
    assert json.loads((kept / "blobs_hmc_diagnostics.json").read_text())["energy"]["passed"] \
        is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blobs", "blobs.failed"]


def generate_errors(root: Path, capsys) -> str:
    """What generate --data-root says about the task before any sampling (in this process:
    nothing of JAX is imported before the task is loaded)."""
    from kinds.bdl2021.reference.cli import main
    assert main(["generate", "--data-root", str(root)]) == 2
    return " ".join(capsys.readouterr().err.split())


def test_one_based_labels_are_named_as_such_with_the_file_and_values(tmp_path, capsys):
    folder = organizer_task(tmp_path)
    inputs = read_task_inputs(folder / "blobs.npz")
    write_task_inputs(folder / "blobs.npz", inputs._replace(y_train=inputs.y_train + 1,
                                                            y_test=inputs.y_test + 1))
    error = generate_errors(tmp_path, capsys)
    assert f"{folder / 'blobs.npz'}: y_train holds the labels 1, 2, 3" in error
    assert "labels must be the integers 0..2" in error and "1-based" in error
    assert "model.layer_sizes is" not in error


def test_a_gaussian_likelihood_on_a_classification_task_is_named_as_such(tmp_path, capsys):
    folder = organizer_task(tmp_path)
    path = folder / "blobs_task.json"
    declaration = json.loads(path.read_text())
    declaration["likelihood"] = {"name": "gaussian"}
    path.write_text(json.dumps(declaration))
    error = generate_errors(tmp_path, capsys)
    assert f"{path}: likelihood.name 'gaussian' needs a regression task" in error
    assert "kind is 'classification'" in error and "model.layer_sizes is" not in error


def test_verify_accepts_an_organizers_own_data_root(tmp_path, capsys):
    """The embedded iris task laid out as an organizer's own data (docs/organizer_data.md):
    true labels in the npz, the declaration's documented keys, no manifest."""
    from kinds.bdl2021.reference.cli import main
    from kinds.bdl2021.reference.task_files import DEFAULT_ROOT
    from kinds.bdl2021.reference.verify import verify
    folder = tmp_path / "iris"
    folder.mkdir()
    for name in ("iris_probs.csv", "iris_chain_probs.npy", "iris_hmc_diagnostics.json",
                 "iris_test_labels.csv"):
        (folder / name).write_bytes((DEFAULT_ROOT / "iris" / name).read_bytes())
    inputs = read_task_inputs(DEFAULT_ROOT / "iris" / "iris.npz")
    labels = np.loadtxt(DEFAULT_ROOT / "iris" / "iris_test_labels.csv").astype(np.int64)
    write_task_inputs(folder / "iris.npz", inputs._replace(y_test=labels))
    full = json.loads((DEFAULT_ROOT / "iris" / "iris_task.json").read_text())
    documented = ("name", "phase", "kind", "num_classes", "n_train", "n_test", "input_shape",
                  "test_blocks", "likelihood", "prior", "summary")
    declaration = {key: full[key] for key in documented}
    declaration["model"] = {key: full["model"][key] for key in ("type", "activation",
                                                                "layer_sizes")}
    (folder / "iris_task.json").write_text(json.dumps(declaration))
    tasks, problems = verify(tmp_path)
    assert problems == [] and [task.declaration["name"] for task in tasks] == ["iris"]
    code, printed = main(["verify", "--root", str(tmp_path)]), capsys.readouterr()
    assert code == 0 and printed.err == "", printed.err
    assert f"1 task(s) verified in {tmp_path}: ok" in printed.out


def _reference_blocks(name: str, kind: str) -> np.ndarray:
    """The committed reference as its 40 independent blocks: batch means of the class
    probabilities, or each batch's mean draw of y."""
    from kinds.bdl2021.reference.task_files import DEFAULT_ROOT, task_files
    from kinds.bdl2021.runtime.exact_posterior import regression_blocks
    from kinds.bdl2021.runtime.formats import read_batch_means, read_chain_samples
    files = task_files(DEFAULT_ROOT, name, kind)
    if kind == "classification":
        batches = read_batch_means(files.batch_means).astype(float)
        return batches.reshape(-1, *batches.shape[2:])
    return np.stack([block.mean(axis=1) for block in
                     regression_blocks(read_chain_samples(files.chain_reference))])


def test_the_committed_nuts_references_agree_with_an_independent_sampler():
    """The embedded references were made with BlackJAX's NUTS; what another sampler gave for
    the same tasks is kept (numpy_hmc_crosscheck/): NumPyro's NUTS, 8 chains of twice the
    task's length from other starts and another random stream, where it was run
    (benchmarks/exact_posterior_expectation.py --save-crosscheck), else our numpy HMC (the MLP
    tasks, 4 chains) or 2 NumPyro chains (digits_cnn). The averages differ by their Monte
    Carlo errors alone (``agreement_p_value`` > 0.01, the errors' correlations kept); against
    an 8-chain NumPyro run the test has the power to see a systematic error twice the
    reference's own Monte Carlo error (each quantity moved by 2 MCSE, random signs: p < 0.01)."""
    from kinds.bdl2021.reference.crosscheck import CROSSCHECK_ROOT, agreement_p_value
    from kinds.bdl2021.reference.task_files import DEFAULT_ROOT, task_files
    from kinds.bdl2021.runtime.formats import read_reference_mcse
    names = sorted(path.stem for path in CROSSCHECK_ROOT.glob("*.npz"))
    assert names == ["breast_cancer", "diabetes_gap", "digits", "digits_cnn", "digits_shift",
                     "iris", "wine"]
    rng = np.random.default_rng(0)
    for name in names:
        with np.load(CROSSCHECK_ROOT / f"{name}.npz") as stored:
            other, kind = stored["chains"], str(stored["kind"])
            engine = str(stored["engine"]) if "engine" in stored else "numpy HMC"
        if kind != "classification":
            other = other[..., 0]                    # (K, N, 2) summaries: the means of y
        declaration = json.loads((DEFAULT_ROOT / name / f"{name}_task.json").read_text())
        assert declaration["hmc"]["engine"].startswith("BlackJAX NUTS"), name
        blocks = _reference_blocks(name, kind)
        ratio, p_value = agreement_p_value(blocks, other)
        assert p_value > 0.01, (name, engine, ratio, p_value)
        if engine.startswith("NumPyro NUTS, 8 chains"):
            mcse = read_reference_mcse(task_files(DEFAULT_ROOT, name, kind).reference_mcse)
            if kind != "classification":
                mcse = mcse[:, 0]
            shifted = blocks + 2 * mcse * rng.choice([-1.0, 1.0], size=mcse.shape)
            assert agreement_p_value(shifted, other)[1] < 0.01, name


@pytest.mark.slow
def test_generate_with_the_data_split_writes_references_that_pass_the_gate(tmp_path):
    """On 3 simulated devices: iris's 100 training rows are padded to 102, 34 a device, as on
    the default 8 (104, 13 a device); 8 devices sum each gradient over 8 parts on 2 cores,
    61 s against 27 s here, for a split no different in kind.

    On a terminal, so that it also shows the bar over the transitions that the partitioned
    program reports once each (test_bdl_sampling_progress.py has the other layouts); the
    references made with the report compiled in pass the gate all the same."""
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=3"}
    code, out, shown = run_cli_on_a_terminal(
        "generate", "--tasks", "iris", "--out", str(tmp_path), "--shard-data", "--warmup", "300",
        "--samples", "500", env=env)
    assert code == 0, shown[-3000:]
    assert "iris: NUTS, 4 chains x (300 warm-up + 500 kept draws)" in shown
    assert "iris sampling: 800 transitions of 800 transitions [####################] 100%" \
        in shown and ("transitions/s" in shown or " s each" in shown) and "ETA" in shown
    assert "iris chain 3 done" in shown and "iris: convergence gate passed" in out
    assert json.loads((tmp_path / "iris" / "iris_hmc_diagnostics.json").read_text())[
        "energy"]["passed"]

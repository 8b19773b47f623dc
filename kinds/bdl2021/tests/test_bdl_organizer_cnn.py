"""An organizer's own convolutional task gets its HMC references through
``python -m reference_data generate --data-root`` (issue 48, item 1), and a network type that
cannot be built is refused in one line naming the task, the type and what is supported.

The chains here are short (2 chains of 30 + 30 draws, so the run takes seconds): too short
for the gate's ESS bar of 400, so the command must report the gate's verdict, keep the
references and diagnostics in ``<task>.failed/`` and exit 1, as docs/references.md says. The
build then takes those references when the spec accepts unconverged ones."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from kinds.bdl2021.runtime.networks import ARCHITECTURES

REPO = Path(__file__).resolve().parents[3]
EMBEDDED = REPO / "kinds" / "bdl2021" / "reference" / "embedded" / "digits_cnn"
TASK, N_TRAIN, N_TEST, CLASSES = "tiny_cnn", 120, 40, 10
# digits_cnn's network with 6 channels instead of 8: 1,030 parameters
CNN = {"type": "sequential", "input_shape": [8, 8, 1], "outputs": CLASSES, "layers": [
    {"type": "conv", "channels": 6, "kernel": 3, "stride": 2, "padding": "same"},
    {"type": "activation", "name": "swish"}, {"type": "flatten"}, {"type": "dense", "units": 10}]}
SHORT_CHAINS = ("--chains", "2", "--warmup", "30", "--samples", "30")
REFERENCE_FILES = ("probs.csv", "chain_probs.npy", "batch_means.npy", "reference_mcse.npy",
                   "exact_posterior_expectation.json", "hmc_diagnostics.json")


def write_task(root: Path, model: dict) -> Path:
    """A few rows of the embedded digits_cnn images, with their true test labels, in the
    organizer's format (docs/organizer_data.md)."""
    folder = root / TASK
    folder.mkdir(parents=True)
    arrays = np.load(EMBEDDED / "digits_cnn.npz")
    labels = np.loadtxt(EMBEDDED / "digits_cnn_test_labels.csv").astype(np.int64)
    np.savez(folder / f"{TASK}.npz", x_train=arrays["x_train"][:N_TRAIN],
             y_train=arrays["y_train"][:N_TRAIN], x_test=arrays["x_test"][:N_TEST],
             y_test=labels[:N_TEST])
    declaration = {"name": TASK, "phase": "development", "kind": "classification",
                   "num_classes": CLASSES, "n_train": N_TRAIN, "n_test": N_TEST,
                   "input_shape": [8, 8, 1],
                   "test_blocks": [{"name": "clean", "start": 0, "stop": N_TEST}],
                   "model": model, "likelihood": {"name": "softmax"},
                   "prior": {"distribution": "normal", "variance": 0.2}, "seed": 3,
                   "summary": "digits as 8x8 images under a small declared CNN"}
    (folder / f"{TASK}_task.json").write_text(json.dumps(declaration))
    return folder


def generate(data: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reference_data", "generate", "--data-root",
                           str(data), *extra], cwd=REPO, capture_output=True, text=True,
                          timeout=900)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    data = tmp_path_factory.mktemp("organizer") / "data"
    folder = write_task(data, CNN)
    inputs = sorted(path.name for path in folder.iterdir())
    return data, inputs, generate(data, *SHORT_CHAINS)


@pytest.mark.slow
def test_a_cnn_task_runs_its_chains_and_reports_the_gate(short_run):
    data, inputs, result = short_run
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"{TASK}: NUTS, 2 chains x (30 warm-up + 30 kept draws)" in result.stderr
    verdict = next(line for line in result.stdout.splitlines() if line.startswith(f"{TASK}:"))
    assert "convergence gate FAILED" in verdict and "bulk ESS of the potential energy" in verdict
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    assert "the convergence gate is not met" in result.stderr
    assert f"{TASK} ran 2 chain(s) x (30 warm-up + 30 kept draws)" in result.stderr
    failed = data / f"{TASK}.failed"
    assert str(failed) in result.stderr
    # the inputs are left as they were; this run's files wait in <task>.failed/
    assert sorted(path.name for path in (data / TASK).iterdir()) == inputs
    assert sorted(path.name for path in data.iterdir()) == [TASK, f"{TASK}.failed"]
    assert sorted(path.name for path in failed.iterdir()) == sorted(
        f"{TASK}_{name}" for name in REFERENCE_FILES)
    chains = np.load(failed / f"{TASK}_chain_probs.npy")
    assert chains.shape == (2, N_TEST, CLASSES)
    np.testing.assert_allclose(chains.sum(axis=-1), 1.0, atol=1e-6)
    diagnostics = json.loads((failed / f"{TASK}_hmc_diagnostics.json").read_text())
    standard = diagnostics["reference_standard"]
    assert standard["energy_ess_bulk"] < standard["ess_minimum"] == 400


@pytest.mark.slow
def test_the_build_takes_the_cnn_references_next_to_the_inputs(short_run, tmp_path):
    """The references moved next to the inputs (as a passing gate does) build and dry-run,
    once the spec accepts that they did not converge."""
    data, _, _ = short_run
    copy = tmp_path / "data"
    shutil.copytree(data / TASK, copy / TASK)
    for path in (data / f"{TASK}.failed").iterdir():
        shutil.copyfile(path, copy / TASK / path.name)
    default_spec = REPO / "kinds" / "bdl2021" / "default_spec.yaml"
    spec = yaml.safe_load(default_spec.read_text())
    shutil.copyfile(default_spec.parent / spec["logo"], tmp_path / spec["logo"])
    spec.update(slug="bdl-organizer-cnn", data_root=str(copy), tracks={},
                tasks={TASK: {"budget_seconds": 10, "accept_unconverged_references": True}},
                phases={"development": {**spec["phases"]["development"], "tasks": [TASK]}})
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    build = subprocess.run([sys.executable, str(REPO / "build_bundle.py"), "--config",
                            str(tmp_path / "spec.yaml"), "--phase", "all", "--out",
                            str(tmp_path / "dist"), "--check"], cwd=REPO, capture_output=True,
                           text=True, timeout=900)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    assert "dry run passed" in build.stdout and f"{TASK}_agreement=" in build.stdout


def test_a_network_type_that_cannot_be_built_is_refused_in_one_line(tmp_path, capsys):
    # the command line's entry point in this process: the task is refused as it is loaded,
    # before anything of JAX is imported (a child interpreter would only add its start)
    from reference_data.__main__ import main
    folder = write_task(tmp_path, {**CNN, "type": "vision_transformer"})
    code = main(["generate", "--data-root", str(tmp_path), *SHORT_CHAINS])
    stderr = capsys.readouterr().err
    assert code == 2 and "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"error: {folder / f'{TASK}_task.json'}: model.type is "
                               "'vision_transformer'; expected one of ")
    assert all(name in lines[0] for name in ARCHITECTURES)
    assert sorted(path.name for path in tmp_path.iterdir()) == [TASK]

"""A BDL task at the 2021 competition's shape (issue 30): an organizer's CIFAR-shaped task
declaring ResNet-20-FRN with swish, in their files, builds on both platforms and passes the
dry run; the kit carries the declared network in numpy, JAX and PyTorch; a code phase times
its budget in epochs on the declared network."""
import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow
N_TRAIN, BLOCK = 24, 6
BLOCKS = ("clean", "gaussian_noise_2", "brightness_3", "pixelate_4", "zoom_blur_5")
MODEL = {"type": "resnet20_frn", "activation": "swish", "input_shape": [32, 32, 3],
         "outputs": 10}


def write_cifar_task(root: Path, rng, model=MODEL) -> Path:
    """CIFAR-10's layout: float32 images, a test set of a clean block and four corrupted
    ones, the HMC model average and each chain's predictive (stand-ins: this test is about
    the shapes, not the values)."""
    folder = root / "cifar"
    folder.mkdir(parents=True)
    n_test = BLOCK * len(BLOCKS)
    labels = rng.integers(0, 10, N_TRAIN + n_test)
    images = rng.normal(size=(N_TRAIN + n_test, 32, 32, 3)).astype(np.float32)
    np.savez(folder / "cifar.npz", x_train=images[:N_TRAIN], y_train=labels[:N_TRAIN],
             x_test=images[N_TRAIN:], y_test=np.zeros(n_test, dtype=labels.dtype))
    declaration = {"name": "cifar", "phase": "evaluation", "kind": "classification",
                   "num_classes": 10, "n_train": N_TRAIN, "n_test": n_test,
                   "test_blocks": [{"name": name, "start": b * BLOCK, "stop": (b + 1) * BLOCK}
                                   for b, name in enumerate(BLOCKS)],
                   "model": model, "likelihood": {"name": "softmax"},
                   "prior": {"distribution": "normal", "variance": 0.05},
                   "summary": "CIFAR-10 and CIFAR-10-C under ResNet-20-FRN (shape rehearsal)"}
    (folder / "cifar_task.json").write_text(json.dumps(declaration))
    chains = rng.dirichlet(np.ones(10), size=(4, n_test))
    np.savetxt(folder / "cifar_probs.csv", chains.mean(axis=0))
    np.save(folder / "cifar_chain_probs.npy", chains)
    np.savetxt(folder / "cifar_test_labels.csv", labels[N_TRAIN:].reshape(-1, 1))
    return folder


def spec_file(tmp_path: Path, phase: dict) -> Path:
    default_spec = REPO / "kinds" / "bdl2021" / "default_spec.yaml"
    spec = yaml.safe_load(default_spec.read_text())
    shutil.copyfile(default_spec.parent / spec["logo"], tmp_path / spec["logo"])
    spec.update(slug="bdl-cifar-shape", tasks={"cifar": phase.pop("task")},
                phases={"evaluation": {"label": "Evaluation", "start": "2027-04-01 00:00:00",
                                       "tasks": ["cifar"], **phase}}, tracks={})
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def build(spec: Path, data: Path, out: Path, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "build_bundle.py"), "--config", str(spec),
                           "--data-root", str(data), "--phase", "evaluation", "--out", str(out),
                           "--check", *map(str, extra)], cwd=REPO, capture_output=True,
                          text=True, timeout=900)


UNIFORM = """import numpy as np


def predict(task, x_train, y_train, x_test, checkpoint):
    return np.full((task.n_test, task.num_classes), 1.0 / task.num_classes)
"""


def uniform_code_zip(path: Path) -> Path:
    """Code that returns at once: the kit's sample (SGLD in numpy) cannot train a ResNet in
    a budget of two epochs, and this test is about the budget."""
    with zipfile.ZipFile(path, "w") as opened:
        opened.writestr("submission.py", UNIFORM)
        opened.writestr("metadata", "description: uniform probabilities\n")
    return path


def kit_names(bundle: Path) -> set[str]:
    with zipfile.ZipFile(bundle) as outer:
        name = next(n for n in outer.namelist() if n.endswith("starting_kit.zip"))
        with zipfile.ZipFile(io.BytesIO(outer.read(name))) as kit:
            return {Path(n).name for n in kit.namelist() if "/baselines/" in f"/{n}"}


@pytest.mark.parametrize("platform", ["codabench", "codalab"])
def test_a_resnet20_frn_cifar_task_builds_and_passes_the_dry_run(tmp_path, platform):
    data = tmp_path / "data"
    write_cifar_task(data, np.random.default_rng(0))
    spec = spec_file(tmp_path, {"submission": "results", "execution_time_limit": 600,
                                "task": {"budget_seconds": 30}})
    result = build(spec, data, tmp_path / "dist", "--platform", platform)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "dry run passed" in result.stdout and "cifar_agreement=" in result.stdout
    pages = "".join(p.read_text() for p in (tmp_path / "dist").rglob("*.html"))
    bundle = next((tmp_path / "dist").glob("*.zip"))
    with zipfile.ZipFile(bundle) as opened:
        pages += "".join(opened.read(n).decode() for n in opened.namelist() if n.endswith(".html"))
    assert "ResNet-20 with filter response normalisation and swish (274042 parameters)" in pages
    assert {"declared_model.py", "networks.py", "declared_model_jax.py",
            "declared_model_torch.py"} <= kit_names(bundle)


def test_a_code_phase_times_epochs_of_the_declared_resnet(tmp_path):
    """The budget in epochs becomes seconds on this machine, timed on ResNet-20-FRN itself
    (numpy here: the CPU image), and the local run (the kit's own) says so."""
    data = tmp_path / "data"
    write_cifar_task(data, np.random.default_rng(1))
    spec = spec_file(tmp_path, {"submission": "code", "execution_time_limit": 600,
                                "task": {"budget_seconds": 60, "budget_epochs": 2}})
    result = subprocess.run(
        [sys.executable, "-m", "bundle.local_run", "--code", str(uniform_code_zip(tmp_path / "u.zip")),
         "--config", str(spec), "--data-root", str(data), "--phase", "evaluation",
         "--out", str(tmp_path / "run")], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "budget 2 epochs x" in result.stdout + result.stderr
    assert "the epoch timed in numpy" in result.stdout + result.stderr


def test_the_ingestion_contract_states_the_bytes_the_child_maps():
    """The inputs reach the child as memory maps, which count in full against an
    address-space limit: the contract says how many bytes, for the mapped-data-memory rule."""
    from bundle.phase_plan import phase_plan
    from bundle.programs import ingestion_config
    from bundle.spec import load_spec
    from kinds.bdl2021.tasks import files
    plan = phase_plan(load_spec(REPO / "kinds" / "bdl2021" / "default_spec.yaml"), "evaluation",
                      None)
    contracts = {task["name"]: task["contract"] for task in ingestion_config(plan)["tasks"]}
    for task in plan.tasks:
        assert contracts[task.name]["mapped_bytes"] == files(task).inputs.stat().st_size > 0

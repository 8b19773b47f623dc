"""--data-root: an organizer's files in the 2021 formats, at the real sizes, build and dry-run."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

import build_bundle
from in_process_commands import run_main
from test_codabench_importer import quick_bdl_sample

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
# name: (kind, n_test, classes or samples, blocks) — the 2021 evaluation phase's sizes
REAL_TASKS = {"retinopathy": ("classification", 42_670, 2, 1),
              "cifar": ("classification", 50_000, 10, 5),
              "medmnist": ("classification", 2_000, 7, 1),
              "uci": ("regression", 256, 1_000, 1)}
FEATURES, N_TRAIN = 4, 300


def write_task(root: Path, name: str, rng) -> None:
    kind, n_test, width, blocks = REAL_TASKS[name]
    folder = root / name
    folder.mkdir(parents=True)
    outputs = width if kind == "classification" else 2
    y_train = (rng.integers(0, width, N_TRAIN) if kind == "classification"
               else rng.normal(size=N_TRAIN))
    true_test = rng.integers(0, width, n_test) if kind == "classification" else rng.normal(size=n_test)
    np.savez(folder / f"{name}.npz", x_train=rng.normal(size=(N_TRAIN, FEATURES)), y_train=y_train,
             x_test=rng.normal(size=(n_test, FEATURES)), y_test=true_test)   # true labels: zeroed by the build
    size = n_test // blocks
    declaration = {"name": name, "phase": "evaluation", "kind": kind, "n_train": N_TRAIN,
                   "n_test": n_test, "input_shape": [FEATURES],
                   "test_blocks": [{"name": "clean" if b == 0 else f"shift_{b}", "start": b * size,
                                    "stop": (b + 1) * size} for b in range(blocks)],
                   "model": {"type": "mlp", "activation": "tanh",
                             "layer_sizes": [FEATURES, 8, outputs]},
                   "likelihood": {"name": "softmax" if kind == "classification" else "gaussian"},
                   "prior": {"distribution": "normal", "variance": 0.1}, "summary": f"{name} at real size",
                   ("num_classes" if kind == "classification" else "num_samples"): width}
    (folder / f"{name}_task.json").write_text(json.dumps(declaration))
    if kind == "classification":
        chains = rng.dirichlet(np.ones(width), size=(4, n_test))
        np.savetxt(folder / f"{name}_probs.csv", chains.mean(axis=0))        # 2021 format
        np.save(folder / f"{name}_chain_probs.npy", chains)
    else:
        chains = rng.normal(size=(4, width, n_test))
        np.savetxt(folder / f"{name}_samples.csv", chains[0])                # S x N, like uci_samples.csv
        np.save(folder / f"{name}_chain_samples.npy", chains)
    np.savetxt(folder / f"{name}_test_labels.csv", true_test.reshape(-1, 1))


def test_real_size_organizer_files_build_and_pass_the_dry_run(tmp_path, default_bundles):
    """The dry run takes the kit's sample with the trivial baseline's predict()
    (quick_bdl_sample, as the 2021 rules' CodaLab test does): the sample's cyclical SGLD trains
    for half of every 6 s budget (its ingestion took 10 s, the trivial one's under 2, five CPU
    seconds less) on the 300 training rows, which are not real size, and nothing here is
    asserted on what it learns. The real-size part is the same: every test set goes through
    the build, the ingestion (predictions of each task's real shape, validated and written)
    and the scorer against the real-size references. The sample zip is the default
    competition's (the run's shared build, conftest.py): the same files, which hold no task."""
    quick = quick_bdl_sample(default_bundles["codalab"]
                             / "bdl-approx-inference-evaluation-extended.zip",
                             tmp_path / "quick_sample.zip")
    rng = np.random.default_rng(0)
    data = tmp_path / "data"
    for name in REAL_TASKS:
        write_task(data, name, rng)
    default_spec = REPO / "kinds" / "bdl2021" / "default_spec.yaml"
    spec = yaml.safe_load(default_spec.read_text())
    # Codabench, the default platform, requires the logo next to the spec
    shutil.copyfile(default_spec.parent / spec["logo"], tmp_path / spec["logo"])
    spec.update(slug="bdl-real-size", tasks={name: {"budget_seconds": 6} for name in REAL_TASKS},
                phases={"evaluation": {"label": "Evaluation", "start": "2027-04-01 00:00:00",
                                       "submission": "code", "tasks": list(REAL_TASKS),
                                       "execution_time_limit": 400}},
                tracks={})
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec))
    out = tmp_path / "dist"
    # the command's main in this process (in_process_commands.py): the build and the dry run
    # are the claim, not a new interpreter's start
    build = run_main(build_bundle.main, "--config", spec_file, "--data-root", data,
                     "--phase", "evaluation", "--out", out, "--check", "--submission", quick)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    assert "dry run passed" in build.stdout
    assert "cifar_agreement=" in build.stdout

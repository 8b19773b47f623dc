"""Checks of a generated zoo folder: manifest, declarations, complete grids, recorded accuracies.

Every model is loaded from its ``config.json`` and ``weights.npz`` and run forward in numpy on
``dataset_1``; its train and test accuracies must equal those in ``model_configs.json`` to 1e-6.
"""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np

from .checks import weights_problem
from .manifest import verify_manifest
from .mlp import accuracy, cross_entropy
from .npz import read_npz

TOLERANCE = 1e-6
PHASES = ("public", "phase1", "phase2")


def task_folders(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / f"{p.name}_task.json").is_file())


def read_dataset(folder: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    arrays = read_npz(folder / "dataset_1" / f"{split}.npz")
    return arrays["inputs"], arrays["outputs"]


def _check_weights(where: str, config: dict, weights: dict) -> list[str]:
    """The builder's check, and float32 throughout (what the generator writes)."""
    problem = weights_problem(where, config, weights)
    problems = [problem] if problem else []
    if any(array.dtype != np.float32 for array in weights.values()):
        problems.append(f"{where}: not float32 throughout")
    return problems


def verify_task(folder: Path) -> tuple[dict, list[str]]:
    """(summary row, problems) of one task folder."""
    name = folder.name
    declared = json.loads((folder / f"{name}_task.json").read_text())
    configs = json.loads((folder / "model_configs.json").read_text())
    grid = declared["hyperparameters"]
    problems = []
    if declared["phase"] not in PHASES:
        problems.append(f"{name}: phase {declared['phase']!r} is not one of {PHASES}")
    expected_models = int(np.prod([len(v) for v in grid.values()]))
    if declared["num_models"] != expected_models or len(configs) != expected_models:
        problems.append(f"{name}: {len(configs)} models, declared {declared['num_models']}, "
                        f"grid product {expected_models}")
    if sorted(configs, key=int) != [str(i) for i in range(len(configs))]:
        problems.append(f"{name}: model ids are not 0..{len(configs) - 1}")
    folders = sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name.startswith("model_"))
    if folders != sorted(f"model_{i}" for i in configs):
        problems.append(f"{name}: model folders do not match model_configs.json")
    points = set()
    for model_id, entry in configs.items():
        hparams = entry["hparams"]
        if set(hparams) != set(grid) or any(hparams[h]["possible_values"] != grid[h] for h in grid):
            problems.append(f"{name} model {model_id}: hparams disagree with the declared grid")
            continue
        points.add(tuple(json.dumps(hparams[h]["current_value"]) for h in grid))
    complete = {tuple(json.dumps(v) for v in values)
                for values in itertools.product(*grid.values())}
    if points != complete:
        problems.append(f"{name}: grid incomplete, {len(complete - points)} point(s) missing")
    x_train, y_train = read_dataset(folder, "train")
    x_test, y_test = read_dataset(folder, "test")
    d = declared["input_shape"][0]
    for split, (x, y, n) in {"train": (x_train, y_train, declared["n_train"]),
                             "test": (x_test, y_test, declared["n_test"])}.items():
        if x.dtype != np.float32 or y.dtype != np.int32 or x.shape != (n, d) or y.shape != (n,):
            problems.append(f"{name}: dataset_1/{split}.npz has {x.dtype}{x.shape}, "
                            f"{y.dtype}{y.shape}")
    gaps, train_accs, test_accs, losses = [], [], [], []
    for model_id, entry in configs.items():
        where = f"{name} model {model_id}"
        config = json.loads((folder / f"model_{model_id}" / "config.json").read_text())
        layers = config["model_config"]
        if config["input_shape"] != [d] or layers[-1] != {
                "layer_name": "Dense", "units": declared["num_classes"], "activation": "linear"}:
            problems.append(f"{where}: input shape or output layer disagree with the task")
        for file in ("weights.npz", "weights_init.npz"):
            weights = read_npz(folder / f"model_{model_id}" / file)
            problems += _check_weights(f"{where} {file}", config, weights)
        weights = read_npz(folder / f"model_{model_id}" / "weights.npz")
        train_acc = accuracy(layers, weights, x_train, y_train)
        test_acc = accuracy(layers, weights, x_test, y_test)
        recorded = entry["metrics"]
        if abs(train_acc - recorded["train_acc"]) > TOLERANCE:
            problems.append(f"{where}: train accuracy {train_acc} != recorded "
                            f"{recorded['train_acc']}")
        if abs(test_acc - recorded["test_acc"]) > TOLERANCE:
            problems.append(f"{where}: test accuracy {test_acc} != recorded {recorded['test_acc']}")
        train_accs.append(train_acc)
        test_accs.append(test_acc)
        gaps.append(train_acc - test_acc)
        losses.append(cross_entropy(layers, weights, x_train, y_train))
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    row = {"task": name, "phase": declared["phase"], "dataset": declared["dataset"],
           "grid": " x ".join(f"{h}{grid[h]}" for h in grid), "models": len(configs),
           "n_train": declared["n_train"], "n_test": declared["n_test"],
           "train_acc": (min(train_accs), max(train_accs)),
           "test_acc": (min(test_accs), max(test_accs)), "gap": (min(gaps), max(gaps)),
           "train_loss_max": max(losses), "bytes": size}
    return row, problems


def verify(root: Path) -> tuple[list[dict], list[str]]:
    problems = verify_manifest(root)
    rows = []
    for folder in task_folders(root):
        row, task_problems = verify_task(folder)
        rows.append(row)
        problems += task_problems
    if not rows:
        problems.append(f"{root}: no task folders")
    return rows, problems


def summary_table(rows: list[dict]) -> str:
    lines = ["| task | phase | data (train/test) | grid | models | train acc | test acc | gap "
             "| size |",
             "|---|---|---|---|---|---|---|---|---|"]
    span = lambda pair: f"{pair[0]:.4f}-{pair[1]:.4f}"  # noqa: E731
    for row in rows:
        lines.append(f"| {row['task']} | {row['phase']} | {row['dataset'].split('.')[-1]} "
                     f"({row['n_train']}/{row['n_test']}) | {row['grid']} | {row['models']} | "
                     f"{span(row['train_acc'])} | {span(row['test_acc'])} | {span(row['gap'])} | "
                     f"{row['bytes'] / 1e6:.2f} MB |")
    return "\n".join(lines)

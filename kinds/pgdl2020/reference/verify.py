"""Checks of a generated zoo folder: manifest, declarations, complete grids, recorded accuracies.

Every model is loaded from its ``config.json`` and ``weights.npz`` and run forward by the
runtime's layers (the code participants' measures load networks with) on ``dataset_1``; its
train and test accuracies must equal those in ``model_configs.json`` to 1e-6. One path serves
every family: an MLP's config is a stack of Dense (and Dropout) layers like any other.
"""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np

from ..runtime import layers as L
from .cnn import evaluate
from .manifest import verify_manifest
from .npz import read_npz

TOLERANCE = 1e-6
PHASES = ("public", "phase1", "phase2")


def task_folders(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / f"{p.name}_task.json").is_file())


def read_dataset(folder: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    arrays = read_npz(folder / "dataset_1" / f"{split}.npz")
    return arrays["inputs"], arrays["outputs"]


def _check_weights(where: str, stack: list, weights: dict) -> list[str]:
    """The runtime's keys, each of its layer's shape, float32 and finite."""
    keys = [key for _, _, key in L.weight_keys(stack)]
    if sorted(weights) != sorted(keys):
        return [f"{where}: keys {sorted(weights)}; expected {keys}"]
    problems = []
    for layer, name in zip(stack, L.layer_names(stack)):
        try:
            L.check_params(layer, {p: weights[f"{name}/{p}"] for p in layer.params},
                           f"{where} {name}")
        except L.LayerError as error:
            problems.append(str(error))
    if any(a.dtype != np.float32 or not np.isfinite(a).all() for a in weights.values()):
        problems.append(f"{where}: not finite float32 throughout")
    return problems


def _check_stack(where: str, config: dict, declared: dict) -> tuple[list | None, list[str]]:
    """(the built stack or None, problems): the declared input shape, and logits last: a
    linear layer of one output per class, followed at most by a Flatten or a global average."""
    if config["input_shape"] != declared["input_shape"]:
        return None, [f"{where}: input_shape {config['input_shape']}, the task declares "
                      f"{declared['input_shape']}"]
    try:
        stack = L.network(config["model_config"], tuple(config["input_shape"]))
    except L.LayerError as error:
        return None, [f"{where}: {error}"]
    last = max((i for i, layer in enumerate(stack) if "kernel" in layer.params), default=None)
    if (last is None or stack[-1].output_shape != (declared["num_classes"],)
            or stack[last].settings["activation"] != "linear"
            or any(layer.kind not in ("Flatten", "GlobalAveragePooling2D")
                   for layer in stack[last + 1:])):
        return stack, [f"{where}: the output is not linear logits of "
                       f"{declared['num_classes']} classes"]
    return stack, []


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
    shape = tuple(declared["input_shape"])
    for split, (x, y, n) in {"train": (x_train, y_train, declared["n_train"]),
                             "test": (x_test, y_test, declared["n_test"])}.items():
        if (x.dtype != np.float32 or y.dtype != np.int32 or x.shape != (n, *shape)
                or y.shape != (n,)):
            problems.append(f"{name}: dataset_1/{split}.npz has {x.dtype}{x.shape}, "
                            f"{y.dtype}{y.shape}")
    gaps, train_accs, test_accs, losses = [], [], [], []
    for model_id, entry in configs.items():
        measured, model_problems = _verify_model(folder / f"model_{model_id}",
                                                 f"{name} model {model_id}", declared,
                                                 entry["metrics"], (x_train, y_train, x_test,
                                                                    y_test))
        problems += model_problems
        if measured:
            train_accs.append(measured[0])
            test_accs.append(measured[1])
            gaps.append(measured[0] - measured[1])
            losses.append(measured[2])
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    row = {"task": name, "phase": declared["phase"], "dataset": declared["dataset"],
           "grid": " x ".join(f"{h}{grid[h]}" for h in grid), "models": len(configs),
           "n_train": declared["n_train"], "n_test": declared["n_test"],
           "train_acc": _span(train_accs), "test_acc": _span(test_accs), "gap": _span(gaps),
           "train_loss_max": max(losses, default=float("nan")), "bytes": size}
    return row, problems


def _span(values: list[float]) -> tuple[float, float]:
    return (min(values), max(values)) if values else (float("nan"), float("nan"))


def _verify_model(folder: Path, where: str, declared: dict, recorded: dict,
                  splits: tuple) -> tuple[tuple | None, list[str]]:
    """((train accuracy, test accuracy, train loss) or None, problems) of one network."""
    config = json.loads((folder / "config.json").read_text())
    stack, problems = _check_stack(where, config, declared)
    if stack is None:
        return None, problems
    for file in ("weights.npz", "weights_init.npz"):
        problems += _check_weights(f"{where} {file}", stack, read_npz(folder / file))
    if problems:
        return None, problems
    weights = read_npz(folder / "weights.npz")
    x_train, y_train, x_test, y_test = splits
    layers, input_shape = config["model_config"], config["input_shape"]
    train_acc, train_loss = evaluate(layers, input_shape, weights, x_train, y_train)
    test_acc = evaluate(layers, input_shape, weights, x_test, y_test)[0]
    for split, measured in (("train", train_acc), ("test", test_acc)):
        if abs(measured - recorded[f"{split}_acc"]) > TOLERANCE:
            problems.append(f"{where}: {split} accuracy {measured} != recorded "
                            f"{recorded[f'{split}_acc']}")
    return (train_acc, test_acc, train_loss), problems


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

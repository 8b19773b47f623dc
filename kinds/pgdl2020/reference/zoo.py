"""Train every task's model zoo and write it in PGDL's layout (organizer's view).

```
<root>/<task>/<task>_task.json      the task's declaration (phase, dataset, grid, stopping rule)
<root>/<task>/model_configs.json    {"<id>": {"hparams": {name: {"possible_values",
                                                                "current_value"}},
                                              "metrics": {"train_acc", "test_acc"}}}
<root>/<task>/model_<id>/config.json       {"model_config": [layers...], "input_shape": [d]
                                           or [H, W, C]}, Keras-style layer entries
<root>/<task>/model_<id>/weights.npz       float32, keyed as the runtime's layers.weight_keys
                                           names them: dense_<k>/kernel (in, out),
                                           conv2d_<k>/kernel (kh, kw, in, out), <layer>/bias,
                                           batch_normalization_<k>/gamma|beta|moving_mean|
                                           moving_variance
<root>/<task>/model_<id>/weights_init.npz  the same keys, the weights training started from
<root>/<task>/dataset_1/train.npz          inputs float32 (N, d) or (N, H, W, C), outputs
                                           int32 (N,)
<root>/<task>/dataset_1/test.npz           the held-out split (organizer-only)
<root>/manifest.json                       size, sha256 and array shapes of every file above
<root>/generation_log.json                 epochs per model, settings, BLAS kernels and wall
                                           times (not in the manifest)
```

Ids are "0", "1", ... unpadded (PGDL's own ids are unpadded too; readers index by id, not by
the sorted folder names). Feature inputs are standardised with the training split's mean and
standard deviation per feature (a constant feature is divided by 1); image inputs with one mean
and standard deviation over all the training split's pixels. MLP zoos are trained by mlp.py,
convolutional ones by cnn.py; recorded accuracies come from the runtime's inference pass on
the weights written.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import sklearn.datasets
from sklearn.model_selection import train_test_split

from . import cnn
from .manifest import write_manifest
from .mlp import Architecture, train
from .npz import write_npz
from .tasks import MOMENTUM, ZooTask

DEFAULT_ROOT = Path(__file__).resolve().parent / "embedded"
MANIFEST = "manifest.json"
LOG = "generation_log.json"


def load_split(task: ZooTask) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(train inputs, train labels, test inputs, test labels): stratified, seeded, standardised."""
    features, labels = getattr(sklearn.datasets, task.loader)(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(
        features.astype(np.float64), labels, train_size=task.n_train, stratify=labels,
        random_state=task.seed)
    if task.image_shape:
        # one scale for every pixel: per-pixel statistics would blow up the near-constant
        # border pixels and make the same stroke look different at different places
        mean, std = x_train.mean(), x_train.std()
    else:
        mean = x_train.mean(axis=0)
        std = x_train.std(axis=0)
        std[std == 0] = 1.0
    shape = (-1, *task.image_shape) if task.image_shape else (-1, x_train.shape[1])
    scale = lambda x: ((x - mean) / std).astype(np.float32).reshape(shape)  # noqa: E731
    return scale(x_train), y_train.astype(np.int32), scale(x_test), y_test.astype(np.int32)


def _write_json(path: Path, content) -> None:
    path.write_text(json.dumps(content, indent=1) + "\n")


def architecture(task: ZooTask, point: dict, input_dim: int, num_classes: int) -> Architecture:
    return Architecture(input_dim=input_dim, num_classes=num_classes, width=int(point["width"]),
                        depth=int(point["depth"]), activation=point["activation"],
                        dropout=float(point["dropout"]))


def train_network(task: ZooTask, model_id: int, point: dict, x_train: np.ndarray,
                  y_train: np.ndarray, num_classes: int) -> tuple[list[dict], object]:
    """(layer list, training result with init and final weights and epochs) of one network."""
    settings = {"learning_rate": float(point["learning_rate"]),
                "batch_size": int(point["batch_size"]),
                "weight_decay": float(point["weight_decay"]), "max_epochs": task.max_epochs,
                "seed": task.seed * 1000 + model_id, "momentum": MOMENTUM,
                "loss_target": task.loss_target}
    if task.family == "mlp":
        arch = architecture(task, point, x_train.shape[1], num_classes)
        return arch.layer_list(), train(arch, x_train, y_train, **settings)
    layers = cnn.layer_list(point, num_classes)
    return layers, cnn.train(layers, x_train.shape[1:], x_train, y_train, **settings)


def write_models(task: ZooTask, folder: Path, model_ids: list[int] | None = None,
                 progress=print) -> tuple[dict, dict, dict]:
    """Write dataset_1 and the given networks of a task (all by default) into folder:
    (model_configs.json entries by id, epochs by id, the data's shapes for the declaration)."""
    folder.mkdir(parents=True, exist_ok=True)
    x_train, y_train, x_test, y_test = load_split(task)
    num_classes = int(max(y_train.max(), y_test.max()) + 1)
    (folder / "dataset_1").mkdir(exist_ok=True)
    write_npz(folder / "dataset_1" / "train.npz", {"inputs": x_train, "outputs": y_train})
    write_npz(folder / "dataset_1" / "test.npz", {"inputs": x_test, "outputs": y_test})
    points = task.points()
    input_shape = [int(size) for size in x_train.shape[1:]]
    configs, epochs = {}, {}
    for model_id in range(task.num_models) if model_ids is None else model_ids:
        model_started = time.perf_counter()
        point = points[model_id]
        layers, result = train_network(task, model_id, point, x_train, y_train, num_classes)
        train_acc = cnn.evaluate(layers, input_shape, result.final, x_train, y_train)[0]
        test_acc = cnn.evaluate(layers, input_shape, result.final, x_test, y_test)[0]
        model_folder = folder / f"model_{model_id}"
        model_folder.mkdir(exist_ok=True)
        _write_json(model_folder / "config.json",
                    {"model_config": layers, "input_shape": input_shape})
        write_npz(model_folder / "weights.npz", result.final)
        write_npz(model_folder / "weights_init.npz", result.init)
        configs[str(model_id)] = {
            "hparams": {name: {"possible_values": list(values), "current_value": point[name]}
                        for name, values in task.grid.items()},
            "metrics": {"train_acc": train_acc, "test_acc": test_acc}}
        epochs[str(model_id)] = result.epochs
        progress(f"{task.name} model {model_id:>2}/{task.num_models} "
                 f"{json.dumps(task.grid_values(point))} epochs {result.epochs:>4} "
                 f"train {train_acc:.4f} test {test_acc:.4f} "
                 f"({time.perf_counter() - model_started:.1f}s)")
    shapes = {"input_shape": input_shape, "num_classes": num_classes,
              "n_train": int(len(y_train)), "n_test": int(len(y_test))}
    return configs, epochs, shapes


def generate_task(task: ZooTask, root: Path, progress=print) -> dict:
    """Train and write one task's zoo; returns its log entry (epochs per model, wall time)."""
    started = time.perf_counter()
    folder = root / task.name
    configs, epochs, shapes = write_models(task, folder, progress=progress)
    _write_json(folder / "model_configs.json", configs)
    _write_json(folder / f"{task.name}_task.json", {
        "name": task.name, "phase": task.phase, "task_type": "zoo", "dataset": task.dataset,
        "summary": task.summary, "num_models": task.num_models,
        "input_shape": shapes["input_shape"], "num_classes": shapes["num_classes"],
        "hyperparameters": {name: list(values) for name, values in task.grid.items()},
        "n_train": shapes["n_train"], "n_test": shapes["n_test"],
        "stopping_rule": task.stopping_rule()})
    return {"epochs": epochs, "max_epochs": task.max_epochs, "loss_target": task.loss_target,
            "settings": {str(i): p for i, p in enumerate(task.points())},
            "blas": cnn.blas_kernels(),
            "wall_seconds": round(time.perf_counter() - started, 1)}


def generate(tasks: list[ZooTask], root: Path, progress=print) -> dict:
    """Generate the tasks under root, then rewrite its manifest and generation log."""
    started = time.perf_counter()
    root.mkdir(parents=True, exist_ok=True)
    log_path = root / LOG
    log = json.loads(log_path.read_text()) if log_path.is_file() else {"tasks": {}}
    for task in tasks:
        log["tasks"][task.name] = generate_task(task, root, progress)
    log["wall_seconds"] = round(time.perf_counter() - started, 1)
    log["tasks"] = dict(sorted(log["tasks"].items()))
    _write_json(log_path, log)
    write_manifest(root)
    return log

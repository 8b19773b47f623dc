"""The zoo tasks: dataset, split, phase, the complete hyperparameter grid and fixed settings.

Every model of a task is one point of the Cartesian product of ``grid`` (in the listed key
order, the last key varying fastest); its id is its index in that product. Settings outside
the grid come from ``fixed``, then from the defaults of the task's family: "mlp" (trained by
mlp.py) or "cnn" (convolutional, trained by cnn.py on inputs shaped as images).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

# Settings a grid does not vary, by family. Each network's full settings are logged, so the
# MLP defaults stay as they were when the MLP zoos were generated.
DEFAULTS = {"width": 64, "depth": 1, "activation": "relu", "dropout": 0.0,
            "learning_rate": 0.02, "weight_decay": 0.0, "batch_size": 32}
CNN_DEFAULTS = {"architecture": "vgg", "blocks": 1, "filters": 16, "batch_norm": False,
                "dense_layers": 1, "width": 32, "dropout": 0.0, "learning_rate": 0.01,
                "weight_decay": 0.0, "batch_size": 32}
FAMILY_DEFAULTS = {"mlp": DEFAULTS, "cnn": CNN_DEFAULTS}
MOMENTUM = 0.9


@dataclass(frozen=True)
class ZooTask:
    name: str
    phase: str                  # "public" | "phase1" | "phase2"
    loader: str                 # a function of sklearn.datasets
    summary: str
    n_train: int
    grid: dict[str, list]
    fixed: dict = field(default_factory=dict)
    max_epochs: int = 1000
    loss_target: float = 0.01
    seed: int = 0
    family: str = "mlp"                     # a key of FAMILY_DEFAULTS
    image_shape: tuple[int, ...] = ()       # (H, W, C) when the features are an image's pixels

    @property
    def dataset(self) -> str:
        return f"sklearn.datasets.{self.loader}"

    def points(self) -> list[dict]:
        """Every grid point's full settings, in id order."""
        names = list(self.grid)
        settings = []
        for values in itertools.product(*(self.grid[name] for name in names)):
            point = {**FAMILY_DEFAULTS[self.family], **self.fixed, **dict(zip(names, values))}
            settings.append(point)
        return settings

    def grid_values(self, point: dict) -> dict:
        return {name: point[name] for name in self.grid}

    @property
    def num_models(self) -> int:
        count = 1
        for values in self.grid.values():
            count *= len(values)
        return count

    def stopping_rule(self) -> str:
        # the MLP wording is in the committed declarations: it stays word for word
        inference = "dropout off" if self.family == "mlp" else (
            "dropout off, BatchNormalization on the moving statistics, which are the training "
            "set's own")
        return (f"minibatch SGD (momentum {MOMENTUM}) on softmax cross-entropy plus "
                f"weight_decay * L2 of the kernels; stop at the end of the first epoch whose "
                f"float32 weights reach 100% training accuracy and a mean training "
                f"cross-entropy <= {self.loss_target} ({inference}), or after {self.max_epochs} "
                f"epochs (then the accuracies reached are recorded as they are)")


TASKS = (
    ZooTask(
        name="digits_mlp", phase="public", loader="load_digits", n_train=400, seed=2020,
        summary="MLPs of one or two hidden ReLU layers on 8x8 handwritten digits (10 classes), "
                "varying width, depth, learning rate, weight decay and batch size.",
        grid={"width": [24, 96], "depth": [1, 2], "learning_rate": [0.01, 0.05],
              "weight_decay": [0.0, 0.001], "batch_size": [16, 64]}),
    ZooTask(
        name="breast_cancer_mlp", phase="phase1", loader="load_breast_cancer", n_train=120,
        seed=2021,
        summary="ReLU MLPs on the Wisconsin breast cancer features (2 classes), varying width, "
                "depth, learning rate, weight decay and dropout.",
        grid={"width": [16, 64], "depth": [1, 2], "learning_rate": [0.005, 0.05],
              "weight_decay": [0.0, 0.001], "dropout": [0.0, 0.3]},
        fixed={"batch_size": 16}),
    ZooTask(
        name="wine_mlp", phase="phase2", loader="load_wine", n_train=60, seed=2022,
        summary="MLPs on the wine cultivar chemistry features (3 classes), varying width, depth, "
                "activation, weight decay and batch size.",
        grid={"width": [16, 64], "depth": [1, 2], "activation": ["relu", "tanh"],
              "weight_decay": [0.0, 0.001], "batch_size": [8, 32]},
        fixed={"learning_rate": 0.01}),
    ZooTask(
        name="digits_deep", phase="phase2", loader="load_digits", n_train=300, seed=2023,
        summary="Deeper, narrower MLPs (three or five hidden layers) on 8x8 handwritten digits, "
                "varying depth, width, activation and dropout.",
        grid={"depth": [3, 5], "width": [24, 48], "activation": ["relu", "tanh"],
              "dropout": [0.0, 0.1]},
        fixed={"learning_rate": 0.02, "batch_size": 32}),
    ZooTask(
        name="digits_vgg", phase="phase1", loader="load_digits", n_train=400, seed=2024,
        family="cnn", image_shape=(8, 8, 1),
        summary="VGG-like convolutional networks on 8x8 handwritten digit images (10 classes): "
                "one or two blocks of two 3x3 convolutions and a max pooling, then a hidden "
                "Dense layer of 32 units; varying filters, blocks, dropout and batch size.",
        grid={"filters": [8, 16], "blocks": [1, 2], "dropout": [0.0, 0.5],
              "batch_size": [16, 128]},
        fixed={"architecture": "vgg", "learning_rate": 0.01}),
    ZooTask(
        name="digits_nin", phase="phase1", loader="load_digits", n_train=400, seed=2025,
        family="cnn", image_shape=(8, 8, 1),
        summary="Networks in Network on 8x8 handwritten digit images (10 classes): blocks of a "
                "3x3 and two 1x1 convolutions, max pooling and dropout, then one 1x1 "
                "convolution per class and a global average; varying filters, blocks, batch "
                "normalization and dropout.",
        grid={"filters": [16, 32], "blocks": [1, 2], "batch_norm": [False, True],
              "dropout": [0.0, 0.25]},
        fixed={"architecture": "nin", "learning_rate": 0.03}),
)


def task_by_name(name: str) -> ZooTask:
    for task in TASKS:
        if task.name == name:
            return task
    raise KeyError(f"unknown zoo task {name!r}; known: {', '.join(t.name for t in TASKS)}")

"""Turns a task declaration into arrays: load from scikit-learn, split, corrupt, standardise.

Standardisation uses training statistics only, so nothing about the test inputs leaks
into the arrays the model is trained on; regression targets are standardised the same
way, and the model, its references and the participants all work on those arrays.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn import datasets as sklearn_datasets
from sklearn.model_selection import train_test_split

from ..runtime.settings import Block
from .corruptions import corrupt
from .tasks import TaskDeclaration

# Features that never vary in training (edge pixels of the digits) keep unit scale
# instead of being divided by ~0.
MIN_FEATURE_STD = 1e-8


@dataclass(frozen=True)
class PreparedTask:
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray          # the true labels/targets: hidden in the evaluation phase
    blocks: tuple[Block, ...]
    feature_names: tuple[str, ...]
    standardisation: dict


def _load(dataset: str):
    loader = getattr(sklearn_datasets, f"load_{dataset}")
    bunch = loader()
    return bunch.data.astype(float), bunch.target, tuple(str(n) for n in bunch.feature_names)


def _standardise(x_train, x_test, how: str):
    axis = None if how == "global" else 0
    mean = x_train.mean(axis=axis)
    std = x_train.std(axis=axis)
    std = np.where(std < MIN_FEATURE_STD, 1.0, std)
    return (x_train - mean) / std, (x_test - mean) / std, mean, std


def _gap_split(x, y, feature_index):
    """UCI-gap: sort along one input, the middle third is the test set."""
    order = np.argsort(x[:, feature_index], kind="stable")
    third = len(order) // 3
    test = np.sort(order[third: len(order) - third])
    train = np.sort(np.concatenate([order[:third], order[len(order) - third:]]))
    return x[train], x[test], y[train], y[test]


def _shifted_test_set(task: TaskDeclaration, x_test_raw, y_test):
    """Clean block first, then one corrupted copy of it per declared shift block."""
    images = x_test_raw.reshape(-1, 8, 8)
    rng = np.random.default_rng([task.seed, 1])
    parts, blocks, start = [x_test_raw], [Block("clean", 0, len(x_test_raw))], len(x_test_raw)
    for shift in task.shift_blocks:
        parts.append(corrupt(images, shift.corruption, shift.severity, rng).reshape(len(images), -1))
        blocks.append(Block(shift.name, start, start + len(images)))
        start += len(images)
    return np.concatenate(parts), np.tile(y_test, len(parts)), tuple(blocks)


def prepare(task: TaskDeclaration) -> PreparedTask:
    x, y, feature_names = _load(task.dataset)
    if task.split == "gap":
        x_train, x_test, y_train, y_test = _gap_split(x, y, feature_names.index(task.gap_feature))
    else:
        x_train, x_test, y_train, y_test = train_test_split(
            x, y, test_size=task.test_fraction, stratify=y, random_state=task.seed)
    blocks = (Block("clean", 0, len(x_test)),)
    if task.shift_blocks:
        x_test, y_test, blocks = _shifted_test_set(task, x_test, y_test)
    x_train, x_test, x_mean, x_std = _standardise(x_train, x_test, task.standardisation)
    standardisation = {"how": task.standardisation,
                       "x_mean": np.round(x_mean, 12).tolist(), "x_std": np.round(x_std, 12).tolist()}
    if task.kind == "regression":
        y_mean, y_std = float(y_train.mean()), float(y_train.std())
        y_train, y_test = (y_train - y_mean) / y_std, (y_test - y_mean) / y_std
        standardisation.update(y_mean=y_mean, y_std=y_std)
    else:
        y_train, y_test = y_train.astype(np.int64), y_test.astype(np.int64)
    if task.network is not None:         # a convolutional network reads images
        shape = tuple(task.network["input_shape"])
        x_train, x_test = x_train.reshape(-1, *shape), x_test.reshape(-1, *shape)
    return PreparedTask(x_train, y_train, x_test, y_test, blocks, feature_names, standardisation)

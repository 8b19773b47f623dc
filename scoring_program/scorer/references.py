"""Load one task's hidden references from ``ref/``: model average, per-chain, true labels.

A broken reference is the organizer's problem, not the participant's: it raises
``ReferenceDataError``, which stops the scoring run with the file and the reason.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from competition_formats import (FormatError, read_chain_probs, read_chain_samples,
                                 read_classification_probs, read_matrix, read_regression_samples)
from competition_formats.loader import SAMPLES_BY_POINTS

from .config import TaskConfig
from .score_types import CLASSIFICATION


class ReferenceDataError(RuntimeError):
    pass


@dataclass(frozen=True)
class References:
    model_average: np.ndarray        # (N, C) probabilities or (N, S) samples
    chains: np.ndarray | None        # (K, N, C) or (K, N, S)
    labels: np.ndarray | None        # (N,) true labels or targets
    noise_ceiling: dict | None = None   # metric -> per-chain values, precomputed by the builder


def load_references(task: TaskConfig, ref: Path) -> References:
    try:
        if task.kind == CLASSIFICATION:
            average = read_classification_probs(ref / task.reference, n_points=task.n_test,
                                                n_classes=task.num_classes)
            chains = (read_chain_probs(ref / task.chain_reference, n_points=task.n_test,
                                       n_classes=task.num_classes)
                      if task.chain_reference else None)
        else:
            average = read_regression_samples(ref / task.reference, layout=SAMPLES_BY_POINTS,
                                              n_points=task.n_test)
            chains = (read_chain_samples(ref / task.chain_reference, n_points=task.n_test)
                      if task.chain_reference else None)
        labels = (read_matrix(ref / task.test_labels, n_rows=task.n_test, n_cols=1)[:, 0]
                  if task.test_labels else None)
    except FormatError as error:
        raise ReferenceDataError(f"reference data of task {task.name}: {error}") from None
    ceiling = _noise_ceiling(task, ref) if chains is not None else None
    if chains is not None and len(chains) < 2:
        raise ReferenceDataError(f"reference data of task {task.name}: {task.chain_reference} holds "
                             f"{len(chains)} chain; error bars need at least 2")
    return References(average, chains, labels, ceiling)


def _noise_ceiling(task: TaskConfig, ref: Path) -> dict | None:
    if not task.noise_ceiling or not (ref / task.noise_ceiling).is_file():
        return None          # the scorer computes it then
    try:
        values = json.loads((ref / task.noise_ceiling).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ReferenceDataError(f"{task.noise_ceiling}: not readable JSON ({error})") from None
    if not isinstance(values, dict) or set(values) != set(task.metric_names):
        raise ReferenceDataError(f"{task.noise_ceiling}: expected per-chain values of "
                             f"{', '.join(task.metric_names)}")
    return values

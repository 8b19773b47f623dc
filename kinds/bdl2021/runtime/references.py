"""Load one task's hidden references from ``ref/``: model average, per-chain, true labels.

A broken reference is the organizer's problem, not the participant's: it raises
``ReferenceDataError``, which stops the scoring run with the file and the reason.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from runtime.formats import FormatError, read_matrix
from runtime.scoring import ReferenceDataError, TaskConfig

from .exact_posterior import Expectation, parse_expectation_document
from .formats import (SAMPLES_BY_POINTS, read_chain_probs, read_chain_samples,
                      read_classification_probs, read_regression_samples)
from .score_types import CLASSIFICATION


@dataclass(frozen=True)
class References:
    model_average: np.ndarray        # (N, C) probabilities or (N, S) samples
    chains: np.ndarray | None        # (K, N, C) or (K, N, S)
    labels: np.ndarray | None        # (N,) true labels or targets
    expectation: dict[str, Expectation] | None = None   # exact-posterior expectation, by metric


def load_references(config: TaskConfig, ref: Path) -> References:
    task = config.settings
    try:
        if task.task_type == CLASSIFICATION:
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
        raise ReferenceDataError(f"reference data of task {config.name}: {error}") from None
    if chains is not None and len(chains) < 2:
        raise ReferenceDataError(f"reference data of task {config.name}: {task.chain_reference} "
                                 f"holds {len(chains)} chain; error bars need at least 2")
    expectation = _expectation(config, ref) if chains is not None else None
    return References(average, chains, labels, expectation)


def _expectation(task: TaskConfig, ref: Path) -> dict[str, Expectation] | None:
    """The builder's exact-posterior expectation, validated; None if not shipped (the
    scorer then computes it from the chains)."""
    name = task.settings.exact_posterior_expectation
    if not name or not (ref / name).is_file():
        return None
    try:
        document = json.loads((ref / name).read_text(encoding="utf-8"))
        return parse_expectation_document(document, task.name, task.settings.task_type, name)
    except (OSError, ValueError) as error:     # JSONDecodeError is a ValueError
        raise ReferenceDataError(f"reference data of task {task.name}: {name}: "
                                 f"{str(error).removeprefix(name + ': ')}") from None

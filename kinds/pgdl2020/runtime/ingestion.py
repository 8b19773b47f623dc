"""The PGDL contract on the ingestion program's side: the child gets the task's networks and
its training data; what comes back is one number per network."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from runtime.beneath import copy_tree_beneath

from .formats import check_measures


def stage_inputs(task, input_dir: Path, folder: Path, child_uid: int | None = None) -> Path:
    """A read-only copy of the zoo (networks and training data) for the child, none of it
    read through a link (``runtime/beneath.py``)."""
    staged = folder / "zoo"
    copy_tree_beneath(input_dir, task.inputs, staged)
    return staged


def units(task) -> tuple[list[str], float]:
    """One unit per network, each with its share of the task's budget as a hard limit."""
    return task.contract["model_ids"], task.contract["seconds_per_model"]


def gate_problem(values, task) -> str | None:
    """A gate task is complete when every network has a finite measure: PGDL ran the final
    phase only for code that finished the first phase's tasks."""
    ids = task.contract["model_ids"]
    missing = [model for model, value in zip(ids, values) if not np.isfinite(value)]
    if not missing:
        return None
    return (f"{len(missing)} of {len(ids)} networks without a finite measure "
            f"({', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''})")


def output_bytes(task) -> int:
    return len(task.contract["model_ids"]) * 8 + 4096


def check_output(array, task, what: str = "measures") -> tuple[np.ndarray, tuple[str, ...]]:
    """One float per network; NaN marks a network the code did not measure (the scorer
    penalises the task then), anything else that is not a finite number is refused: the
    scorer's check of an uploaded array (``formats.check_measures``)."""
    return check_measures(array, task.contract["model_ids"], what)

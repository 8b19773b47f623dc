"""A BDL task's files and what its declaration says: shared by the kind's data hooks
(``kind.py``) and its pages (``pages.py``)."""
from __future__ import annotations

from .reference.task_files import TaskFiles, task_files
from .runtime.score_types import CLASSIFICATION


def test_rows(declaration: dict) -> int:
    """How many test rows the task has (a public part is a prefix of them)."""
    return int(declaration["n_test"])


def data_source(declaration: dict) -> str | None:
    """What the task's rows are drawn from: the dataset, how its test rows were split off (a
    ``gap`` split holds out a range of one feature, a shift of its own; the random state is
    left out, since two random splits of one dataset are drawn alike) and its test blocks
    (corrupted copies are rows of another distribution). None for a declaration without a
    dataset (an organizer's own may have none)."""
    if "dataset" not in declaration:
        return None
    split = declaration.get("split", {})
    how = " on ".join(str(split[key]) for key in ("method", "feature") if key in split)
    blocks = ", ".join(block["name"] for block in declaration.get("test_blocks", ()))
    return f"{declaration['dataset']}; split: {how or 'not stated'}; test blocks: {blocks or 'one'}"


def task_type(declaration: dict) -> str:
    """The declaration's ``kind`` key (its name in our organizer file format) is the task type."""
    return declaration["kind"]


def files(task) -> TaskFiles:
    return task_files(task.folder.parent, task.name, task.task_type)


def prediction_stem(task) -> str:
    return f"{task.name}_{'probs' if task.task_type == CLASSIFICATION else 'samples'}"


def has_std(task) -> bool:
    """The sd columns are the spread over HMC chains: only with the per-chain reference."""
    return files(task).chain_reference.is_file()


def std_description(task, metric) -> str:
    return f"Standard deviation of {metric.label} over the HMC chains"


def has_public_references(task) -> bool:
    return files(task).reference.is_file()

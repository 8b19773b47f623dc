"""The BDL participant contract, on the ingestion program's side: what a task's child gets
staged, and what its returned predictions must be."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from runtime.beneath import opened_beneath
from runtime.formats import FormatError
from runtime.formats.prediction_arrays import check_probability_rows

from .calibration import task_epoch_seconds
from .formats import copy_npz_members, map_npz, read_task_inputs
from .score_types import CLASSIFICATION


def stage_inputs(task, input_dir: Path, folder: Path, child_uid: int | None = None) -> Path:
    """The task's arrays without y_test, as one uncompressed file the child may read and map.

    The build checked the values; here the headers are checked and the images copied a block
    at a time, so staging a GiB of them takes no GiB of memory. y_train is written from the
    checked array: an N x 1 column reaches ``predict`` flattened, as it always did. The file
    is opened beneath ``input_dir``, never through a link (``runtime/beneath.py``)."""
    name = input_dir / task.inputs
    if name.suffix.lower() != ".npz":
        raise FormatError(f"{name}: expected an .npz file of the task's arrays")
    data = folder / "data.npz"
    with opened_beneath(input_dir, task.inputs) as source:
        try:
            inputs = read_task_inputs(source, mapped=True, check_values=False, opened=True)
            copy_npz_members(source, data, ("x_train", "y_train", "x_test"),
                             replacements={"y_train": inputs.y_train})
        except FormatError as error:        # named as the organizer knows it
            raise FormatError(str(error).replace(str(source), str(name))) from None
    os.chmod(data, 0o644)
    return data


def epoch_seconds(task, data: Path) -> dict:
    """Seconds per epoch of plain SGD on the declared model and the task's training data, on
    this machine (``calibration.py``): what a budget in epochs is converted with, and the
    framework that ran it (the image's: PyTorch where it is installed, else numpy)."""
    arrays = map_npz(data, ("x_train", "y_train"), exact=False)
    return task_epoch_seconds(task.contract["declaration"], arrays["x_train"], arrays["y_train"])


def output_bytes(task) -> int:
    """The largest prediction a frame may carry: the float64 matrix and its .npy header."""
    return task.contract["n_test"] * task.contract["width"] * 8 + 4096


def check_output(array, task, what: str = "predictions") -> tuple[np.ndarray, tuple[str, ...]]:
    """(checked float64 array, notes) or FormatError saying what is wrong."""
    n_points, width = task.contract["n_test"], task.contract["width"]
    try:
        array = np.asarray(array, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise FormatError(f"{what}: not a numeric array ({error})") from None
    meaning = "classes" if task.task_type == CLASSIFICATION else "samples"
    if array.shape != (n_points, width):
        raise FormatError(f"{what}: expected shape ({n_points}, {width}) = (test points, "
                          f"{meaning}), found {array.shape}")
    bad = np.argwhere(~np.isfinite(array))
    if len(bad):
        row, column = (int(v) for v in bad[0])
        raise FormatError(f"{what}: row {row}, column {column} (0-based) is {array[row, column]}; "
                          f"expected finite numbers ({len(bad)} non-finite in all)")
    if task.task_type != CLASSIFICATION:
        return array, ()
    notes = check_probability_rows(array, lambda row, column=None: f"{what}: row {row}" + (
        f", column {column}" if column is not None else "") + " (0-based)", what)
    return array, notes

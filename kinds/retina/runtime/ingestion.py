"""Retina's contract on the ingestion program's side: the child gets the training rows and
the pooled test features; what comes back is a probability and an uncertainty per test row."""
from __future__ import annotations

import numpy as np

from runtime.formats import FormatError

from . import predictions


def output_bytes(task) -> int:
    return task.contract["n_test"] * 16 + 4096


def check_output(array, task, what: str = "predictions") -> tuple[np.ndarray, tuple[str, ...]]:
    """(N, 1) or (N, 2): probability in [0, 1], optional finite uncertainty."""
    try:
        values = predictions.check(array, task.contract["n_test"], what)
    except (TypeError, ValueError) as error:
        raise FormatError(str(error)) from None
    return values, (() if values.shape[1] == 2 else
                    ("no uncertainty returned: the scorer uses the predictive entropy",))

"""Retina's contract, on the child's side (standard library and numpy only)::

    def predict(task, x_train, y_train, x_test):
        return probability, uncertainty     # or the probability alone

``probability``: for each row of x_test, the predicted probability that the patient is
referable (class 1); ``uncertainty``: any finite number per row, higher = refer sooner (left
out: the predictive entropy of the probability is used). ``task.checkpoint(probability,
uncertainty)`` saves predictions on the way: if the budget runs out, the last saved ones are
scored. ``task.grades_train`` holds the clinical grade of each training row.
"""
import time

SIGNATURE = "(task, x_train, y_train, x_test)"


class Task:
    def __init__(self, spec, started, checkpoint, data):
        self.name = spec["name"]
        self.n_test = spec["contract"]["n_test"]
        self.feature_names = list(spec["contract"]["feature_names"])
        self.seconds = spec["budget_seconds"]
        self.grades_train = data["grades_train"]
        self._deadline = started + self.seconds
        self._checkpoint = checkpoint

    def time_left(self):
        return max(0.0, self._deadline - time.monotonic())

    def checkpoint(self, probability, uncertainty=None):
        self._checkpoint(_columns(probability, uncertainty))


def _columns(probability, uncertainty=None):
    import numpy
    parts = [probability] if uncertainty is None else [probability, uncertainty]
    return numpy.column_stack([numpy.asarray(part, dtype=numpy.float64).ravel()
                               for part in parts])


def call(function, spec, begin, checkpoint):
    import numpy
    with numpy.load(spec["data"], allow_pickle=False) as stored:
        data = {name: stored[name] for name in stored.files}
    result = function(Task(spec, begin(), checkpoint, data), data["x_train"], data["y_train"],
                      data["x_test"])
    if isinstance(result, tuple) and len(result) == 2:
        return _columns(*result)
    return result

"""The BDL participant contract, on the child's side: what ``predict`` receives.

Copied alone into each task's sandbox (standard library and numpy only, no imports from the
programs). The participant's module (``submission.py``) defines::

    def predict(task, x_train, y_train, x_test, checkpoint):
        ...                      # train within task.time_left() seconds
        checkpoint(predictions)  # optional, any number of times: the last one is used
        return predictions       # if the budget runs out before this line
"""
import time

SIGNATURE = "(task, x_train, y_train, x_test, checkpoint)"


class Task:
    """What the participant's function learns about its task."""

    def __init__(self, spec, started):
        contract = spec["contract"]
        declaration = contract["declaration"]
        self.name = spec["name"]
        self.task_type = spec["task_type"]       # "classification" or "regression"
        self.kind = self.task_type               # its older name: submissions still read it
        self.n_test = contract["n_test"]
        self.num_classes = contract["width"] if self.task_type == "classification" else None
        self.num_samples = contract["width"] if self.task_type == "regression" else None
        self.seconds = spec["budget_seconds"]
        # A budget stated in epochs of plain SGD on the declared model: the epochs, and the
        # seconds one took on this machine just before your code started (None otherwise).
        calibration = spec.get("rules", {}).get("calibration") or {}
        self.epochs = calibration.get("epochs")
        self.seconds_per_epoch = calibration.get("seconds_per_epoch")
        self.model = declaration.get("model", {})
        self.likelihood = declaration.get("likelihood", {})
        self.prior = declaration.get("prior", {})
        self.declaration = declaration
        self._deadline = started + self.seconds

    def time_left(self):
        """Seconds until the budget ends (the process is stopped then)."""
        return max(0.0, self._deadline - time.monotonic())

    def __repr__(self):
        return f"Task({self.name!r}, {self.task_type}, {self.seconds:g} s)"


def call(function, spec, begin, checkpoint):
    """Loads the staged arrays and calls the participant's function; returns what it returns.
    ``begin()`` ends the start-up: the budget's clock starts there."""
    import numpy
    with numpy.load(spec["data"], allow_pickle=False) as data:
        x_train, y_train, x_test = data["x_train"], data["y_train"], data["x_test"]
    return function(Task(spec, begin()), x_train, y_train, x_test, checkpoint)

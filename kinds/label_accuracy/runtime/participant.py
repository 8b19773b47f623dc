"""Label accuracy's contract, on the child's side (standard library and numpy only)::

    def predict(task, x_train, y_train, x_test):
        return labels            # task.n_test integers in 0 .. task.num_classes - 1
"""
import time

SIGNATURE = "(task, x_train, y_train, x_test)"


class Task:
    def __init__(self, spec, started):
        self.name = spec["name"]
        self.n_test = spec["contract"]["n_test"]
        self.num_classes = spec["contract"]["num_classes"]
        self.seconds = spec["budget_seconds"]
        self._deadline = started + self.seconds

    def time_left(self):
        return max(0.0, self._deadline - time.monotonic())


def call(function, spec, begin, checkpoint):
    import numpy
    with numpy.load(spec["data"], allow_pickle=False) as data:
        x_train, y_train, x_test = data["x_train"], data["y_train"], data["x_test"]
    return function(Task(spec, begin()), x_train, y_train, x_test)

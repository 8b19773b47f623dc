"""Retina's contract, on the child's side (standard library and numpy only)::

    def predict(task, x_train, y_train, x_test):
        return probability, uncertainty     # or the probability alone

``probability``: for each row of x_test, the predicted probability that the patient is
referable (class 1); ``uncertainty``: any finite number per row, higher = refer sooner (left
out: the predictive entropy of the probability is used). ``task.checkpoint(probability,
uncertainty)`` saves predictions on the way: if the budget runs out, the last saved ones are
scored. ``task.grades_train`` holds the clinical grade of each training row.

On an image task (``task.inputs == "images"``) ``x_train`` and ``x_test`` are read-only
memory maps of uint8 images (n, H, W, C), ``task.image_shape`` is (H, W, C), and the task
offers batched numpy helpers (images.py): ``task.batches``, ``task.augment`` and
``task.standardise``. A memory map reads the pages a batch touches; an array as large as the
machine's memory is never read at once, unless the code asks for it (``numpy.asarray(x_train)``).
"""
import os
import time

from . import images

IMAGE_FILES = ("train_images.npy", "test_images.npy")

SIGNATURE = "(task, x_train, y_train, x_test)"
HELPER_FILES = ("images.py",)


class Task:
    def __init__(self, spec, started, checkpoint, data):
        self.name = spec["name"]
        self.n_test = spec["contract"]["n_test"]
        self.feature_names = list(spec["contract"].get("feature_names", ()))
        self.seconds = spec["budget_seconds"]
        self.grades_train = data["grades_train"]
        self.inputs = spec["contract"].get("inputs", "features")
        self.image_shape = tuple(spec["contract"].get("image_shape", ()))
        self._deadline = started + self.seconds
        self._checkpoint = checkpoint
        self._x_train = data.get("x_train")
        self._statistics = None

    def time_left(self):
        return max(0.0, self._deadline - time.monotonic())

    def checkpoint(self, probability, uncertainty=None):
        self._checkpoint(_columns(probability, uncertainty))

    # --- image tasks -------------------------------------------------------------------------

    def batches(self, x, batch_size, rng=None):
        """(indices, uint8 batch) over ``x`` in order, or in a random order from ``rng``
        (a ``numpy.random.Generator``; each call draws a new order), read batch by batch."""
        return images.batches(x, batch_size, rng)

    def augment(self, batch, rng):
        """Each image flipped left-right and up-down with probability 1/2 each and rotated by
        a uniform angle (nearest neighbour, black outside): uint8, same shape."""
        return images.augment(batch, rng)

    def standardise(self, batch):
        """float32 (n, H, W, C): (batch / 255 - mean) / sd, per channel, the mean and sd of
        the training images (estimated once on up to 2,048 of them): one affine map per
        channel, the same for every pixel. It subtracts no local mean: Ben Graham's
        preprocessing (a blurred copy subtracted), on which RETINA's figures were made, is
        left to the submission."""
        if self._statistics is None:
            self._statistics = images.channel_statistics(self._x_train)
        return images.standardise(batch, *self._statistics)


def _columns(probability, uncertainty=None):
    import numpy
    parts = [probability] if uncertainty is None else [probability, uncertainty]
    return numpy.column_stack([numpy.asarray(part, dtype=numpy.float64).ravel()
                               for part in parts])


def _load(path):
    """The task's arrays: its inputs file, and on an image task the image arrays beside it,
    memory-mapped read-only (``path`` is then the folder the ingestion staged)."""
    import numpy
    if os.path.isdir(path):
        with numpy.load(os.path.join(path, "inputs.npz"), allow_pickle=False) as stored:
            data = {name: stored[name] for name in stored.files}
        for name in IMAGE_FILES:
            data["x_" + name.split("_")[0]] = numpy.load(os.path.join(path, name),
                                                          mmap_mode="r", allow_pickle=False)
        return data
    with numpy.load(path, allow_pickle=False) as stored:
        return {name: stored[name] for name in stored.files}


def call(function, spec, begin, checkpoint):
    data = _load(spec["data"])
    result = function(Task(spec, begin(), checkpoint, data), data["x_train"], data["y_train"],
                      data["x_test"])
    if isinstance(result, tuple) and len(result) == 2:
        return _columns(*result)
    return result

"""A small convolutional network in numpy, for image tasks on the CPU image: two 3 x 3
convolutions with max pooling, global average pooling and a two-way softmax, trained with
Adam on augmented, standardised batches read from the memory-mapped images; the uncertainty
is the predictive entropy of its probability (one network: aleatoric only, as MAP).

It trains epoch after epoch while the budget lasts, keeping back the time that predicting
the test images takes (from its mean time per training image so far), and saves its
predictions after each epoch from the second on, so a run cut short still scores.
``layers.py`` is the numpy layers of the PGDL kind (forward and backward of each layer),
which the kit ships beside it.
"""
import time

import numpy as np

from layers import cross_entropy_gradient, network, run, run_backward
from tabular_mlp import entropy

ARCHITECTURE = [
    {"layer_name": "Conv2D", "filters": 16, "kernel_size": [3, 3], "padding": "same",
     "activation": "relu"},
    {"layer_name": "MaxPooling2D", "pool_size": [2, 2]},
    {"layer_name": "Conv2D", "filters": 32, "kernel_size": [3, 3], "padding": "same",
     "activation": "relu"},
    {"layer_name": "MaxPooling2D", "pool_size": [2, 2]},
    {"layer_name": "GlobalAveragePooling2D"},
    {"layer_name": "Dense", "units": 2},
]
BATCH = 64
# A convolution's windows (im2col) and every layer's cache live for a whole batch: at most
# this many pixels a batch bounds that memory (about 250 MB), whatever the images' size.
BATCH_PIXELS = 2**18
LEARNING_RATE = 0.01
MAX_EPOCHS = 40
SEED = 0
# Random flips and rotations (task.augment) suit fundus photographs, which have no upright;
# the embedded tasks' digits have one (a 6 turned over is a 9), so they are off here.
AUGMENT = False


def initial_params(layers, rng):
    """He-normal kernels, zero biases."""
    params = []
    for layer in layers:
        entry = {}
        for name, shape in layer.params.items():
            fan_in = int(np.prod(shape[:-1]))
            entry[name] = (rng.normal(0.0, np.sqrt(2.0 / fan_in), shape) if name == "kernel"
                           else np.zeros(shape)).astype(np.float32)
        params.append(entry)
    return params


class Adam:
    def __init__(self, params, rate):
        self.rate, self.step = rate, 0
        self.first = [{k: np.zeros_like(v) for k, v in p.items()} for p in params]
        self.second = [{k: np.zeros_like(v) for k, v in p.items()} for p in params]

    def update(self, params, grads):
        self.step += 1
        for p, g, m, v in zip(params, grads, self.first, self.second):
            for name in p:
                m[name] = 0.9 * m[name] + 0.1 * g[name]
                v[name] = 0.999 * v[name] + 0.001 * np.square(g[name])
                m_hat = m[name] / (1 - 0.9 ** self.step)
                v_hat = v[name] / (1 - 0.999 ** self.step)
                p[name] -= (self.rate * m_hat / (np.sqrt(v_hat) + 1e-8)).astype(np.float32)


def class_weights(labels):
    """Each example weighted by the inverse of its class's frequency: referable patients are
    the minority, and an unweighted loss learns to call everyone healthy."""
    counts = np.bincount(labels, minlength=2).astype(float)
    return (labels.size / (2 * np.maximum(counts, 1)))[labels]


def train_step(layers, params, optimiser, x, y, weights):
    logits, caches = run(layers, params, x)
    _, grad = cross_entropy_gradient(logits, y)
    grad = grad * (weights / weights.mean())[:, None].astype(np.float32)
    _, grads = run_backward(layers, params, caches, grad)
    optimiser.update(params, grads)


def batch_size(image_shape):
    return int(np.clip(BATCH_PIXELS // (image_shape[0] * image_shape[1]), 1, BATCH))


def probabilities(task, layers, params, images):
    out = np.empty(len(images))
    for indices, batch in task.batches(images, batch_size(task.image_shape)):
        logits, _ = run(layers, params, task.standardise(batch))
        logits = logits - logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        out[indices] = p[:, 1] / p.sum(axis=1)
    return out


class Pace:
    """Seconds per training image: the mean over every step so far. One step's time alone
    misled: an epoch's last batch (its fixed costs on a few images) or one pause of a busy
    machine made an image look ten times slower, and training stopped epochs early."""

    def __init__(self):
        self.seconds, self.images = 0.0, 0

    def add(self, seconds, images):
        self.seconds += seconds
        self.images += images

    def per_image(self):
        return self.seconds / self.images


def train_epoch(task, model, x_train, y_train, weights, rng, n_test, pace):
    """One pass over the training images in a random order; False when it stopped early to
    keep the time that predicting ``n_test`` images takes (about a third of a training step
    per image: twice that is kept)."""
    layers, params, optimiser = model
    for indices, batch in task.batches(x_train, batch_size(task.image_shape), rng):
        started = time.monotonic()
        if AUGMENT:
            batch = task.augment(batch, rng)
        train_step(layers, params, optimiser, task.standardise(batch), y_train[indices],
                   weights[indices])
        pace.add(time.monotonic() - started, len(indices))
        if task.time_left() < 2 * pace.per_image() * n_test + 1.0:
            return False
    return True


def predict(task, x_train, y_train, x_test):
    if getattr(task, "inputs", "features") != "images":
        raise ValueError("small_cnn.py is for image tasks; this task gives feature columns")
    rng = np.random.default_rng(SEED)
    layers = network(ARCHITECTURE, task.image_shape)
    params = initial_params(layers, rng)
    model = (layers, params, Adam(params, LEARNING_RATE))
    y_train = np.asarray(y_train)
    weights = class_weights(y_train)
    pace = Pace()
    for epoch in range(MAX_EPOCHS):
        if not train_epoch(task, model, x_train, y_train, weights, rng, len(x_test), pace):
            break
        if epoch >= 1:                   # saved as it goes: a run cut short still scores
            p = probabilities(task, layers, params, x_test)
            task.checkpoint(p, entropy(p))
    p = probabilities(task, layers, params, x_test)
    return p, entropy(p)

"""A small PyTorch ResNet for the Retina image tasks, shared by ``torch_mc_dropout.py`` and
``torch_deep_ensemble.py`` (copy it next to your submission.py, as ``tabular_mlp.py`` is for
the table baselines).

Images arrive channels-last (N, H, W, C) uint8 from read-only memory maps; the network works
in NCHW. Three stages of basic residual blocks (16, 32, 64 channels, stride 2 between stages),
batch normalisation, global average pooling and one logit for referable disease. Dropout sits
inside each block and before the last layer, so that MC dropout has something to sample.

Training runs on a GPU when torch sees one (bfloat16 autocast), else on the CPU, and stops at
the epoch limit or when what is left of the task's budget is just enough to predict the test
set, whichever comes first. Python 3.10; numpy, torch and the standard library only.
"""
import functools
import math
import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional

WIDTHS = (16, 32, 64)
BLOCKS = 1                # residual blocks per stage
STAGE_SIDE = 128          # larger images are downsampled in the stem to this side at most
EPOCHS = 20
BATCH = 64
PREDICT_BATCH = 256
LEARNING_RATE = 2e-3
WEIGHT_DECAY = 1e-4
SAFETY = 1.5              # the prediction estimate is multiplied by this
MARGIN = 0.05             # fraction of the time left kept back for writing the results
MIN_EPOCHS = 2            # an ensemble member shorter than this is not worth training
# Random flips and rotations (task.augment) suit fundus photographs, which have no upright;
# the embedded tasks' digits have one (a 6 turned over is a 9): set True for fundus images.
AUGMENT = False


@functools.lru_cache(maxsize=None)
def device():
    """The GPU when torch sees one; said once so a log tells which ran."""
    name = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"torch {torch.__version__}: training on {name}"
          + (f" ({torch.cuda.get_device_name(0)})" if name == "cuda" else ""), flush=True)
    if name == "cuda":
        torch.backends.cudnn.benchmark = True     # fixed shapes: the fastest kernels, once
    return torch.device(name)


def _autocast():
    # bfloat16 only where it pays; on the CPU it is slower and changes the numbers
    return torch.autocast("cuda", dtype=torch.bfloat16, enabled=device().type == "cuda")


class Block(nn.Module):
    """A basic residual block; dropout between its two convolutions."""

    def __init__(self, inputs, outputs, stride, dropout):
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.shortcut = nn.Sequential()
        if stride != 1 or inputs != outputs:
            self.shortcut = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride, bias=False),
                                          nn.BatchNorm2d(outputs))

    def forward(self, x):
        y = self.dropout(functional.relu(self.bn1(self.conv1(x))))
        return functional.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


def _stem(channels, width, side):
    """3x3 for small images; ResNet's strided 7x7 and max pools for large ones, so the first
    stage never works on more than STAGE_SIDE pixels a side."""
    if side <= STAGE_SIDE:
        layers = [nn.Conv2d(channels, width, 3, 1, 1, bias=False)]
    else:
        layers = [nn.Conv2d(channels, width, 7, 2, 3, bias=False)]
        side = (side + 1) // 2
    layers += [nn.BatchNorm2d(width), nn.ReLU()]
    while side > STAGE_SIDE:
        layers.append(nn.MaxPool2d(3, 2, 1))
        side = (side + 1) // 2
    return nn.Sequential(*layers)


class ResNet(nn.Module):
    def __init__(self, image_shape, dropout=0.0, widths=WIDTHS, blocks=BLOCKS):
        super().__init__()
        layers = [_stem(image_shape[2], widths[0], max(image_shape[:2]))]
        inputs = widths[0]
        for stage, width in enumerate(widths):
            for block in range(blocks):
                stride = 2 if stage > 0 and block == 0 else 1
                layers.append(Block(inputs, width, stride, dropout))
                inputs = width
        self.body = nn.Sequential(*layers)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(inputs, 1)

    def forward(self, x):
        features = self.body(x).mean(dim=(2, 3))
        # the logit in float32: bfloat16's 8-bit mantissa would tie many probabilities
        with torch.autocast(x.device.type, enabled=False):
            return self.head(self.dropout(features.float())).squeeze(1)


def to_tensor(task, batch):
    """uint8 (n, H, W, C) to the standardised NCHW tensor on the device; the permuted view
    is channels-last in memory, which the model on a GPU is laid out for too."""
    x = torch.from_numpy(task.standardise(batch)).permute(0, 3, 1, 2)
    return x.to(device(), non_blocking=True)


def predict_seconds(per_image, n_predict, passes):
    """Expected seconds to predict: a pass forward is about a third of a training step
    (forward and backward), and reading each batch about what it cost in training."""
    return SAFETY * n_predict * per_image * (1 + passes / 3)


def plan(seconds, per_image, n_train, n_predict, passes, members):
    """(how many of `members` networks are worth training, seconds for each) out of
    `seconds`, each to be followed by its own prediction."""
    usable = seconds * (1 - MARGIN)
    predict = predict_seconds(per_image, n_predict, passes)
    cost = MIN_EPOCHS * n_train * per_image + predict
    affordable = max(0, min(members, int(usable // cost)))
    share = (usable - max(1, affordable) * predict) / max(1, affordable)
    return affordable, max(0.0, share)


class Clock:
    """How far one network's training has gone, in steps and against its time share."""

    def __init__(self, task, n_train, n_predict, passes, members, per_image=None):
        self.task, self.start = task, task.time_left()
        self.sizes = (n_train, n_predict, passes, members)
        self.began, self.images, self.per_image = None, 0, per_image

    def tick(self, images):
        """After each step. The first step is left out of the rate: it pays once for CUDA's
        kernels and cuDNN's search (seconds on a GPU), and counted it would make the
        prediction look so long that training stopped after one step."""
        if self.began is None:
            self.began = time.perf_counter()
            return
        self.images += images
        self.per_image = (time.perf_counter() - self.began) / self.images

    def share(self):
        if self.per_image is None:
            return math.inf
        return plan(self.start, self.per_image, *self.sizes)[1]

    def spent(self):
        return self.start - self.task.time_left()


def _class_weight(y_train):
    """Referable is the minority: weigh its rows up to as much as the rest."""
    positive = int(np.sum(y_train))
    return torch.tensor(max(1.0, (len(y_train) - positive) / max(1, positive)))


def train(task, x_train, y_train, seed, dropout=0.0, epochs=None, n_predict=0, passes=1,
          members=1, per_image=None):
    """One network from `seed`; returns it (in eval mode) and its training seconds per image.
    It stops after `epochs` (EPOCHS when None) or when its time is spent: the task's time
    left, less the prediction of `n_predict` images `passes` times, shared among `members`
    networks still to train (`per_image`: a measure from an earlier one, if any).
    Reproducible on the CPU when the epochs run out before the time does."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = ResNet(task.image_shape, dropout).to(device(), memory_format=torch.channels_last)
    optimiser = torch.optim.AdamW(model.parameters(), LEARNING_RATE, weight_decay=WEIGHT_DECAY)
    weight = _class_weight(y_train).to(device())
    clock = Clock(task, len(x_train), n_predict, passes, members, per_image)
    steps = (epochs or EPOCHS) * math.ceil(len(x_train) / BATCH)
    model.train()
    for step, (indices, batch) in enumerate(_batches(task, x_train, rng)):
        progress = max(step / steps, clock.spent() / max(clock.share(), 1e-9))
        if progress >= 1:
            break
        if len(indices) > 1:                 # batch norm needs two rows
            _step(model, optimiser, task, task.augment(batch, rng) if AUGMENT else batch,
                  y_train[indices], weight, progress)
            clock.tick(len(indices))
    return model.eval(), clock.per_image


def _batches(task, x_train, rng):
    """Epoch after epoch, each in a new random order."""
    while True:
        yield from task.batches(x_train, BATCH, rng)


def _step(model, optimiser, task, batch, labels, weight, progress):
    for group in optimiser.param_groups:      # cosine decay over steps or time, whichever leads
        group["lr"] = LEARNING_RATE * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    x = to_tensor(task, batch)
    y = torch.from_numpy(np.asarray(labels, dtype=np.float32)).to(device())
    with _autocast():
        logits = model(x)
    loss = functional.binary_cross_entropy_with_logits(logits.float(), y, pos_weight=weight)
    optimiser.zero_grad(set_to_none=True)
    loss.backward()
    optimiser.step()


def _dropout(model, on):
    """Batch norm keeps its training statistics; only dropout samples (MC dropout)."""
    model.eval()
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.train(on)


@torch.inference_mode()
def predict_probabilities(model, task, x_test, samples=1, dropout_on=False):
    """(samples, N) float64 probabilities; each batch is read once and passed `samples` times."""
    _dropout(model, dropout_on)
    out = np.empty((samples, len(x_test)), dtype=np.float64)
    for indices, batch in task.batches(x_test, PREDICT_BATCH):
        x = to_tensor(task, batch)
        for sample in range(samples):
            with _autocast():
                out[sample, indices] = torch.sigmoid(model(x)).double().cpu().numpy()
    model.eval()
    if device().type == "cuda":
        print(f"GPU memory peak {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB", flush=True)
    return out


def entropy(p):
    """Predictive entropy of a Bernoulli probability, natural log (RETINA's uncertainty)."""
    q = np.clip(p, 1e-12, 1 - 1e-12)
    return -(q * np.log(q) + (1 - q) * np.log(1 - q))


def mutual_information(samples):
    """Epistemic part of the entropy of (samples, N) probabilities: the entropy of their mean
    less the mean of their entropies (BALD)."""
    return np.maximum(0.0, entropy(samples.mean(axis=0)) - entropy(samples).mean(axis=0))

"""Baseline (PyTorch): MC dropout (Gal & Ghahramani 2016) on the declared network.

Dropout acts on the input of the declared network's final dense layer (its features, the
last hidden layer of an MLP): every unit is kept with probability 1 - p (a Bernoulli mask z,
no rescaling, as in the paper and ``mc_dropout.py``, so the final weight matrix M is the
variational parameter and W = M diag(z) the sampled weight). Only there: the declared
networks are fixed architectures (convolutions, filter response normalisation, an LSTM)
with no dropout layers of their own, and the final layer is where every one of them has
hidden units to drop; the layers below are point estimates, as in a dropout head. (A
``sequential`` declaration without a dense layer gets no dropout: a MAP estimate.)

Weight decay from the declared prior N(0, sigma^2 I), as in ``mc_dropout.py``:
(1 - p) / sigma^2 on M (it reads dropped units), 1 / sigma^2 on every other parameter; the
loss minimised is -(N / batch) sum_batch log p(y | x, theta, z) + sum lambda theta^2 / 2,
by minibatch Adam from the declared initialisation, for at most half the budget, the final
predictive included (a checkpoint measures its cost). The predictive averages PASSES
stochastic passes with dropout on (classification: mean softmax; regression: one draw of y
per pass, round robin as ``torch_training.predictive`` does); the layers below the final one
are deterministic, so a test batch goes through them once and its features meet all PASSES
masks at once. A checkpoint after the first epoch and every CHECKPOINT_EVERY steps keeps it
anytime. On the GPU when there is one; repeatable on the CPU given its seed when no
deadline cuts it short.
"""

import numpy as np
import torch

from declared_model_torch import TorchOps
from torch_training import Budget, DeclaredModel, adam, predictive, seeded

DROP = 0.1                  # p, on the final dense layer's inputs
BATCH = 128
STEPS = 30000
LEARNING_RATE = 1e-3
PASSES = 100                # stochastic passes in the predictive
CHECKPOINT_EVERY = 1000
TIME_SHARE = 0.5
SEED = 4


def is_dense_weight(parameter):
    return parameter.name.endswith("dense/w") or parameter.name == "head/w"


class FinalDropout(TorchOps):
    """TorchOps whose final dense layer reads its input through Bernoulli(1 - DROP) masks:
    one per example, or ``passes`` of them, the batch then growing to passes x batch rows
    (pass-major), which every later operation treats as examples."""

    def __init__(self, dense_layers, generator, passes=None):
        self.left, self.generator, self.passes = dense_layers, generator, passes

    def dense(self, x, w, b):
        self.left -= 1
        if self.left:
            return x @ w + b
        shape = x.shape if self.passes is None else (self.passes, *x.shape)
        kept = (torch.rand(shape, generator=self.generator, device=x.device, dtype=x.dtype)
                >= DROP).to(x.dtype)
        return ((x * kept) @ w + b).reshape(-1, w.shape[1])


def decay_vector(model):
    """Per-parameter precision of the L2 term: (1 - p) / sigma^2 on the final dense weights."""
    decay = torch.full((model.num_parameters,), 1.0 / model.prior_variance,
                       device=model.device, dtype=torch.float32)
    network = model.network
    dense = [i for i, p in enumerate(network.parameters) if is_dense_weight(p)]
    if not dense:                   # no dense layer, no dropout: FinalDropout never drops
        return decay
    final = dense[-1]
    start, end = int(network.offsets[final]), int(network.offsets[final + 1])
    decay[start:end] = (1.0 - DROP) / model.prior_variance
    return decay


def predict(task, x_train, y_train, x_test, checkpoint):
    model = DeclaredModel(task, x_train, y_train)
    rng = np.random.default_rng(SEED)
    generator = seeded(SEED, model.device)
    budget = Budget(task, TIME_SHARE)
    dense_layers = sum(map(is_dense_weight, model.network.parameters))
    decay = decay_vector(model)
    steps_per_epoch = -(-model.n // min(BATCH, model.n))
    passes = PASSES if task.task_type == "classification" else min(PASSES, task.num_samples)

    def mc_predictive(theta):
        def stacked(x):
            output = model.outputs(theta, x, FinalDropout(dense_layers, generator, passes))
            return output.reshape(passes, len(x), -1)
        return predictive(task, model, [stacked], x_test, rng)

    def potential(theta, rows):
        return model.potential(theta, rows, FinalDropout(dense_layers, generator), decay)

    def save(theta, step):
        if step == steps_per_epoch or step % CHECKPOINT_EVERY == 0:
            budget.checkpoint(checkpoint, lambda: mc_predictive(theta), passes)

    theta = adam(model, model.initial(rng), rng, STEPS, LEARNING_RATE, BATCH,
                 lambda: budget.over(passes), callback=save, potential=potential)
    return mc_predictive(theta)

"""What the PyTorch baselines share: the declared network on a device, the minibatch
potential, and the predictive of a set of parameter samples, computed in batches.

For competitions whose image has PyTorch and a GPU (the declared ResNet-20-FRN, CNN-LSTM and
the convolutional presets train in minutes there, not hours as in numpy). The network is
the task's declaration (``declared_model.task_network``) run by ``declared_model_torch.TorchOps``
on one flat parameter vector theta, the layout of the HMC references, so a baseline's theta
is the reference's network. Beside this file in a submission: ``declared_model.py``,
``declared_model_torch.py`` and ``networks.py``.

The potential on a minibatch B of the N training rows is the declared model's:
U = -(N / |B|) log p(y_B | x_B, theta) - log p(theta), the prior N(0, prior_variance) on every
parameter (its constant dropped). Training is float32 on the GPU when there is one; the
predictions come back as float64 numpy arrays of the contract's shapes.
"""
import math
import time

import numpy as np
import torch

from declared_model import task_network
from declared_model_torch import TorchOps, as_network, log_likelihood, to_tensor

# softplus(r) = 1 at r = log(e - 1): regression outputs start with unit noise scale.
UNIT_SCALE_RAW = math.log(math.e - 1)
PREDICT_BATCH = 500         # test rows per forward pass in the predictive
DTYPE = torch.float32


def device():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def seeded(seed, where):
    """A torch generator on ``where`` (the baselines' noise: repeatable without touching
    torch's global state)."""
    return torch.Generator(device=where).manual_seed(seed)


class DeclaredModel:
    """The task's network, likelihood and prior, with the training data on the device."""

    def __init__(self, task, x_train, y_train, where=None):
        self.task = task
        self.declared = task_network(task.model)     # its initialisation is the declared one's
        self.network = as_network(self.declared)     # the tanh MLP: the same layout
        self.likelihood = task.likelihood["name"]
        self.prior_variance = float(task.prior["variance"])
        self.device = where if where is not None else device()
        self.x_train = self.inputs(x_train)
        self.y_train = (to_tensor(y_train, self.device) if self.likelihood == "softmax"
                        else to_tensor(np.asarray(y_train, float), self.device, DTYPE))
        self.n = len(self.x_train)

    @property
    def num_parameters(self):
        return self.network.num_parameters

    def inputs(self, x):
        return to_tensor(self.network.prepare_inputs(x), self.device, DTYPE)

    def initial(self, rng):
        """The declared initialisation (a unit noise scale for regression), as a tensor."""
        theta = self.declared.initial(rng)
        last = self.network.parameters[-1]
        if self.likelihood == "gaussian" and last.name.endswith("/b") and last.shape == (2,):
            theta[-1] = UNIT_SCALE_RAW
        return to_tensor(theta, self.device, DTYPE)

    def outputs(self, theta, x, ops=TorchOps):
        return self.network.apply(ops, theta, x)

    def potential(self, theta, rows=None, ops=TorchOps, decay=None):
        """U on the training rows ``rows`` (all when None): the likelihood scaled by N / |B|,
        plus the prior's 0.5 theta.theta / variance (``decay``: a per-parameter precision
        in its place)."""
        x, y = (self.x_train, self.y_train) if rows is None else (self.x_train[rows],
                                                                     self.y_train[rows])
        log_lik = log_likelihood(self.likelihood, self.outputs(theta, x, ops), y)
        prior = (0.5 * (theta * theta).sum() / self.prior_variance if decay is None
                 else 0.5 * (decay * theta * theta).sum())
        return -(self.n / len(x)) * log_lik + prior

    def gradient(self, theta, rows=None):
        theta = theta.detach().requires_grad_()
        grad, = torch.autograd.grad(self.potential(theta, rows), theta)
        return grad

    def batches(self, rng, batch):
        """Row indices of one epoch, a fresh random order, ``batch`` rows each."""
        order = torch.as_tensor(rng.permutation(self.n), device=self.device)
        size = min(batch, self.n)
        return [order[start:start + size] for start in range(0, self.n, size)]


def finite(tensor):
    return bool(torch.isfinite(tensor).all())


def predictive(task, model, passes, x_test, rng):
    """Model average of ``passes``: functions from a batch of test inputs to the network's
    outputs, B x outputs for one parameter sample (or stochastic pass), or P x B x outputs
    for P of them at once. Classification: the mean softmax probabilities (N x C);
    regression: draws of y (N x S), draw j from pass j mod P with its Gaussian noise
    (``training.predictive``'s round robin; passes beyond S unused). The test set goes
    through in batches of PREDICT_BATCH rows."""
    classification = task.task_type == "classification"
    parts = []
    with torch.no_grad():
        for start in range(0, len(x_test), PREDICT_BATCH):
            x = model.inputs(x_test[start:start + PREDICT_BATCH])
            outputs = []
            for one in passes:
                output = one(x)
                outputs.append(output if output.dim() == 3 else output[None])
                if not classification and sum(map(len, outputs)) >= task.num_samples:
                    break
            outputs = torch.cat(outputs).double()                     # P x B x outputs
            if classification:
                parts.append(torch.softmax(outputs, dim=-1).mean(dim=0).cpu().numpy())
            else:
                outputs = outputs[:task.num_samples]
                parts.append(torch.stack([outputs[..., 0], torch.nn.functional.softplus(
                    outputs[..., 1])], dim=-1).cpu().numpy())
    if classification:
        probabilities = np.concatenate(parts)
        return probabilities / probabilities.sum(axis=1, keepdims=True)
    moments = np.concatenate(parts, axis=1)                  # P x N x (mean, scale)
    which = np.arange(task.num_samples) % len(moments)
    noise = rng.standard_normal((task.num_samples, moments.shape[1]))
    return (moments[which, :, 0] + moments[which, :, 1] * noise).T


def sample_passes(model, samples):
    """The predictive's passes of a list of parameter vectors."""
    return [lambda x, theta=theta: model.outputs(theta, x) for theta in samples]


class Budget:
    """A share of what is left of the task's budget, and the measured cost of the
    predictive per pass (parameter sample, stochastic pass), so that the final one, with
    however many passes, still fits."""

    def __init__(self, task, share):
        self.deadline = time.monotonic() + share * task.time_left()
        self.per_pass = 0.0         # seconds, once a checkpoint has measured it

    def left(self):
        return self.deadline - time.monotonic()

    def reserve(self, passes):
        return self.per_pass * passes

    def over(self, passes):
        """True when only a final predictive of ``passes`` passes still fits."""
        return self.left() < self.reserve(passes)

    def checkpoint(self, checkpoint, make, passes):
        """``checkpoint(make())`` of a predictive of ``passes`` passes when it and a final one
        of as many both fit; measures its cost. True when it was made."""
        if self.left() < 2 * self.reserve(passes):
            return False
        started = time.monotonic()
        checkpoint(make())
        self.per_pass = max(self.per_pass, (time.monotonic() - started) / passes)
        return True


class Adam:
    """Adam (Kingma & Ba 2015) on a list of tensors, updated in place from their gradients,
    the update of ``training.adam``. Written out rather than torch.optim.Adam: constructing
    the first torch optimiser imports torch._dynamo, about 2 s of a task's budget."""

    def __init__(self, tensors, learning_rate):
        self.tensors, self.learning_rate, self.steps = tensors, learning_rate, 0
        self.first = [torch.zeros_like(t) for t in tensors]
        self.second = [torch.zeros_like(t) for t in tensors]

    def step(self, grads):
        self.steps += 1
        with torch.no_grad():
            for tensor, grad, first, second in zip(self.tensors, grads, self.first,
                                                   self.second):
                first.mul_(0.9).add_(grad, alpha=0.1)
                second.mul_(0.999).addcmul_(grad, grad, value=0.001)
                tensor.sub_(self.learning_rate * (first / (1 - 0.9 ** self.steps)) / (
                    (second / (1 - 0.999 ** self.steps)).sqrt() + 1e-8))


def adam(model, theta, rng, steps, learning_rate, batch, stop, callback=None,
         potential=None):
    """Minibatch Adam on ``potential(theta, rows)`` (the model's by default) from ``theta``,
    at most ``steps`` steps, until ``stop()``; ``callback(theta, step)`` after every step.
    A non-finite step is undone, so the theta returned is finite."""
    potential = potential or model.potential
    theta = theta.detach().clone()
    optimiser = Adam([theta], learning_rate)
    step = 0
    while step < steps:
        for rows in model.batches(rng, batch):
            variable = theta.detach().requires_grad_()
            grad, = torch.autograd.grad(potential(variable, rows), variable)
            if finite(grad):
                before = theta.clone()
                optimiser.step([grad])
                if not finite(theta):
                    theta.copy_(before)
            step += 1
            if callback is not None:
                callback(theta, step)
            if step >= steps or stop():
                return theta
    return theta


def warm_start(model, rng, budget, share, epochs, learning_rate, batch):
    """Adam from the declared initialisation for ``epochs`` epochs, or ``share`` of the budget
    left if that ends first: where the sampling methods start."""
    deadline = time.monotonic() + share * budget.left()
    return adam(model, model.initial(rng), rng, epochs * -(-model.n // batch), learning_rate,
                batch, lambda: time.monotonic() > deadline)

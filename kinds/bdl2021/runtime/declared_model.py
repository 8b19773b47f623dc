"""The declared task model: a network (the tanh MLP below, or one of ``networks.py``) with
an isotropic Gaussian prior.

Parameters live in one flat vector (what HMC moves); ``MLP`` knows how to slice it into
weight matrices and biases. Layer l maps h -> h @ W_l + b_l, tanh on every hidden layer.

Likelihoods, as in the 2021 competition:
- ``softmax``: y ~ Categorical(softmax(f(x)));
- ``gaussian``: f(x) = (mu, r), y ~ Normal(mu, softplus(r)^2).
The prior is N(0, prior_variance) on every weight and bias.

``task_network(model_declaration)`` builds the network a task declares. Every network has
``num_parameters``, ``prepare_inputs(x)``, ``forward(theta, x)``, ``output_and_vjp(theta, x)``
and ``initial(rng)``; the tanh MLP keeps its own hand-written gradient (the references of the
embedded tasks were made with it), any other goes through ``networks.Network``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

try:                       # a package in the programs; a file beside this one in the kit
    from .networks import Network, NetworkError
except ImportError:
    from networks import Network, NetworkError

LIKELIHOODS = ("softmax", "gaussian")


def softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


@dataclass(frozen=True)
class MLP:
    layer_sizes: tuple[int, ...]   # (inputs, hidden..., outputs)

    @property
    def shapes(self) -> list[tuple[tuple[int, int], tuple[int]]]:
        return [((n_in, n_out), (n_out,))
                for n_in, n_out in zip(self.layer_sizes[:-1], self.layer_sizes[1:])]

    @property
    def num_parameters(self) -> int:
        return sum(w[0] * w[1] + b[0] for w, b in self.shapes)

    def unpack(self, theta: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Views of theta as [(W_1, b_1), ...]; writing to them writes to theta."""
        layers, offset = [], 0
        for (n_in, n_out), _ in self.shapes:
            weight = theta[offset: offset + n_in * n_out].reshape(n_in, n_out)
            offset += n_in * n_out
            layers.append((weight, theta[offset: offset + n_out]))
            offset += n_out
        return layers

    def forward(self, theta: np.ndarray, x: np.ndarray) -> np.ndarray:
        h = x
        layers = self.unpack(theta)
        for weight, bias in layers[:-1]:
            h = np.tanh(h @ weight + bias)
        weight, bias = layers[-1]
        return h @ weight + bias

    def forward_with_activations(self, theta, x):
        activations = [x]
        layers = self.unpack(theta)
        for weight, bias in layers[:-1]:
            activations.append(np.tanh(activations[-1] @ weight + bias))
        weight, bias = layers[-1]
        return activations[-1] @ weight + bias, activations, layers

    def backward(self, output_grad, activations, layers) -> np.ndarray:
        """Gradient of a scalar w.r.t. theta, given its gradient w.r.t. the network output."""
        grads = []
        delta = output_grad
        for index in range(len(layers) - 1, -1, -1):
            h = activations[index]
            grads.append((delta.sum(axis=0), (h.T @ delta).ravel()))
            if index:
                delta = (delta @ layers[index][0].T) * (1.0 - h * h)
        return np.concatenate([part for bias, weight in reversed(grads) for part in (weight, bias)])

    @property
    def input_shape(self) -> tuple[int, ...]:
        return (self.layer_sizes[0],)

    def prepare_inputs(self, x) -> np.ndarray:
        x = np.asarray(x)
        return x.reshape(len(x), -1).astype(np.float64, copy=False)

    def output_and_vjp(self, theta, x):
        """Outputs and the map from their gradient to theta's gradient."""
        output, activations, layers = self.forward_with_activations(theta, x)
        return output, lambda output_grad: self.backward(output_grad, activations, layers)

    def initial(self, rng: np.random.Generator) -> np.ndarray:
        """Weights N(0, 1/fan_in), zero biases."""
        theta = np.zeros(self.num_parameters)
        for weight, _ in self.unpack(theta):
            weight[...] = rng.normal(0.0, 1.0 / math.sqrt(weight.shape[0]), weight.shape)
        return theta

    def describe(self) -> str:
        return f"{'-'.join(map(str, self.layer_sizes))} tanh MLP"


def task_network(model: dict, where: str = "model"):
    """The network a task's ``model`` declares; NetworkError names the key at fault."""
    if isinstance(model, dict) and model.get("type") == "mlp" \
            and model.get("activation", "tanh") == "tanh":
        network = Network(model, where)      # checks the declaration
        return MLP(tuple(network.spec["layer_sizes"]))
    return Network(model, where)


def output_size(likelihood: str, num_classes: int | None) -> int:
    return 2 if likelihood == "gaussian" else int(num_classes)


def log_likelihood_and_output_grad(likelihood: str, output: np.ndarray, y: np.ndarray):
    """Sum of log p(y_i | f(x_i)) and its gradient w.r.t. the output f."""
    if likelihood == "softmax":
        log_probs = log_softmax(output)
        rows = np.arange(len(y))
        grad = -np.exp(log_probs)
        grad[rows, y] += 1.0
        return float(log_probs[rows, y].sum()), grad
    mean, raw_scale = output[:, 0], output[:, 1]
    scale = softplus(raw_scale)
    residual = y - mean
    log_lik = -0.5 * math.log(2 * math.pi) * len(y) - np.log(scale).sum() \
        - 0.5 * np.sum((residual / scale) ** 2)
    d_scale = -1.0 / scale + residual ** 2 / scale ** 3
    grad = np.stack([residual / scale ** 2, d_scale * sigmoid(raw_scale)], axis=1)
    return float(log_lik), grad


def walk_full_batches(batches: list, start: int, count: int) -> list:
    """``count`` full minibatches of an epoch, in its order from ``start`` on, wrapping round:
    the epoch calibration times a long epoch in a few steps, each on fresh examples and never
    the short last batch (calibration.py and declared_model_torch.py alike)."""
    full = [rows for rows in batches if len(rows) == len(batches[0])]
    return [full[(start + i) % len(full)] for i in range(count)]


@dataclass(frozen=True)
class Posterior:
    """U(theta) = -log p(y | x, theta) - log p(theta) for one task's training set."""
    model: object            # MLP or networks.Network
    likelihood: str
    prior_variance: float
    x: np.ndarray
    y: np.ndarray

    def potential_and_grad(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        # Far-out leapfrog proposals may underflow the Gaussian scale to 0; the potential
        # is then inf and the Metropolis step rejects the proposal, so no warning is due.
        with np.errstate(all="ignore"):
            output, vjp = self.model.output_and_vjp(theta, self.x)
            log_lik, output_grad = log_likelihood_and_output_grad(self.likelihood, output, self.y)
            log_lik_grad = vjp(output_grad)
        if not math.isfinite(log_lik):
            return math.inf, np.zeros_like(theta)
        potential = -log_lik + 0.5 * float(theta @ theta) / self.prior_variance
        return potential, -log_lik_grad + theta / self.prior_variance


def predictive_probabilities(model, theta: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.exp(log_softmax(model.forward(theta, x)))


def predictive_mean_and_scale(model, theta: np.ndarray, x: np.ndarray):
    output = model.forward(theta, x)
    return output[:, 0], softplus(output[:, 1])

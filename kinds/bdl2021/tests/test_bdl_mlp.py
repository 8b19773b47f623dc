"""The declared model's potential and its gradient (what HMC integrates)."""
import numpy as np
import pytest

from kinds.bdl2021.runtime.declared_model import MLP, Posterior, predictive_probabilities


def numerical_gradient(fn, theta, eps=1e-6):
    grad = np.zeros_like(theta)
    for i in range(theta.size):
        step = np.zeros_like(theta)
        step[i] = eps
        grad[i] = (fn(theta + step) - fn(theta - step)) / (2 * eps)
    return grad


@pytest.mark.parametrize("likelihood, outputs", [("softmax", 3), ("gaussian", 2)])
def test_gradient_matches_finite_differences(likelihood, outputs):
    rng = np.random.default_rng(0)
    model = MLP((4, 5, 6, outputs))
    x = rng.standard_normal((20, 4))
    y = rng.integers(0, 3, 20) if likelihood == "softmax" else rng.standard_normal(20)
    posterior = Posterior(model, likelihood, 0.7, x, y)
    theta = 0.5 * rng.standard_normal(model.num_parameters)
    _, grad = posterior.potential_and_grad(theta)
    expected = numerical_gradient(lambda t: posterior.potential_and_grad(t)[0], theta)
    np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-5)


def test_parameter_layout_is_weight_then_bias_per_layer():
    model = MLP((2, 3, 1))
    theta = np.arange(model.num_parameters, dtype=float)
    (w1, b1), (w2, b2) = model.unpack(theta)
    assert model.num_parameters == 2 * 3 + 3 + 3 * 1 + 1
    np.testing.assert_array_equal(w1, np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(b1, [6, 7, 8])
    np.testing.assert_array_equal(w2.ravel(), [9, 10, 11])
    np.testing.assert_array_equal(b2, [12])


def test_potential_is_infinite_not_nan_when_the_scale_underflows():
    model = MLP((1, 2))
    theta = np.array([0.0, 0.0, 0.0, -1e4])      # raw scale -1e4: softplus underflows to 0
    posterior = Posterior(model, "gaussian", 1.0, np.ones((3, 1)), np.zeros(3))
    potential, _ = posterior.potential_and_grad(theta)
    assert potential == np.inf


def test_predictive_probabilities_are_distributions():
    model = MLP((3, 4, 5))
    theta = np.random.default_rng(1).standard_normal(model.num_parameters) * 3
    probs = predictive_probabilities(model, theta, np.random.default_rng(2).standard_normal((7, 3)))
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    assert probs.min() >= 0

"""The declared networks in PyTorch (``declared_model_torch.TorchOps``) are the numpy networks
of ``networks.py``: in float64, equal outputs, equal log likelihoods, and autograd's gradient of
the potential (log likelihood + Gaussian prior) equal to numpy's reverse accumulation, for
every architecture at small shapes, and ResNet-20-FRN at CIFAR's; the torch form of the
reference SGD's epoch timing returns usable figures. Skipped where torch is not installed
(the project's own venv)."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kinds.bdl2021.runtime import declared_model_torch as dmt  # noqa: E402
from kinds.bdl2021.runtime.declared_model import (MLP, Posterior, task_network,  # noqa: E402
                                                  log_likelihood_and_output_grad)

from bdl_network_examples import example  # noqa: E402

F64 = torch.float64
# name -> (declaration, likelihood); small shapes, every operation of networks.py covered.
CASES = {
    "resnet20_frn": ({"type": "resnet20_frn", "input_shape": [8, 8, 3], "outputs": 10,
                      "width": 4}, "softmax"),
    "resnet20_frn_relu": ({"type": "resnet20_frn", "input_shape": [8, 8, 3], "outputs": 2,
                           "width": 4, "activation": "relu"}, "gaussian"),
    "medmnist_lenet": ({"type": "medmnist_lenet", "input_shape": [28, 28, 3], "outputs": 7},
                       "softmax"),
    "cifar_alexnet": ({"type": "cifar_alexnet", "input_shape": [8, 8, 3], "outputs": 10},
                      "softmax"),
    "retinopathy_cnn": ({"type": "retinopathy_cnn", "input_shape": [32, 32, 3], "outputs": 2},
                        "softmax"),
    "cnn_lstm": ({"type": "cnn_lstm", "input_shape": [24], "outputs": 2, "vocabulary": 50,
                  "embedding": 6, "filters": 5, "cell": 7}, "softmax"),
    "mlp_relu": ({"type": "mlp", "layer_sizes": [5, 50, 2], "activation": "relu"}, "gaussian"),
    "sequential_max_pool": ({"type": "sequential", "input_shape": [9, 7, 2], "outputs": 3,
                             "layers": [{"type": "conv", "channels": 4, "kernel": 3,
                                         "stride": 2},
                                        {"type": "activation", "name": "sigmoid"},
                                        {"type": "conv", "channels": 5, "kernel": 2},
                                        {"type": "activation", "name": "tanh"},
                                        {"type": "max_pool", "size": [2, 3]},
                                        {"type": "flatten"}, {"type": "dense", "units": 3}]},
                            "softmax"),
    "sequential_avg_pool": ({"type": "sequential", "input_shape": [8, 8, 1], "outputs": 2,
                             "layers": [{"type": "conv", "channels": 8, "kernel": 3,
                                         "padding": "valid"},
                                        {"type": "activation", "name": "swish"},
                                        {"type": "avg_pool", "size": 2}, {"type": "flatten"},
                                        {"type": "dense", "units": 2}]}, "gaussian"),
}
PRIOR_VARIANCE = 0.3


@pytest.fixture(autouse=True)
def one_thread():
    """The suite's workers share two cores in CI: torch's threads spinning against each other
    made an epoch a hundred times slower here."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def problem(spec, likelihood, rows=3, seed=0):
    """(network, theta, x, y): theta near the declared initialisation, jittered so that no
    parameter (bias, FRN tau) sits exactly at a tie of max or relu."""
    network, theta, x = example(spec, rows, seed)
    rng = np.random.default_rng(seed + 1)
    outputs = network.spec["outputs"]
    y = rng.integers(0, outputs, rows) if likelihood == "softmax" else rng.standard_normal(rows)
    return network, theta, x, y


def torch_inputs(network, x):
    return dmt.to_tensor(network.prepare_inputs(x), dtype=F64)


@pytest.mark.parametrize("name", list(CASES))
def test_outputs_log_likelihood_and_gradient_equal_numpys(name):
    spec, likelihood = CASES[name]
    network, theta, x, y = problem(spec, likelihood)
    expected = network.forward(theta, x)
    theta_t = dmt.to_tensor(theta, dtype=F64).requires_grad_()
    output = network.apply(dmt.TorchOps, theta_t, torch_inputs(network, x))
    assert output.dtype == F64 and tuple(output.shape) == expected.shape
    np.testing.assert_allclose(output.detach().numpy(), expected, rtol=0, atol=1e-10)

    y_t = dmt.to_tensor(y, dtype=F64)
    log_lik = dmt.log_likelihood(likelihood, output, y_t)
    expected_log_lik, _ = log_likelihood_and_output_grad(likelihood, expected, y)
    assert log_lik.item() == pytest.approx(expected_log_lik, rel=1e-12, abs=1e-10)
    rows = dmt.log_likelihoods(likelihood, output, y_t)
    assert rows.shape == (len(y),) and rows.sum().item() == pytest.approx(log_lik.item())

    potential = -log_lik + 0.5 * (theta_t * theta_t).sum() / PRIOR_VARIANCE
    grad, = torch.autograd.grad(potential, theta_t)
    posterior = Posterior(network, likelihood, PRIOR_VARIANCE, x, y)
    expected_potential, expected_grad = posterior.potential_and_grad(theta)
    assert potential.item() == pytest.approx(expected_potential, rel=1e-12)
    scale = max(1.0, np.abs(expected_grad).max())
    np.testing.assert_allclose(grad.numpy(), expected_grad, rtol=0, atol=1e-10 * scale)


def test_the_tanh_mlp_of_declared_model_is_the_same_network_in_torch():
    """``task_network`` keeps the hand-written tanh MLP; ``as_network`` gives the torch form
    the same layout, so one theta is one network in both."""
    declaration = {"type": "mlp", "layer_sizes": [4, 6, 5, 3]}
    mlp = task_network(declaration)
    assert isinstance(mlp, MLP)
    rng = np.random.default_rng(1)
    theta, x = mlp.initial(rng), rng.standard_normal((5, 4))
    for model in (mlp, declaration):
        network = dmt.as_network(model)
        output = network.apply(dmt.TorchOps, dmt.to_tensor(theta, dtype=F64),
                               torch_inputs(network, x))
        np.testing.assert_allclose(output.numpy(), mlp.forward(theta, x), rtol=0, atol=1e-12)


def test_resnet20_frn_at_cifar_shape_equals_numpy():
    network, theta, x, _ = problem({"type": "resnet20_frn", "input_shape": [32, 32, 3],
                                    "outputs": 10}, "softmax", rows=2)
    assert network.num_parameters == 274_042
    output = network.apply(dmt.TorchOps, dmt.to_tensor(theta, dtype=F64),
                           torch_inputs(network, x))
    np.testing.assert_allclose(output.numpy(), network.forward(theta, x), rtol=0, atol=1e-10)


def test_float32_follows_the_parameters_dtype():
    spec, _ = CASES["medmnist_lenet"]
    network, theta, x, _ = problem(spec, "softmax", rows=2)
    output = network.apply(dmt.TorchOps, dmt.to_tensor(theta, dtype=torch.float32),
                           dmt.to_tensor(network.prepare_inputs(x), dtype=torch.float32))
    assert output.dtype == torch.float32
    np.testing.assert_allclose(output.numpy(), network.forward(theta, x), rtol=1e-4, atol=1e-4)


def test_to_tensor_keeps_integers_int64():
    assert dmt.to_tensor(np.array([1, 2], np.int32), dtype=torch.float32).dtype == torch.int64
    assert dmt.to_tensor(np.array([1.5]), dtype=torch.float32).dtype == torch.float32


@pytest.mark.parametrize("model", [
    {"type": "medmnist_lenet", "input_shape": [28, 28, 3], "outputs": 4},
    MLP((5, 8, 3)),                  # calibration.py's case: the tanh MLP's layer sizes
])
def test_sgd_epoch_seconds_gives_positive_finite_figures_on_the_cpu(model):
    rng = np.random.default_rng(2)
    network = dmt.as_network(model)
    x = rng.standard_normal((40, *network.input_shape)).astype(np.float32)
    y = rng.integers(0, 3, 40)
    figures = dmt.sgd_epoch_seconds(model, "softmax", 1.0, x, y, device="cpu", batch=16,
                                    sample_seconds=0.01, time_cap_seconds=0.5)
    assert 1 <= len(figures) <= 5
    assert all(math.isfinite(f) and f > 0 for f in figures)


def test_sgd_epoch_seconds_sizes_its_samples_from_a_timed_step():
    """With a clock that advances 1/64 s per reading (exact in binary): the timed step (here
    the whole epoch, 6 rows) reads 1/64 s, so a sample runs ceil(0.05 * 64) = 4 epochs and
    reports 1/256 s per epoch; five samples."""
    readings = iter(np.arange(0, 100, 1 / 64))
    x, y = np.zeros((6, 3)), np.array([0.5, -1, 2, 0, 1, 1])
    figures = dmt.sgd_epoch_seconds({"type": "mlp", "layer_sizes": [3, 4, 2]}, "gaussian",
                                    1.0, x, y, device="cpu", clock=lambda: next(readings))
    assert figures == [1 / 256] * 5

"""The declared networks in PyTorch (issue 30, item 1): the same outputs, log likelihoods and
gradients as the numpy form on the same parameter vector, and an epoch of the reference SGD
timed in PyTorch. Skipped where PyTorch is not installed (the CPU image and this project's
test environment; the GPU image has it): run with an interpreter that has torch."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kinds.bdl2021.runtime import calibration  # noqa: E402
from kinds.bdl2021.runtime.declared_model import log_likelihood_and_output_grad  # noqa: E402
from kinds.bdl2021.runtime.declared_model_torch import (TorchOps, log_likelihood,  # noqa: E402
                                                        sgd_epoch_seconds)
from kinds.bdl2021.runtime.networks import Network  # noqa: E402

SMALL = {
    "resnet20_frn": {"type": "resnet20_frn", "input_shape": [8, 8, 3], "outputs": 10, "width": 4},
    "medmnist_lenet": {"type": "medmnist_lenet", "input_shape": [28, 28, 3], "outputs": 7},
    "cifar_alexnet": {"type": "cifar_alexnet", "input_shape": [8, 8, 3], "outputs": 10},
    "retinopathy_cnn": {"type": "retinopathy_cnn", "input_shape": [16, 16, 3], "outputs": 2},
    "cnn_lstm": {"type": "cnn_lstm", "input_shape": [21], "outputs": 2, "vocabulary": 50,
                 "embedding": 6, "filters": 5, "cell": 7},
    "uci_mlp": {"type": "mlp", "activation": "relu", "layer_sizes": [5, 50, 2]},
    "sequential": {"type": "sequential", "input_shape": [9, 9, 2], "outputs": 3, "layers": [
        {"type": "conv", "channels": 4, "kernel": 3, "stride": 2, "padding": "valid"},
        {"type": "activation", "name": "tanh"}, {"type": "max_pool", "size": 2},
        {"type": "conv", "channels": 3, "kernel": 2}, {"type": "activation", "name": "sigmoid"},
        {"type": "avg_pool", "size": [1, 2]}, {"type": "flatten"}, {"type": "dense", "units": 3}]},
}


def example(spec, rows=3, seed=0):
    network = Network(spec)
    rng = np.random.default_rng(seed)
    theta = network.initial(rng) + 0.05 * rng.standard_normal(network.num_parameters)
    x = (rng.integers(0, spec["vocabulary"], (rows, *network.input_shape))
         if network.token_inputs else rng.standard_normal((rows, *network.input_shape)))
    return network, theta, x


@pytest.mark.parametrize("name", sorted(SMALL))
def test_torch_gives_numpys_outputs_log_likelihood_and_gradient(name):
    network, theta, x = example(SMALL[name])
    likelihood = "gaussian" if network.spec["outputs"] == 2 and name == "uci_mlp" else "softmax"
    y = (np.array([0.3, -1.2, 2.0]) if likelihood == "gaussian"
         else np.arange(3) % network.spec["outputs"])
    theta_t = torch.tensor(theta, dtype=torch.float64, requires_grad=True)
    output = network.apply(TorchOps, theta_t, torch.as_tensor(network.prepare_inputs(x)))
    value = log_likelihood(likelihood, output, torch.as_tensor(y))
    value.backward()
    ours, vjp = network.output_and_vjp(theta, x)
    log_lik, output_grad = log_likelihood_and_output_grad(likelihood, ours, y)
    np.testing.assert_allclose(output.detach().numpy(), ours, rtol=1e-10, atol=1e-10)
    assert float(value.detach()) == pytest.approx(log_lik, rel=1e-12)
    np.testing.assert_allclose(theta_t.grad.numpy(), vjp(output_grad), rtol=1e-9, atol=1e-10)


def test_resnet20_frn_at_the_cifar_shape_equals_numpy():
    network, theta, x = example({"type": "resnet20_frn", "input_shape": [32, 32, 3],
                                 "outputs": 10}, rows=2)
    assert network.num_parameters == 274_042
    output = network.apply(TorchOps, torch.as_tensor(theta), torch.as_tensor(x))
    np.testing.assert_allclose(output.numpy(), network.forward(theta, x), rtol=1e-9, atol=1e-9)


def test_an_epoch_is_timed_in_torch_and_the_ingestion_says_so():
    network, _, x = example(SMALL["medmnist_lenet"], rows=40)
    y = np.arange(40) % 7
    samples = sgd_epoch_seconds(network, "softmax", 0.1, x, y, device="cpu", batch=16,
                                step_size=1e-5, samples=3, sample_seconds=0.01, time_cap=5.0,
                                long_epoch=1.0)
    assert len(samples) == 3 and all(np.isfinite(samples)) and min(samples) > 0
    declaration = {"model": SMALL["medmnist_lenet"], "likelihood": {"name": "softmax"},
                   "prior": {"variance": 0.1}}
    timed = calibration.task_epoch_seconds(declaration, x, y)      # torch is installed here
    assert timed["timed_with"] == "PyTorch on cpu" and min(timed["samples"]) > 0

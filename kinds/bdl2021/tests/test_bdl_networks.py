"""The declared networks of the BDL kind (issue 30, item 1): written once
(``runtime/networks.py``), the same function of the same parameter vector in numpy and JAX,
the numpy gradient by reverse accumulation equal to JAX's, the 2021 architectures at their
parameter counts, and a bad declaration named by its key. PyTorch's form has its own file
(``test_bdl_networks_torch.py``), skipped where torch is not installed."""
import numpy as np
import pytest

from kinds.bdl2021.reference import jax_model  # noqa: F401  (float64 JAX, before jax starts)
from kinds.bdl2021.reference.declared_model_jax import JaxOps, log_likelihood
from kinds.bdl2021.runtime import calibration
from kinds.bdl2021.runtime.declared_model import (MLP, log_likelihood_and_output_grad,
                                                  task_network)
from kinds.bdl2021.runtime.networks import Network, NetworkError

import jax
import jax.numpy as jnp

from bdl_network_examples import example

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
# Where the gradient is compared with JAX's: every operation's vector-Jacobian product but
# filter response normalisation is in one of them; ResNet-20-FRN's (XLA takes minutes to
# compile its gradient here) is compared with finite differences.
GRADIENTS = ("cnn_lstm", "sequential", "medmnist_lenet")


@pytest.mark.parametrize("name", sorted(set(SMALL) - {"resnet20_frn"}))   # below, full size
def test_numpy_and_jax_give_the_same_outputs(name):
    network, theta, x = example(SMALL[name])
    ours = network.forward(theta, x)
    theirs = network.apply(JaxOps, jnp.asarray(theta), jnp.asarray(network.prepare_inputs(x)))
    assert ours.shape == (3, network.spec["outputs"])
    np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", GRADIENTS)
def test_the_numpy_gradient_of_the_log_posterior_equals_jaxs(name):
    network, theta, x = example(SMALL[name], rows=4, seed=1)
    y = np.array([0, 1, 1, 0])
    variance = 0.3

    def log_posterior(t):
        output = network.apply(JaxOps, t, jnp.asarray(network.prepare_inputs(x)))
        return log_likelihood("softmax", output, jnp.asarray(y)) - 0.5 * t @ t / variance
    value, grad = jax.jit(jax.value_and_grad(log_posterior))(jnp.asarray(theta))
    output, vjp = network.output_and_vjp(theta, x)
    log_lik, output_grad = log_likelihood_and_output_grad("softmax", output, y)
    ours = vjp(output_grad) - theta / variance
    assert log_lik - 0.5 * theta @ theta / variance == pytest.approx(float(value), rel=1e-12)
    np.testing.assert_allclose(ours, np.asarray(grad), rtol=1e-9, atol=1e-10)


def test_the_numpy_gradient_of_resnet20_frn_matches_finite_differences():
    """Central differences of the log likelihood along random directions: the FRN, residual
    and strided-convolution gradients, in float64."""
    network, theta, x = example(SMALL["resnet20_frn"], rows=2, seed=2)
    y = np.array([3, 7])

    def log_lik(t):
        return log_likelihood_and_output_grad("softmax", network.forward(t, x), y)[0]
    output, vjp = network.output_and_vjp(theta, x)
    grad = vjp(log_likelihood_and_output_grad("softmax", output, y)[1])
    rng = np.random.default_rng(3)
    for _ in range(3):
        direction = rng.standard_normal(network.num_parameters)
        step = 1e-5 / np.linalg.norm(direction)
        numeric = (log_lik(theta + step * direction) - log_lik(theta - step * direction)) / (2 * step)
        assert grad @ direction == pytest.approx(numeric, rel=1e-6, abs=1e-8)


def test_the_2021_networks_have_their_parameter_counts_and_one_layout():
    """The counts of the 2021 starting kit's networks at their data's shapes (its PyTorch and
    Haiku models hold the same numbers of weights)."""
    counts = {("resnet20_frn", (32, 32, 3), 10): 274_042,
              ("medmnist_lenet", (28, 28, 3), 7): 61_751,
              ("cifar_alexnet", (32, 32, 3), 10): 1_488_202,
              ("retinopathy_cnn", (64, 64, 3), 2): 68_738}
    for (kind, shape, outputs), count in counts.items():
        network = Network({"type": kind, "input_shape": list(shape), "outputs": outputs})
        assert network.num_parameters == count, kind
        assert sum(p.size for p in network.parameters) == count
    lstm = Network({"type": "cnn_lstm", "input_shape": [400], "outputs": 2})
    assert lstm.num_parameters == 20000 * 128 + (5 * 128 * 64 + 64) + (192 * 512 + 512) + 258
    names = [p.name for p in Network(SMALL["resnet20_frn"]).parameters]
    assert names[:5] == ["stem/conv/w", "stem/conv/b", "stem/frn/gamma", "stem/frn/beta",
                         "stem/frn/tau"] and names[-2:] == ["head/w", "head/b"]
    assert len(names) == len(set(names))


def test_resnet20_frn_runs_at_the_cifar_shape_in_numpy_and_jax():
    network, theta, x = example({"type": "resnet20_frn", "input_shape": [32, 32, 3],
                                 "outputs": 10}, rows=2)
    ours = network.forward(theta, x)
    theirs = network.apply(JaxOps, jnp.asarray(theta), jnp.asarray(x))
    np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-9, atol=1e-9)


def test_the_tanh_mlp_as_a_network_is_the_mlp():
    """The embedded references were made with MLP; the same declaration through the generic
    network has the same layout and outputs, so either reads the other's parameters."""
    spec = {"type": "mlp", "activation": "tanh", "layer_sizes": [4, 16, 3]}
    assert isinstance(task_network(spec), MLP)
    network, theta, x = example(spec)
    np.testing.assert_allclose(network.forward(theta, x), MLP((4, 16, 3)).forward(theta, x),
                               rtol=1e-12)


@pytest.mark.parametrize("spec, message", [
    ({"type": "vgg16"}, "model.type is 'vgg16'; expected one of mlp, sequential"),
    ({"type": "resnet20_frn", "input_shape": [32, 32], "outputs": 10},
     "model.input_shape is [32, 32]; expected [height, width, channels]"),
    ({"type": "resnet20_frn", "input_shape": [32, 32, 3], "outputs": 10, "activation": "elu"},
     "model.activation is 'elu'; expected 'relu' or 'swish'"),
    ({"type": "medmnist_lenet", "input_shape": [28, 28, 3]}, "model.outputs is None"),
    ({"type": "medmnist_lenet", "input_shape": [8, 8, 3], "outputs": 7},
     "a 5x5 valid convolution does not fit a 4x4 input"),
    ({"type": "sequential", "input_shape": [4, 4, 1], "outputs": 2,
      "layers": [{"type": "dense", "units": 2}]}, "a dense layer of 1 inputs gets shape"),
    ({"type": "sequential", "input_shape": [4, 4, 1], "outputs": 2,
      "layers": [{"type": "conv", "channels": 0, "kernel": 3}]},
     "layers[0].channels is 0; expected a positive integer"),
    ({"type": "sequential", "input_shape": [4, 4, 1], "outputs": 3,
      "layers": [{"type": "flatten"}, {"type": "dense", "units": 2}]},
     "the network ends in shape (2,), expected (3,)"),
    ({"type": "mlp", "layer_sizes": [4, "16", 3]}, "model.layer_sizes is [4, '16', 3]"),
])
def test_a_declaration_no_network_can_be_built_from_is_named_by_its_key(spec, message):
    with pytest.raises(NetworkError) as error:
        task_network(spec, where="wine_task.json")
    assert str(error.value).startswith("wine_task.json: ") and message in str(error.value)
    assert "\n" not in str(error.value)


def test_an_epoch_of_a_convolutional_network_is_timed_in_numpy():
    network, _, x = example(SMALL["medmnist_lenet"], rows=40)
    samples = calibration.sgd_epoch_seconds(network, "softmax", 0.1, x, np.arange(40) % 7)
    assert len(samples) >= 1 and all(np.isfinite(samples)) and min(samples) > 0

"""``Model.to_torch()`` and ``Model.to_keras()`` (kinds/pgdl2020/runtime/frameworks.py): the
same network in PyTorch or Keras, for participants on a GPU image, gives the same logits and
the same gradients as the numpy model. Each test skips, saying why, where its framework is
not installed (this project's .venv has neither; ``codalab/codalab-legacy:gpu310`` has both)."""
import numpy as np
import pytest

from kinds.pgdl2020.runtime import participant
from test_pgdl_participant import CONV, IMAGE, make_conv_model

# Odd sizes with stride 2 under SAME padding (TensorFlow pads one more at the end), average
# pooling that counts only the elements inside the input, batch normalisation on features.
ODD = [{"layer_name": "Conv2D", "filters": 4, "kernel_size": 3, "strides": 2, "padding": "same",
        "activation": "tanh"},
       {"layer_name": "AveragePooling2D", "pool_size": 3, "strides": 2, "padding": "same"},
       {"layer_name": "MaxPooling2D", "pool_size": 2, "strides": 1, "padding": "same"},
       {"layer_name": "Conv2D", "filters": 3, "kernel_size": 1, "activation": "sigmoid"},
       {"layer_name": "GlobalAveragePooling2D"},
       {"layer_name": "BatchNormalization", "center": False},
       {"layer_name": "Dense", "units": 3}]
NETWORKS = {"conv": (CONV, IMAGE), "odd": (ODD, (9, 7, 2))}


@pytest.fixture(params=sorted(NETWORKS))
def network(request, tmp_path):
    layers, shape = NETWORKS[request.param]
    model = participant.Model(make_conv_model(tmp_path / "model_0", seed=7, layers=layers,
                                              shape=shape))
    rng = np.random.default_rng(8)
    return model, rng.standard_normal((6, *shape)).astype(np.float32), rng.integers(0, 3, 6)


def test_to_torch_gives_the_same_logits_and_gradients(network):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed in this Python")
    model, x, y = network
    net = model.to_torch()
    inputs = torch.tensor(x, requires_grad=True)
    logits = net(inputs)
    np.testing.assert_allclose(logits.detach().numpy(), model.logits(x), rtol=1e-5, atol=1e-5)
    torch.nn.functional.cross_entropy(logits, torch.tensor(y)).backward()
    assert net.weight_names == model.weight_names
    for name, parameter, trained, expected in zip(model.weight_names, net.keras_weights,
                                                  model.trainable, model.gradients(x, y)):
        if trained:
            np.testing.assert_allclose(parameter.grad.numpy(), expected, rtol=1e-4, atol=1e-6,
                                       err_msg=name)
        else:
            assert parameter.grad is None and not parameter.requires_grad
    np.testing.assert_allclose(inputs.grad.numpy(), model.input_gradients(x, y), rtol=1e-4,
                               atol=1e-6)


def test_to_keras_gives_the_same_logits(network):
    pytest.importorskip("tensorflow", reason="TensorFlow is not installed in this Python")
    model, x, _ = network
    keras_model = model.to_keras()
    np.testing.assert_allclose(np.asarray(keras_model(x, training=False)), model.logits(x),
                               rtol=1e-5, atol=1e-5)
    for ours, theirs in zip(model.weights, keras_model.get_weights()):
        np.testing.assert_array_equal(ours, theirs)


def test_without_the_framework_the_error_says_which_image_has_it(network, monkeypatch):
    import builtins
    real_import = builtins.__import__

    def refuse(name, *args, **kwargs):
        if name.split(".")[0] in ("torch", "tensorflow"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refuse)
    model = network[0]
    with pytest.raises(ImportError, match="to_torch\\(\\) needs PyTorch.*gpu310"):
        model.to_torch()
    with pytest.raises(ImportError, match="to_keras\\(\\) needs TensorFlow.*gpu310"):
        model.to_keras()

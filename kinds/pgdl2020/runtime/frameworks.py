"""The same network in PyTorch or Keras, for participants who want the GPU (issue 28, item 3).

``codalab/codalab-legacy:gpu310`` carries torch and tensorflow; neither is needed anywhere
else, so each is imported only when asked for. Both adapters take the layer stack and the
weights of a ``Model`` (``layers.py``) and give a network that computes the same logits from
the same (N, H, W, C) inputs.

PyTorch: ``TorchNetwork`` keeps every array in Keras's layout and order, as ``Model.weights``
lists them (a ParameterList; the moving statistics do not require gradients), so that
``[p.grad for p in net.keras_weights]`` lines up with ``Model.gradients``. Its forward pass
turns them into torch's layouts as it goes: NCHW activations, (out, in, kh, kw) kernels.
Padding ``same`` is TensorFlow's, one extra row or column at the end when the total is odd,
and average pooling divides by the elements inside the input, as Keras does.

Keras: ``keras_model`` builds a ``Sequential`` from the config as PGDL's loader did (each
``layer_name`` looked up in ``keras.layers``, the other keys as its arguments) and sets the
weights in ``get_weights()`` order.
"""
from __future__ import annotations

from . import layers as nn


def _torch():
    try:
        import torch
    except ImportError as error:
        raise ImportError("to_torch() needs PyTorch, which this Python lacks (the "
                          f"codalab/codalab-legacy:gpu310 image has it): {error}") from None
    return torch


def _same_padding(layer, x_hw):
    (kh, kw), (sh, sw) = layer.settings["window"], layer.settings["strides"]
    top, bottom = nn._same_padding(x_hw[0], kh, sh)
    left, right = nn._same_padding(x_hw[1], kw, sw)
    return (left, right, top, bottom)                # torch.nn.functional.pad's order


def _activation(torch, name, z):
    if name == "relu":
        return torch.relu(z)
    if name == "tanh":
        return torch.tanh(z)
    if name == "sigmoid":
        return torch.sigmoid(z)
    return z


def _window(torch, layer, x, fill):
    """x padded as the layer's ``padding`` says (NCHW)."""
    if layer.settings["padding"] == "valid":
        return x
    return torch.nn.functional.pad(x, _same_padding(layer, x.shape[2:]), value=fill)


def _conv(torch, layer, params, x):
    F = torch.nn.functional
    kernel = params["kernel"].permute(3, 2, 0, 1)            # (kh, kw, in, out) -> torch's
    z = F.conv2d(_window(torch, layer, x, 0.0), kernel, params.get("bias"),
                 stride=layer.settings["strides"])
    return _activation(torch, layer.settings["activation"], z)


def _max_pool(torch, layer, params, x):
    return torch.nn.functional.max_pool2d(_window(torch, layer, x, float("-inf")),
                                          layer.settings["window"], layer.settings["strides"])


def _average_pool(torch, layer, params, x):
    """Sum over the window / number of its elements inside the input."""
    pool = torch.nn.functional.avg_pool2d
    window, strides = layer.settings["window"], layer.settings["strides"]
    ones = torch.ones_like(x[:1, :1])
    return (pool(_window(torch, layer, x, 0.0), window, strides)
            / pool(_window(torch, layer, ones, 0.0), window, strides))


def _batch_norm(torch, layer, params, x):
    """Written out rather than torch's batch_norm, which refuses a gradient to the moving
    statistics; ``Model.gradients`` gives one, and so does this."""
    shape = (1, -1) + (1,) * (x.dim() - 2)                     # the channels of NCHW or (N, C)
    scale = torch.rsqrt(params["moving_variance"] + layer.settings["epsilon"])
    if "gamma" in params:
        scale = scale * params["gamma"]
    out = (x - params["moving_mean"].reshape(shape)) * scale.reshape(shape)
    return out + params["beta"].reshape(shape) if "beta" in params else out


def _flatten(torch, layer, params, x):
    if x.dim() == 4:
        x = x.permute(0, 2, 3, 1)                             # Keras flattens (H, W, C)
    return x.reshape(x.shape[0], -1)


def _dense(torch, layer, params, x):
    z = x @ params["kernel"]
    if "bias" in params:
        z = z + params["bias"]
    return _activation(torch, layer.settings["activation"], z)


_TORCH = {"Conv2D": _conv, "MaxPooling2D": _max_pool, "AveragePooling2D": _average_pool,
          "GlobalAveragePooling2D": lambda torch, layer, params, x: x.mean(dim=(2, 3)),
          "BatchNormalization": _batch_norm,
          "Activation": lambda torch, layer, params, x: _activation(
              torch, layer.settings["activation"], x),
          "Flatten": _flatten, "Dropout": lambda torch, layer, params, x: x,
          "Dense": _dense}


def to_torch(stack, keys, weights, trainable, device=None):
    """A ``torch.nn.Module`` computing the stack's logits from (N, *input_shape) inputs."""
    torch = _torch()

    class TorchNetwork(torch.nn.Module):
        """The network in PyTorch; ``keras_weights`` in ``Model.weights``'s order."""

        def __init__(self):
            super().__init__()
            self.weight_names = [key for _, _, key in keys]
            self.keras_weights = torch.nn.ParameterList(
                torch.nn.Parameter(torch.tensor(array, dtype=torch.float32),
                                   requires_grad=bool(train))
                for array, train in zip(weights, trainable))

        def forward(self, x):
            params = [{} for _ in stack]
            for (index, param, _), tensor in zip(keys, self.keras_weights):
                params[index][param] = tensor
            if x.dim() == 4:
                x = x.permute(0, 3, 1, 2)                     # NHWC -> NCHW
            for layer, layer_params in zip(stack, params):
                x = _TORCH[layer.kind](torch, layer, layer_params, x)
            return x

    network = TorchNetwork().eval()
    return network if device is None else network.to(device)


def to_keras(config, weights):
    """A Keras ``Sequential`` built from ``config.json`` as PGDL's loader built it."""
    try:
        from tensorflow import keras
    except ImportError as error:
        raise ImportError("to_keras() needs TensorFlow, which this Python lacks (the "
                          f"codalab/codalab-legacy:gpu310 image has it): {error}") from None
    built = [keras.Input(shape=tuple(config["input_shape"]))]
    for entry in config["model_config"]:
        settings = {key: value for key, value in entry.items() if key != "layer_name"}
        built.append(getattr(keras.layers, entry["layer_name"])(**settings))
    model = keras.Sequential(built)
    model.set_weights(list(weights))
    return model

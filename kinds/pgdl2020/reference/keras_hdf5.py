"""PGDL's trained networks as they were shipped: a Keras layer list (``config.json``) and weights
saved with Keras ``model.save_weights`` in HDF5, turned into this kind's ``config.json`` and
``weights.npz`` (organizer side only; h5py is a builder requirement, never shipped).

Keras's HDF5 weights layout: the root attribute ``layer_names`` lists the layers in model order;
each layer is a group whose attribute ``weight_names`` lists its arrays (``dense/kernel:0``,
``dense/bias:0``), each a dataset at ``<layer>/<weight name>``. Layers without weights
(Dropout, Flatten) are listed with no weight names; a long name list is split into attributes
``layer_names0``, ``layer_names1``, ... (checked against Keras's ``save_weights_to_hdf5_group``
and ``save_attributes_to_hdf5_group``, read with the search tool). Keras loads by position:
the i-th layer with weights in the file goes to the i-th layer with weights in the model; so
does this module.

Only what the kind's runtime evaluates is accepted (``runtime/layers.py``, the layers of the
2020 zoos: Conv2D, MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D,
BatchNormalization, Activation, Flatten, Dropout, Dense); anything else is refused, naming the
file, the layer and the value.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np

from ..runtime.layers import Layer, LayerError, layer_names, network, weight_keys

# Keras settings that are counts or sizes: PGDL's loader cast integral floats (64.0) to int.
INTEGER_SETTINGS = ("filters", "units", "kernel_size", "strides", "pool_size")
# Keras's names of each layer kind's arrays (``conv2d/kernel:0``), ours without the layer.
KERAS_WEIGHT = re.compile(r"(?:.*/)?([a-z_]+)(?::\d+)?$")


class ModelError(ValueError):
    """A model file this kind cannot use; the message names the file (and layer)."""


def _integer(value, where: str) -> int:
    """PGDL's loader cast integral floats (64.0) to int; anything else is refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value != int(value) or value < 1:
        raise ModelError(f"{where} must be a positive integer, found {value!r}")
    return int(value)


def _entry(where: str, entry) -> dict:
    """One layer's settings with PGDL's integral floats made integers."""
    if not isinstance(entry, dict):
        raise ModelError(f"{where}: expected a mapping of Keras settings, found "
                         f"{repr(entry)[:60]}")
    entry = dict(entry)
    for key in INTEGER_SETTINGS:
        value = entry.get(key)
        if isinstance(value, list):
            entry[key] = [_integer(v, f"{where} {key}") for v in value]
        elif value is not None:
            entry[key] = _integer(value, f"{where} {key}")
    return entry


def read_config(path: Path) -> dict:
    """``config.json`` (``{"model_config": [Keras layer settings...], "input_shape": [...]}``),
    checked layer by layer against the shape each one receives, the last giving logits."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelError(f"{path}: missing") from None
    except (OSError, ValueError) as error:
        raise ModelError(f"{path}: not readable JSON ({error})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("model_config"), list):
        raise ModelError(f"{path}: expected {{\"model_config\": [layers...], \"input_shape\": "
                         "[...]}")
    shape = raw.get("input_shape")
    if not isinstance(shape, list) or not shape:
        raise ModelError(f"{path}: input_shape must be a non-empty list, found {shape!r}")
    config = {"model_config": [_entry(f"{path}: layer {index}", entry)
                               for index, entry in enumerate(raw["model_config"])],
              "input_shape": [_integer(size, f"{path}: input_shape entry") for size in shape]}
    last = config["model_config"][-1] if config["model_config"] else {}
    if last.get("activation") == "softmax":
        raise ModelError(f"{path}: layer {len(config['model_config']) - 1} "
                         f"({last.get('layer_name')}) has activation 'softmax'; the last layer "
                         "gives the logits (activation linear), as PGDL's networks did")
    stack(config, path)
    return config


def stack(config: dict, path="config.json") -> list[Layer]:
    """The config's layers (``runtime.layers.network``); ModelError naming the file."""
    try:
        layers = network(config["model_config"], tuple(config["input_shape"]))
    except LayerError as error:
        raise ModelError(f"{path}: {error}") from None
    if not layers:
        raise ModelError(f"{path}: model_config lists no layers")
    if len(layers[-1].output_shape) != 1:
        raise ModelError(f"{path}: the last layer's output has shape "
                         f"{layers[-1].output_shape}; a classifier ends in one logit per class "
                         "(add a Flatten or a GlobalAveragePooling2D and a Dense layer)")
    return layers


def weight_shapes(config: dict) -> list[tuple[str, tuple[int, ...]]]:
    """``(key, shape)`` of every array the network holds, in Keras's order
    (``conv2d_0/kernel`` (kh, kw, in, out), ``dense_0/kernel`` (in, out), ...)."""
    layers = stack(config)
    return [(key, layers[index].params[param]) for index, param, key in weight_keys(layers)]


def _attribute_list(node, name: str) -> list[str]:
    """A Keras name-list attribute; Keras splits long ones into ``name0``, ``name1``, ..."""
    if name in node.attrs:
        values = list(node.attrs[name])
    else:
        values, chunk = [], 0
        while f"{name}{chunk}" in node.attrs:
            values.extend(node.attrs[f"{name}{chunk}"])
            chunk += 1
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values]


def read_hdf5_weights(path: Path) -> list[tuple[str, list[tuple[str, np.ndarray]]]]:
    """``[(layer name, [(weight name, array), ...]), ...]`` for the layers that have weights,
    in the file's layer order (Keras's loading order)."""
    import h5py
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: missing")
    try:
        with h5py.File(path, "r") as handle:
            root = handle["model_weights"] if ("layer_names" not in handle.attrs
                                               and "layer_names0" not in handle.attrs
                                               and "model_weights" in handle) else handle
            names = _attribute_list(root, "layer_names")
            if not names:
                raise ModelError(f"{path}: no layer_names attribute (not a Keras "
                                 "save_weights HDF5 file)")
            layers = []
            for layer in names:
                if layer not in root:
                    raise ModelError(f"{path}: layer {layer!r} is listed but has no group")
                group = root[layer]
                weights = []
                for weight in _attribute_list(group, "weight_names"):
                    if weight not in group:
                        raise ModelError(f"{path}: layer {layer!r}: weight {weight!r} is "
                                         "listed but missing")
                    weights.append((weight, np.array(group[weight])))
                if weights:
                    layers.append((layer, weights))
            return layers
    except ModelError:
        raise
    except (OSError, KeyError, ValueError, TypeError) as error:
        raise ModelError(f"{path}: not a readable Keras HDF5 weights file ({error})") from None


def _by_name(path: Path, layer: str, expected: list[str], weights) -> list[np.ndarray]:
    """The layer's arrays in our order: by Keras's names (``kernel:0``, ``gamma:0``), else,
    when the names are not Keras's own, in the file's order (Keras saves in that order)."""
    found = [(KERAS_WEIGHT.match(name), array) for name, array in weights]
    by_name = {match.group(1): array for match, array in found if match}
    if set(by_name) == set(expected) and len(by_name) == len(weights):
        return [by_name[name] for name in expected]
    if len(weights) == len(expected) and not set(by_name) & set(expected):
        return [array for _, array in weights]
    raise ModelError(f"{path}: layer {layer!r} holds {len(weights)} array(s) "
                     f"({', '.join(name for name, _ in weights)}); expected "
                     f"{', '.join(expected)}")


def order_hint(shape: tuple, expected: tuple) -> str:
    if len(shape) == 4 and shape == (expected[3], expected[2], expected[0], expected[1]):
        return " (stored (out, in, kh, kw) as PyTorch does; Keras's order is (kh, kw, in, out))"
    if len(shape) == 2 and shape == expected[::-1]:
        return " (stored (out, in); Keras's order is (in, out))"
    return ""


def layer_weights(config_path: Path, config: dict, weights_path: Path) -> dict[str, np.ndarray]:
    """``{"<layer>_<k>/<array>": float32}`` from a Keras HDF5 weights file, layer by layer
    against the config: the i-th layer with weights in the file is the config's i-th."""
    layers = stack(config, config_path)
    holding = [(index, name) for index, name in enumerate(layer_names(layers))
               if layers[index].params]
    stored = read_hdf5_weights(weights_path)
    if len(stored) != len(holding):
        raise ModelError(f"{weights_path}: weights for {len(stored)} layer(s) "
                         f"({', '.join(name for name, _ in stored) or 'none'}); "
                         f"{config_path.name} has {len(holding)} layer(s) with weights "
                         f"({', '.join(name for _, name in holding)})")
    arrays = {}
    for (index, ours), (theirs, weights) in zip(holding, stored):
        layer = layers[index]
        where = f"{weights_path}: layer {theirs!r} ({layer.kind} {ours})"
        for param, array in zip(layer.params, _by_name(weights_path, theirs,
                                                       list(layer.params), weights)):
            expected = layer.params[param]
            if array.shape != expected:
                raise ModelError(f"{where}: {param} has shape {array.shape}; "
                                 f"{config_path.name} says {expected}"
                                 + order_hint(array.shape, expected))
            if not np.issubdtype(array.dtype, np.floating) or not np.isfinite(array).all():
                raise ModelError(f"{where}: {param} is {array.dtype}; expected finite "
                                 "floating-point numbers")
            arrays[f"{ours}/{param}"] = array.astype(np.float32)
    return arrays

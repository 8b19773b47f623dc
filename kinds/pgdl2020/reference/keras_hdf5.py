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

Only what the kind's runtime evaluates is accepted (``participant._parse_layers``): Dense
(relu, tanh or linear, with a bias) and Dropout, plus a Flatten before the first Dense (the
runtime flattens every example itself, so it is dropped). Anything else is refused, naming the
file and the layer: a convolutional zoo cannot be scored by a measure that only sees an MLP.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

ACTIVATIONS = ("relu", "tanh", "linear")
SUPPORTED = "this kind's runtime evaluates Dense and Dropout layers only"


class ModelError(ValueError):
    """A model file this kind cannot use; the message names the file (and layer)."""


def _integer(value, where: str) -> int:
    """PGDL's loader cast integral floats (64.0) to int; anything else is refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value != int(value) or value < 1:
        raise ModelError(f"{where} must be a positive integer, found {value!r}")
    return int(value)


def read_config(path: Path, keras: bool = True) -> dict:
    """``config.json`` as the runtime reads it: ``{"model_config": [Dense/Dropout entries with
    only the keys the runtime uses], "input_shape": [...]}``; refuses other layers. ``keras``:
    PGDL's original file, where a Flatten before the first Dense is dropped (and needed for
    inputs of several dimensions); else this kind's own, which has none (the runtime
    flattens every example)."""
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
    input_shape = [_integer(size, f"{path}: input_shape entry") for size in shape]
    return {"model_config": _layers(path, raw["model_config"], len(input_shape), keras),
            "input_shape": input_shape}


def _layers(path: Path, entries: list, input_rank: int, keras: bool) -> list[dict]:
    layers, seen_dense = [], False
    for index, entry in enumerate(entries):
        where = f"{path}: layer {index}"
        name = entry.get("layer_name") if isinstance(entry, dict) else None
        if name == "Flatten" and not seen_dense and keras:
            continue                          # the runtime flattens the inputs itself
        if name == "Dense":
            layers.append(_dense(where, entry))
            seen_dense = True
        elif name == "Dropout":
            rate = entry.get("rate", 0.0)
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or \
                    not 0.0 <= rate < 1.0:
                raise ModelError(f"{where} is Dropout with rate {rate!r}; expected a number "
                                 "in [0, 1)")
            layers.append({"layer_name": "Dropout", "rate": float(rate)})
        else:
            raise ModelError(f"{where} is {name if name else repr(entry)[:60]}; {SUPPORTED}")
    if not seen_dense:
        raise ModelError(f"{path}: no Dense layer; {SUPPORTED}")
    flattened = any(isinstance(e, dict) and e.get("layer_name") == "Flatten" for e in entries)
    if keras and input_rank > 1 and not flattened:
        raise ModelError(f"{path}: input_shape has {input_rank} dimensions and no Flatten "
                         "before the first Dense layer (Keras would apply Dense to the last "
                         "axis only; the runtime flattens each example)")
    return layers


def _dense(where: str, entry: dict) -> dict:
    units = _integer(entry.get("units"), f"{where} (Dense) units")
    activation = entry.get("activation") or "linear"
    if activation not in ACTIVATIONS:
        raise ModelError(f"{where} is Dense with activation {activation!r}; the runtime "
                         f"evaluates {', '.join(ACTIVATIONS)} (the last layer gives logits)")
    if entry.get("use_bias", True) is False:
        raise ModelError(f"{where} is Dense without a bias (use_bias false); the runtime's "
                         "Dense layers have one")
    return {"layer_name": "Dense", "units": units, "activation": activation}


def dense_shapes(config: dict) -> list[tuple[tuple[int, int], tuple[int]]]:
    """(kernel, bias) shape of each Dense layer of a config as ``read_config`` gives it: the
    kernel (in, out), as the runtime's ``inputs @ kernel + bias`` needs it, the first ``in``
    the flattened input shape."""
    fan_in, shapes = int(np.prod(config["input_shape"])), []
    for layer in config["model_config"]:
        if layer["layer_name"] == "Dense":
            shapes.append(((fan_in, layer["units"]), (layer["units"],)))
            fan_in = layer["units"]
    return shapes


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


def _kernel_and_bias(path: Path, layer: str, weights) -> tuple[np.ndarray, np.ndarray]:
    """The pair by name (``.../kernel:0``, ``.../bias:0``), else by rank."""
    if len(weights) != 2:
        raise ModelError(f"{path}: layer {layer!r} holds {len(weights)} arrays "
                         f"({', '.join(name for name, _ in weights)}); a Dense layer holds a "
                         "kernel and a bias")
    by_name = {name.rsplit("/", 1)[-1].split(":", 1)[0]: array for name, array in weights}
    if set(by_name) == {"kernel", "bias"}:
        return by_name["kernel"], by_name["bias"]
    ordered = sorted((array for _, array in weights), key=lambda a: -a.ndim)
    return ordered[0], ordered[1]


def dense_weights(config_path: Path, config: dict, weights_path: Path) -> dict[str, np.ndarray]:
    """``{"dense_<k>/kernel": (in, out), "dense_<k>/bias": (out,)}`` float32 from a Keras HDF5
    file, checked against the config's units and input shape."""
    shapes = dense_shapes(config)
    stored = read_hdf5_weights(weights_path)
    if len(stored) != len(shapes):
        raise ModelError(f"{weights_path}: weights for {len(stored)} layer(s) "
                         f"({', '.join(name for name, _ in stored) or 'none'}); "
                         f"{config_path.name} has {len(shapes)} Dense layer(s)")
    arrays = {}
    for k, ((expected, bias_shape), (name, weights)) in enumerate(zip(shapes, stored)):
        kernel, bias = _kernel_and_bias(weights_path, name, weights)
        if kernel.shape != expected or bias.shape != bias_shape:
            raise ModelError(f"{weights_path}: layer {name!r} (Dense {k}): kernel "
                             f"{kernel.shape}, bias {bias.shape}; {config_path.name} says "
                             f"kernel {expected} and bias {bias_shape}")
        for array in (kernel, bias):
            if not np.issubdtype(array.dtype, np.floating) or not np.isfinite(array).all():
                raise ModelError(f"{weights_path}: layer {name!r}: expected finite floating-"
                                 f"point weights, found {array.dtype} with non-finite or "
                                 "non-float values")
        arrays[f"dense_{k}/kernel"] = kernel.astype(np.float32)
        arrays[f"dense_{k}/bias"] = bias.astype(np.float32)
    return arrays

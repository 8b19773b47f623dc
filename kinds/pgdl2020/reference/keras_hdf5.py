"""PGDL's trained networks as they were shipped: a Keras layer list (``config.json``) and weights
saved by Keras in HDF5, turned into this kind's ``config.json`` and ``weights.npz`` (organizer
side only; h5py is a builder requirement, never shipped).

Keras has written its weights in two HDF5 layouts, and this module reads both:

- Keras 2's (``save_weights("weights.hdf5")``, and inside every whole model saved as
  ``model.save("model.h5")``, by Keras 2 or 3, under a group ``model_weights``): the root
  attribute ``layer_names`` lists the layers in model order; each layer is a group whose
  attribute ``weight_names`` lists its arrays (``dense/kernel:0``, ``sequential/dense/kernel``),
  each a dataset at ``<layer>/<weight name>``. Layers without weights (Dropout, Flatten) are
  listed with no weight names; a long name list is split into attributes ``layer_names0``,
  ``layer_names1``, ... (checked against Keras's ``save_weights_to_hdf5_group`` and
  ``save_attributes_to_hdf5_group``, read with the search tool). Keras loads by position: the
  i-th layer with weights in the file goes to the i-th layer with weights in the model; so
  does this module.
- Keras 3's (``save_weights("x.weights.h5")``, and ``model.weights.h5`` inside a ``.keras``
  archive; tf_keras 2.21 writes the same for those names): a group
  ``layers/<group>/vars`` per layer holding its arrays as datasets ``0``, ``1``, ... in
  Keras's order (kernel, bias; gamma, beta, moving_mean, moving_variance, without those
  switched off). The group is named by the layer's class and count, not by the layer's name
  (``saving_lib._save_container_state``: ``conv2d``, ``conv2d_1``, ... for the first, second,
  ... Conv2D), and Keras 3 loads by those names; so does this module. A compiled model's
  file also holds ``optimizer/vars/...``, which is not part of the network and is not read.

Only what the kind's runtime evaluates is accepted (``runtime/layers.py``, the layers of the
2020 zoos: Conv2D, MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D,
BatchNormalization, Activation, Flatten, Dropout, Dense); anything else is refused, naming the
file, the layer and the value.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..runtime.layers import SNAKE, Layer, LayerError, layer_names, network, weight_keys

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


def read_json(path: Path):
    """A JSON file's content; ModelError naming the file."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelError(f"{path}: missing") from None
    except (OSError, ValueError) as error:
        raise ModelError(f"{path}: not readable JSON ({error})") from None


def read_config(path: Path) -> dict:
    """``config.json`` (``{"model_config": [Keras layer settings...], "input_shape": [...]}``),
    checked layer by layer against the shape each one receives, the last giving logits."""
    return layer_list_config(read_json(path), path)


def layer_list_config(raw, path) -> dict:
    """PGDL's layer list, checked (``checked_config``)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("model_config"), list):
        raise ModelError(f"{path}: expected {{\"model_config\": [layers...], \"input_shape\": "
                         "[...]}")
    return checked_config(raw["model_config"], raw.get("input_shape"), path)


def checked_config(entries: list, shape, path) -> dict:
    """``{"model_config": entries, "input_shape": shape}`` with integral floats made integers,
    checked layer by layer against the shape each one receives, the last giving logits."""
    if not isinstance(shape, list) or not shape:
        raise ModelError(f"{path}: input_shape must be a non-empty list, found {shape!r}")
    config = {"model_config": [_entry(f"{path}: layer {index}", entry)
                               for index, entry in enumerate(entries)],
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


@dataclass(frozen=True)
class StoredWeights:
    """The arrays of one Keras weights file, as its layout keeps them."""
    where: str                  # the file (and an archive's member), for messages
    by_position: bool           # Keras 2's layout: matched by position; Keras 3's: by group
    layers: list                # [(layer or group name, [(weight name, array), ...])], each
                                # holding arrays, in the file's order
    model_config: str | None = None     # a whole model's Keras JSON, where the file has one
    config_where: str = ""              # where that JSON is, for messages


LAYOUTS = ("Keras 2's (a root attribute layer_names, or a group model_weights holding it: "
           "save_weights('weights.hdf5'), model.save('model.h5')) or Keras 3's (groups "
           "layers/<class>/vars/<i>: save_weights('weights.weights.h5'), or a .keras archive)")


def read_hdf5_weights(source, where: str) -> StoredWeights:
    """A Keras HDF5 file's weights (a path, or an archive's member in memory), in either
    layout; a whole model's JSON comes along."""
    import h5py
    try:
        with h5py.File(source, "r") as handle:
            config = _text_attribute(handle, "model_config")
            stored = _keras2_or_3(handle, where)
    except ModelError:
        raise
    except (OSError, KeyError, ValueError, TypeError, RuntimeError) as error:
        raise ModelError(f"{where}: not a readable HDF5 file ({error})") from None
    return StoredWeights(stored.where, stored.by_position, stored.layers, config,
                         f"{where}: attribute model_config")


def _keras2_or_3(handle, where: str) -> StoredWeights:
    import h5py
    for root in (handle, handle.get("model_weights")):
        if isinstance(root, h5py.Group) and _attribute_list(root, "layer_names"):
            return StoredWeights(where, True, _keras2_layers(root, where))
    if isinstance(handle.get("layers"), h5py.Group):
        return StoredWeights(where, False, _keras3_layers(handle, where))
    raise ModelError(f"{where}: in neither of Keras's weight layouts: found {_contents(handle)}; "
                     f"expected {LAYOUTS}")


def _contents(handle) -> str:
    groups, attributes = list(handle), list(handle.attrs)
    if not groups and not attributes:
        return "an empty file"
    return "; ".join(f"{what} {', '.join(names[:6])}" + (", ..." if len(names) > 6 else "")
                     for what, names in (("groups", groups), ("attributes", attributes))
                     if names)


def _text_attribute(handle, name: str) -> str | None:
    """A text attribute (h5py gives bytes or str); any other value as text, so that reading
    it as JSON names what it is."""
    value = handle.attrs.get(name)
    if value is None or isinstance(value, str):
        return value
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _keras2_layers(root, where: str) -> list:
    """Keras 2's layout: every layer named in ``layer_names``, in model order."""
    layers = []
    for layer in _attribute_list(root, "layer_names"):
        if layer not in root:
            raise ModelError(f"{where}: layer {layer!r} is listed but has no group")
        group = root[layer]
        weights = []
        for weight in _attribute_list(group, "weight_names"):
            if weight not in group:
                raise ModelError(f"{where}: layer {layer!r}: weight {weight!r} is listed but "
                                 "missing")
            weights.append((weight, np.array(group[weight])))
        if weights:
            layers.append((layer, weights))
    return layers


def _arrays_below(node) -> list[str]:
    """The paths of every dataset below a group, relative to it."""
    import h5py
    found: list[str] = []
    node.visititems(lambda path, item: found.append(path) if isinstance(item, h5py.Dataset)
                    else None)
    return found


def _keras3_layers(handle, where: str) -> list:
    """Keras 3's layout: ``layers/<group>/vars/<i>`` for the layers holding arrays, ``vars``
    in numeric order (the file lists ``10`` before ``2``)."""
    import h5py
    own = handle.get("vars")
    if isinstance(own, h5py.Group) and _arrays_below(own):
        raise ModelError(f"{where}: the model's own vars/ holds arrays; a Sequential model "
                         "keeps every array in its layers' groups (layers/<class>/vars)")
    layers = []
    for name, group in handle["layers"].items():
        if not isinstance(group, h5py.Group):
            raise ModelError(f"{where}: layers/{name} is an array, not a layer's group")
        arrays = _arrays_below(group)
        stray = [path for path in arrays if not re.fullmatch(r"vars/\d+", path)]
        if stray:
            raise ModelError(f"{where}: layers/{name}/{stray[0]} lies outside the numbered "
                             "arrays vars/0, vars/1, ... of a layer: a nested model or a layer "
                             "this kind does not read")
        if arrays:
            ordered = sorted(arrays, key=lambda path: int(path.split("/")[1]))
            layers.append((f"layers/{name}", [(path, np.array(group[path]))
                                              for path in ordered]))
    return layers


def _by_name(path, layer: str, expected: list[str], weights) -> list[np.ndarray]:
    """The layer's arrays in our order: by Keras's names (``kernel:0``, ``gamma:0``), else,
    when the names are not Keras's own (Keras 3's ``vars/0``, ``vars/1``), in the file's
    order (Keras saves in that order)."""
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


def keras3_groups(layers: list[Layer]) -> list[str]:
    """Keras 3's group of each layer: its class in snake case, then ``_1``, ``_2``, ... for the
    later layers of that class (``layers/conv2d``, ``layers/conv2d_1``); the layers' own names
    play no part."""
    counts: dict[str, int] = {}
    groups = []
    for layer in layers:
        count = counts.get(layer.kind, 0)
        counts[layer.kind] = count + 1
        groups.append(f"layers/{SNAKE[layer.kind]}" + (f"_{count}" if count else ""))
    return groups


def _by_position(stored: StoredWeights, layers: list[Layer], config_name: str) -> list:
    """Keras 2's matching: the i-th layer with weights in the file is the config's i-th."""
    holding = [(index, name) for index, name in enumerate(layer_names(layers))
               if layers[index].params]
    if len(stored.layers) != len(holding):
        raise ModelError(f"{stored.where}: weights for {len(stored.layers)} layer(s) "
                         f"({', '.join(name for name, _ in stored.layers) or 'none'}); "
                         f"{config_name} has {len(holding)} layer(s) with weights "
                         f"({', '.join(name for _, name in holding)})")
    return [(index, ours, theirs, weights)
            for (index, ours), (theirs, weights) in zip(holding, stored.layers)]


def _by_group(stored: StoredWeights, layers: list[Layer], config_name: str) -> list:
    """Keras 3's matching: each layer with weights reads the group of its class and count."""
    found = dict(stored.layers)
    names = layer_names(layers)
    pairs = []
    for index, group in enumerate(keras3_groups(layers)):
        if not layers[index].params:
            continue
        if group not in found:
            raise ModelError(f"{stored.where}: no arrays for layer {index} "
                             f"({layers[index].kind} {names[index]}) of {config_name}: Keras 3 "
                             f"keeps them in {group}; the file's groups holding arrays are "
                             f"{', '.join(name for name, _ in stored.layers) or 'none'}")
        pairs.append((index, names[index], group, found.pop(group)))
    if found:
        raise ModelError(f"{stored.where}: {', '.join(found)} hold(s) arrays that no layer of "
                         f"{config_name} takes (Keras 3 names a group by its layer's class "
                         "and count: the first Conv2D's is layers/conv2d, the second's "
                         "layers/conv2d_1)")
    return pairs


def layer_weights(config_name: str, config: dict,
                  stored: StoredWeights) -> dict[str, np.ndarray]:
    """``{"<layer>_<k>/<array>": float32}`` from a Keras weights file, layer by layer against
    the config (``config_name`` names it in messages), matched as Keras matches the file's
    layout."""
    layers = stack(config, config_name)
    match = _by_position if stored.by_position else _by_group
    arrays = {}
    for index, ours, theirs, weights in match(stored, layers, config_name):
        layer = layers[index]
        where = f"{stored.where}: layer {theirs!r} ({layer.kind} {ours})"
        for param, array in zip(layer.params, _by_name(stored.where, theirs,
                                                       list(layer.params), weights)):
            expected = layer.params[param]
            if array.shape != expected:
                raise ModelError(f"{where}: {param} has shape {array.shape}; "
                                 f"{config_name} says {expected}"
                                 + order_hint(array.shape, expected))
            if not np.issubdtype(array.dtype, np.floating) or not np.isfinite(array).all():
                raise ModelError(f"{where}: {param} is {array.dtype}; expected finite "
                                 "floating-point numbers")
            arrays[f"{ours}/{param}"] = array.astype(np.float32)
    return arrays

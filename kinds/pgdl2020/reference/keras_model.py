"""One model folder's network from the files Keras writes, PGDL's and current Keras's alike
(organizer side only).

PGDL's folders hold ``config.json`` (PGDL's layer list) and ``weights.hdf5`` (Keras 2's
``save_weights``). An organizer with a current TensorFlow gets Keras 3, which refuses to
``save_weights`` to that name: it writes ``<name>.weights.h5`` in another layout
(``keras_hdf5.py``), whole models as ``.keras`` archives (a zip of ``config.json``, Keras's
model JSON, and ``model.weights.h5``), or, asked for ``.h5``, as a legacy whole-model HDF5
(Keras 2's weights layout with the model's JSON in the attribute ``model_config``). So this
module accepts, in a model folder:

- the trained weights in one file named ``weights`` or ``model`` and the initial weights
  (optional) in one named ``weights_init`` or ``model_init``, each ending ``.hdf5``, ``.h5``,
  ``.weights.h5`` or ``.keras``; what a file holds is read from the file itself (a zip or
  HDF5, and which layout), not from its name;
- ``config.json``: PGDL's layer list, or a Keras model's JSON (``model.to_json()``, Keras 2's
  or 3's); without it, the JSON saved inside a whole model's file (the trained one).

Keras's model JSON is turned into PGDL's layer list: a Sequential's layers, each with the
settings the runtime reads, so that the converted ``config.json`` is the layer list the
participants' ``Model`` (and its ``to_keras``) reads, whichever Keras wrote the source.
"""
from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .keras_hdf5 import (ModelError, StoredWeights, checked_config, layer_list_config,
                         layer_weights, read_hdf5_weights, read_json)

CONFIG = "config.json"
TRAINED_STEMS = ("weights", "model")
INITIAL_STEMS = ("weights_init", "model_init")
SUFFIXES = (".hdf5", ".h5", ".weights.h5", ".keras")
ARCHIVE_CONFIG, ARCHIVE_WEIGHTS = "config.json", "model.weights.h5"
# The settings of a Keras layer's JSON that the runtime reads or checks (runtime/layers.py).
# The others (name, trainable, initialisers, regularisers, constraints, build_config) do not
# change what a trained network computes, and Keras 3's serialised objects among them would
# not construct in the image's Keras 2 (runtime/frameworks.to_keras passes every key on).
RUNTIME_SETTINGS = ("filters", "kernel_size", "strides", "padding", "data_format",
                    "dilation_rate", "groups", "activation", "use_bias", "pool_size", "axis",
                    "epsilon", "center", "scale", "rate", "units")


@dataclass(frozen=True)
class Network:
    """A model folder's network: PGDL's layer list and its arrays, keyed as weights.npz."""
    config: dict
    weights: dict[str, np.ndarray]
    initial: dict[str, np.ndarray] | None


def read_network(folder: Path) -> Network:
    """The folder's config and weights, every problem a ModelError naming the file. A
    ``config.json`` is read first, so that its problems are named before the weights'."""
    config_file = folder / CONFIG
    given = read_source_config(config_file) if config_file.is_file() else None
    trained_path = weights_file(folder, TRAINED_STEMS, "trained", required=True)
    trained = open_weights(trained_path)
    if given is not None:
        config, config_name = given, CONFIG
    else:
        config, config_name = embedded_config(trained, config_file), \
            f"{trained_path.name}'s model config"
    initial_path = weights_file(folder, INITIAL_STEMS, "initial", required=False)
    initial = None if initial_path is None else layer_weights(config_name, config,
                                                              open_weights(initial_path))
    return Network(config, layer_weights(config_name, config, trained), initial)


# --- which files --------------------------------------------------------------------------

def weights_file(folder: Path, stems: tuple[str, ...], what: str,
                 required: bool) -> Path | None:
    """The one file of the folder named ``<stem><suffix>``; two are refused rather than one
    picked, as they may hold different networks."""
    names = [stem + suffix for stem in stems for suffix in SUFFIXES]
    found = [folder / name for name in names if (folder / name).is_file()]
    if len(found) > 1:
        raise ModelError(f"{folder}: {len(found)} files of {what} weights "
                         f"({', '.join(path.name for path in found)}); keep one")
    if not found and required:
        raise ModelError(f"{folder / names[0]}: missing, and no other file of {what} weights "
                         f"({', '.join(names[1:])})")
    return found[0] if found else None


def open_weights(path: Path) -> StoredWeights:
    """A weights file by its content: a zip is a ``.keras`` archive, else HDF5."""
    import h5py
    try:
        with open(path, "rb") as handle:
            head = handle.read(8)
    except OSError as error:
        raise ModelError(f"{path}: not readable ({error})") from None
    if head.startswith(b"PK"):
        return read_archive(path)
    if h5py.is_hdf5(str(path)):
        return read_hdf5_weights(path, str(path))
    raise ModelError(f"{path}: neither an HDF5 file nor a .keras archive (it starts with "
                     f"{head!r}); Keras saves weights as HDF5 (.hdf5, .h5, .weights.h5) and "
                     "whole models as .keras archives or HDF5")


def read_archive(path: Path) -> StoredWeights:
    """A ``.keras`` archive's weights (``model.weights.h5``, read in memory) with its
    ``config.json``; its ``metadata.json`` and any assets are not needed."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.namelist()
            missing = [name for name in (ARCHIVE_CONFIG, ARCHIVE_WEIGHTS) if name not in members]
            if missing:
                raise ModelError(f"{path}: a zip archive without {' or '.join(missing)} (it "
                                 f"holds {', '.join(members[:6]) or 'nothing'}); a .keras "
                                 f"archive holds {ARCHIVE_CONFIG} and {ARCHIVE_WEIGHTS}")
            config = archive.read(ARCHIVE_CONFIG).decode("utf-8")
            weights = archive.read(ARCHIVE_WEIGHTS)
    except ModelError:
        raise
    except (OSError, EOFError, ValueError, NotImplementedError, zipfile.BadZipFile,
            zipfile.LargeZipFile) as error:
        raise ModelError(f"{path}: not a readable .keras archive ({error})") from None
    stored = read_hdf5_weights(io.BytesIO(weights), f"{path}: {ARCHIVE_WEIGHTS}")
    return replace(stored, model_config=config, config_where=f"{path}: {ARCHIVE_CONFIG}")


# --- which config -------------------------------------------------------------------------

def read_source_config(path: Path) -> dict:
    """A source folder's ``config.json``: PGDL's layer list or a Keras model's JSON."""
    raw = read_json(path)
    if isinstance(raw, dict) and "model_config" in raw:
        return layer_list_config(raw, path)
    if isinstance(raw, dict) and "class_name" in raw:
        return keras_json_config(raw, str(path))
    raise ModelError(f"{path}: neither PGDL's layer list ({{\"model_config\": [...], "
                     "\"input_shape\": [...]}) nor a Keras model's JSON (model.to_json(): "
                     "{\"class_name\": \"Sequential\", \"config\": {...}})")


def embedded_config(stored: StoredWeights, config_file: Path) -> dict:
    """The JSON a whole model's file holds, when the folder has no ``config.json``."""
    if stored.model_config is None:
        raise ModelError(f"{config_file}: missing, and {stored.where} holds weights only: add "
                         "config.json (PGDL's layer list, or model.to_json()) or save the whole "
                         "model (model.save('model.keras'))")
    try:
        raw = json.loads(stored.model_config)
    except ValueError as error:
        raise ModelError(f"{stored.config_where}: not readable JSON ({error})") from None
    if not isinstance(raw, dict):
        raise ModelError(f"{stored.config_where}: expected a Keras model's JSON, found "
                         f"{repr(raw)[:60]}")
    return keras_json_config(raw, stored.config_where)


def keras_json_config(raw: dict, where: str) -> dict:
    """PGDL's layer list from a Keras Sequential model's JSON, Keras 3's or Keras 2's: its
    layers but the InputLayer, with their runtime settings, and the declared input shape."""
    kind = raw.get("class_name")
    if kind != "Sequential":
        raise ModelError(f"{where}: a Keras {kind} model; only Sequential models convert "
                         "(save a keras.Sequential of the same layers, or write PGDL's layer "
                         "list)")
    inner = raw.get("config")
    entries = inner.get("layers") if isinstance(inner, dict) else None
    if not isinstance(entries, list):
        raise ModelError(f"{where}: expected config.layers, a list of layers; found "
                         f"{repr(inner)[:60]}")
    layers = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("config"), dict):
            raise ModelError(f"{where}: layer {len(layers)}: expected {{\"class_name\": ..., "
                             f"\"config\": {{...}}}}, found {repr(entry)[:60]}")
        if entry.get("class_name") != "InputLayer":
            layers.append(_layer_settings(entry, f"{where}: layer {len(layers)}"))
    return checked_config(layers, _input_shape(inner, entries, where), where)


def _input_shape(inner: dict, entries: list, where: str) -> list:
    """One example's shape: the batch shape of the InputLayer (Keras 3's ``batch_shape``,
    Keras 2's ``batch_input_shape``) or of the first layer, else the shape it was built for,
    without the batch."""
    first = entries[0] if entries else {}
    settings = first.get("config", {})
    built = first.get("build_config")
    for batch_shape in (settings.get("batch_shape"), settings.get("batch_input_shape"),
                        built.get("input_shape") if isinstance(built, dict) else None,
                        inner.get("build_input_shape")):
        if isinstance(batch_shape, list) and len(batch_shape) > 1:
            return batch_shape[1:]
    raise ModelError(f"{where}: the model's JSON declares no input shape (no InputLayer's "
                     "batch_shape, no build_input_shape); give the model a keras.Input(shape) "
                     "before saving it")


def _layer_settings(entry: dict, where: str) -> dict:
    """One layer's PGDL entry: ``layer_name`` and the settings the runtime reads. A custom
    class or a dtype other than float32 would compute something else than the runtime does."""
    kind, settings = entry.get("class_name"), entry["config"]
    label = f"{where} ({kind} {settings.get('name')!r})"
    module, registered = entry.get("module"), entry.get("registered_name")
    if registered not in (None, kind) or (module is not None
                                          and not str(module).startswith("keras")):
        raise ModelError(f"{label}: a custom layer (module {module!r}, registered as "
                         f"{registered!r}); only Keras's own layers convert")
    dtype = _dtype_name(settings.get("dtype"))
    if dtype not in (None, "float32"):
        raise ModelError(f"{label}: dtype {dtype!r}; only float32 networks convert (the "
                         "runtime computes in float32)")
    return {"layer_name": kind} | {key: settings[key] for key in RUNTIME_SETTINGS
                                   if key in settings}


def _dtype_name(dtype):
    """Keras 2's ``"float32"`` or Keras 3's policy ``{"class_name": "DTypePolicy", "config":
    {"name": "float32"}}`` as its name."""
    if isinstance(dtype, dict):
        policy = dtype.get("config")
        return policy.get("name") if isinstance(policy, dict) else repr(dtype)[:60]
    return dtype

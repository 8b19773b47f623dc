"""The checks of a zoo in this kind's layout (docs/organizer_data.md), one source for the
builder (``kind.task_problems``, on every zoo a build reads) and ``convert`` (on what it read
from PGDL's files, then on what it wrote, through the builder's check).

A network that loads but computes something else fails only when a participant's measure
runs, and then looks like the participant's fault: kernels stored (out, in), weight keys
counted from 1, a softmax output, labels counted from 1. Each problem is one line naming the
file, the key or layer, what was found and what was expected. Build-side only (numpy).
"""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from .keras_hdf5 import ModelError, order_hint, read_config, stack, weight_shapes
from .npz import read_npz

WEIGHT_FILES = ("weights.npz", "weights_init.npz")      # the second is optional
SHOWN_MODELS = 3


def output_units(config: dict) -> int:
    return stack(config)[-1].output_shape[0]


def weights_problem(where: str, config: dict, arrays: dict) -> str | None:
    """The first thing wrong with one network's weights (``<layer>_<k>/<array>``, k counting
    the layers of that kind in config.json from 0: ``conv2d_0/kernel``, ``dense_1/bias``), or
    None."""
    shapes = weight_shapes(config)
    expected = [key for key, _ in shapes]
    missing = [key for key in expected if key not in arrays]
    if missing or len(arrays) != len(expected):
        first = f"no key {missing[0]}" if missing else f"{len(arrays)} arrays"
        return (f"{where}: {first}; expected {', '.join(expected)} (k counts each kind's "
                f"layers of config.json from 0), found {', '.join(sorted(arrays))}")
    for key, shape in shapes:
        array = arrays[key]
        if array.shape != shape:
            return f"{where}: {key} has shape {array.shape}; expected {shape}" + order_hint(
                array.shape, shape)
        if not np.issubdtype(array.dtype, np.floating) or not np.isfinite(array).all():
            return (f"{where}: {key} is {array.dtype}; expected finite floating-point "
                    "numbers")
    return None


def data_problem(where: str, inputs: np.ndarray, outputs: np.ndarray, input_shape: list[int],
                 num_classes: int) -> str | None:
    """The first thing wrong with a split: inputs (n, *input_shape) or (n, d) floats, outputs
    (n,) integer class indices 0..num_classes-1 (the index of the network's output)."""
    shape, flat = tuple(input_shape), int(np.prod(input_shape))
    if inputs.ndim < 2 or inputs.shape[1:] not in (shape, (flat,)):
        return (f"{where}: inputs have shape {inputs.shape}; expected (n, "
                f"{', '.join(map(str, shape))}) as the networks' input_shape {list(shape)}")
    if not np.issubdtype(inputs.dtype, np.floating) or not np.isfinite(inputs).all():
        return f"{where}: inputs are {inputs.dtype}; expected finite floating-point numbers"
    if outputs.shape != (len(inputs),) or not np.issubdtype(outputs.dtype, np.integer):
        return (f"{where}: outputs are {outputs.dtype} of shape {outputs.shape}; expected "
                f"({len(inputs)},) integer class labels, one per input")
    if len(outputs) and (outputs.min() < 0 or outputs.max() >= num_classes):
        return (f"{where}: outputs span {outputs.min()}..{outputs.max()}; expected class "
                f"indices 0..{num_classes - 1} (the networks have {num_classes} outputs)")
    return None


def _arrays(path: Path) -> dict:
    """An .npz's arrays; ValueError naming the file where it is not one."""
    try:
        return read_npz(path)
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as error:
        raise ValueError(f"{path}: not a readable .npz of numeric arrays ({error})") from None


def model_problem(folder: Path) -> tuple[dict | None, str | None]:
    """(config, the first problem) of one network's folder: its config, then each weights
    file (a mistake in one is usually in the other too: one line says it)."""
    try:
        config = read_config(folder / "config.json")
    except ModelError as error:
        return None, str(error)
    for name in WEIGHT_FILES:
        path = folder / name
        if not path.is_file():
            continue
        try:
            problem = weights_problem(str(path), config, _arrays(path))
        except ValueError as error:
            problem = str(error)
        if problem:
            return config, problem
    return config, None


def zoo_problems(folder: Path, model_ids: list[str], train_data: Path) -> list[str]:
    """What is wrong with a zoo's networks and training data. A mistake made in every network
    is one line: the first broken network's problem, naming how many more are broken."""
    broken, configs = [], {}
    for model in model_ids:
        config, problem = model_problem(folder / model)
        if problem:
            broken.append((model, problem))
        else:
            configs[model] = config
    if broken:
        first, others = broken[0][1], [model for model, _ in broken[1:]]
        if others:
            more = f" and {len(others) - SHOWN_MODELS} more" if len(others) > SHOWN_MODELS else ""
            first += (f" [{len(others)} more network(s) fail too: "
                      f"{', '.join(others[:SHOWN_MODELS])}{more}]")
        return [first]
    shared = shared_problem(str(folder), list(configs.values()))
    return [shared] if shared else _train_data_problems(train_data, configs)


def shared_problem(where: str, configs: list[dict]) -> str | None:
    """A task's networks share their input shape and output width."""
    shapes = {tuple(c["input_shape"]) for c in configs}
    classes = {output_units(c) for c in configs}
    if len(shapes) > 1 or len(classes) > 1:
        return (f"{where}: the networks disagree on input_shape {sorted(shapes)} or output "
                f"units {sorted(classes)}; a task's networks share both")
    return None


def _train_data_problems(path: Path, configs: dict) -> list[str]:
    config = next(iter(configs.values()))
    try:
        arrays = _arrays(path)
    except ValueError as error:
        return [str(error)]
    if not {"inputs", "outputs"} <= set(arrays):
        return [f"{path}: keys {', '.join(sorted(arrays))}; expected inputs and outputs"]
    problem = data_problem(str(path), arrays["inputs"], arrays["outputs"],
                           config["input_shape"], output_units(config))
    return [problem] if problem else []

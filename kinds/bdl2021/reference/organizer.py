"""HMC references for an organizer's own tasks: ``python -m reference_data generate
--data-root DIR``.

A task folder in the documented format (docs/organizer_data.md): ``<task>.npz`` with the true
``y_test`` and ``<task>_task.json`` whose model is the declared network (the tanh MLP
``{"type": "mlp", "activation": "tanh", "layer_sizes": [inputs, hidden..., outputs]}``, or
any network of ``runtime/networks.py``, e.g. ``{"type": "resnet20_frn", "input_shape":
[32, 32, 3], "outputs": 10}``), with its likelihood and Gaussian prior. Optional ``"hmc": {"num_chains", "num_warmup", "num_samples"}``
and ``"seed"`` in the declaration set the run (defaults: 4 chains, 1000 + 1000 draws, seed 0).
The command writes the model average, each chain's predictive and the diagnostics next to the
inputs, under the same convergence gate as the embedded tasks.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from runtime.formats import FormatError
from kinds.bdl2021.runtime.declared_model import MLP, NetworkError, task_network
from kinds.bdl2021.runtime.formats import read_task_inputs
from kinds.bdl2021.runtime.settings import Block

from .datasets import PreparedTask
from .tasks import HMCSettings, TaskDeclaration

DEFAULT_HMC = {"num_chains": 4, "num_warmup": 1000, "num_samples": 1000}
LIKELIHOOD_KINDS = {"softmax": "classification", "gaussian": "regression"}
MAX_SHOWN_LABELS = 12


def task_names(root: Path) -> list[str]:
    return sorted(folder.name for folder in Path(root).iterdir()
                  if (folder / f"{folder.name}_task.json").is_file())


def _declared(declaration: dict, path: Path, key: str, allowed) -> str:
    value = declaration
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value not in allowed:
        raise FormatError(f"{path}: {key} is {value!r}; references can be made for "
                          f"{', '.join(map(repr, allowed))}")
    return value


def _task_kind(declaration: dict, path: Path, likelihood: str) -> str:
    """The likelihood decides the task type; a declared ``kind`` must agree with it."""
    kind = LIKELIHOOD_KINDS[likelihood]
    declared = declaration.get("kind", kind)
    if declared != kind:
        fitting = [name for name, of in LIKELIHOOD_KINDS.items() if of == declared]
        raise FormatError(f"{path}: likelihood.name {likelihood!r} needs a {kind} task, but "
                          f"kind is {declared!r}" + (f"; a {declared} task takes likelihood "
                                                     f"{fitting[0]!r}" if fitting else ""))
    return kind


def _shown(values: np.ndarray) -> str:
    """Distinct values as a reader checks them: all of a few, else the range."""
    if len(values) <= MAX_SHOWN_LABELS:
        return ", ".join(f"{value:g}" for value in values)
    return f"{values[0]:g} .. {values[-1]:g} ({len(values)} distinct values)"


def _check_labels(path: Path, inputs, classes: int) -> None:
    """Classification labels index the network's outputs: integers 0..classes-1."""
    for key in ("y_train", "y_test"):
        values = np.unique(np.asarray(getattr(inputs, key), dtype=float))
        if np.all(values == np.round(values)) and values.min() >= 0 and values.max() < classes:
            continue
        hint = (" (they look 1-based: subtract 1 from every label)"
                if values.min() == 1 and values.max() == classes else "")
        raise FormatError(f"{path}: {key} holds the labels {_shown(values)}; classification "
                          f"labels must be the integers 0..{classes - 1}, one per output of "
                          f"the network (it has {classes} outputs){hint}")


def _check_outputs(path: Path, inputs_path: Path, inputs, network, kind: str) -> int:
    """The network reads these inputs and has one output per class (2 for regression);
    returns the number of outputs."""
    outputs = network.layer_sizes[-1] if isinstance(network, MLP) else network.spec["outputs"]
    if kind == "classification":
        _check_labels(inputs_path, inputs, outputs)
    expected = 2 if kind == "regression" else int(inputs.y_train.max()) + 1
    example = inputs.x_train.shape[1:]
    if isinstance(network, MLP):
        wanted, key = [int(np.prod(example)), expected], "model.layer_sizes"
        if [network.layer_sizes[0], outputs] != wanted:
            raise FormatError(f"{path}: {key} is {list(network.layer_sizes)}; expected "
                              f"[{wanted[0]}, hidden sizes..., {wanted[1]}] for these inputs "
                              "and outputs")
        return outputs
    if tuple(example) != network.input_shape:
        raise FormatError(f"{path}: model.input_shape is {list(network.input_shape)}, but "
                          f"{inputs_path} holds x_train examples of shape {list(example)}")
    if outputs < expected or (kind == "regression" and outputs != 2):
        raise FormatError(f"{path}: model.outputs is {outputs}; expected {expected} for "
                          f"these {'labels' if kind == 'classification' else 'targets'}")
    return outputs


def load_task(root: Path, name: str, overrides: dict) -> tuple[TaskDeclaration, PreparedTask]:
    """The task's declaration as the samplers need it, and its arrays; FormatError names the
    file and key of anything the declared network cannot be built from."""
    path = Path(root) / name / f"{name}_task.json"
    try:
        declaration = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise FormatError(f"{path}: not a readable JSON declaration ({error})") from None
    try:
        network = task_network(declaration.get("model"), where=str(path))
    except NetworkError as error:
        raise FormatError(str(error)) from None
    likelihood = _declared(declaration, path, "likelihood.name", tuple(LIKELIHOOD_KINDS))
    _declared(declaration, path, "prior.distribution", ("normal",))
    variance = declaration["prior"].get("variance")
    if not isinstance(variance, (int, float)) or not variance > 0:
        raise FormatError(f"{path}: prior.variance is {variance!r}; expected a positive number")
    kind = _task_kind(declaration, path, likelihood)
    inputs_path = Path(root) / name / f"{name}.npz"
    inputs = read_task_inputs(inputs_path)
    outputs = _check_outputs(path, inputs_path, inputs, network, kind)
    if kind == "classification" and declaration.get("num_classes", outputs) != outputs:
        raise FormatError(f"{path}: num_classes is {declaration['num_classes']!r}, but "
                          f"the model has {outputs} outputs; expected the same number of "
                          "classes in both")
    settings = {**DEFAULT_HMC, **declaration.get("hmc", {}), **overrides}
    task = TaskDeclaration(
        name=name, phase=declaration.get("phase", "evaluation"),
        summary=declaration.get("summary", ""), dataset="", kind=kind,
        hidden_layers=tuple(network.layer_sizes[1:-1]) if isinstance(network, MLP) else (),
        prior_variance=float(variance),
        hmc=HMCSettings(settings["num_chains"], settings["num_warmup"], settings["num_samples"],
                        trajectory_length=0.0), seed=int(declaration.get("seed", 0)),
        network=None if isinstance(network, MLP) else declaration["model"])
    blocks = tuple(Block(b["name"], b["start"], b["stop"])
                   for b in declaration.get("test_blocks", ())) or (
        Block("all", 0, len(inputs.x_test)),)
    x_train = network.prepare_inputs(inputs.x_train)
    x_test = network.prepare_inputs(inputs.x_test)
    y_train, y_test = ((inputs.y_train.astype(np.int64), inputs.y_test.astype(np.int64))
                       if kind == "classification" else (inputs.y_train, inputs.y_test))
    return task, PreparedTask(x_train, y_train, x_test, y_test, blocks, (), {})

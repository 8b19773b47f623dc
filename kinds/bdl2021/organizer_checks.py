"""The organizer's BDL task files, checked before anything is built (docs/organizer_data.md).

``task_problems(task)`` reads a task's declaration and files where the organizer put them and
returns one line per problem, each naming the organizer's own file, what was found and what
was expected; the core (``bundle/phase_plan.py``) calls it for every task of the spec;
``unconverged_reference_problems(task)`` says which checks of the convergence gate the
references failed, which the spec may accept (``bundle/spec.py``). A
transposed regression reference (N x S where S x N is expected) gets the "looks transposed"
hint participants' files get (``runtime/formats/matrix_files.py``).

Inputs are read through memory maps, their values scanned a block at a time and parameter
draws checked from their headers: a CIFAR-sized task is checked in bounded memory.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from runtime.formats import read_matrix
from runtime.formats.matrix_files import FormatError

from .reference.gate import gate_checks, read_diagnostics
from .reference.task_files import task_files
from .runtime.declared_model import MLP, task_network
from .runtime.formats import (array_blocks, npz_headers, read_batch_means, read_chain_probs,
                              read_chain_samples, read_reference_mcse, read_task_inputs)
from .runtime.networks import Network, NetworkError
from .runtime.score_types import CLASSIFICATION, TASK_TYPES

REQUIRED_KEYS = ("kind", "n_train", "n_test", "test_blocks")
WIDTH_KEY = {"classification": "num_classes", "regression": "num_samples"}


def _positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def declaration_problems(path: Path, declaration: dict) -> list[str]:
    kind = declaration.get("kind")
    if kind not in TASK_TYPES:
        return [f"{path}: key 'kind': found {kind!r}, expected one of {', '.join(TASK_TYPES)}"]
    required = REQUIRED_KEYS + (WIDTH_KEY[kind],)
    missing = [key for key in required if key not in declaration]
    if missing:
        return [f"{path}: missing required key(s) {', '.join(missing)} (a {kind} declaration "
                f"holds at least {', '.join(required)}; see docs/organizer_data.md)"]
    problems = [f"{path}: key {key!r}: found {declaration[key]!r}, expected a positive integer"
                for key in ("n_train", "n_test", WIDTH_KEY[kind])
                if not _positive_int(declaration[key])]
    blocks = declaration["test_blocks"]
    if not isinstance(blocks, list) or not blocks:
        problems.append(f"{path}: key 'test_blocks': found {blocks!r}, expected a list of "
                        "{name, start, stop} covering the test points")
    elif _positive_int(declaration["n_test"]):
        for index, block in enumerate(blocks):
            ok = (isinstance(block, dict) and isinstance(block.get("name"), str)
                  and isinstance(block.get("start"), int) and isinstance(block.get("stop"), int)
                  and 0 <= block["start"] < block["stop"] <= declaration["n_test"])
            if not ok:
                problems.append(f"{path}: test_blocks[{index}]: found {block!r}, expected "
                                f"{{name, start, stop}} with 0 <= start < stop <= n_test "
                                f"({declaration['n_test']})")
    return problems


def _shape_problem(path: Path, shape: tuple, expected: tuple, labels: tuple) -> str | None:
    """A shape mismatch in the file's own orientation, with the transposed hint."""
    if all(want is None or want == found for want, found in zip(expected, shape)):
        return None
    wanted = " x ".join(f"{want if want is not None else '?'} ({label})"
                        for want, label in zip(expected, labels))
    message = (f"{path}: wrong shape: expected {wanted}, found "
               f"{' x '.join(str(n) for n in shape)}")
    known = [(i, want) for i, want in enumerate(expected) if want is not None]
    swapped = tuple(reversed(shape))
    if len(shape) == 2 and shape[0] != shape[1] and all(
            want == swapped[i] for i, want in known):
        singular = {"test points": "test point", "samples": "sample"}.get(labels[0], labels[0])
        message += f" (the file looks transposed: expected one row per {singular})"
    return message


def task_problems(task) -> list[str]:
    """Every problem of one task's declaration and files, [] when it can be built."""
    paths = task_files(task.folder.parent, task.name, task.task_type)
    declaration = task.declaration
    problems = declaration_problems(paths.declaration, declaration)
    if problems:
        return problems
    n_test, n_train = declaration["n_test"], declaration["n_train"]
    classification = task.task_type == CLASSIFICATION
    width = declaration["num_classes" if classification else "num_samples"]
    try:
        inputs = read_task_inputs(paths.inputs, mapped=True)
    except FormatError as error:
        inputs = None
        problems.append(f"{error} (expected the task's inputs: an .npz with x_train, y_train, "
                        "x_test, y_test; see docs/organizer_data.md)")
    else:
        for key, rows, declared in (("x_test", len(inputs.x_test), ("n_test", n_test)),
                                    ("x_train", len(inputs.x_train), ("n_train", n_train))):
            if rows != declared[1]:
                problems.append(f"{paths.inputs}: {key} has {rows} rows, but {paths.declaration} "
                                f"declares {declared[0]} = {declared[1]}")
    try:
        network = task_network(declaration.get("model"), where=str(paths.declaration))
    except NetworkError as error:
        problems.append(str(error))
    else:
        if inputs is not None:
            problems += example_problems(paths, network, inputs)
        problems += parameter_problems(paths, declaration.get("model"))
    if not paths.reference.is_file():
        problems.append(f"{paths.reference}: file does not exist (expected the HMC reference: "
                        + ("N x C class probabilities" if classification
                           else "S x N predictive samples, one row per sample")
                        + "; see docs/organizer_data.md)")
    else:
        try:
            reference = read_matrix(paths.reference)
        except FormatError as error:
            problems.append(str(error))
        else:
            expected, labels = (((n_test, width), ("test points", "classes")) if classification
                                else ((None, n_test), ("samples", "test points")))
            problem = _shape_problem(paths.reference, reference.shape, expected, labels)
            if problem:
                problems.append(problem)
            elif classification and not np.allclose(reference.sum(axis=1), 1.0, atol=1e-3):
                row = int(np.argmax(np.abs(reference.sum(axis=1) - 1.0)))
                problems.append(f"{paths.reference}: row {row + 1} sums to "
                                f"{reference[row].sum():.6g}, expected class probabilities "
                                "summing to 1 in every row")
    if paths.chain_reference.is_file():
        try:
            if classification:
                read_chain_probs(paths.chain_reference, n_points=n_test, n_classes=width)
            else:
                read_chain_samples(paths.chain_reference, n_points=n_test)
        except FormatError as error:
            problems.append(str(error))
    if classification and paths.batch_means.is_file():
        try:
            read_batch_means(paths.batch_means, n_points=n_test, n_classes=width)
        except FormatError as error:
            problems.append(str(error))
    if paths.reference_mcse.is_file():
        try:
            read_reference_mcse(paths.reference_mcse, n_points=n_test,
                                n_columns=width if classification else 2)
        except FormatError as error:
            problems.append(str(error))
    if paths.test_labels.is_file():
        try:
            read_matrix(paths.test_labels, n_rows=n_test, n_cols=1, row_label="test points",
                        col_label="label")
        except FormatError as error:
            problems.append(str(error))
    if paths.diagnostics.is_file():
        try:
            read_diagnostics(paths.diagnostics)
        except FormatError as error:
            problems.append(str(error))
    return problems


def example_problems(paths, network, inputs) -> list[str]:
    """x_train and x_test against the declared network: one example's shape (the MLP reads it
    flattened) and, for token ids, integers within the vocabulary."""
    problems = []
    for key in ("x_train", "x_test"):
        x = getattr(inputs, key)
        problem = (_mlp_shape_problem(x, network) if isinstance(network, MLP)
                   else _network_shape_problem(x, network)
                   or (_token_problem(x, network) if network.token_inputs else None))
        if problem:
            problems.append(f"{paths.inputs}: {key} {problem} in {paths.declaration}")
    return problems


def _mlp_shape_problem(x, network) -> str | None:
    features = int(np.prod(x.shape[1:]))
    if features == network.layer_sizes[0]:
        return None
    return (f"holds examples of shape {tuple(x.shape[1:])} ({features} features flattened); "
            f"expected {network.layer_sizes[0]} features, as declared by model.layer_sizes[0]")


def _network_shape_problem(x, network) -> str | None:
    if tuple(x.shape[1:]) == network.input_shape:
        return None
    return (f"holds examples of shape {tuple(x.shape[1:])}; expected "
            f"{network.input_shape}, as declared by model.input_shape "
            f"{list(network.input_shape)}")


def _token_problem(x, network) -> str | None:
    """Token ids must index the embedding: integers in [0, vocabulary)."""
    vocabulary = network.spec["vocabulary"]
    expected = (f"expected token ids, integers in [0, {vocabulary}), as model.type "
                f"'cnn_lstm' with model.vocabulary {vocabulary} declares")
    if x.dtype.kind not in "iu":
        return f"has dtype {x.dtype}; {expected}"
    low, high = _value_range(x)
    if low < 0 or high >= vocabulary:
        return f"holds values from {low} to {high}; {expected}"
    return None


def _value_range(array) -> tuple[int, int]:
    """min and max, a block at a time (bounded memory on a memory map)."""
    low = high = None
    for _, block in array_blocks(array):
        low = int(block.min()) if low is None else min(low, int(block.min()))
        high = int(block.max()) if high is None else max(high, int(block.max()))
    return low, high


def parameter_problems(paths, model) -> list[str]:
    """A declared parameter count against the declared layout, and the organizer's parameter
    draws (optional ``<task>_parameters.npz``) against it, from the .npy headers alone: one array per parameter, each of shape
    (chains, draws, *the parameter's shape), the same (chains, draws) for all."""
    layout = {p.name: p.shape for p in Network(model).parameters}
    problems = _declared_count_problem(paths, model, layout)
    path = paths.parameters
    if not path.is_file():
        return problems
    try:
        headers = npz_headers(path)
    except FormatError as error:
        return problems + [f"{error} (expected the parameter draws: an .npz with one array per "
                           "parameter; see docs/organizer_data.md)"]
    problems += [f"{path}: no array {name!r}; expected one per parameter of the declared model, "
                 f"shape (chains, draws, {', '.join(map(str, shape))})"
                 for name, shape in layout.items() if name not in headers]
    problems += [f"{path}: array {name!r} is no parameter of the declared model (expected "
                 f"names: {', '.join(layout)})" for name in headers if name not in layout]
    return problems + _draw_shape_problems(path, layout, headers)


def _declared_count_problem(paths, model, layout) -> list[str]:
    declared = model.get("num_parameters")
    count = sum(int(np.prod(shape)) for shape in layout.values())
    if declared is None or declared == count:
        return []
    return [f"{paths.declaration}: model.num_parameters is {declared!r}, but the declared "
            f"model has {count} parameters (its layout: the names and shapes the starting "
            "kit's networks.py gives; see docs/organizer_data.md)"]


def _draw_shape_problems(path, layout, headers) -> list[str]:
    problems, leading = [], {}
    for name, shape in layout.items():
        if name not in headers:
            continue
        found, dtype = headers[name]
        if dtype.kind != "f":
            problems.append(f"{path}: array {name!r} has dtype {dtype}; expected floats")
        if len(found) != len(shape) + 2 or tuple(found[2:]) != tuple(shape):
            problems.append(f"{path}: array {name!r} has shape {found}; expected (chains, "
                            f"draws, {', '.join(map(str, shape))}), the declared shape "
                            f"{tuple(shape)} after two leading axes")
        else:
            leading.setdefault(tuple(found[:2]), []).append(name)
    if len(leading) > 1:
        first, *others = sorted(leading.items(), key=lambda item: -len(item[1]))
        problems += [f"{path}: array {names[0]!r} holds (chains, draws) = {counts}, but "
                     f"{first[1][0]!r} holds {first[0]}; expected the same draws for every "
                     "parameter" for counts, names in others]
    return problems


def convergence_failures(task) -> list[str]:
    """The checks of the convergence gate the task's references failed, as their diagnostics
    state them; none without a diagnostics file (references made elsewhere carry none)."""
    path = task_files(task.folder.parent, task.name, task.task_type).diagnostics
    if not path.is_file():
        return []
    try:
        diagnostics = read_diagnostics(path)
    except FormatError:
        return []                  # task_problems reports the file
    return [check.failure() for check in gate_checks(diagnostics) if not check.passed]


def unconverged_reference_problems(task) -> list[str]:
    """The core's check of the references' own quality (``bundle/spec.py``): the failed
    convergence checks, naming the diagnostics file."""
    failures = convergence_failures(task)
    path = task_files(task.folder.parent, task.name, task.task_type).diagnostics
    return [f"{path}: the references did not pass the convergence gate: "
            + "; ".join(failures)] if failures else []

"""The organizer's BDL task files, checked before anything is built (docs/organizer_data.md).

``task_problems(task)`` reads a task's declaration and files where the organizer put them and
returns one line per problem, each naming the organizer's own file, what was found and what
was expected; the core (``bundle/phase_plan.py``) calls it for every task of the spec;
``unconverged_reference_problems(task)`` says which checks of the convergence gate the
references failed, which the spec may accept (``bundle/spec.py``). A
transposed regression reference (N x S where S x N is expected) gets the "looks transposed"
hint participants' files get (``runtime/formats/matrix_files.py``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from runtime.formats import read_matrix
from runtime.formats.matrix_files import FormatError

from .reference.gate import gate_checks, read_diagnostics
from .reference.task_files import task_files
from .runtime.formats import read_chain_probs, read_chain_samples, read_task_inputs
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
        inputs = read_task_inputs(paths.inputs)
    except FormatError as error:
        problems.append(f"{error} (expected the task's inputs: an .npz with x_train, y_train, "
                        "x_test, y_test; see docs/organizer_data.md)")
    else:
        for key, rows, declared in (("x_test", len(inputs.x_test), ("n_test", n_test)),
                                    ("x_train", len(inputs.x_train), ("n_train", n_train))):
            if rows != declared[1]:
                problems.append(f"{paths.inputs}: {key} has {rows} rows, but {paths.declaration} "
                                f"declares {declared[0]} = {declared[1]}")
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

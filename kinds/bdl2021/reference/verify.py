"""Check generated references: manifest, loadability with the declared shapes, convergence.

The README's main command runs it first (``python -m reference_data verify``), and the
tests run it on the committed files. An organizer's own data root (no manifest; true labels in
the inputs) is checked as the build checks it, with the convergence gate.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bundle.phase_plan import task_data_problems
from bundle.task_declarations import declaration_path
from runtime.formats import FormatError
from kinds.bdl2021.runtime.declared_model import MLP, NetworkError, task_network
from kinds.bdl2021.runtime.formats import (read_chain_probs, read_chain_samples,
                                           read_classification_probs, read_regression_samples,
                                           read_task_inputs)
from kinds.bdl2021.runtime.formats import SAMPLES_BY_POINTS

from .gate import gate_problems, read_diagnostics
from .manifest import verify_manifest
from .organizer import task_names as organizer_task_names
from .task_files import DEFAULT_ROOT, MANIFEST_NAME, UNLISTED_IN_MANIFEST, task_files

PROBABILITY_SUM_TOLERANCE = 1e-9


@dataclass
class VerifiedTask:
    declaration: dict
    diagnostics: dict
    problems: list[str] = field(default_factory=list)


def _check_loads(declaration: dict, files) -> list[str]:
    """Load each array file the way the scorer will, with the shapes the declaration states."""
    n_test, kind = declaration["n_test"], declaration["kind"]
    inputs = read_task_inputs(files.inputs)
    problems = []
    if inputs.x_test.shape[0] != n_test or inputs.x_train.shape[0] != declaration["n_train"]:
        problems.append(f"{files.inputs.name}: sizes differ from {files.declaration.name}")
    if np.any(inputs.y_test != 0):
        problems.append(f"{files.inputs.name}: y_test is not all zeros (labels would leak)")
    if kind == "classification":
        classes = declaration["num_classes"]
        bma = read_classification_probs(files.reference, n_points=n_test, n_classes=classes)
        chains = read_chain_probs(files.chain_reference, n_points=n_test, n_classes=classes)
        for name, probs in ((files.reference.name, bma), (files.chain_reference.name, chains)):
            if np.abs(probs.sum(axis=-1) - 1).max() > PROBABILITY_SUM_TOLERANCE or probs.min() < 0:
                problems.append(f"{name}: rows are not probability vectors")
    else:
        samples = declaration["num_samples"]
        read_regression_samples(files.reference, layout=SAMPLES_BY_POINTS,
                                n_points=n_test, n_samples=samples)
        read_chain_samples(files.chain_reference, n_points=n_test, n_samples=samples)
    return problems


def verify_task(root: Path, name: str) -> VerifiedTask:
    declaration_path = Path(root) / name / f"{name}_task.json"
    declaration = json.loads(declaration_path.read_text())
    files = task_files(root, name, declaration["kind"])
    diagnostics = json.loads(files.diagnostics.read_text())
    result = VerifiedTask(declaration, diagnostics)
    try:
        result.problems += _check_loads(declaration, files)
    except FormatError as error:
        result.problems.append(str(error))
    result.problems += gate_problems(name, diagnostics)
    return result


def task_names(root: Path) -> list[str]:
    return sorted(p.parent.name for p in Path(root).glob("*/*_task.json"))


def _is_organizer_root(root: Path) -> bool:
    """An organizer's own data root (docs/organizer_data.md): task folders, and no manifest,
    which only ``generate --out`` writes; the embedded references always need theirs."""
    return (root.is_dir() and not (root / MANIFEST_NAME).exists()
            and root.resolve() != DEFAULT_ROOT.resolve() and bool(organizer_task_names(root)))


def verify_organizer_task(root: Path, name: str) -> VerifiedTask:
    """An organizer's task as the build checks it (its inputs hold the true y_test), and the
    convergence gate its diagnostics state."""
    from .. import NAME
    problems = task_data_problems(NAME, name, root)
    if problems:
        return VerifiedTask({"name": name}, {}, problems)
    declaration = json.loads(declaration_path(root, name).read_text(encoding="utf-8"))
    path = task_files(root, name, declaration["kind"]).diagnostics
    if not path.is_file():
        return VerifiedTask(declaration, {}, [f"{path}: missing, so the convergence of the "
                                              "references is unknown (generate --data-root "
                                              "writes it)"])
    try:
        diagnostics = read_diagnostics(path)
    except FormatError as error:
        return VerifiedTask(declaration, {}, [str(error)])
    return VerifiedTask(declaration, diagnostics, gate_problems(name, diagnostics))


def verify(root: Path) -> tuple[list[VerifiedTask], list[str]]:
    root = Path(root)
    if _is_organizer_root(root):
        tasks = [verify_organizer_task(root, name) for name in organizer_task_names(root)]
        return tasks, [p for task in tasks for p in task.problems]
    problems = verify_manifest(root, MANIFEST_NAME, UNLISTED_IN_MANIFEST)
    tasks = [verify_task(root, name) for name in task_names(root)]
    if not tasks:
        problems.append(f"{root}: no task folders found")
    return tasks, problems + [p for task in tasks for p in task.problems]


HEADER = ("| task | phase | N train / test | classes or samples | model (params) | chains x kept | "
          "step size | leapfrog steps | acceptance | rank R-hat max (U) | bulk / tail ESS min (U) | "
          "fit to test labels |")


def summary_table(tasks: list[VerifiedTask]) -> str:
    """The per-task facts a reviewer asks for, as a Markdown table; "?" where an organizer's
    declaration does not state them, "-" where there are no diagnostics."""
    return "\n".join([HEADER, "|" + "---|" * (HEADER.count("|") - 1)]
                     + [_row(task.declaration, task.diagnostics) for task in tasks])


def _model(d: dict) -> str:
    try:
        network = task_network(d.get("model"))
    except NetworkError:
        return "?"
    if isinstance(network, MLP):
        return f"{'-'.join(map(str, network.layer_sizes))} ({network.num_parameters})"
    return f"{network.describe()} ({network.num_parameters})"


def _row(d: dict, g: dict) -> str:
    facts = [d.get("name", "?"), d.get("phase", "?"),
             f"{d.get('n_train', '?')} / {d.get('n_test', '?')}",
             d.get("num_classes", d.get("num_samples", "?")), _model(d)]
    if not g:
        return "| " + " | ".join(map(str, facts + ["-"] * 7)) + " |"
    chains = g["chains"]
    spread = [f"{min(c[key] for c in chains):{form}}-{max(c[key] for c in chains):{form}}"
              for key, form in (("step_size", ".3g"), ("num_steps", ".0f"),
                                ("acceptance_rate", ".2f"))]
    facts += [f"{len(chains)} x {d.get('hmc', {}).get('num_samples', '?')}", *spread,
              *_standard_cells(g),
              ", ".join(f"{block}: {_fit(values)}" for block, values in g["test_blocks"].items())]
    return "| " + " | ".join(map(str, facts)) + " |"


def _standard_cells(g: dict) -> list[str]:
    """The reference-posterior standard's figures; "-" for files made before it."""
    standard = g.get("reference_standard")
    if not standard:
        return ["-", "-"]
    return [f"{standard['rhat_max']:.3f} ({standard['energy_rhat']:.3f})",
            f"{standard['ess_bulk_min']:.0f} / {standard['ess_tail_min']:.0f} "
            f"({standard['energy_ess_bulk']:.0f} / {standard['energy_ess_tail']:.0f})"]


def _fit(block: dict) -> str:
    if "accuracy" in block:
        return f"accuracy {block['accuracy']:.3f}"
    return f"RMSE {block['rmse_of_mean']:.3f}"

"""Check generated references: manifest, loadability with the declared shapes, convergence.

This is what the README's main command runs until the bundle builder exists, and what the
tests run on the committed files.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from competition_formats import FormatError
from kinds.bdl2021.runtime.formats import (read_chain_probs, read_chain_samples,
                                           read_classification_probs, read_regression_samples,
                                           read_task_inputs)
from kinds.bdl2021.runtime.formats import SAMPLES_BY_POINTS

from .manifest import verify_manifest
from .references import gate_problems
from .task_files import MANIFEST_NAME, UNLISTED_IN_MANIFEST, task_files

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


def verify(root: Path) -> tuple[list[VerifiedTask], list[str]]:
    problems = verify_manifest(Path(root), MANIFEST_NAME, UNLISTED_IN_MANIFEST)
    tasks = [verify_task(root, name) for name in task_names(root)]
    if not tasks:
        problems.append(f"{root}: no task folders found")
    return tasks, problems + [p for task in tasks for p in task.problems]


def summary_table(tasks: list[VerifiedTask]) -> str:
    """The per-task facts a reviewer asks for, as a Markdown table."""
    header = ("| task | phase | N train / test | classes or samples | model (params) | "
              "chains x kept | step size | leapfrog steps | acceptance | worst R-hat (p99) | "
              "ESS min / median (U) | fit to test labels |")
    rows = [header, "|" + "---|" * (header.count("|") - 1)]
    for task in tasks:
        d, g = task.declaration, task.diagnostics
        chains = g["chains"]
        outputs = d.get("num_classes", d.get("num_samples"))
        fit_text = ", ".join(f"{block}: {_fit(values)}" for block, values in g["test_blocks"].items())
        rows.append(
            f"| {d['name']} | {d['phase']} | {d['n_train']} / {d['n_test']} | {outputs} | "
            f"{'-'.join(map(str, d['model']['layer_sizes']))} ({d['model']['num_parameters']}) | "
            f"{len(chains)} x {d['hmc']['num_samples']} | "
            f"{min(c['step_size'] for c in chains):.3g}-{max(c['step_size'] for c in chains):.3g} | "
            f"{min(c['num_steps'] for c in chains):.0f}-{max(c['num_steps'] for c in chains):.0f} | "
            f"{min(c['acceptance_rate'] for c in chains):.2f}-{max(c['acceptance_rate'] for c in chains):.2f} | "
            f"{g['rhat']['max']:.3f} ({g['rhat']['p99']:.3f}) | "
            f"{g['ess']['min']:.0f} / {g['ess']['median']:.0f} ({g['ess']['potential_energy']:.0f}) | "
            f"{fit_text} |")
    return "\n".join(rows)


def _fit(block: dict) -> str:
    if "accuracy" in block:
        return f"accuracy {block['accuracy']:.3f}"
    return f"RMSE {block['rmse_of_mean']:.3f}"

"""A Retina kit baseline run in this process on a phase's tasks, as the ingestion gives them to
the child (the kind's staged inputs, its contract's ``call`` and ``Task``), on a clock the
test chooses, and the in-domain AUROC the leaderboard shows (``auroc_in``) of what it returned.
Tests of a baseline's quality run it here on a virtual clock (virtual_clock.py); what holds at
any speed is left to the sandboxed path (bundle.local_run)."""
import csv
import importlib
import sys
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from bundle.phase_data import stage_input_data
from bundle.phase_plan import phase_plan
from bundle.programs import ingestion_config
from bundle.spec import load_spec
from ingestion_program.ingest.config import parse_config
from kinds.kind import KINDS, ingestion_runtime
from kinds.retina.runtime import metrics, participant
from kinds.retina.runtime.tables import REFERENCE_FILE


def import_baselines(monkeypatch, folder: Path, *names: str) -> list:
    """The kit's baselines ``names``, imported from a kit's baselines folder staged under
    ``folder`` (with what they import: the kit's copy of layers.py, tabular_mlp.py); every
    module of that folder is forgotten when the test ends, another test's copy put back."""
    KINDS["retina"].stage_kit(None, folder)
    baselines = folder / "baselines"
    stems = [path.stem for path in baselines.glob("*.py")]
    monkeypatch.syspath_prepend(str(baselines))
    for name in stems:
        if name in sys.modules:
            monkeypatch.delitem(sys.modules, name)
    modules = [importlib.import_module(name) for name in names]
    for name in stems:
        if name in sys.modules:             # set through monkeypatch: removed at the end
            monkeypatch.setitem(sys.modules, name, sys.modules.pop(name))
    return modules


def staged_specs(spec_file: Path, phase: str, folder: Path) -> dict[str, dict]:
    """{task: the spec the supervisor gives the child} of a code phase, its inputs staged
    under ``folder`` as the ingestion stages them."""
    plan = phase_plan(load_spec(spec_file), phase, code_submission=True)
    stage_input_data(plan, folder / "input")
    contract = ingestion_runtime(plan.kind)
    specs = {}
    for task in parse_config(ingestion_config(plan)).tasks:
        (folder / task.name).mkdir()
        data = contract.stage_inputs(task, folder / "input", folder / task.name)
        specs[task.name] = {"name": task.name, "task_type": task.task_type,
                            "contract": task.contract, "budget_seconds": task.budget_seconds,
                            "data": str(data)}
    return specs


def run_in_process(predict, spec: dict, begin) -> tuple[np.ndarray, list]:
    """``predict`` called through the contract; ``begin()`` starts the budget's clock (the
    clock participant.Task reads). On one BLAS thread: OpenBLAS's threads spin while they
    wait, and beside the suite's other workers on two cores a second one made the matrix
    products three times slower."""
    saved = []
    with threadpool_limits(limits=1, user_api="blas"):
        columns = participant.call(predict, spec, begin, saved.append)
    return np.asarray(columns, dtype=float), saved


def in_domain_auroc(task_folder: Path, probability: np.ndarray) -> float:
    """The leaderboard's ``auroc_in`` (test_retina_kind.py checks the scorer against
    metrics.auroc on the same rows)."""
    with open(task_folder / REFERENCE_FILE, newline="") as handle:
        rows = list(csv.DictReader(handle))
    labels = np.array([int(row["label"]) for row in rows])
    in_domain = np.array([row["shifted"] == "0" for row in rows])
    return float(metrics.auroc(labels[in_domain], probability[in_domain]))

"""Label accuracy on the builder's side: this module's names are its ``kinds.kind.Kind``."""
from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np

from kinds.kind import PublicTraining

from .runtime.scoring import ACCURACY, TASK_TYPES

HERE = Path(__file__).resolve().parent
DEFAULT_SPEC = HERE / "default_spec.yaml"
EMBEDDED_ROOT = HERE / "tasks"
TEMPLATES = HERE / "templates"
KIT = HERE / "kit"
BASELINE_RESULTS = KIT / "baseline_results.json"       # none committed: the pages say so
DEFAULT_WEIGHTS = {"accuracy": 1.0, "balanced_accuracy": 0.0}
AGGREGATE_DESCRIPTION = "Weighted average over tasks of 1 - accuracy"
PROPORTION_METRICS = (ACCURACY.name,)          # the share of test rows labelled right
# The baseline the guide and the starting kit page run as their example (KIT/baselines/).
EXAMPLE_BASELINE = "nearest_centroid.py"
SCORING_DESCRIPTION = "Scores predicted class labels against the hidden test labels (accuracy)"


def task_type(declaration: dict) -> str:
    return declaration["task_type"]


def _file(task, suffix: str) -> Path:
    return task.folder / f"{task.name}{suffix}"


def prediction_stem(task) -> str:
    return f"{task.name}_labels"


def test_rows(declaration: dict) -> int:
    return int(declaration["n_test"])


def has_public_references(task) -> bool:
    return False


def scoring_settings(task) -> dict:
    return {"n_test": task.declaration["n_test"], "num_classes": task.declaration["num_classes"],
            "submission_stem": prediction_stem(task),
            "test_labels": f"{task.name}_test_labels.npy"}


def ingestion_contract(task) -> dict:
    return {"n_test": task.declaration["n_test"], "num_classes": task.declaration["num_classes"]}


def input_file(task) -> str:
    return f"{task.name}_inputs.npz"


def _inputs_npz(task) -> bytes:
    train = np.loadtxt(_file(task, "_train.csv"), delimiter=",", ndmin=2)
    x_test = np.loadtxt(_file(task, "_test.csv"), delimiter=",", ndmin=2)
    buffer = io.BytesIO()
    np.savez(buffer, x_train=train[:, :-1], y_train=train[:, -1].astype(np.int64), x_test=x_test)
    return buffer.getvalue()


def stage_inputs(task, destination: Path) -> None:
    (destination / input_file(task)).write_bytes(_inputs_npz(task))


def stage_reference(task, destination: Path) -> None:
    labels = np.loadtxt(_file(task, "_test_labels.csv"), ndmin=1).astype(np.int64)
    np.save(destination / f"{task.name}_test_labels.npy", labels.reshape(-1, 1))


def stage_public(task, destination: Path, code_submission: bool) -> None:
    """Inputs and the declaration; the test labels are never public."""
    stage_inputs(task, destination)
    (destination / f"{task.name}_task.json").write_text(json.dumps(task.declaration, indent=1))


def sample_code_submission(destination: Path) -> Path:
    destination.mkdir(parents=True)
    shutil.copyfile(KIT / "baselines" / "nearest_centroid.py", destination / "submission.py")
    return destination


def sample_results(plan, destination: Path) -> Path:
    """Every test point labelled with its task's most frequent training label."""
    destination.mkdir(parents=True)
    for task in plan.tasks:
        train = np.loadtxt(_file(task, "_train.csv"), delimiter=",", ndmin=2)
        majority = np.bincount(train[:, -1].astype(int)).argmax()
        np.savetxt(destination / f"{prediction_stem(task)}.csv",
                   np.full(task.declaration["n_test"], majority), fmt="%d")
    return destination


def page_context(plan, phase, baseline_results: dict | None) -> dict:
    types = {task.task_type for task in plan.tasks}
    return {
        "tasks": [{"name": t.name, "classes": t.declaration["num_classes"],
                   "features": t.declaration["num_features"],
                   "sizes": f"{t.declaration['n_train']} / {t.declaration['n_test']}",
                   "budget": (f"{t.budget_seconds:g} s" if phase.code_submission and t.budget_seconds
                              else "-"),
                   "summary": t.declaration["summary"], "input": input_file(t),
                   "prediction_file": f"{prediction_stem(t)}.csv"} for t in plan.tasks],
        "metrics": [{"name": s.label, "description": s.description, "formula": s.function.__doc__,
                     "better": "higher" if s.higher_is_better else "lower"}
                    for name in sorted(types) for s in TASK_TYPES[name].score_types],
        "inputs": [input_file(t) for t in plan.tasks],
        "stems": [prediction_stem(t) for t in plan.tasks],
        "baselines": {"note": "Baseline results are not available for these tasks.",
                      "header": [], "rows": []},
    }


def public_training(task) -> PublicTraining:
    """The data page's figures: the training rows participants get (x_train, y_train)."""
    train = np.loadtxt(_file(task, "_train.csv"), delimiter=",", ndmin=2)
    return PublicTraining(source=f"{input_file(task)} (x_train, y_train)",
                          input_shape=(train.shape[1] - 1,),
                          targets=train[:, -1].astype(np.int64))

"""PGDL 2020 on the builder's side: this module's names are its ``kinds.kind.Kind``.

A task is a model zoo: PGDL's layout (``model_<id>/config.json``, weights, ``dataset_1/``) and
its ``model_configs.json`` (hyperparameters, train and test accuracy), which is the hidden
reference of a code phase. The spec's ``budget_seconds`` of a task is the whole zoo's; each
network gets an equal share of it.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from kinds.baseline_table import failed, failed_cell, failed_note
from kinds.kind import PublicTraining

from .runtime.formats import read_model_configs
from .runtime.scoring import ZOO, predict_json

HERE = Path(__file__).resolve().parent
DEFAULT_SPEC = HERE / "default_spec.yaml"
EMBEDDED_ROOT = HERE / "reference" / "embedded"
TEMPLATES = HERE / "templates"
KIT = HERE / "kit"
BASELINE_RESULTS = KIT / "baseline_results.json"
# PGDL's competition score is 100 x the mean task score; the weighted loss is its complement.
DEFAULT_WEIGHTS = {"cmi": 1.0, "kendall_tau": 0.0, "granulated_kendall": 0.0}
AGGREGATE_DESCRIPTION = ("Mean over tasks of 1 - CMI: PGDL's competition score is "
                         "100 x (1 - weighted loss)")
RANKS_BY_AGGREGATE = True          # PGDL ranked by the mean task score
# The baseline the guide and the starting kit page run as their example (KIT/baselines/).
EXAMPLE_BASELINE = "sum_of_squares.py"
SCORING_DESCRIPTION = ("Scores complexity measures by the conditional mutual information between "
                       "their ordering of the networks and the networks' generalisation gaps")
ENTRY = ("complexity", "complexity")        # complexity.py: complexity(model, dataset)
MODEL_CONFIGS = "model_configs.json"
TRAIN_DATA = Path("dataset_1") / "train.npz"
SAMPLE_MEASURE = "sum_of_squares"


def task_type(declaration: dict) -> str:
    return declaration.get("task_type", ZOO)


def data_source(declaration: dict) -> str | None:
    """What the zoo's networks are drawn from: the dataset they were trained on and the
    hyperparameters their grid varies (its values aside: another grid of the same axes is
    drawn alike)."""
    if "dataset" not in declaration:
        return None
    varied = ", ".join(sorted(declaration.get("hyperparameters", {}))) or "not stated"
    return f"{declaration['dataset']}; networks varying {varied}"


def model_ids(task) -> list[str]:
    return list(read_model_configs(task.folder / MODEL_CONFIGS).ids)


def _model_folders(task) -> list[Path]:
    return [task.folder / model for model in model_ids(task)]     # ids are the folder names


def prediction_stem(task) -> str:
    return task.name


def has_public_references(task) -> bool:
    """A zoo's accuracies are public only where the phase publishes them (a results phase)."""
    return (task.folder / MODEL_CONFIGS).is_file()


def scoring_settings(task) -> dict:
    return {"num_models": len(model_ids(task)), "model_configs": f"{task.name}_{MODEL_CONFIGS}",
            "submission_stem": prediction_stem(task)}


def ingestion_contract(task) -> dict:
    ids = model_ids(task)
    return {"model_ids": ids, "seconds_per_model": task.budget_seconds / len(ids)}


def input_file(task) -> str:
    return task.name


INDEX = "zoos.json"


def stage_inputs(task, destination: Path) -> None:
    """The networks and the training data, never the test data or the accuracies; ``zoos.json``
    at the root lists the task folders (PGDL's input data was one folder per task, so the
    root holds folders: the index says so, and keeps a lone task's folder from looking like a
    zip of a wrapping folder, which CodaLab would not flatten)."""
    index = destination / INDEX
    tasks = json.loads(index.read_text()) if index.is_file() else []
    index.write_text(json.dumps(sorted(set(tasks) | {task.name}), indent=1) + "\n")
    target = destination / task.name
    for folder in _model_folders(task):
        shutil.copytree(folder, target / folder.name)
    (target / TRAIN_DATA).parent.mkdir(parents=True)
    shutil.copyfile(task.folder / TRAIN_DATA, target / TRAIN_DATA)


def stage_reference(task, destination: Path) -> None:
    shutil.copyfile(task.folder / MODEL_CONFIGS, destination / f"{task.name}_{MODEL_CONFIGS}")


def stage_public(task, destination: Path, code_submission: bool) -> None:
    """The zoo and its declaration; in a results phase also its accuracies (as PGDL's public
    tasks gave them), so participants can compute and check their measures locally."""
    stage_inputs(task, destination)
    (destination / f"{task.name}_task.json").write_text(json.dumps(task.declaration, indent=1))
    if not code_submission:
        shutil.copyfile(task.folder / MODEL_CONFIGS, destination / task.name / MODEL_CONFIGS)


def sample_code_submission(destination: Path) -> Path:
    destination.mkdir(parents=True)
    shutil.copyfile(KIT / "baselines" / f"{SAMPLE_MEASURE}.py", destination / "complexity.py")
    return destination


def sample_results(plan, destination: Path) -> Path:
    """A .predict file per task: every network's number of parameters, a valid (weak) measure."""
    import numpy as np
    destination.mkdir(parents=True)
    for task in plan.tasks:
        ids = model_ids(task)
        sizes = []
        for folder in _model_folders(task):
            with np.load(folder / "weights.npz") as weights:
                sizes.append(sum(weights[key].size for key in weights.files))
        (destination / f"{prediction_stem(task)}.predict").write_text(predict_json(ids, sizes))
    return destination


def page_context(plan, phase, baseline_results: dict | None) -> dict:
    return {
        "tasks": [{"name": t.name, "dataset": t.declaration.get("dataset", ""),
                   "models": t.declaration.get("num_models", ""),
                   "hyperparameters": ", ".join(
                       f"{name} {values}" for name, values in
                       t.declaration.get("hyperparameters", {}).items()),
                   "budget": (f"{t.budget_seconds:g} s ({t.budget_seconds / len(model_ids(t)):g} "
                              "s per network)") if phase.code_submission and t.budget_seconds
                   else "-",
                   "summary": t.declaration.get("summary", ""), "input": input_file(t),
                   "prediction_file": f"{prediction_stem(t)}.predict"} for t in plan.tasks],
        "stems": [prediction_stem(t) for t in plan.tasks],
        "baselines": _baseline_table(plan, baseline_results),
    }


def _baseline_table(plan, results: dict | None) -> dict:
    """The kit's measures on this phase's zoos, from the table made with run_local."""
    tasks = [t.name for t in plan.tasks if results and t.name in results.get("tasks", {})]
    if not tasks:
        return {"note": "Baseline results are not available for these tasks.", "header": [],
                "rows": []}
    shown = [(task, label, results["tasks"][task][measure]) for task in tasks
             for measure, label in results["measures"].items()
             if measure in results["tasks"][task]]
    rows = [[task, label, *(failed_cell(row) if failed(row) else f"{row[key]:.3f}"
                            for key in ("cmi", "kendall_tau", "granulated_kendall"))]
            for task, label, row in shown]
    return {"note": "The starting kit's measures, run by the ingestion and scoring programs of "
                    "this competition under the phases' budgets."
                    + failed_note(row for _, _, row in shown),
            "header": ["task", "measure", "CMI", "Kendall tau", "granulated tau"], "rows": rows}


def public_training(task) -> PublicTraining:
    """The data page's figures: the zoo's training data (dataset_1/train.npz, in the public
    data and the input data alike); images where its inputs are (n, H, W, C)."""
    import numpy as np
    with np.load(task.folder / TRAIN_DATA, allow_pickle=False) as data:
        inputs, outputs = data["inputs"], np.asarray(data["outputs"]).ravel()
    images = inputs.ndim == 4 and inputs.shape[-1] in (1, 3)
    return PublicTraining(source=f"{task.name}/{TRAIN_DATA.as_posix()} (inputs, outputs)",
                          input_shape=tuple(inputs.shape[1:]), targets=outputs,
                          classification=outputs.dtype.kind in "iub",
                          images=(lambda rows: inputs[rows]) if images else None)


def reference_cli(argv: list[str]) -> int:
    """``python -m reference_data --kind pgdl2020 {generate,verify,convert}``: the embedded
    zoos, and an organizer's zoos in PGDL's original formats (docs/pgdl_data.md)."""
    from .reference.cli import main
    return main(argv)


def task_problems(task) -> list[str]:
    """What is wrong with an organizer's zoo folder, each naming the file: the grid in
    model_configs.json (complete, unique), every network's folder and files, then what they
    hold (``reference/checks.py``, which convert runs too). The builder reports them all
    before building anything."""
    from runtime.formats import FormatError
    try:
        ids = model_ids(task)
    except FormatError as error:
        return [str(error)]
    problems = [f"{task.folder / model}: missing (model_configs.json lists it)"
                for model in ids if not (task.folder / model).is_dir()]
    problems += [f"{task.folder / model / name}: missing" for model in ids
                 if (task.folder / model).is_dir() for name in ("config.json", "weights.npz")
                 if not (task.folder / model / name).is_file()]
    if not (task.folder / TRAIN_DATA).is_file():
        problems.append(f"{task.folder / TRAIN_DATA}: missing (the training data, with inputs "
                        "and outputs arrays)")
    from .reference.checks import zoo_problems
    return problems or zoo_problems(task.folder, ids, task.folder / TRAIN_DATA)

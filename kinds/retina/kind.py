"""Retina on the builder's side: this module's names are its ``kinds.kind.Kind``.

A task is a folder ``<data_root>/<task>/`` with ``<task>_task.json`` and three csv tables
(``runtime/tables.py``): ``train.csv`` (features, label, grade), ``test.csv`` (features of the
in-domain and shifted rows pooled) and the hidden ``test_reference.csv`` (label, grade,
shifted per test row). docs/retina_data.md describes the format for organizers.
"""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np

from runtime.formats import FormatError
from kinds.baseline_table import failed, failed_cell, failed_note
from kinds.kind import PublicTraining, copy_baselines

from .runtime import tables
from .runtime.scoring import DIAGNOSIS, TASK_TYPES
from .task_files import task_files

HERE = Path(__file__).resolve().parent
DEFAULT_SPEC = HERE / "default_spec.yaml"
EMBEDDED_ROOT = HERE / "reference" / "embedded"
TEMPLATES = HERE / "templates"
KIT = HERE / "kit"
BASELINES = KIT / "baselines"
BASELINE_RESULTS = KIT / "baseline_results.json"
SHARED_MODEL = BASELINES / "tabular_mlp.py"
# The numpy layers (forward and backward) that small_cnn.py trains: the PGDL kind's own file,
# shipped in the kit beside the baselines rather than kept twice.
LAYERS = HERE.parent / "pgdl2020" / "runtime" / "layers.py"
SAMPLE_BASELINE = "map.py"
# RETINA selected models by in-domain AUROC and by the area under the balanced joint
# accuracy referral curve: the weighted loss is their mean, and ranks.
DEFAULT_WEIGHTS = {name: 0.0 for name in TASK_TYPES[DIAGNOSIS].metric_names} | {
    "auroc_in": 0.5, "referral_joint": 0.5}
AGGREGATE_DESCRIPTION = ("Mean over tasks of 1/2 (1 - in-domain AUROC) + 1/2 (1 - joint "
                         "referral accuracy area): RETINA's two selection criteria")
RANKS_BY_AGGREGATE = True
# The baseline the guide and the starting kit page run as their example (KIT/baselines/): the
# code phases' sample, so the guide runs it once (kit/README.md.j2).
EXAMPLE_BASELINE = SAMPLE_BASELINE
SCORING_DESCRIPTION = ("Scores probabilities of referable disease and their uncertainties: "
                       "in-domain AUROC and referral curves on in-domain and shifted patients")


def task_type(declaration: dict) -> str:
    return declaration.get("task_type", DIAGNOSIS)


def data_source(declaration: dict) -> str | None:
    """What the task's patients (or images) are drawn from: the dataset and the shift its
    shifted rows come from."""
    if "dataset" not in declaration:
        return None
    return f"{declaration['dataset']}; shift: {declaration.get('shift', 'none stated')}"


def prediction_stem(task) -> str:
    return f"{task.name}_predictions"


def has_public_references(task) -> bool:
    return False


def _data(task):
    """The task's files, tables or images (task_files.py)."""
    return task_files(task.folder, task.declaration)


def scoring_settings(task) -> dict:
    return {"n_test": _data(task).n_test, "submission_stem": prediction_stem(task),
            "reference": f"{task.name}_{tables.REFERENCE_FILE}"}


def ingestion_contract(task) -> dict:
    return _data(task).contract(task.name)


def input_file(task) -> str:
    return f"{task.name}_inputs.npz"


def stage_inputs(task, destination: Path) -> None:
    _data(task).stage_inputs(task.name, destination)


def stage_reference(task, destination: Path) -> None:
    shutil.copyfile(task.folder / tables.REFERENCE_FILE,
                    destination / f"{task.name}_{tables.REFERENCE_FILE}")


def stage_public(task, destination: Path, code_submission: bool) -> None:
    """The inputs (arrays for code, csv for reading), never the reference."""
    stage_inputs(task, destination)
    _data(task).stage_public(task.name, destination)
    (destination / f"{task.name}_task.json").write_text(json.dumps(task.declaration, indent=1))


def sample_code_submission(destination: Path) -> Path:
    destination.mkdir(parents=True)
    shutil.copyfile(BASELINES / SAMPLE_BASELINE, destination / "submission.py")
    shutil.copyfile(SHARED_MODEL, destination / SHARED_MODEL.name)
    return destination


def stage_kit(plan, destination: Path) -> None:
    """The kit's baselines, with the numpy layers small_cnn.py imports."""
    copy_baselines(KIT, plan, destination)
    shutil.copyfile(LAYERS, destination / "baselines" / LAYERS.name)


def sample_results(plan, destination: Path) -> Path:
    """Per task, the MAP network's probabilities only (no uncertainty column: the scorer then
    uses their entropy), as a csv with a header (on an image task the network sees block
    means of the images: tabular_mlp.features)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("tabular_mlp", SHARED_MODEL)
    model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(model)
    destination.mkdir(parents=True)
    for task in plan.tasks:
        x_train, x_test = _data(task).x_train_and_test()
        p = model.Network(x_train, _data(task).labels, seed=0).probability(x_test)
        np.savetxt(destination / f"{prediction_stem(task)}.csv", p, fmt="%.6f",
                   header="probability", comments="")
    return destination


STAND_IN_SEED = 0


def _held_out(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Training rows held out for a stand-in (a third of each label's), and which of them are
    marked shifted (a third of each label's held-out rows), so both parts hold both labels."""
    rng = np.random.default_rng(STAND_IN_SEED)
    held, shifted = [], []
    for label in (0, 1):
        rows = rng.permutation(np.flatnonzero(labels == label))
        rows = rows[:max(2, rows.size // 3)]
        held.append(rows)
        shifted.append(rows[:max(1, rows.size // 3)])
    order = rng.permutation(np.concatenate(held))
    return order, np.isin(order, np.concatenate(shifted))


def stand_in_task(task, folder: Path):
    """A stand-in of the task made of its public training patients only, for local scoring
    where the test patients' labels are hidden: a third of them held out as test rows, of
    which a third are marked shifted at random (no real shift), the rest to train on. Written
    in the task's own format; returns the task and a line saying what it is."""
    import dataclasses
    files = _data(task)
    labels = files.labels
    held, shifted = _held_out(labels)
    kept = np.setdiff1d(np.arange(labels.size), held)
    folder.mkdir(parents=True)
    files.write_stand_in(folder, kept, held, shifted)
    about = (f"{task.name}: {held.size} of its {labels.size} public training patients held out "
             f"at random ({int(shifted.sum())} of them marked shifted at random: no real shift), "
             f"trained on the other {kept.size}")
    declaration = {**task.declaration, "summary": about}
    (folder / f"{task.name}_task.json").write_text(json.dumps(declaration, indent=1))
    return dataclasses.replace(task, folder=folder, declaration=declaration), about


def page_context(plan, phase, baseline_results: dict | None) -> dict:
    rows = []
    for t in plan.tasks:
        reference = _data(t).reference
        shifted = int(reference["shifted"].sum())
        rows.append({"name": t.name, "shift": t.declaration.get("shift", ""),
                     "sizes": f"{_data(t).labels.size} / "
                              f"{reference['label'].size - shifted} / {shifted}",
                     "features": _data(t).description(), "images": _data(t).inputs == "images",
                     "budget": (t.budget_text() if phase.code_submission and t.budget_seconds
                                else "-"),
                     "summary": t.declaration.get("summary", ""),
                     "input": input_file(t), "n_test": reference["label"].size,
                     "prediction_file": f"{prediction_stem(t)}.csv"})
    return {"tasks": rows, "stems": [prediction_stem(t) for t in plan.tasks],
            "images": any(row["images"] for row in rows),
            "features": not all(row["images"] for row in rows),
            "inputs": [input_file(t) for t in plan.tasks],
            "metrics": [{"name": s.label, "key": s.name, "description": s.description,
                         "formula": s.function.__doc__, "better": "higher" if
                         s.higher_is_better else "lower"}
                        for s in TASK_TYPES[DIAGNOSIS].score_types],
            "baselines": _baseline_table(plan, baseline_results)}


def public_training(task) -> PublicTraining:
    """The data page's figures: the training patients' grades and labels (train.csv) and, on
    an image task, their photographs (train_images.npy); never a test file."""
    data = _data(task)
    images = data.inputs == "images"
    return PublicTraining(
        source=(f"{task.name}_train_images.npy and {task.name}_{tables.TRAIN_FILE}" if images
                else f"{task.name}_{tables.TRAIN_FILE}"),
        input_shape=data.image_shape if images else (len(data.features),),
        targets=data.grades, target="grade", also={"referable label": data.labels},
        images=(lambda rows: data.images("train_images.npy")[rows]) if images else None)


BASELINE_COLUMNS = (("auroc_in", "AUROC in"), ("referral_joint", "referral joint"),
                    ("referral_in", "referral in"), ("referral_shifted", "referral shifted"),
                    ("ood_auroc", "OOD AUROC"))


def _baseline_table(plan, results: dict | None) -> dict:
    tasks = [t.name for t in plan.tasks if results and t.name in results.get("tasks", {})]
    if not tasks:
        return {"note": "Baseline results are not available for these tasks.", "header": [],
                "rows": []}
    shown = [(task, label, results["tasks"][task][method]) for task in tasks
             for method, label in results["methods"].items()
             if method in results["tasks"][task]]
    rows = [[task, label, *(failed_cell(row) if failed(row) else f"{row[key]:.3f}"
                            for key, _ in BASELINE_COLUMNS)]
            for task, label, row in shown]
    return {"note": "The starting kit's baselines, run by the ingestion and scoring programs of "
                    "this competition under the phases' budgets."
                    + failed_note(row for _, _, row in shown),
            "header": ["task", "method", *(label for _, label in BASELINE_COLUMNS)],
            "rows": rows}


def task_problems(task) -> list[str]:
    """What is wrong with an organizer's task folder, each naming the file."""
    try:
        data = _data(task)
    except FormatError as error:
        return [str(error)]
    folder, problems = task.folder, data.problems(task.declaration)
    reference = data.reference
    if reference["label"].size != data.n_test:
        what = "test_images.npy" if data.inputs == "images" else tables.FEATURES_FILE
        problems.append(f"{folder / tables.REFERENCE_FILE}: {reference['label'].size} rows, "
                        f"{what} has {data.n_test}")
        return problems
    order = next(filter(None, (_order_problem(name, reference[name]) for name in ORDER_LEAKS)),
                 None)         # one shuffle fixes both: say it once
    problems += [f"{folder / tables.FEATURES_FILE}: {order}"] if order else []
    labels = data.labels
    if not np.isin(labels, (0, 1)).all() or np.unique(labels).size < 2:
        problems.append(f"{folder / tables.TRAIN_FILE}: column label must hold 0 and 1, both")
    in_domain = reference["label"][~reference["shifted"]]
    if np.unique(in_domain).size < 2:
        problems.append(f"{folder / tables.REFERENCE_FILE}: the in-domain rows (shifted = 0) "
                        "need both labels: the leaderboard ranks by their AUROC")
    if not reference["shifted"].any():
        problems.append(f"{folder / tables.REFERENCE_FILE}: no shifted row (shifted = 1)")
    return problems


# The reference columns whose order over the test rows would tell participants what is hidden.
ORDER_LEAKS = ("shifted", "label")
# How rarely a shuffled file is as ordered as one refused: a random order is refused at most
# once in a million builds (docs/retina_data.md says how small a sorted file still passes).
CHANCE = 1e-6


def _order_problem(name: str, values: np.ndarray) -> str | None:
    """A column of 0s and 1s whose values change between consecutive rows far less often than
    in any shuffle (the runs test, exact): sorted by it, or pasted together from per-domain
    files. A file too small to tell from chance passes."""
    values = np.asarray(values).astype(bool)
    runs = 1 + int(np.count_nonzero(values[1:] != values[:-1]))
    ones, zeros = int(values.sum()), int(values.size - values.sum())
    expected = 1 + 2 * ones * zeros / values.size if values.size else 0
    if min(ones, zeros) == 0 or runs >= expected or _runs_at_most(runs, zeros, ones) >= CHANCE:
        return None
    return (f"its rows are ordered by {name} of {tables.REFERENCE_FILE}: {name} changes "
            f"{runs - 1} time(s) down its {values.size} rows, where a shuffle changes it about "
            f"{expected - 1:.0f} times (and this few times with a chance under {CHANCE:g}), so "
            f"participants could read {name} from the row order; shuffle the data rows of "
            f"{tables.FEATURES_FILE} and {tables.REFERENCE_FILE} with one permutation, "
            "headers first and row i of one still row i of the other (docs/retina_data.md)")


def _runs_at_most(runs: int, zeros: int, ones: int) -> float:
    """P(at most ``runs`` runs) in a uniformly random order of ``zeros`` 0s and ``ones`` 1s:
    the runs test's exact distribution, summed in logs (no overflow on large files)."""
    def log_comb(n: int, k: int) -> float:
        return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) \
            if 0 <= k <= n else -math.inf

    def log_ways(r: int) -> float:
        k = r // 2
        if r % 2 == 0:
            return math.log(2) + log_comb(zeros - 1, k - 1) + log_comb(ones - 1, k - 1)
        return np.logaddexp(log_comb(zeros - 1, k) + log_comb(ones - 1, k - 1),
                            log_comb(zeros - 1, k - 1) + log_comb(ones - 1, k))

    total = log_comb(zeros + ones, ones)
    return float(np.exp(np.logaddexp.reduce([log_ways(r) for r in range(2, runs + 1)]) - total))


def reference_cli(argv: list[str]) -> int:
    """``python -m reference_data --kind retina {generate,verify}``: the embedded tasks."""
    from .reference.make_tasks import main
    return main(argv)

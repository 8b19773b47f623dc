"""The BDL 2021 kind on the builder's side: the module whose names are its record (a
``kinds.kind.Kind``, made by name in ``kinds/kind.py``), from its task files (``tasks.py``), the data and kit hooks below, its
pages (``pages.py``) and its organizer checks (``organizer_checks.py``).

Tasks are small Bayesian networks on real data; the hidden reference is the predictive of
long HMC runs (model average and each chain's own); participants submit class
probabilities (N x C) or samples of y (N x S), or code whose ``predict`` returns them.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from runtime.formats import read_matrix


from .organizer_checks import task_problems, unconverged_reference_problems
from .pages import page_context, public_training
from .reference.expectation_file import task_expectation
from .reference.task_files import DEFAULT_ROOT
from .runtime.formats import (SAMPLES_BY_POINTS, TASK_INPUT_KEYS, copy_npz_members,
                              read_classification_probs,
                              read_regression_samples, read_task_inputs)
from .runtime.score_types import AGREEMENT, CLASSIFICATION
from .tasks import (data_source, files, has_public_references, has_std, prediction_stem,
                    std_description, task_type, test_rows)

HERE = Path(__file__).resolve().parent
DEFAULT_SPEC = HERE / "default_spec.yaml"
EMBEDDED_ROOT = DEFAULT_ROOT
TEMPLATES = HERE / "templates"
KIT = HERE / "kit"
BASELINE_RESULTS = KIT / "baseline_results.json"
# The proposal's aggregate: 1 - agreement, total variation and W2, equally weighted; W1
# (the 2021 code's "W2") is reported but not aggregated.
DEFAULT_WEIGHTS = {"agreement": 1.0, "total_variation": 1.0, "w2": 1.0, "w1": 0.0}
# Agreement is the share of test rows whose top class is the reference's.
PROPORTION_METRICS = (AGREEMENT.name,)
AGGREGATE_DESCRIPTION = ("Weighted average over tasks of 1 - agreement, total variation and W2 "
                         "(the proposal's score)")
# The code phases' sample submission (KIT/baselines/<it>.py with the files it imports), and the
# baseline the guide and the starting kit page run as their example: the same one, so the
# guide runs it once (kit/README.md.j2).
SAMPLE_BASELINE = "sgld"
EXAMPLE_BASELINE = f"{SAMPLE_BASELINE}.py"
SCORING_DESCRIPTION = ("Scores predictive distributions against the HMC references (agreement, "
                       "total variation, Wasserstein)")
DECLARED_MODEL = HERE / "runtime" / "declared_model.py"
# The declared networks as participants get them: the definitions and the numpy form (with
# its gradient), and the PyTorch and JAX forms (PyTorch's is in runtime/: the programs time
# epochs with it on GPU images). Copied beside every baseline.
MODEL_FILES = (DECLARED_MODEL, HERE / "runtime" / "networks.py",
               HERE / "runtime" / "declared_model_torch.py",
               HERE / "reference" / "declared_model_jax.py")
# A task budget stated in epochs (the 2021 rules): timed on the worker by runtime/calibration.py.
EPOCH_UNIT = ("one pass of plain SGD over the training data with the declared model "
              "(minibatches of 128; in PyTorch where the image installs it, on the GPU "
              "images' GPU, else in numpy)")
# Arrays of the public .npz files that stand in for hidden values: the leakage check proves
# them all zeros.
ZEROED_PUBLIC_ARRAYS = ("y_test",)
BASELINE_SUPPORT = ("training.py", "torch_training.py")


# ---- program configs -----------------------------------------------------------------------

def reference_names(task) -> dict:
    """Names inside ref/: text files become .npy (parsed once here, not at every scoring)."""
    paths = files(task)
    chains = paths.chain_reference.is_file()
    return {"reference": paths.reference.with_suffix(".npy").name,
            "chain_reference": paths.chain_reference.name if chains else None,
            "test_labels": (paths.test_labels.with_suffix(".npy").name
                            if paths.test_labels.is_file() else None),
            "exact_posterior_expectation": (f"{task.name}_exact_posterior_expectation.json"
                                            if chains else None)}


def scoring_settings(task) -> dict:
    declaration = task.declaration
    return {"n_test": declaration["n_test"], "num_classes": declaration.get("num_classes"),
            "num_samples": declaration.get("num_samples"), "blocks": declaration["test_blocks"],
            "submission_stem": prediction_stem(task), **reference_names(task)}


def ingestion_contract(task) -> dict:
    """What the child is promised; ``mapped_bytes``: the inputs it maps (the staged arrays are
    the public .npz's members), which count against an address-space memory limit."""
    declaration = {k: v for k, v in task.declaration.items() if k not in ("files", "hmc")}
    return {"n_test": declaration["n_test"],
            "width": declaration.get("num_classes") or declaration["num_samples"],
            "declaration": declaration, "mapped_bytes": files(task).inputs.stat().st_size}


# ---- data ----------------------------------------------------------------------------------

def copy_public_inputs(source: Path, destination: Path) -> None:
    """The task's npz as participants get it: y_test all zeros, whatever the source holds.

    Read through memory maps and headers only (``task_problems`` scanned the values before the
    build), and rewritten member by member a block at a time, so that memory does not grow
    with the images."""
    inputs = read_task_inputs(source, mapped=True, check_values=False)
    if np.any(inputs.y_test != 0):
        copy_npz_members(source, destination, TASK_INPUT_KEYS, replacements={
            "y_train": inputs.y_train,
            "y_test": np.zeros(inputs.y_test.shape, inputs.y_test.dtype)})
    else:
        shutil.copyfile(source, destination)


def input_file(task) -> str:
    return files(task).inputs.name


def stage_inputs(task, destination: Path) -> None:
    """The participants' input: the task's npz, whose y_test is all zeros."""
    copy_public_inputs(files(task).inputs, destination / files(task).inputs.name)


def stage_reference(task, destination: Path) -> None:
    """The hidden files: model average and labels (.npy), per-chain references, and the
    exact-posterior expectation (a property of the references: the generator's file, or computed
    here where it is missing or stale)."""
    names, paths = reference_names(task), files(task)
    classification = task.task_type == CLASSIFICATION
    if classification:
        average = read_classification_probs(paths.reference)
    else:    # kept S x N on disk, like the csv it comes from
        average = read_regression_samples(paths.reference, layout=SAMPLES_BY_POINTS).T
    np.save(destination / names["reference"], np.ascontiguousarray(average))
    if names["chain_reference"]:
        shutil.copyfile(paths.chain_reference, destination / names["chain_reference"])
        document = task_expectation(paths, task.declaration.get("num_samples"))
        (destination / names["exact_posterior_expectation"]).write_text(
            json.dumps(document, indent=1) + "\n")
    if names["test_labels"]:
        np.save(destination / names["test_labels"], read_matrix(paths.test_labels))


def stage_public(task, destination: Path, code_submission: bool) -> None:
    """Inputs and declarations; references only in a results phase, whose references are
    public by design (as CIFAR-10's and IMDB's were in 2021)."""
    paths = files(task)
    copy_public_inputs(paths.inputs, destination / paths.inputs.name)
    declaration = {k: v for k, v in task.declaration.items() if k != "files"}
    (destination / paths.declaration.name).write_text(json.dumps(declaration, indent=1) + "\n")
    if not code_submission:
        shutil.copyfile(paths.reference, destination / paths.reference.name)
        for published in (paths.chain_reference, paths.reference_mcse):
            if published.is_file():
                shutil.copyfile(published, destination / published.name)


# ---- starting kit --------------------------------------------------------------------------

def package_baseline(baseline: Path, destination: Path) -> Path:
    """A baseline as a submission folder: the file as submission.py, its support module and
    the declared model."""
    destination.mkdir(parents=True)
    shutil.copyfile(baseline, destination / "submission.py")
    for name in BASELINE_SUPPORT:
        shutil.copyfile(baseline.parent / name, destination / name)
    copy_model_files(destination)
    return destination


def copy_model_files(destination: Path) -> None:
    for path in MODEL_FILES:
        shutil.copyfile(path, destination / path.name)


def sample_code_submission(destination: Path) -> Path:
    return package_baseline(KIT / "baselines" / f"{SAMPLE_BASELINE}.py", destination)


def sample_results(plan, destination: Path) -> Path:
    """Valid prediction files for a results phase: uniform probabilities, N(0,1) samples."""
    destination.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for task in plan.tasks:
        n = task.declaration["n_test"]
        if task.task_type == CLASSIFICATION:
            classes = task.declaration["num_classes"]
            np.savetxt(destination / f"{task.name}_probs.csv", np.full((n, classes), 1 / classes))
        else:
            np.savetxt(destination / f"{task.name}_samples.csv",
                       rng.standard_normal((n, task.declaration["num_samples"])))
    return destination


def stage_kit(plan, destination: Path) -> None:
    """The kind's part of the starting kit besides its guide: the baselines and the declared
    model they import."""
    shutil.copytree(KIT / "baselines", destination / "baselines",
                    ignore=shutil.ignore_patterns("__pycache__"))
    copy_model_files(destination / "baselines")


# ---- organizers' tools ---------------------------------------------------------------------

def reference_cli(argv: list[str]) -> int:
    """``python -m reference_data {generate,verify}``: HMC references of the embedded tasks."""
    from .reference.cli import main
    return main(argv)

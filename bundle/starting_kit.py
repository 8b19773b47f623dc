"""What participants download: the starting kit folder, packaged submissions, samples.

``package_baseline`` is how a baseline becomes a submission folder (used by run_local and
by the bundle's sample submission): the baseline file as submission.py, its support
module and the declared model. The sample submissions are also shipped as the zips that
``submission_zip.py`` makes: the dry run uploads those. ``kit.json`` tells run_local the
kit's platform, phase and leaderboard keys, so a local run checks what that platform would.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from starting_kit.submission_zip import make_zip

from .phase_data import stage_input_data, stage_reference_data
from .phase_plan import PhasePlan
from .programs import assemble_ingestion_program, assemble_scoring_program

REPO = Path(__file__).resolve().parents[1]
KIT = REPO / "starting_kit"
DECLARED_MODEL = REPO / "reference_data" / "mlp.py"
BASELINE_SUPPORT = ("training.py",)
KIT_CONFIG = "kit.json"
SAMPLE_BASELINE = "sgld"
# baseline_results.py stays behind: it remakes the table from the organizers' repository.
KIT_FILES = ("README.md", "run_local.py", "submission_zip.py", "baseline_results.json")


def package_baseline(baseline: Path, destination: Path) -> Path:
    destination.mkdir(parents=True)
    shutil.copyfile(baseline, destination / "submission.py")
    for name in BASELINE_SUPPORT:
        shutil.copyfile(baseline.parent / name, destination / name)
    shutil.copyfile(DECLARED_MODEL, destination / "declared_model.py")
    return destination


def sample_results(plan: PhasePlan, destination: Path) -> Path:
    """Valid prediction files for a results phase: uniform probabilities, N(0,1) samples."""
    destination.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for task in plan.tasks:
        n = task.declaration["n_test"]
        if task.kind == "classification":
            classes = task.declaration["num_classes"]
            np.savetxt(destination / f"{task.name}_probs.csv", np.full((n, classes), 1 / classes))
        else:
            np.savetxt(destination / f"{task.name}_samples.csv",
                       rng.standard_normal((n, task.declaration["num_samples"])))
    return destination


def stage_starting_kit(plan: PhasePlan, destination: Path, code_plan: PhasePlan,
                       limits: dict, platform: str, leaderboard_keys: list[str]) -> Path:
    """The kit of one bundle: guide, baselines, samples, and what run_local needs offline:
    the phase's own scoring program, an ingestion program set up for code runs of the same
    tasks, the public input data, the references where they are public, and the worker's
    command and submission rules."""
    destination.mkdir(parents=True)
    for name in KIT_FILES:
        if (KIT / name).is_file():
            shutil.copyfile(KIT / name, destination / name)
    shutil.copyfile(REPO / "bundle" / "worker.py", destination / "worker.py")
    shutil.copytree(KIT / "baselines", destination / "baselines",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(DECLARED_MODEL, destination / "baselines" / "declared_model.py")
    assemble_ingestion_program(code_plan, destination / "programs" / "ingestion_program", limits)
    assemble_scoring_program(plan, destination / "programs" / "scoring_program", platform)
    stage_input_data(plan, destination / "data" / "input")
    if plan.code_submission:
        sample = package_baseline(KIT / "baselines" / f"{SAMPLE_BASELINE}.py",
                                  destination / "sample_code_submission")
    else:      # the development references are public: run_local scores against them
        stage_reference_data(plan, destination / "data" / "reference")
        sample = sample_results(plan, destination / "sample_result_submission")
    make_zip(sample, destination / f"{sample.name}.zip", code=plan.code_submission)
    config = {"platform": platform, "phase": plan.name, "code_submission": plan.code_submission,
              "tasks": [task.name for task in plan.tasks], "leaderboard_keys": leaderboard_keys}
    (destination / KIT_CONFIG).write_text(json.dumps(config, indent=1) + "\n")
    return destination

"""What participants download: the starting kit folder, packaged submissions, samples.

The kit holds the core's tools (``run_local.py``, ``submission_zip.py``, the worker model),
the kind's part (guide, baselines, their results) and what a local run needs. The sample
submissions are shipped as the zips that ``submission_zip.py`` makes: the dry run uploads
those. ``kit.json`` tells run_local the kit's platform, phase and leaderboard keys, so a local
run checks what that platform would.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from starting_kit.submission_zip import make_zip

from .kinds import entry_file, kind_of, stage_kit
from .phase_data import stage_input_data, stage_reference_data
from .phase_plan import PhasePlan
from .programs import assemble_ingestion_program, assemble_scoring_program
from .spec import is_gpu_image

REPO = Path(__file__).resolve().parents[1]
KIT = REPO / "starting_kit"
KIT_CONFIG = "kit.json"
KIT_FILES = ("run_local.py", "submission_zip.py", "versions.py")
IMAGE_REQUIREMENTS = REPO / "requirements-image.txt"


def image_requirements(image: str) -> Path | None:
    """The versions of ``image``'s packages, where this repository has them: the image that
    .venv-image reproduces, which the dry run takes for every image that is not a GPU one."""
    return None if is_gpu_image(image) else IMAGE_REQUIREMENTS


def stage_starting_kit(plan: PhasePlan, destination: Path, code_plan: PhasePlan,
                       limits: dict, platform: str, leaderboard_keys: list[str],
                       image: str) -> Path:
    """The kit of one bundle: guide, baselines, samples, and what run_local needs offline:
    the phase's own scoring program, an ingestion program set up for code runs of the same
    tasks, the public input data, the references where they are public, and the worker's
    command and submission rules."""
    destination.mkdir(parents=True)
    kind = kind_of(plan)
    for name in KIT_FILES:
        shutil.copyfile(KIT / name, destination / name)
    shutil.copyfile(REPO / "bundle" / "worker.py", destination / "worker.py")
    if image_requirements(image):
        shutil.copyfile(image_requirements(image), destination / IMAGE_REQUIREMENTS.name)
    stage_kit(kind, plan, destination)
    assemble_ingestion_program(code_plan, destination / "programs" / "ingestion_program", limits)
    assemble_scoring_program(plan, destination / "programs" / "scoring_program", platform)
    stage_input_data(plan, destination / "data" / "input")
    if plan.code_submission:
        sample = kind.sample_code_submission(destination / "sample_code_submission")
    else:
        if all(kind.has_public_references(task) for task in plan.tasks):
            # public by the kind's design in a results phase: run_local scores against them;
            # otherwise (hidden labels) run_local checks the files without scoring them
            stage_reference_data(plan, destination / "data" / "reference")
        sample = kind.sample_results(plan, destination / "sample_result_submission")
    make_zip(sample, destination / f"{sample.name}.zip", code=plan.code_submission,
             entry=entry_file(kind))
    config = {"platform": platform, "docker_image": image, "phase": plan.name, "code_submission": plan.code_submission,
              "entry_file": entry_file(kind),
              "tasks": [task.name for task in plan.tasks], "leaderboard_keys": leaderboard_keys}
    (destination / KIT_CONFIG).write_text(json.dumps(config, indent=1) + "\n")
    return destination

"""What participants download: the starting kit folder, packaged submissions, samples.

The kit holds the core's tools (``run_local.py``, ``submission_zip.py``, the worker model and,
in a results phase, ``predictions_zip.py``, which runs code into that phase's prediction files),
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
from .render import PREDICTIONS_TOOL, RESULTS_FILE, SAMPLE_FOLDERS, render_guide

REPO = Path(__file__).resolve().parents[1]
KIT = REPO / "starting_kit"
KIT_CONFIG = "kit.json"
KIT_FILES = ("run_local.py", "submission_zip.py")


def stage_starting_kit(plan: PhasePlan, destination: Path, code_plan: PhasePlan,
                       limits: dict, platform: str, leaderboard_keys: list[str], guide: dict,
                       baseline_results: dict | None) -> Path:
    """The kit of one bundle: guide, baselines, samples, and what run_local needs offline:
    the phase's own scoring program, an ingestion program set up for code runs of the same
    tasks, the public input data, the references where they are public, and the worker's
    command and submission rules. ``guide``: the phase's guide context (render.guide_contexts),
    made from the same facts as the pages; ``baseline_results``: the table the pages show."""
    destination.mkdir(parents=True)
    kind = kind_of(plan)
    for name in KIT_FILES + (() if plan.code_submission else (PREDICTIONS_TOOL,)):
        shutil.copyfile(KIT / name, destination / name)
    shutil.copyfile(REPO / "bundle" / "worker.py", destination / "worker.py")
    (destination / "README.md").write_text(render_guide(guide, kind.KIT), encoding="utf-8")
    if guide["phase"]["results_file"]:
        (destination / RESULTS_FILE).write_text(json.dumps(baseline_results, indent=1) + "\n")
    stage_kit(kind, plan, destination)
    assemble_ingestion_program(code_plan, destination / "programs" / "ingestion_program", limits)
    assemble_scoring_program(plan, destination / "programs" / "scoring_program", platform)
    stage_input_data(plan, destination / "data" / "input")
    sample_folder = destination / SAMPLE_FOLDERS[plan.code_submission]
    if plan.code_submission:
        sample = kind.sample_code_submission(sample_folder)
    else:
        if all(kind.has_public_references(task) for task in plan.tasks):
            # public by the kind's design in a results phase: run_local scores against them;
            # otherwise (hidden labels) run_local checks the files without scoring them
            stage_reference_data(plan, destination / "data" / "reference")
        sample = kind.sample_results(plan, sample_folder)
    make_zip(sample, destination / f"{sample.name}.zip", code=plan.code_submission,
             entry=entry_file(kind))
    config = {"platform": platform, "phase": plan.name, "code_submission": plan.code_submission,
              "entry_file": entry_file(kind),
              "tasks": [task.name for task in plan.tasks], "leaderboard_keys": leaderboard_keys}
    (destination / KIT_CONFIG).write_text(json.dumps(config, indent=1) + "\n")
    return destination

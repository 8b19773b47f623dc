"""What participants download: the starting kit folder, packaged submissions, samples.

The kit holds the core's tools (``run_local.py``, ``submission_zip.py``, the worker model and,
in a results phase, ``predictions_zip.py``, which runs code into that phase's prediction files),
the kind's part (guide, baselines, their results) and what a local run needs. The sample
submissions are shipped as the zips that the kit's own ``submission_zip.py`` makes: the dry run
uploads those. ``kit.json`` tells run_local the kit's platform, phase and leaderboard keys, so a local
run checks what that platform would, and, in a code phase, the names the ingestion writes in its
output (``ingestion_outputs``), which a code zip must not hold.

The guide (the kit's ``README.md``) is the kind's ``kit/README.md.j2`` with the core's
``templates/guide_*.md.j2`` parts. It is rendered from the same context as the pages
(``render.guide_contexts``), so it cannot state another ranking, limit or file name than they
and ``competition.yaml`` do. Every command it shows names the kit's own sample folder or the
kind's ``EXAMPLE_BASELINE``, so it runs as written (``tests/test_kit_install_line.py`` runs
them in a bare environment; ``tests/test_guide_commands_more.py`` runs CodaLab's with the
image's Python). ``versions.py`` prints the local Python and packages beside the image's
(``requirements-image.txt``, copied into the kit).

Where the phase's references are hidden, the kit holds a public stand-in (``stand_in/``): the
phase's programs set up for the kind's ``stand_in_task`` of each task, else for the spec's
public tasks, with their own data, references and record key. ``run_local --code`` scores
there and says so; ``phase_plan.local_scores`` tells the guide which case holds.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ingestion_program.ingest.config import CONFIG_NAME as INGESTION_CONFIG_NAME
from kinds.kind import kind

from .phase_data import stage_input_data, stage_reference_data
from .kit_requirements import kit_requirements, write_requirements
from .leaderboard import written_keys
from .phase_plan import PhasePlan, references_in_kit, stand_in_plan
from .programs import assemble_ingestion_program, assemble_scoring_program
from .render import PREDICTIONS_TOOL, RESULTS_FILE, SAMPLE_FOLDERS, render_guide
from .spec import is_gpu_image

REPO = Path(__file__).resolve().parents[1]
KIT = REPO / "starting_kit"
KIT_CONFIG = "kit.json"
KIT_FILES = ("run_local.py", "submission_zip.py", "versions.py")
WORKER_MODEL = REPO / "bundle" / "platforms" / "worker.py"      # the kit's worker.py
ZIP_TOOL = "submission_zip.py"
IMAGE_REQUIREMENTS = REPO / "requirements-image.txt"
# kit.json's key for ingestion_outputs, which the kit's submission_zip.py and run_local.py read
OUTPUTS_KEY = "ingestion_outputs"


def ingestion_outputs(config: dict) -> list[str]:
    """Every name the ingestion configured by ``config`` (its config file, as a dict) writes
    at the root of its output, a folder's with a trailing '/': the run record, each task's
    prediction and logs (asked of the ingestion's own ``_write_outputs``), and the folder a
    rule runs its tasks into instead (the smoke test's). The Codabench worker copies a
    submission over that output before scoring (codabench_v2.md §3.4), so the kit and the
    dry run refuse a code zip holding one of these names (worker.overwrite_problem)."""
    import numpy as np
    from ingestion_program.ingest.config import parse_config
    from ingestion_program.ingest.main import _write_outputs
    from ingestion_program.ingest.supervisor import TaskOutcome
    from runtime import rules
    from runtime.formats import RECORD_NAME
    parsed = parse_config(config)
    names = {RECORD_NAME}
    every_output = TaskOutcome("ok", "", 0.0, predictions=np.zeros(1), stdout="-", stderr="-")
    with tempfile.TemporaryDirectory(prefix="ingestion-outputs-") as scratch:
        for task in parsed.tasks:
            names |= _write_outputs(Path(scratch), task, every_output)
    names |= {f"{folder}/" for folder in rules.output_folders(parsed)}
    return sorted(names)


def image_requirements(image: str) -> Path | None:
    """The versions of ``image``'s packages, where this repository has them: the image that
    .venv-image reproduces, which the dry run takes for every image that is not a GPU one."""
    return None if is_gpu_image(image) else IMAGE_REQUIREMENTS


def stage_stand_in(spec, code_plan: PhasePlan, destination: Path, limits: dict,
                   platform: str) -> dict | None:
    """The stand-in's programs (the phase's code, configs for the stand-in tasks) and data in
    ``destination``; what kit.json says of it."""
    with tempfile.TemporaryDirectory(prefix="stand-in-") as work:
        made = stand_in_plan(spec, code_plan, Path(work))
        if made is None:
            return None
        plan, about = made
        assemble_ingestion_program(plan, destination / "ingestion_program", limits)
        assemble_scoring_program(plan, destination / "scoring_program", platform)
        stage_input_data(plan, destination / "input")
        stage_reference_data(plan, destination / "reference")
    return {"about": about, "leaderboard_keys": written_keys(plan)}


def stage_starting_kit(plan: PhasePlan, destination: Path, code_plan: PhasePlan,
                       limits: dict, platform: str, leaderboard_keys: list[str], spec,
                       guide: dict, baseline_results: dict | None) -> Path:
    """The kit of one bundle: guide, baselines, samples, and what run_local needs offline:
    the phase's own scoring program, an ingestion program set up for code runs of the same
    tasks, the public input data, the references where they are public (else a public
    stand-in, ``stage_stand_in``), and the worker's command and submission rules.
    ``guide``: the phase's guide context (render.guide_contexts), made from the same facts as
    the pages; ``baseline_results``: the table the pages show."""
    image = spec.docker_image
    destination.mkdir(parents=True)
    definition = kind(plan.kind)
    for name in KIT_FILES + (() if plan.code_submission else (PREDICTIONS_TOOL,)):
        shutil.copyfile(KIT / name, destination / name)
    shutil.copyfile(WORKER_MODEL, destination / "worker.py")
    if image_requirements(image):
        shutil.copyfile(image_requirements(image), destination / IMAGE_REQUIREMENTS.name)
    if guide["phase"]["results_file"]:
        (destination / RESULTS_FILE).write_text(json.dumps(baseline_results, indent=1) + "\n")
    definition.stage_kit(plan, destination)
    assemble_ingestion_program(code_plan, destination / "programs" / "ingestion_program", limits)
    assemble_scoring_program(plan, destination / "programs" / "scoring_program", platform)
    stage_input_data(plan, destination / "data" / "input")
    public = references_in_kit(plan)
    if public:
        # public by the kind's design in a results phase: run_local scores against them
        stage_reference_data(plan, destination / "data" / "reference")
    stand_in = None if public else stage_stand_in(spec, code_plan, destination / "stand_in",
                                                   limits, platform)
    sample_folder = destination / SAMPLE_FOLDERS[plan.code_submission]
    if plan.code_submission:
        sample = definition.sample_code_submission(sample_folder)
    else:
        sample = definition.sample_results(plan, sample_folder)
    # the guide's first command installs what the staged kit's files import
    install = kit_requirements(destination, definition.EXAMPLE_BASELINE, IMAGE_REQUIREMENTS)
    write_requirements(destination, install)
    (destination / "README.md").write_text(render_guide({**guide, "install": install},
                                                        definition.KIT), encoding="utf-8")
    config = {"platform": platform, "docker_image": image, "phase": plan.name, "code_submission": plan.code_submission,
              "entry_file": definition.entry_file,
              "tasks": [task.name for task in plan.tasks], "leaderboard_keys": leaderboard_keys,
              **({"stand_in": stand_in} if stand_in else {})}
    if plan.code_submission:
        config[OUTPUTS_KEY] = ingestion_outputs(json.loads(
            (destination / "programs" / "ingestion_program" / INGESTION_CONFIG_NAME).read_text(
                encoding="utf-8")))
    (destination / KIT_CONFIG).write_text(json.dumps(config, indent=1) + "\n")
    zip_with_kit_tool(destination, sample, plan.code_submission)
    return destination


def zip_with_kit_tool(kit: Path, sample: Path, code: bool) -> Path:
    """The sample's zip as the kit's own submission_zip.py makes it (kit.json gives it the
    entry file), run as a participant runs it: the builder never imports a kit tool."""
    archive = kit / f"{sample.name}.zip"
    made = subprocess.run([sys.executable, ZIP_TOOL, str(sample), str(archive),
                           "--code" if code else "--results"], cwd=kit, capture_output=True,
                          text=True)
    if made.returncode != 0:
        raise ValueError(f"the kit's {ZIP_TOOL} refused the sample {sample.name}: "
                         f"{made.stderr.strip()}")
    return archive

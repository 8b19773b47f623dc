"""Assemble the scoring and ingestion program folders, each with its generated config.

A program folder is its source folder plus the code both programs share, copied by one
function (``copy_shipped_code``): the ``runtime`` package, the kinds' registry and records
(``kinds/__init__.py``, ``kinds/kind.py``) and the phase's kind's ``runtime/`` (never its
build-time code or data), plus a config generated from the phase plan.
Zipping these folders is the builder's next step; tests run them as the worker would.

Each program also gets a ``metadata`` file: the command that starts it and a description. The
scoring program's description is the kind's ``SCORING_DESCRIPTION``; the ingestion's names
the kind's entry file and function. Some sites give the ingestion no reference data (the
platform object's ``record_key_in_program``). There a bundle's ingestion program carries the
run-record key itself. A starting kit's never does.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from kinds import package
from kinds.kind import kind
from scoring_program.scorer.config import CONFIG_FORMAT, CONFIG_NAME, parse_config

from ingestion_program.ingest.config import CONFIG_FORMAT as INGESTION_CONFIG_FORMAT
from ingestion_program.ingest.config import CONFIG_NAME as INGESTION_CONFIG_NAME
from ingestion_program.ingest.config import DEFAULT_MAX_ENTRIES, DEFAULT_STARTUP_SECONDS
from ingestion_program.ingest.config import parse_config as parse_ingestion_config

from . import competition_rules
from .leaderboard import phase_columns, ranking_entry
from .phase_plan import PhasePlan, tasks_alone
from . import platforms
from .platforms import DEFAULT_PLATFORM
from .record_key import write_record_key

REPO = Path(__file__).resolve().parents[1]
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".DS_Store", "README.md")
# What a program imports of kinds/ besides the phase's kind: the registry and the records.
KIND_REGISTRY = ("__init__.py", "kind.py")


def scoring_config(plan: PhasePlan, platform: str = DEFAULT_PLATFORM,
                   worker_references: dict | None = None, leaderboard: list | None = None) -> dict:
    """``worker_references``: where the phase's references are sealed on the worker
    (``worker_data.WorkerPart.config_entry``), when they are not in ref/; ``leaderboard``:
    the competition's columns, where several phases share the leaderboard (its ranking)."""
    definition = kind(plan.kind)
    types = definition.task_types
    tasks = [{"name": task.name, "task_type": task.task_type,
              "weights": {metric.name: plan.weights.get(metric.name, 0.0)
                          for metric in types[task.task_type].score_types},
              "budget_seconds": task.budget_seconds, "settings": definition.scoring_settings(task),
              **competition_rules.scoring_task_entries(task)}
             for task in plan.tasks]
    columns = [{"key": c.key, "label": c.label, "statistic": c.statistic, "task": c.task,
                "metric": c.metric}
               for c in phase_columns(plan) if not c.computed]

    def config_of(name, tasks):     # a rule's: the plan run on these tasks alone
        return scoring_config(tasks_alone(plan, name, tasks))
    config = {"format": CONFIG_FORMAT, "phase": plan.name, "kind": plan.kind, "tasks": tasks,
              "columns": columns, "ranking": ranking_entry(plan, leaderboard),
              # a code phase's res/ holds a record signed by its ingestion (scorer/config.py)
              "record": (platforms.platform(platform).record_rule if plan.code_submission
                         else "optional"),
              **competition_rules.scoring_config_entries(plan, config_of)}
    if worker_references:
        config["worker_references"] = worker_references
    parse_config(config, "generated scoring config")      # the scorer must accept what we emit
    return config


def copy_shipped_code(kind: str, destination: Path) -> None:
    """Everything a program ships besides its own source: the shared ``runtime`` package, the
    kinds' registry and records, and this kind's ``__init__.py`` and ``runtime/``."""
    shutil.copytree(REPO / "runtime", destination / "runtime", ignore=IGNORED)
    kinds_folder = destination / "kinds"
    kinds_folder.mkdir()
    for name in KIND_REGISTRY:
        shutil.copyfile(REPO / "kinds" / name, kinds_folder / name)
    source = REPO / Path(*package(kind).split("."))
    (kinds_folder / source.name).mkdir()
    shutil.copyfile(source / "__init__.py", kinds_folder / source.name / "__init__.py")
    shutil.copytree(source / "runtime", kinds_folder / source.name / "runtime", ignore=IGNORED)


def write_metadata(folder: Path, description: str, extra_argument: str | None = None) -> None:
    """The source's ``metadata`` holds the command, which is the core's; the description a
    platform shows is the kind's, so it is added here. Also written as ``metadata.yaml``, the
    name Codabench looks for first, so one zip serves both platforms. ``extra_argument``: a
    last argument of the command (the worker's data mount, where a phase keeps data there)."""
    command = (folder / "metadata").read_text(encoding="utf-8").rstrip("\n")
    if extra_argument:
        command += f" {extra_argument}"
    text = f"{command}\ndescription: {json.dumps(description, ensure_ascii=False)}\n"
    for name in ("metadata", "metadata.yaml"):
        (folder / name).write_text(text, encoding="utf-8")


def assemble_program(source: Path, destination: Path, config_name: str, config: dict,
                     description: str, extra_argument: str | None = None) -> Path:
    """Program folder + shipped shared code and kind runtime + config + metadata."""
    shutil.copytree(source, destination, ignore=IGNORED)
    write_metadata(destination, description, extra_argument)
    copy_shipped_code(config["kind"], destination)
    (destination / config_name).write_text(json.dumps(config, indent=1, sort_keys=True) + "\n")
    return destination


# Sandbox limits of the ingestion program unless the organizer spec says otherwise.
# processes: RLIMIT_NPROC of the sandbox user, which counts threads too: BLAS, OpenMP and
# PyTorch start a pool per core each, and a participant's thread pool comes on top.
DEFAULT_LIMITS = {"memory_bytes": 4 * 2**30, "max_file_bytes": 256 * 2**20,
                  "disk_bytes": 1 * 2**30, "open_files": 256, "processes": 4096,
                  "grace_seconds": 2.0, "output_bytes": 128 * 2**10, "cores": None,
                  "max_entries": DEFAULT_MAX_ENTRIES, "startup_seconds": DEFAULT_STARTUP_SECONDS}


def _ingestion_task(definition, task) -> dict:
    if task.budget_seconds is None:
        raise ValueError(f"task {task.name}: a code phase needs a budget in seconds")
    return {"name": task.name, "task_type": task.task_type,
            "inputs": definition.input_file(task),
            "prediction_stem": definition.prediction_stem(task),
            "budget_seconds": task.budget_seconds,
            "contract": definition.ingestion_contract(task),
            **competition_rules.ingestion_task_entries(task)}


def ingestion_config(plan: PhasePlan, limits: dict | None = None,
                     worker_input: dict | None = None) -> dict:
    """``worker_input``: where the phase's input data is on the worker
    (``worker_data.WorkerPart.config_entry``), when it is not in ``$input``."""
    definition = kind(plan.kind)
    module, function = definition.ENTRY
    config = {"format": INGESTION_CONFIG_FORMAT, "phase": plan.name, "kind": plan.kind,
              "tasks": [_ingestion_task(definition, task) for task in plan.tasks],
              "entry_module": module, "entry_function": function,
              "limits": {**DEFAULT_LIMITS, **(limits or {})},
              **competition_rules.ingestion_config_entries(plan),
              **competition_rules.ingestion_config_tasks(
                  plan, lambda task: _ingestion_task(definition, task))}
    if worker_input:
        config["worker_input"] = worker_input
    parse_ingestion_config(config, "generated ingestion config")
    return config


def assemble_ingestion_program(plan: PhasePlan, destination: Path,
                               limits: dict | None = None, record_key: bool = False,
                               importer_key: bool = False, worker_input: dict | None = None,
                               platform: str = DEFAULT_PLATFORM) -> Path:
    """``record_key``: the program carries the key that signs its record (a bundle's, on a
    platform that wants it there; never a starting kit's); ``importer_key``: it carries the
    key derived for Codabench's importer of v1.5 bundles instead (runtime/formats/run_record.py);
    ``worker_input``: the phase's input data is on the worker, whose data mount (the
    platform's) the command then names."""
    definition = kind(plan.kind)
    description = (f"Runs {definition.ENTRY[1]}() of the participant's {definition.entry_file} "
                   "on each task under a hard wall-clock budget, sandboxed, and writes its "
                   "predictions")
    mount = platforms.platform(platform).worker_data_mount if worker_input else None
    folder = assemble_program(REPO / "ingestion_program", Path(destination),
                              INGESTION_CONFIG_NAME, ingestion_config(plan, limits, worker_input),
                              description, mount)
    if (record_key or importer_key) and plan.code_submission:
        write_record_key(folder, plan, for_importer=importer_key and not record_key)
    return folder


def assemble_scoring_program(plan: PhasePlan, destination: Path,
                             platform: str = DEFAULT_PLATFORM,
                             worker_references: dict | None = None,
                             leaderboard: list | None = None) -> Path:
    """``worker_references``: the phase's references are sealed on the worker, whose data
    mount (the platform's) the command then names; ``leaderboard``: the competition's
    columns (``scoring_config``)."""
    mount = platforms.platform(platform).worker_data_mount if worker_references else None
    return assemble_program(REPO / "scoring_program", Path(destination), CONFIG_NAME,
                            scoring_config(plan, platform, worker_references, leaderboard),
                            kind(plan.kind).SCORING_DESCRIPTION, mount)

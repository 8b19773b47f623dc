"""Assemble the scoring and ingestion program folders, each with its generated config.

A program folder is its source folder plus a copy of ``competition_formats`` (one source
shared by the scoring and ingestion programs) plus a config generated from the phase plan.
Zipping these folders is the builder's next step; tests run them as the worker would.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from scoring_program.scorer.config import CONFIG_FORMAT, CONFIG_NAME, parse_config
from scoring_program.scorer.score_types import SCORE_TYPES

from ingestion_program.ingest.config import CONFIG_FORMAT as INGESTION_CONFIG_FORMAT
from ingestion_program.ingest.config import CONFIG_NAME as INGESTION_CONFIG_NAME
from ingestion_program.ingest.config import parse_config as parse_ingestion_config

from .leaderboard import phase_columns
from .phase_plan import PhasePlan

REPO = Path(__file__).resolve().parents[1]
SHARED_PACKAGES = ("competition_formats",)
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".DS_Store", "README.md")


def submission_stem(task) -> str:
    return f"{task.name}_{'probs' if task.kind == 'classification' else 'samples'}"


def reference_names(task) -> dict:
    """Names inside ref/: text files become .npy (parsed once here, not at every scoring)."""
    files = task.files
    return {"reference": files.reference.with_suffix(".npy").name,
            "chain_reference": files.chain_reference.name if files.chain_reference.is_file() else None,
            "test_labels": (files.test_labels.with_suffix(".npy").name
                            if files.test_labels.is_file() else None),
            "exact_posterior_expectation": (f"{task.name}_exact_posterior_expectation.json"
                                            if files.chain_reference.is_file() else None)}


# What the scorer requires of a code phase's res/ (scorer/config.py RECORD_RULES): CodaLab
# mounts the reference data for the ingestion, which can then sign its record; Codabench
# does not, but there the ingestion always runs and rewrites the record.
RECORD_RULE = {"codalab": "signed", "codabench": "required"}


def scoring_config(plan: PhasePlan, platform: str = "codalab") -> dict:
    tasks = []
    for task in plan.tasks:
        declaration = task.declaration
        tasks.append({
            "name": task.name, "kind": task.kind, "n_test": declaration["n_test"],
            "num_classes": declaration.get("num_classes"),
            "num_samples": declaration.get("num_samples"),
            "blocks": declaration["test_blocks"], "submission_stem": submission_stem(task),
            **reference_names(task),
            "weights": {metric.name: plan.weights.get(metric.name, 0.0)
                        for metric in SCORE_TYPES[task.kind]},
            "budget_seconds": task.budget_seconds})
    columns = [{"key": c.key, "statistic": c.statistic, "task": c.task, "metric": c.metric}
               for c in phase_columns(plan) if not c.computed]
    config = {"format": CONFIG_FORMAT, "phase": plan.name, "tasks": tasks, "columns": columns,
              "record": RECORD_RULE[platform] if plan.code_submission else "optional"}
    parse_config(config, "generated scoring config")      # the scorer must accept what we emit
    return config


def assemble_program(source: Path, destination: Path, config_name: str, config: dict) -> Path:
    """Program folder + shared packages + config; ``metadata`` is also written as
    ``metadata.yaml``, the name Codabench looks for first, so one zip serves both platforms."""
    shutil.copytree(source, destination, ignore=IGNORED)
    shutil.copyfile(destination / "metadata", destination / "metadata.yaml")
    for package in SHARED_PACKAGES:
        shutil.copytree(REPO / package, destination / package, ignore=IGNORED)
    (destination / config_name).write_text(json.dumps(config, indent=1, sort_keys=True) + "\n")
    return destination


# Sandbox limits of the ingestion program unless the organizer spec says otherwise.
DEFAULT_LIMITS = {"memory_bytes": 4 * 2**30, "max_file_bytes": 256 * 2**20,
                  "disk_bytes": 1 * 2**30, "open_files": 256, "processes": 128,
                  "grace_seconds": 2.0, "output_bytes": 128 * 2**10, "cores": None}


def ingestion_config(plan: PhasePlan, limits: dict | None = None) -> dict:
    tasks = []
    for task in plan.tasks:
        declaration = {k: v for k, v in task.declaration.items() if k not in ("files", "hmc")}
        if task.budget_seconds is None:
            raise ValueError(f"task {task.name}: a code phase needs a budget in seconds")
        tasks.append({"name": task.name, "kind": task.kind, "inputs": task.files.inputs.name,
                      "prediction_stem": submission_stem(task), "n_test": declaration["n_test"],
                      "width": declaration.get("num_classes") or declaration["num_samples"],
                      "budget_seconds": task.budget_seconds, "declaration": declaration})
    config = {"format": INGESTION_CONFIG_FORMAT, "phase": plan.name, "tasks": tasks,
              "limits": {**DEFAULT_LIMITS, **(limits or {})}}
    parse_ingestion_config(config, "generated ingestion config")
    return config


def assemble_ingestion_program(plan: PhasePlan, destination: Path,
                               limits: dict | None = None) -> Path:
    return assemble_program(REPO / "ingestion_program", Path(destination), INGESTION_CONFIG_NAME,
                            ingestion_config(plan, limits))


def assemble_scoring_program(plan: PhasePlan, destination: Path,
                             platform: str = "codalab") -> Path:
    return assemble_program(REPO / "scoring_program", Path(destination), CONFIG_NAME,
                            scoring_config(plan, platform))

"""The builder's view of a competition kind: its definition and runtime, looked up by name.

A kind's ``kind.py`` (build time) provides, as module attributes:

- ``DEFAULT_SPEC``, ``EMBEDDED_ROOT`` (the default ``data_root``), ``TEMPLATES`` (its
  ``kind_tasks``, ``kind_evaluation``, ``kind_data`` and ``kind_submission`` page parts),
  ``BASELINE_RESULTS``, ``DEFAULT_WEIGHTS``, ``AGGREGATE_DESCRIPTION``,
  ``SCORING_DESCRIPTION`` (its scoring program's metadata description), ``EXAMPLE_BASELINE``
  (the file of ``KIT/baselines/`` that the guide's commands run) and, optionally,
  ``ZEROED_PUBLIC_ARRAYS`` (placeholders the leakage check proves all zeros) and
  ``RANKS_BY_AGGREGATE`` (rank by the weighted loss, not the average rank over tasks) and
  ``ENTRY`` (the module and function a code submission defines; default submission.predict)
  and ``EPOCH_UNIT`` (what an epoch is, for a budget in epochs; its runtime ``ingestion``
  then provides ``epoch_seconds(task, data)``);
- ``task_type(declaration)``; ``prediction_stem(task)``; ``has_std(task)`` and
  ``std_description(task, metric)`` (the leaderboard's sd columns);
- ``scoring_settings(task)`` and ``ingestion_contract(task)``: its part of the program configs;
- ``input_file(task)``, ``stage_inputs``, ``stage_reference``, ``stage_public`` and
  ``has_public_references``: the data of one task; optionally ``task_problems(task)`` (its
  files) and ``unconverged_reference_problems(task)`` (references whose runs did not
  converge: refused unless the spec accepts them, ``bundle/spec.py``);
- ``page_context(plan, phase, baseline_results)``: what its page parts show;
- ``sample_results(plan, destination)`` and ``sample_code_submission(destination)``, and
  optionally ``stage_kit(plan, destination)`` (default: ``KIT/baselines/`` as it is) and
  ``support_modules()`` (default: none): the starting kit. Its guide is ``KIT/README.md.j2``,
  rendered from the pages' context of the kit's phase (``bundle.render.guide_contexts``): the
  core's ``guide_*.md.j2`` parts and ``page_context``'s entries, so that the guide and the
  pages say the same.

A task is a folder ``<data_root>/<task>/`` holding ``<task>_task.json``, its declaration; what
else the folder holds is the kind's business.
"""
from __future__ import annotations

import shutil

from kinds import definition, runtime


DEFAULT_ENTRY = ("submission", "predict")


def entry(kind) -> tuple[str, str]:
    """(module, function) a code submission defines: the kind's ``ENTRY``, or BDL's."""
    return tuple(getattr(kind, "ENTRY", DEFAULT_ENTRY))


def entry_file(kind) -> str:
    return f"{entry(kind)[0]}.py"


def stage_kit(kind, plan, destination) -> None:
    """The kind's files of a starting kit besides its guide: its own ``stage_kit``, or its
    baselines (``KIT/baselines/``)."""
    if hasattr(kind, "stage_kit"):
        kind.stage_kit(plan, destination)
        return
    shutil.copytree(kind.KIT / "baselines", destination / "baselines",
                    ignore=shutil.ignore_patterns("__pycache__"))


def support_modules(kind) -> dict:
    """Modules a baseline file imports from elsewhere in the repository (run_local adds them)."""
    return kind.support_modules() if hasattr(kind, "support_modules") else {}


def kind_definition(name: str):
    return definition(name)


def kind_of(plan):
    """The build-time definition of the kind a phase plan belongs to."""
    return definition(plan.kind)


def task_types(name: str) -> dict:
    """The kind's task types (``kinds.scoring.TaskType``), from its runtime."""
    return runtime(name, "scoring").TASK_TYPES

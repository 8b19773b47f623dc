"""The worker recipe: for a competition whose submissions run on the organizer's own workers (a
queue of their own, or a GPU image, which only such workers serve), the platform's compute worker
settings, written next to the bundle as ``<bundle>.worker.env``, so that the workers the organizer
starts keep what the pages promise participants.

The platform object says whether there is one and writes its text
(``Platform.worker_recipe``; Codabench's: ``platforms/codabench_worker_env.py``); this module
gives it the pages' own lines about the machine, taken from what the evaluation page renders
(``render.budget_lines``), so that the recipe cannot state other figures than the pages. The
recipe holds nothing but the spec's queue and image and those lines: never the record secret,
a broker login or hidden data.
"""
from __future__ import annotations

from pathlib import Path

from .platforms import platform
from .render import budget_lines

SUFFIX = ".worker.env"
# The pages' budget lines that are about the machine rather than the rules of a run: its
# memory, its disk and where the log states the rest (CPU model, cores, memory, GPU).
HARDWARE_STARTS = ("memory:", "files up to", "the machine")


def recipe_path(bundle: Path) -> Path:
    """Where a bundle's recipe goes: next to it, named after it."""
    return bundle.with_name(bundle.name.removesuffix(".zip") + SUFFIX)


def promised_hardware(spec, phases) -> list[str]:
    """The evaluation page's lines about the machine for a bundle of ``phases`` (keys): none
    where every phase scores uploaded prediction files, since nothing runs then but scoring."""
    if not any(phase.code_submission for phase in spec.phases if phase.key in phases):
        return []
    return [line for line in budget_lines(spec, True) if line.startswith(HARDWARE_STARTS)]


def write_worker_recipe(spec, bundle: Path, phases, platform_name: str) -> Path | None:
    """Write the bundle's recipe where the platform gives one, and return its path; where it
    gives none, remove a recipe an earlier build left there, which no longer applies."""
    path = recipe_path(bundle)
    text = platform(platform_name).worker_recipe(spec, bundle.name,
                                                 promised_hardware(spec, phases))
    if text is None:
        path.unlink(missing_ok=True)
        return None
    path.write_text(text, encoding="utf-8")
    return path

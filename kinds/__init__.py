"""Competition kinds: the one place where a kind is registered, and the seam the core uses.

A kind is one package, ``kinds/<name>/``:

- ``runtime/`` ships inside the scoring and ingestion programs (standard library and the
  docker image's packages only): ``scoring.py`` (task types, score types, how a task is
  scored and reported), ``ingestion.py`` (how the ingestion stages a task and checks what
  comes back) and ``participant.py`` (what the participant's code receives and what it must
  return).
- ``kind.py`` is used by the builder only: task declarations, staging of hidden, input and
  public data, page text, starting kit, default spec and embedded tasks.

The core (``bundle/``, ``ingestion_program/``, ``scoring_program/``, ``starting_kit/``) looks a
kind up here by the name the spec gives and reads it through its records (``kinds/kind.py``),
knowing nothing else about it. This module and ``kinds/kind.py`` are copied into both programs with the
kind's ``__init__.py`` and ``runtime/`` and the shared ``runtime`` package (the seam's types,
file formats, report pieces): ``bundle.programs.copy_shipped_code``. Standard library only here.
"""
from __future__ import annotations

import importlib

# name in the spec -> package. Adding a kind: its package, and one line here.
KINDS = {
    "bdl2021": "kinds.bdl2021",
    "label_accuracy": "kinds.label_accuracy",
    "pgdl2020": "kinds.pgdl2020",
    "retina": "kinds.retina",
}
DEFAULT_KIND = "bdl2021"


class UnknownKind(ValueError):
    pass


def package(name: str) -> str:
    if name not in KINDS:
        raise UnknownKind(f"unknown competition kind {name!r}; known: {', '.join(sorted(KINDS))}")
    return KINDS[name]


def runtime_module(name: str, module: str):
    """A module of the kind's ``runtime/`` (present in the program zips). The programs read a
    kind's runtime through its records (``kinds.kind``), not through the module."""
    return importlib.import_module(f"{package(name)}.runtime.{module}")


def definition(name: str):
    """The kind's build-time definition, ``kinds/<name>/kind.py`` (the builder's side)."""
    return importlib.import_module(f"{package(name)}.kind")

"""What the shipped ``starting_kit/run_local.py`` imports in the organizers' repository
(``repository_layout``): the kit's files stay as they are until issue 26's starting-kit step, so
its import stays too, and goes with that step. Everything else reads ``kinds.kind``."""
from __future__ import annotations

from kinds.kind import Kind, kind


def kind_of(plan) -> Kind:
    return kind(plan.kind)


def entry_file(definition: Kind) -> str:
    return definition.entry_file


def support_modules(definition: Kind) -> dict:
    return definition.support_modules()

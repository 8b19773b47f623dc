"""Phase plans of a kind's default competition, as the tests use them: label_accuracy's, the
smallest kind and the core tests' fixture, unless a test names another (a test of a BDL
harness, or of what only BDL has), so that a change to one kind cannot break a core test."""
import dataclasses
import shutil
from pathlib import Path

import yaml

from bundle.phase_plan import PhasePlan, phase_plan
from bundle.spec import load_spec
from kinds.kind import KINDS

CORE_KIND = "label_accuracy"


def embedded_phase(phase: str, code_submission: bool | None = None,
                   budget_seconds: float | None = None, kind: str = CORE_KIND) -> PhasePlan:
    """The phase of ``kind``'s default spec, tasks in name order (the tests rely on which runs
    first); ``budget_seconds`` replaces every task's budget."""
    plan = phase_plan(load_spec(KINDS[kind].DEFAULT_SPEC), phase,
                      code_submission=code_submission, budget_seconds=budget_seconds)
    return dataclasses.replace(plan, tasks=tuple(sorted(plan.tasks, key=lambda t: t.name)))


def per_phase_spec(folder: Path, kind: str = CORE_KIND) -> Path:
    """``kind``'s default spec written into ``folder`` (with its logo) with one bundle per phase
    (layout: per_phase), as a test of a single phase's bundle builds it: label_accuracy's
    default puts both its phases in one bundle."""
    default = KINDS[kind].DEFAULT_SPEC
    raw = yaml.safe_load(default.read_text(encoding="utf-8"))
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(default.parent / raw["logo"], folder / raw["logo"])
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump({**raw, "layout": "per_phase"}, sort_keys=False),
                    encoding="utf-8")
    return path

"""Phase plans of a kind's default competition, as the tests use them: label_accuracy's, the
smallest kind and the core tests' fixture, unless a test names another (a test of a BDL
harness, or of what only BDL has), so that a change to one kind cannot break a core test."""
import dataclasses

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

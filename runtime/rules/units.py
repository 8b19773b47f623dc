"""Tasks run in units, each unit under its own hard time limit, worker side (PGDL: one unit per
trained network): the kind's ingestion record's ``units(task)`` names them and the seconds each
may take. A unit not done in time costs that unit, not the task, and a task whose units were
not all done is not complete. No builder half: the kind's own hook decides.
"""
from __future__ import annotations

DONE, TIMED_OUT, FAILED, NOT_REACHED = "done", "timed_out", "failed", "not_reached"
UNDONE = (TIMED_OUT, FAILED, NOT_REACHED)


def outcome_problems(task, outcome) -> list[str]:
    """The units a task's outcome did not get done, by how."""
    units = outcome.units or {}
    return [f"{state.replace('_', ' ')}: {', '.join(units[state])}"
            for state in UNDONE if units.get(state)]

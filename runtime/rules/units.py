"""Tasks run in units, each unit under its own hard time limit, worker side (PGDL: one unit per
trained network). No builder half: the kind's own hook decides.

A kind may split a task into units: its ingestion record's ``units(task)`` gives their names
and the seconds each may take. One child runs the units in order and sends a checkpoint after
each, holding the whole output so far (one row per unit, rows not yet measured as the kind
fills them). A unit that runs past its seconds is killed with its child, and a child that dies
inside a unit without reporting an error costs that unit too; either way a fresh child goes on
with the next unit, until every unit was tried or the task's own budget is spent. So one hung
or crashing network costs that network, not the zoo. The task has one start-up allowance, its
first child's: the budget begins when that child calls the participant's function, and a
fresh child starts up within the budget.

The children are the ingestion's (``ingest/supervisor.py``): this rule runs each through the
``run_child`` the core passes, with the unit window the supervisor enforces (``UnitWindow``:
checkpoints, a unit's own kill), and never imports the ingestion.
"""
from __future__ import annotations

import dataclasses
import functools
import time

import numpy as np

from runtime import failures
from runtime.formats.matrix_files import FormatError

from .records import WorkerRule

_DONE, _TIMED_OUT, _FAILED, _NOT_REACHED = "done", "timed_out", "failed", "not_reached"
_UNDONE = (_TIMED_OUT, _FAILED, _NOT_REACHED)


def task_runner(task, contract):
    """How the task runs when the kind runs it in units, else None (the core runs it whole)."""
    names, seconds = contract.units(task)
    if not names:
        return None
    return functools.partial(_run_in_units, task, contract, (tuple(names), float(seconds)))


def outcome_problems(task, outcome) -> list[str]:
    """The units a task's outcome did not get done, by how."""
    units = outcome.units or {}
    return [f"{state.replace('_', ' ')}: {', '.join(units[state])}"
            for state in _UNDONE if units.get(state)]


def outcome_lines(task, outcome) -> list[str]:
    """What the ingestion's log says of a task run in units."""
    if not outcome.units:
        return []
    counts = ", ".join(f"{len(outcome.units[state])} {state.replace('_', ' ')}"
                       for state in _UNDONE)
    return [f"run one unit at a time, each killed after {outcome.units['seconds']:g} s: {counts}"]


def _merge(merged: np.ndarray | None, rows: np.ndarray | None, first: int):
    """Rows before ``first`` come from earlier children, the rest from this one."""
    if rows is None:
        return merged
    if merged is None:
        return rows.copy()
    merged = merged.copy()
    merged[first:] = rows[first:]
    return merged


def _run_in_units(task, contract, plan: tuple[tuple[str, ...], float], run_child):
    """``run_child(names=, seconds=, first=, deadline=)``: one child of the task, over the
    units from ``first`` on (the supervisor's ``UnitWindow``), its ``TaskOutcome``."""
    names, seconds = plan
    deadline = None         # the first child's start-up is not the budget's
    states = [_NOT_REACHED] * len(names)
    children: list[tuple[int, object]] = []
    merged, first = None, 0
    while first < len(names) and (deadline is None or time.monotonic() < deadline):
        outcome = run_child(names=names, seconds=seconds, first=first, deadline=deadline)
        deadline = outcome.budget_ends if deadline is None else deadline
        children.append((first, outcome))
        merged = _merge(merged, outcome.predictions, first)
        final = outcome.prediction == "final"
        finished = len(names) if final else min(first + outcome.units_done, len(names))
        states[first:finished] = [_DONE] * (finished - first)
        if final or finished == len(names):
            break
        if outcome.training_seconds is not None:   # it began: the unit under way was hit
            states[finished] = _TIMED_OUT if outcome.status == "timed_out" else _FAILED
        if not outcome.resumable:
            break
        first = finished + 1
    return _combined(task, contract, children, states, merged, plan)


def _unit_notes(children: list[tuple[int, object]], names) -> list[str]:
    """One line per child that ended inside a unit: which unit, and how."""
    notes = []
    for first, child in children:
        index = first + child.units_done
        if child.prediction != "final" and index < len(names) and child.resumable:
            text = child.message.removeprefix(f"{names[index]} ")
            notes.append(f"{names[index]}: {text}; a fresh process went on with the next one"
                         if index + 1 < len(names) else f"{names[index]}: {text}")
    return notes


def _combined(task, contract, children: list[tuple[int, object]],
              states: list[str], merged, plan):
    """The task's outcome from its children's: complete when every unit was tried."""
    names, seconds = plan
    outcomes = [child for _, child in children]
    last = outcomes[-1]
    complete = _NOT_REACHED not in states and (last.prediction == "final" or last.resumable)
    wall = round(sum(o.wall_seconds for o in outcomes), 3)
    begun = outcomes[0].training_seconds is not None
    combined = dataclasses.replace(
        last, wall_seconds=wall, startup_seconds=outcomes[0].startup_seconds,
        # at least 0: the rounded wall time can fall a few microseconds short of the first
        # child's start-up when training took none, and the scorer refuses a record with a
        # negative figure, failing the whole submission (the organizer matrix, a loaded machine)
        training_seconds=max(wall - outcomes[0].startup_seconds, 0.0) if begun else None,
        peak_memory_mb=max((o.peak_memory_mb for o in outcomes if o.peak_memory_mb),
                           default=None),
        resident_peak_mb=max((o.resident_peak_mb for o in outcomes
                              if o.resident_peak_mb is not None), default=None),
        stdout=_joined([o.stdout for o in outcomes]), stderr=_joined([o.stderr for o in outcomes]),
        killed_descendants=sum(o.killed_descendants for o in outcomes),
        protections=_weakest([o.protections for o in outcomes]),
        scratch="; ".join(o.scratch for o in outcomes if o.scratch) or None,
        units_done=states.count(_DONE), resumable=False,
        units={"seconds": seconds, **{state: [n for n, s in zip(names, states) if s == state]
                                      for state in (_TIMED_OUT, _FAILED, _NOT_REACHED)}})
    notes = _unit_notes(children, names)
    if states.count(_NOT_REACHED):
        notes.append(f"{states.count(_NOT_REACHED)} of {len(names)} not reached")
    if complete:
        combined.status, combined.message = "ok", ""
    if merged is not None:
        try:
            combined.predictions, checked = contract.check_output(merged, task, "the results")
            notes = list(checked) + notes
        except FormatError as error:   # each part passed the same check: report, do not crash
            combined.predictions, notes = None, notes + [f"the merged results are unusable: {error}"]
    if not _any_value(combined.predictions):
        combined.predictions = None        # nothing to score: the run's reasons say more
        if complete:
            combined.status = "failed"
            combined.message = _no_value_text(states, _unit_notes(children, names))
            combined.failure = _no_value_failure(children, names)
    combined.prediction = None if combined.predictions is None else (
        "final" if complete else "anytime")
    combined.notes = notes + (["the task's budget ended before every unit was tried"]
                              if not complete and last.status == "timed_out" else [])
    return combined


def _weakest(reports: list) -> list | None:
    """The protections every child of the task installed: one that ran with less shows (a
    child without a report died before any code of theirs ran, so it does not count)."""
    reports = [report for report in reports if report is not None]
    if not reports:
        return None
    weakest = []
    for name, on, detail in reports[0]:
        offs = [d for report in reports for n, o, d in report if n == name and not o]
        weakest.append((name, on and not offs, offs[0] if offs else detail))
    return weakest


def _any_value(predictions) -> bool:
    """Whether some unit got a value: the kind leaves NaN in the rows of the others."""
    return predictions is not None and bool(np.isfinite(predictions).any())


def _no_value_failure(children: list[tuple[int, object]], names) -> str:
    """The category of a task whose every unit was tried and none got a value: the first
    child's that ended inside a unit (the first error the message names); where every unit
    finished, what they returned was no value."""
    ended = [child for first, child in children if child.prediction != "final"
             and first + child.units_done < len(names) and child.resumable and child.failure]
    return ended[0].failure if ended else failures.INVALID_OUTPUT


def _no_value_text(states: list[str], unit_notes: list[str]) -> str:
    """Why a task whose every unit was tried counts as failed, and the first error that ended
    a child (each unit's own line follows in the notes)."""
    counts = ", ".join(f"{states.count(state)} {label}" for state, label in (
        (_FAILED, "failed"), (_TIMED_OUT, "timed out"), (_DONE, "finished without one"))
        if state in states)
    return f"none of the {len(states)} units got a value ({counts})" + (
        f"; the first error: {unit_notes[0]}" if unit_notes else "")


def _joined(texts: list[str]) -> str:
    return "".join(text if text.endswith("\n") or not text else text + "\n" for text in texts)


RULE = WorkerRule(name="units", task_runner=task_runner, outcome_problems=outcome_problems,
                  outcome_lines=outcome_lines)

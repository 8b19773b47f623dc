"""A baseline table's failed entries: one rule for every kind's table, its script, its pages
and the build's methodology check.

A baseline that did not deliver a scored prediction for a task (it raised, timed out, wrote
nothing: any penalty of the scorer) has a failed row: the penalty's reason and its category
(``runtime/failures.py``), and no figures. The scorer gives such a task the worst value of
every metric so that it ranks last on a leaderboard; copied into a table of baselines, that
value reads as a result ("0.000 ± 1.000"), so no reader of a table shows or compares it.

Two table shapes are committed: ``tasks.<task>.methods.<method>`` (BDL) and
``tasks.<task>.<method>`` (PGDL, Retina); ``task_rows`` reads both. Tables made before the
category was kept have the reason only.
"""
from __future__ import annotations

import sys

from runtime import failures

KEEP_GOING = "--keep-going"
KEEP_GOING_HELP = ("write the table even when a baseline fails a task (its row then shows it "
                   "failed, with no figure); without it such a run writes nothing and exits 1")


def failed_row(result: dict) -> dict | None:
    """The row of a task's detailed result (``result_summary``) that the scorer penalised:
    why and in which category; None for a scored one."""
    if not result.get("penalty"):
        return None
    return {"penalty": result["penalty"], "failure": result.get("failure")}


def failed(row) -> bool:
    return isinstance(row, dict) and bool(row.get("penalty"))


def category(row: dict) -> str:
    """The failure's title as the log and the detailed results name it."""
    code = failures.known(row.get("failure"))
    return failures.title(code) if code else "penalised"


def failed_cell(row: dict) -> str:
    """What a table shows where a failed baseline's figure would be."""
    return f"failed: {category(row)}"


def task_rows(table: dict, task: str) -> dict:
    """{method: row} of one task, in either shape."""
    rows = table.get("tasks", {}).get(task, {})
    return rows.get("methods", rows)


def failures_of(table: dict) -> list[str]:
    """One line per failed row: the baseline, the task, the category and the reason."""
    return [f"{method} on {task}: {category(row)}: {row['penalty']}"
            for task in table.get("tasks", {})
            for method, row in task_rows(table, task).items() if failed(row)]


def stopped_by_failures(table: dict, keep_going: bool) -> bool:
    """A baselines script's check before it writes ``table``: True (and an ``error:`` line per
    failed row on stderr) where a baseline failed a task and ``keep_going`` is not given; with
    it, a warning per failed row. A crash must not become a published figure unnoticed."""
    refused = refusal(table, keep_going)
    for line in [f"error: {line}" for line in refused] or failure_warnings(table):
        print(line, file=sys.stderr)
    return bool(refused)


def refusal(table: dict, keep_going: bool) -> list[str]:
    """The error lines that stop a baselines script before it writes ``table``: one per
    failed row and the advice, unless ``keep_going``."""
    lines = failures_of(table)
    if keep_going or not lines:
        return []
    return [*lines, f"{len(lines)} baseline run(s) failed; the table was not written (fix "
                    f"them, or rerun with {KEEP_GOING} to write it with them shown failed)"]


def failure_warnings(table: dict) -> list[str]:
    """What a script run with --keep-going prints about the rows it wrote failed."""
    return [f"warning: written as failed: {line}" for line in failures_of(table)]


def failed_note(rows) -> str:
    """What a page adds under its table where a row of ``rows`` (of one phase) failed."""
    if not any(failed(row) for row in rows):
        return ""
    return (" A baseline shown as failed delivered no prediction the scoring program could "
            "score on that task (the failure's category, as the detailed results name it): "
            "it has no figure there and is not compared.")

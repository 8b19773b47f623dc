"""Public rows, worker side (the 2021 evaluation phase): a task with ``public_rows`` in the
scoring config is scored on its first test rows for the leaderboard, the logs and the detailed
results; its figures on all rows (the full figures) are the rule's private columns, which the
scorer computes by scoring every task again without the rule's option and writes only to its
private output (``private/full_scores.txt``, ``private/full_results.json``): every column of a
scores file is public on Codabench, whatever its hidden flag. The builder's half is
``bundle/competition_rules/public_rows.py``.

A kind that scores a prefix of the rows says ``SCORES_PUBLIC_ROWS`` and gives ``first_rows``
and ``first_submission_rows``, which ``runtime.scoring.score_task(..., rows=)`` uses.
"""
from __future__ import annotations

from kinds.kind import scoring_runtime

from .records import RuleError, WorkerRule

FULL_VALUE = "full_value"
FULL_AGGREGATE = "full_weighted_loss"
# The full figures are the leaderboard's own statistics, on all rows.
PRIVATE_STATISTICS = {FULL_VALUE: "value", FULL_AGGREGATE: "weighted_loss"}
PRIVATE_OUTPUT = "full"


def _rule_error(message: str):
    return RuleError(message)


def scoring_task_fields(raw_task: dict, where: str) -> dict:
    rows = raw_task.get("public_rows")
    if rows is not None and (not isinstance(rows, int) or rows < 1):
        raise _rule_error(f"{where}.public_rows: expected a positive integer, found {rows!r}")
    return {"public_rows": rows}


def scoring_config_fields(raw: dict, where: str) -> dict:
    """Nothing of its own: a public part needs a kind whose scorer scores one."""
    tasks = raw.get("tasks") or []
    public = [index for index, task in enumerate(tasks) if task.get("public_rows") is not None]
    if public and not scoring_runtime(raw["kind"]).SCORES_PUBLIC_ROWS:
        raise _rule_error(f"{where}: tasks[{public[0]}].public_rows: this kind does not score "
                          "a part of the rows")
    return {}


def score_options(task) -> dict:
    rows = task.rules.get("public_rows")
    return {"rows": rows} if rows else {}


def result_notes(task) -> list[str]:
    rows = task.rules.get("public_rows")
    return [f"scored on its first {rows} test rows, the public part; the figures on all rows "
            "stay hidden until the organizers reveal them"] if rows else []


RULE = WorkerRule(name="public_rows", PRIVATE_STATISTICS=PRIVATE_STATISTICS,
                  PRIVATE_OUTPUT=PRIVATE_OUTPUT, scoring_task_fields=scoring_task_fields,
                  scoring_config_fields=scoring_config_fields, score_options=score_options,
                  result_notes=result_notes)

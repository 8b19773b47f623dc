"""Public rows, build side (the 2021 evaluation phase): during the competition the leaderboard
scores a task on its first ``public_rows`` test rows; the figures on all rows are computed for
every submission and kept where only the organizers can read them; a rebuild with
``reveal_full_scores: true`` scores every row in the usual columns, for the final ranking.

This half reads the spec keys, plans each task's public part, passes it to the scorer's config,
adds the hidden full columns and states the public part on the pages. The worker's half, which
scores the public part and computes the full figures, is ``runtime/rules/public_rows.py``. The
kind says whether its scorer can score a prefix of the rows (``Kind.scores_public_rows``) and
how many test rows a task has (``Kind.test_rows``).

``page_facts`` gives no template names: the rule's page text is one of the phase's facts
(``phase_facts``), which the pages print with the others.
"""
from __future__ import annotations

import dataclasses

from kinds.kind import KINDS
from runtime.rules.public_rows import FULL_AGGREGATE, FULL_VALUE

from ..task_declarations import TaskDataError, declaration_path, read_declaration
from ..spec_key import Key, number
from .records import BuildRule

_FULL_SUFFIX = "full"       # a task's figures on all its test rows, hidden while a part is public
_ON_ALL_ROWS = ", on all test rows"

SPEC_KEYS = {
    "tasks.<task>": {"public_rows": Key(
        number(minimum=1, integer=True),
        "Score the task's first `public_rows` test rows for the leaderboard during the "
        "competition (the 2021 evaluation phase: CIFAR-10 10,000 of 50,000, UCI 100 of "
        "256) and all rows for the final ranking. The full figures are computed for "
        "every submission and kept from participants in `private/full_scores.txt` of "
        "its scoring output, which only organizers can read (CodaLab v1.5: the private "
        "output; Codabench: the scoring output, which the phase hides), never in a "
        "leaderboard column: Codabench's submissions API shows every column, hidden "
        "ones too, to anyone. The detailed results and logs show the public part "
        "only. See `reveal_full_scores`.",
        default=None, shown="none: the task is scored on all its rows", example=100)},
    "": {"reveal_full_scores": Key(
        {"type": "boolean"},
        "Rebuild with `true` at the end of the competition: every task is then scored on all "
        "its rows, in the leaderboard's usual columns. Replace the phase's scoring program "
        "with the rebuilt one and re-run all submissions.", default=False, example=True)},
}


def spec_values(raw: dict) -> dict:
    """``public_rows``: the tasks scored on a public prefix of their test rows;
    ``reveal_full_scores``: the full figures replace the public ones (the final ranking)."""
    return {"public_rows": {name: int(task["public_rows"]) for name, task in raw["tasks"].items()
                            if "public_rows" in task},
            "reveal_full_scores": raw["reveal_full_scores"]}


def spec_problems(raw: dict, data_root, load_task) -> list[str]:
    """A public part needs a kind that scores a prefix of the test rows, and fewer rows than
    the task has (else nothing would be hidden)."""
    problems = []
    for name, task in raw["tasks"].items():
        if "public_rows" not in task:
            continue
        where = f"tasks.{name}.public_rows"
        if not KINDS[raw["kind"]].scores_public_rows:
            problems.append(f"{where}: kind {raw['kind']} does not score a part of a task's "
                            "test rows")
            continue
        rows = _test_rows(raw["kind"], name, data_root)
        if rows is not None and task["public_rows"] >= rows:
            problems.append(f"{where}: found {task['public_rows']}, expected fewer than the "
                            f"task's {rows} test rows (the rest are scored only in full)")
    return problems


def _test_rows(kind: str, name: str, data_root) -> int | None:
    """The task's number of test rows, as the kind reads its declaration; None if unknown."""
    try:
        declaration = read_declaration(declaration_path(data_root, name), name)
        return KINDS[kind].test_rows(declaration)
    except (TaskDataError, KeyError, TypeError, ValueError):
        return None                    # the task's own problems are reported on their own


def plan_task(spec, name: str, spec_budgets: bool) -> dict:
    # Once revealed, every task is scored in full: no public part, no hidden figures.
    rows = None if spec.rules["reveal_full_scores"] else spec.rules["public_rows"].get(name)
    return {"public_rows": rows}


def public_part(task) -> int | None:
    """How many of a planned task's first test rows its leaderboard scores during the phase
    (None: all of them): the rule's state, as any build code reads it."""
    return task.rules.get("public_rows")


def _public(plan) -> list:
    return [task for task in plan.tasks if public_part(task)]


def task_columns(plan, task, columns) -> list:
    """A task scored on a public part also gets each metric on all its rows, hidden."""
    if not public_part(task):
        return []
    return [dataclasses.replace(
        column, key=f"{column.key}_{_FULL_SUFFIX}", label=f"{column.label} ({_FULL_SUFFIX})",
        description=column.description + _ON_ALL_ROWS, statistic=FULL_VALUE, hidden=True)
        for column in columns if column.statistic == "value"]


def aggregate_columns(plan, aggregate) -> list:
    """The weighted loss on all rows, hidden, where some task is scored on a public part."""
    if not _public(plan):
        return []
    return [dataclasses.replace(
        aggregate, key=f"{aggregate.key}_{_FULL_SUFFIX}",
        label=f"{aggregate.label} ({_FULL_SUFFIX})",
        description=aggregate.description + _ON_ALL_ROWS, statistic=FULL_AGGREGATE, hidden=True)]


def scoring_task_entries(task) -> dict:
    # A task scored in full keeps the entries it had before this rule.
    rows = public_part(task)
    return {"public_rows": rows} if rows else {}


def phase_facts(plan, budget_facts) -> list[tuple[str, str]]:
    public = _public(plan)
    if not public:
        return []
    return [("Scored during the phase", "; ".join(
        f"{task.name}: its first {public_part(task)} test rows" for task in public)
        + ". The leaderboard shows these scores; the final ranking scores all rows")]


def withholds_figures(spec) -> bool:
    """Until the organizer rebuilds with ``reveal_full_scores``, the full figures are kept."""
    return bool(spec.rules["public_rows"]) and not spec.rules["reveal_full_scores"]


RULE = BuildRule(name="public_rows", SPEC_KEYS=SPEC_KEYS, spec_values=spec_values,
                 spec_problems=spec_problems, plan_task=plan_task, task_columns=task_columns,
                 aggregate_columns=aggregate_columns, scoring_task_entries=scoring_task_entries,
                 phase_facts=phase_facts, withholds_figures=withholds_figures)

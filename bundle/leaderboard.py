"""Leaderboard columns, derived from a phase's tasks and its kind's score types.

The same objects give competition.yaml its columns (key, label, sort, format) and the
scoring program its list of keys to write, so no key is typed twice.
"""
from __future__ import annotations

from dataclasses import dataclass

from scoring_program.scorer.score_types import AGGREGATE, AVERAGE_RANK, TRAIN_SECONDS

from kinds.kind import kind

from . import competition_rules
from .phase_plan import PhasePlan

LABEL_LIMIT = 50


@dataclass(frozen=True)
class LeaderboardColumn:
    key: str
    label: str
    sort: str                        # "asc" or "desc"
    numeric_format: int
    description: str
    statistic: str | None            # what the scorer writes; None for computed columns
    task: str | None = None
    metric: str | None = None
    computed_fields: tuple[str, ...] = ()   # CodaLab "Avg" of the ranks of these columns
    selection_default: int = 0
    # A figure a competition rule keeps from participants: the scorer computes it, and writes
    # it to its private output, never to the scores file: CodaLab v1.5 has no hidden
    # columns, and Codabench's submissions API shows every column, hidden or not, to anyone
    # (codabench_v2.md §3.9). No leaderboard of either platform lists them.
    hidden: bool = False

    @property
    def computed(self) -> bool:
        return bool(self.computed_fields)


def aggregate_description(plan: PhasePlan) -> str:
    """The kind's words for its weighted loss."""
    return kind(plan.kind).AGGREGATE_DESCRIPTION


def _task_columns(plan: PhasePlan, task) -> list[LeaderboardColumn]:
    columns = []
    for metric in kind(plan.kind).task_types[task.task_type].score_types:
        value = LeaderboardColumn(f"{task.name}_{metric.name}", f"{task.name} {metric.label}",
                                  metric.sort, metric.precision, metric.description, "value",
                                  task.name, metric.name)
        columns += [value, *competition_rules.metric_columns(plan, task, metric, value)]
    if plan.code_submission:
        columns.append(LeaderboardColumn(
            f"{task.name}_{TRAIN_SECONDS.name}", f"{task.name} {TRAIN_SECONDS.label}",
            TRAIN_SECONDS.sort, TRAIN_SECONDS.precision, TRAIN_SECONDS.description,
            "train_seconds", task.name))
    return columns + competition_rules.task_columns(plan, task, columns)


def _primary_keys(plan: PhasePlan) -> list[str]:
    types = kind(plan.kind).task_types
    return [f"{task.name}_{types[task.task_type].primary.name}" for task in plan.tasks]


def _aggregate(plan: PhasePlan) -> LeaderboardColumn:
    return LeaderboardColumn(AGGREGATE.name, AGGREGATE.label, AGGREGATE.sort,
                             AGGREGATE.precision, aggregate_description(plan), "weighted_loss")


def phase_columns(plan: PhasePlan) -> list[LeaderboardColumn]:
    """Scored columns per task, the weighted loss, and (several tasks) the average rank.

    The ranking column (selection_default) is the average rank over the tasks' primary
    metrics, as the 2021 competition ranked; with one task, that task's primary metric. A kind
    whose competition ranked by its aggregate (``RANKS_BY_AGGREGATE``) ranks by the weighted
    loss instead.
    """
    columns = [column for task in plan.tasks for column in _task_columns(plan, task)]
    aggregate = _aggregate(plan)
    columns += [aggregate, *competition_rules.aggregate_columns(plan, aggregate)]
    primary = _primary_keys(plan)
    if kind(plan.kind).RANKS_BY_AGGREGATE:
        return _checked([_ranking(c, c.statistic == "weighted_loss") for c in columns])
    if len(primary) > 1:
        columns.append(LeaderboardColumn(AVERAGE_RANK.name, AVERAGE_RANK.label, "asc",
                                         AVERAGE_RANK.precision, AVERAGE_RANK.description,
                                         None, computed_fields=tuple(primary),
                                         selection_default=1))
    else:
        columns = [_ranking(c, True) if c.key == primary[0] else c for c in columns]
    return _checked(columns)


def ranking_entry(plan: PhasePlan, leaderboard: list[LeaderboardColumn] | None = None) -> dict:
    """How the leaderboard's ranking column is computed, for the phase's scoring config (read
    back by ``scoring_program/ranks.py``): ``average_rank`` over its computed fields, the
    ``weighted_loss`` over the value columns of the phase's weighted metrics, or one
    ``column``. ``leaderboard``: the competition's columns where several phases share one
    leaderboard (``competition_columns``: it may rank otherwise than a phase alone would);
    by default the phase's own. Derived from the columns, so it names the very keys the
    leaderboard ranks by."""
    columns = phase_columns(plan)
    ranking = next(c for c in (leaderboard or columns) if c.selection_default)
    if ranking.computed:
        statistic, keys = "average_rank", list(ranking.computed_fields)
    elif ranking.statistic == "weighted_loss":
        statistic = "weighted_loss"
        keys = [c.key for c in columns
                if c.statistic == "value" and plan.weights.get(c.metric, 0.0)]
    else:
        statistic, keys = "column", [ranking.key]
    return {"statistic": statistic, "key": ranking.key, "label": ranking.label, "keys": keys}


def written_keys(plan: PhasePlan) -> list[str]:
    """The keys the phase's scorer writes to its scores file: the non-computed columns, less
    the hidden ones, which go to its private output."""
    return [c.key for c in phase_columns(plan) if not c.computed and not c.hidden]


def _checked(columns: list[LeaderboardColumn]) -> list[LeaderboardColumn]:
    too_long = [c.label for c in columns if len(c.label) > LABEL_LIMIT]
    if too_long:
        raise ValueError(f"leaderboard labels longer than {LABEL_LIMIT} characters: {too_long}")
    return columns


def competition_columns(plans: list[PhasePlan]) -> list[LeaderboardColumn]:
    """The one leaderboard of a competition holding several phases: both platforms attach a
    single leaderboard to every phase (codalab_v1.md G26, codabench_v2.md §1.4), so its columns
    are the union of the phases' columns, and a phase leaves the others' empty ("-").

    The ranking column must be one every phase writes: as a single phase ranks when all
    phases score the same tasks, otherwise the weighted loss, which every phase writes (a
    CodaLab Avg of ranks over columns a phase leaves empty is undefined).
    """
    if len(plans) == 1:
        return phase_columns(plans[0])
    scored: dict[str, LeaderboardColumn] = {}
    for plan in plans:
        for column in phase_columns(plan):
            if not column.computed and column.statistic != "weighted_loss":
                scored.setdefault(column.key, _ranking(column, False))
    aggregate = _aggregate(plans[0])
    ranking = next(c for c in phase_columns(plans[0]) if c.selection_default)
    if len({tuple(_primary_keys(plan)) for plan in plans}) > 1 or ranking.key == aggregate.key:
        return _checked([*scored.values(), _ranking(aggregate, True)])
    if ranking.computed:
        return _checked([*scored.values(), aggregate, ranking])
    return _checked([_ranking(c, c.key == ranking.key) for c in scored.values()] + [aggregate])


def _ranking(column: LeaderboardColumn, ranks: bool) -> LeaderboardColumn:
    return LeaderboardColumn(**{**column.__dict__, "selection_default": int(ranks)})


def codabench_columns(columns: list[LeaderboardColumn]) -> list[LeaderboardColumn]:
    """The leaderboard as Codabench holds it: the ranking column first (index 0 ranks,
    codabench_v2.md §1.5) and marked so. The average rank is the site's own ``avg_rank``
    (v1.29), computed as it serves the leaderboard over the same columns, each a task's own
    key, so ranks are per task as on CodaLab. The hidden figures are no column of it (see
    ``LeaderboardColumn.hidden``)."""
    shown = [c for c in columns if not c.hidden]
    ranking_key = next(c.key for c in shown if c.selection_default)
    ordered = sorted(shown, key=lambda c: c.key != ranking_key)
    return [_ranking(c, c.key == ranking_key) for c in ordered]

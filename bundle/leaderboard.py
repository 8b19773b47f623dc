"""Leaderboard columns, derived from a phase's tasks and the scorer's score types.

The same objects give competition.yaml its columns (key, label, sort, format) and the
scoring program its list of keys to write, so no key is typed twice.
"""
from __future__ import annotations

from dataclasses import dataclass

from scoring_program.scorer.score_types import (AGGREGATE, AVERAGE_RANK, PRIMARY, SCORE_TYPES,
                                                STD_SUFFIX, TRAIN_SECONDS)

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

    @property
    def computed(self) -> bool:
        return bool(self.computed_fields)


def _task_columns(plan: PhasePlan, task) -> list[LeaderboardColumn]:
    columns = []
    for metric in SCORE_TYPES[task.kind]:
        key = f"{task.name}_{metric.name}"
        columns.append(LeaderboardColumn(key, f"{task.name} {metric.label}", metric.sort,
                                         metric.precision, metric.description, "value",
                                         task.name, metric.name))
        if task.files.chain_reference.is_file():
            columns.append(LeaderboardColumn(
                f"{key}_{STD_SUFFIX}", f"{task.name} {metric.label} sd", "asc", metric.precision,
                f"Standard deviation of {metric.label} over the HMC chains", "std",
                task.name, metric.name))
    if plan.code_submission:
        columns.append(LeaderboardColumn(
            f"{task.name}_{TRAIN_SECONDS.name}", f"{task.name} {TRAIN_SECONDS.label}",
            TRAIN_SECONDS.sort, TRAIN_SECONDS.precision, TRAIN_SECONDS.description,
            "train_seconds", task.name))
    return columns


def phase_columns(plan: PhasePlan) -> list[LeaderboardColumn]:
    """Scored columns per task, the weighted loss, and (several tasks) the average rank.

    The ranking column (selection_default) is the average rank over the tasks' primary
    metrics, as the 2021 competition ranked; with one task, that task's primary metric.
    """
    columns = [column for task in plan.tasks for column in _task_columns(plan, task)]
    columns.append(LeaderboardColumn(AGGREGATE.name, AGGREGATE.label, AGGREGATE.sort,
                                     AGGREGATE.precision, AGGREGATE.description,
                                     "weighted_loss"))
    primary = [f"{task.name}_{PRIMARY[task.kind].name}" for task in plan.tasks]
    if len(primary) > 1:
        columns.append(LeaderboardColumn(AVERAGE_RANK.name, AVERAGE_RANK.label, "asc",
                                         AVERAGE_RANK.precision, AVERAGE_RANK.description,
                                         None, computed_fields=tuple(primary),
                                         selection_default=1))
    else:
        columns = [LeaderboardColumn(**{**c.__dict__, "selection_default": 1})
                   if c.key == primary[0] else c for c in columns]
    too_long = [c.label for c in columns if len(c.label) > LABEL_LIMIT]
    if too_long:
        raise ValueError(f"leaderboard labels longer than {LABEL_LIMIT} characters: {too_long}")
    return columns

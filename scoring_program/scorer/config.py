"""The scoring configuration the builder writes into the scoring program.

It names the competition kind, the phase's tasks (each with its task type, weights, budget
and the kind's own settings) and the exact leaderboard columns to write, all derived by the
builder from the organizer spec, so the scorer never invents a key. Validated on load: a
broken config is a builder bug, and it must say so plainly rather than surface as a KeyError
mid-scoring.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from runtime.formats.json_files import config_field, load_config_file
from kinds import UnknownKind
from kinds.kind import KindDefinitionError, ScoringRuntime, scoring_runtime
from runtime import rules
from runtime.scoring import TaskConfig

CONFIG_NAME = "scoring_config.json"
CONFIG_FORMAT = "scoring-config/2"
# A competition rule's own statistics (runtime/rules/) follow the core's.
STATISTICS = ("value", "train_seconds", "weighted_loss", "full_value",
              "full_weighted_loss") + rules.column_statistics()
# Figures on all test rows of a task scored on a public part: they go to $output/private/,
# never to the scores file (every score column is public on Codabench, whatever its hidden flag).
FULL_STATISTICS = ("full_value", "full_weighted_loss")
RECORD_RULES = ("optional", "required", "signed")


class ConfigError(ValueError):
    pass


def scores_file_keys(raw: dict) -> list[str]:
    """The keys a generated config makes the scorer write to scores.txt / scores.json: every
    column's, but the full figures, which go to the private output."""
    return [column["key"] for column in raw["columns"]
            if column["statistic"] not in FULL_STATISTICS]


@dataclass(frozen=True)
class Column:
    key: str
    statistic: str
    task: str | None = None
    metric: str | None = None


@dataclass(frozen=True)
class ScoringConfig:
    phase: str
    kind: str                      # the competition kind whose runtime scores the tasks
    tasks: tuple[TaskConfig, ...]
    columns: tuple[Column, ...]
    # What res/ must hold besides predictions: nothing (results phases), the ingestion's
    # record, or the record signed with the key in ref/ (where the ingestion can read it).
    record: str = "optional"
    # The competition rules' fields of this phase, under their own names (runtime/rules/)
    rules: dict = field(default_factory=dict)

    @property
    def full_columns(self) -> tuple["Column", ...]:
        return tuple(c for c in self.columns if c.statistic in FULL_STATISTICS)

    def task(self, name: str) -> TaskConfig:
        return next(task for task in self.tasks if task.name == name)

    @property
    def scoring(self) -> ScoringRuntime:
        """The record of the kind's runtime scoring module."""
        return scoring_runtime(self.kind)


def _require(mapping: dict, key: str, kind, where: str):
    return config_field(mapping, key, kind, where, ConfigError)


def _task(raw: dict, scoring: ScoringRuntime, where: str) -> TaskConfig:
    type_name = _require(raw, "task_type", str, where)
    if type_name not in scoring.TASK_TYPES:
        raise ConfigError(f"{where}.task_type: expected one of {', '.join(scoring.TASK_TYPES)}, "
                          f"found {type_name!r}")
    task_type = scoring.TASK_TYPES[type_name]
    weights = {name: float(w) for name, w in _require(raw, "weights", dict, where).items()}
    for name in weights:
        if name not in task_type.metric_names:
            raise ConfigError(f"{where}.weights: {name!r} is not a {type_name} metric")
    try:
        settings = scoring.parse_settings(type_name, _require(raw, "settings", dict, where),
                                          f"{where}.settings")
    except ValueError as error:
        raise ConfigError(str(error)) from None
    public_rows = raw.get("public_rows")
    if public_rows is not None and (not isinstance(public_rows, int) or public_rows < 1):
        raise ConfigError(f"{where}.public_rows: expected a positive integer, found {public_rows!r}")
    if public_rows is not None and not scoring.SCORES_PUBLIC_ROWS:
        raise ConfigError(f"{where}.public_rows: this kind does not score a part of the rows")
    try:
        rule_fields = rules.scoring_task_fields(raw, where)
    except rules.RuleError as error:
        raise ConfigError(str(error)) from None
    return TaskConfig(_require(raw, "name", str, where), task_type, weights,
                      raw.get("budget_seconds"), settings, public_rows, rule_fields)


def _column(raw: dict, tasks: dict[str, TaskConfig], where: str) -> Column:
    column = Column(_require(raw, "key", str, where), _require(raw, "statistic", str, where),
                    raw.get("task"), raw.get("metric"))
    if column.statistic not in STATISTICS:
        raise ConfigError(f"{where}.statistic: expected one of {STATISTICS}, found {column.statistic!r}")
    if column.statistic not in ("weighted_loss", "full_weighted_loss") and column.task not in tasks:
        raise ConfigError(f"{where}.task: {column.task!r} is not a task of this phase")
    by_rule = column.statistic in rules.column_statistics()
    if by_rule or column.statistic in ("value", "full_value"):
        if column.metric not in tasks[column.task].metric_names:
            raise ConfigError(f"{where}.metric: {column.metric!r} is not a metric of task "
                              f"{column.task!r}")
    if by_rule:
        problem = rules.column_problem(column.statistic, tasks[column.task])
        if problem:
            raise ConfigError(f"{where}: {problem}")
    return column


def parse_config(raw: dict, source: str = CONFIG_NAME) -> ScoringConfig:
    if raw.get("format") != CONFIG_FORMAT:
        raise ConfigError(f"{source}: format must be {CONFIG_FORMAT!r}, found {raw.get('format')!r}")
    kind = _require(raw, "kind", str, source)
    try:
        scoring = scoring_runtime(kind)
    except (UnknownKind, ImportError, KindDefinitionError) as error:
        raise ConfigError(f"{source}.kind: {error}") from None
    tasks = tuple(_task(t, scoring, f"{source}: tasks[{i}]")
                  for i, t in enumerate(_require(raw, "tasks", list, source)))
    by_name = {task.name: task for task in tasks}
    columns = tuple(_column(c, by_name, f"{source}: columns[{i}]")
                    for i, c in enumerate(_require(raw, "columns", list, source)))
    keys = [column.key for column in columns]
    duplicates = sorted({key for key in keys if keys.count(key) > 1})
    if duplicates:
        raise ConfigError(f"{source}: duplicate column keys {duplicates}")
    record = raw.get("record", "optional")
    if record not in RECORD_RULES:
        raise ConfigError(f"{source}: record must be one of {RECORD_RULES}, found {record!r}")
    try:
        rule_fields = rules.scoring_config_fields(raw, source)
    except rules.RuleError as error:
        raise ConfigError(str(error)) from None
    return ScoringConfig(_require(raw, "phase", str, source), kind, tasks, columns, record,
                         rule_fields)


def load_config(path: Path) -> ScoringConfig:
    return load_config_file(path, parse_config, "the builder writes it into the scoring program",
                            ConfigError)

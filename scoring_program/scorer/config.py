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
from runtime.worker_data import WorkerFolder, parse_worker_folder

CONFIG_NAME = "scoring_config.json"
CONFIG_FORMAT = "scoring-config/2"
# A competition rule's own statistics (runtime/rules/) follow the core's; a rule's private
# ones go to $output/private/, never to the scores file (every score column is public on
# Codabench, whatever its hidden flag).
STATISTICS = (("value", "train_seconds", "weighted_loss") + rules.column_statistics()
              + tuple(rules.private_statistics()))
PRIVATE_FOLDER = "private"     # organizers only (codalab_v1.md §4.6, codabench_v2.md §3.9)
# "signed_or_importer": a v1.5 bundle's, which may also run through Codabench's importer, where
# its ingestion signs with the key derived for it (runtime/formats/run_record.py importer_key);
# a native Codabench bundle's scorer never accepts that key.
RECORD_RULES = ("optional", "required", "signed", "signed_or_importer")
SIGNED_RULES = ("signed", "signed_or_importer")
# How the leaderboard's ranking column is computed from the value columns it reads
# (bundle/leaderboard.py ranking_entry): one column as it is, the mean over columns of each
# column's rank, or the weighted loss over the weighted metrics.
RANKING_STATISTICS = ("column", "average_rank", "weighted_loss")


class ConfigError(ValueError):
    pass


def scores_file_keys(raw: dict) -> list[str]:
    """The keys a generated config makes the scorer write to scores.txt / scores.json: every
    column's, but the rules' private ones, which go to the private output."""
    return [column["key"] for column in raw["columns"]
            if column["statistic"] not in rules.private_statistics()]


def private_files(output: str) -> tuple[str, str]:
    """A rule's private output (its ``PRIVATE_OUTPUT``) as files of the private folder: the
    scores file's stem (``.txt`` and ``.json``, as ``scores``) and the details file's name."""
    return f"{output}_scores", f"{output}_results.json"


@dataclass(frozen=True)
class Column:
    key: str
    statistic: str
    task: str | None = None
    metric: str | None = None
    label: str | None = None       # the leaderboard's title (configs before it have none)


@dataclass(frozen=True)
class Ranking:
    """The leaderboard's ranking column: its key and label, the statistic it is, and the
    value columns it is computed from (scoring_program/ranks.py recomputes it)."""
    statistic: str                 # one of RANKING_STATISTICS
    key: str
    label: str
    keys: tuple[str, ...]


@dataclass(frozen=True)
class ScoringConfig:
    phase: str
    kind: str                      # the competition kind whose runtime scores the tasks
    tasks: tuple[TaskConfig, ...]
    columns: tuple[Column, ...]
    # What res/ must hold besides predictions: nothing (results phases), the ingestion's
    # record, or the record signed with the key in ref/ (where the ingestion can read it), or
    # for a v1.5 bundle also with the importer's key where Codabench runs it (SIGNED_RULES).
    record: str = "optional"
    # The competition rules' fields of this phase, under their own names (runtime/rules/)
    rules: dict = field(default_factory=dict)
    # Where the references are sealed on the worker's data mount, when not in ref/
    worker_references: WorkerFolder | None = None
    # How the leaderboard ranks (configs written before it have none)
    ranking: Ranking | None = None

    @property
    def private_columns(self) -> tuple["Column", ...]:
        """The rules' figures kept from participants."""
        return tuple(c for c in self.columns if c.statistic in rules.private_statistics())

    @property
    def private_keys(self) -> dict[str, list[str]]:
        """The private columns' keys by the rules' private output they belong to."""
        kept: dict[str, list[str]] = {}
        for column in self.private_columns:
            kept.setdefault(rules.private_output(column.statistic), []).append(column.key)
        return kept

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
    try:
        rule_fields = rules.scoring_task_fields(raw, where)
    except rules.RuleError as error:
        raise ConfigError(str(error)) from None
    return TaskConfig(_require(raw, "name", str, where), task_type, weights,
                      raw.get("budget_seconds"), settings, rule_fields)


def _column(raw: dict, tasks: dict[str, TaskConfig], where: str) -> Column:
    label = raw.get("label")
    if label is not None and not isinstance(label, str):
        raise ConfigError(f"{where}.label: expected a string, found {label!r}")
    column = Column(_require(raw, "key", str, where), _require(raw, "statistic", str, where),
                    raw.get("task"), raw.get("metric"), label)
    if column.statistic not in STATISTICS:
        raise ConfigError(f"{where}.statistic: expected one of {STATISTICS}, found {column.statistic!r}")
    # a rule's private figure is checked as the core statistic it is computed as
    statistic = rules.private_statistics().get(column.statistic, column.statistic)
    if statistic != "weighted_loss" and column.task not in tasks:
        raise ConfigError(f"{where}.task: {column.task!r} is not a task of this phase")
    by_rule = statistic in rules.column_statistics()
    if by_rule or statistic == "value":
        if column.metric not in tasks[column.task].metric_names:
            raise ConfigError(f"{where}.metric: {column.metric!r} is not a metric of task "
                              f"{column.task!r}")
    if by_rule:
        problem = rules.column_problem(statistic, tasks[column.task])
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
        rule_fields = {**rules.scoring_config_fields(raw, source),
                       **rules.scoring_configs(raw, source, parse_config)}
    except rules.RuleError as error:
        raise ConfigError(str(error)) from None
    return ScoringConfig(_require(raw, "phase", str, source), kind, tasks, columns, record,
                         rule_fields, _worker_references(raw, source),
                         _ranking(raw.get("ranking"), columns, by_name, f"{source}: ranking"))


def _ranking(raw, columns: tuple[Column, ...], tasks: dict[str, TaskConfig],
             where: str) -> Ranking | None:
    """The optional ranking entry: each key a value column of this config, exactly one for
    ``column``, and for ``weighted_loss`` only weighted metrics (the others weigh nothing)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping, found {type(raw).__name__}")
    statistic = _require(raw, "statistic", str, where)
    if statistic not in RANKING_STATISTICS:
        raise ConfigError(f"{where}.statistic: expected one of {RANKING_STATISTICS}, found "
                          f"{statistic!r}")
    keys = _require(raw, "keys", list, where)
    by_key = {column.key: column for column in columns}
    if not keys or (statistic == "column" and len(keys) != 1):
        raise ConfigError(f"{where}.keys: expected {'one key' if statistic == 'column' else 'keys'}"
                          f" of value columns, found {keys!r}")
    for key in keys:
        column = by_key.get(key) if isinstance(key, str) else None
        if column is None or column.statistic != "value":
            raise ConfigError(f"{where}.keys: {key!r} is not a value column of this config")
        if statistic == "weighted_loss" and not tasks[column.task].weights.get(column.metric):
            raise ConfigError(f"{where}.keys: {key!r} has no weight in the weighted loss")
    return Ranking(statistic, _require(raw, "key", str, where), _require(raw, "label", str, where),
                   tuple(keys))


def _worker_references(raw: dict, source: str) -> WorkerFolder | None:
    references = parse_worker_folder(raw.get("worker_references"),
                                      f"{source}: worker_references", ConfigError)
    if references is not None and references.key is None:
        raise ConfigError(f"{source}: worker_references: missing key 'key'")
    return references


def load_config(path: Path) -> ScoringConfig:
    return load_config_file(path, parse_config, "the builder writes it into the scoring program",
                            ConfigError)

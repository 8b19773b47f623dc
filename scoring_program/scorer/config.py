"""The scoring configuration the builder writes into the scoring program.

It names the phase's tasks, their files and shapes, the aggregate's weights and the exact
leaderboard columns to write, all derived by the builder from the organizer spec, so the
scorer never invents a key. Validated on load: a broken config is a builder bug, and it
must say so plainly rather than surface as a KeyError mid-scoring.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from competition_formats import FormatError
from competition_formats.json_files import read_json_object

from .score_types import CLASSIFICATION, REGRESSION, SCORE_TYPES, score_type

CONFIG_NAME = "scoring_config.json"
CONFIG_FORMAT = "scoring-config/1"
STATISTICS = ("value", "std", "train_seconds", "weighted_loss")
RECORD_RULES = ("optional", "required", "signed")


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Block:
    name: str
    start: int
    stop: int


@dataclass(frozen=True)
class TaskConfig:
    name: str
    kind: str
    n_test: int
    num_classes: int | None
    num_samples: int | None
    blocks: tuple[Block, ...]
    submission_stem: str           # res/<stem>.csv|.txt|.npy
    reference: str                 # files in ref/
    chain_reference: str | None
    test_labels: str | None
    exact_posterior_expectation: str | None   # JSON the builder precomputes (exact_posterior.py)
    weights: dict[str, float]      # metric name -> weight in the aggregate
    budget_seconds: float | None

    @property
    def metric_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in SCORE_TYPES[self.kind])


@dataclass(frozen=True)
class Column:
    key: str
    statistic: str
    task: str | None = None
    metric: str | None = None


@dataclass(frozen=True)
class ScoringConfig:
    phase: str
    tasks: tuple[TaskConfig, ...]
    columns: tuple[Column, ...]
    # What res/ must hold besides predictions: nothing (results phases), the ingestion's
    # record, or the record signed with the key in ref/ (where the ingestion can read it).
    record: str = "optional"

    def task(self, name: str) -> TaskConfig:
        return next(task for task in self.tasks if task.name == name)


def _require(mapping: dict, key: str, kind, where: str):
    if key not in mapping:
        raise ConfigError(f"{where}: missing key {key!r}")
    value = mapping[key]
    if kind is not None and not isinstance(value, kind):
        raise ConfigError(f"{where}.{key}: expected {getattr(kind, '__name__', kind)}, "
                          f"found {type(value).__name__} {value!r}")
    return value


def _task(raw: dict, where: str) -> TaskConfig:
    kind = _require(raw, "kind", str, where)
    if "noise_ceiling" in raw:     # an old builder's config: its ceiling was not a ceiling
        raise ConfigError(f"{where}.noise_ceiling: replaced by exact_posterior_expectation; "
                          "rebuild the bundle with this builder")
    if kind not in (CLASSIFICATION, REGRESSION):
        raise ConfigError(f"{where}.kind: expected {CLASSIFICATION} or {REGRESSION}, found {kind!r}")
    blocks = tuple(Block(b["name"], int(b["start"]), int(b["stop"]))
                   for b in _require(raw, "blocks", list, where))
    n_test = _require(raw, "n_test", int, where)
    if not blocks or blocks[0].start != 0 or blocks[-1].stop != n_test or any(
            a.stop != b.start for a, b in zip(blocks, blocks[1:])):
        raise ConfigError(f"{where}.blocks: must tile 0..{n_test} in order, found {blocks}")
    weights = {name: float(w) for name, w in _require(raw, "weights", dict, where).items()}
    for name in weights:
        if name not in (t.name for t in SCORE_TYPES[kind]):
            raise ConfigError(f"{where}.weights: {name!r} is not a {kind} metric")
    task = TaskConfig(
        name=_require(raw, "name", str, where), kind=kind, n_test=n_test,
        num_classes=raw.get("num_classes"), num_samples=raw.get("num_samples"), blocks=blocks,
        submission_stem=_require(raw, "submission_stem", str, where),
        reference=_require(raw, "reference", str, where),
        chain_reference=raw.get("chain_reference"), test_labels=raw.get("test_labels"),
        exact_posterior_expectation=raw.get("exact_posterior_expectation"),
        weights=weights, budget_seconds=raw.get("budget_seconds"))
    needed = "num_classes" if kind == CLASSIFICATION else "num_samples"
    if not isinstance(getattr(task, needed), int):
        raise ConfigError(f"{where}.{needed}: expected an integer for a {kind} task")
    return task


def _column(raw: dict, tasks: dict[str, TaskConfig], where: str) -> Column:
    column = Column(_require(raw, "key", str, where), _require(raw, "statistic", str, where),
                    raw.get("task"), raw.get("metric"))
    if column.statistic not in STATISTICS:
        raise ConfigError(f"{where}.statistic: expected one of {STATISTICS}, found {column.statistic!r}")
    if column.statistic != "weighted_loss" and column.task not in tasks:
        raise ConfigError(f"{where}.task: {column.task!r} is not a task of this phase")
    if column.statistic in ("value", "std"):
        metric = score_type(column.metric) if column.metric else None
        if metric is None or metric.kind != tasks[column.task].kind:
            raise ConfigError(f"{where}.metric: {column.metric!r} is not a metric of task "
                              f"{column.task!r}")
        if column.statistic == "std" and not tasks[column.task].chain_reference:
            raise ConfigError(f"{where}: a std column needs the task's chain_reference")
    return column


def parse_config(raw: dict, source: str = CONFIG_NAME) -> ScoringConfig:
    if raw.get("format") != CONFIG_FORMAT:
        raise ConfigError(f"{source}: format must be {CONFIG_FORMAT!r}, found {raw.get('format')!r}")
    tasks = tuple(_task(t, f"{source}: tasks[{i}]")
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
    return ScoringConfig(_require(raw, "phase", str, source), tasks, columns, record)


def load_config(path: Path):
    try:
        raw = read_json_object(path, "the builder writes it into the scoring program")
    except FormatError as error:
        raise ConfigError(str(error)) from None
    return parse_config(raw, str(path))

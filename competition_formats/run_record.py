"""The ingestion program's record of each task's training run, which the scorer reads.

One JSON file, ``ingestion_record.json``, in the folder the ingestion program fills (the
scorer's ``res/``). Written by the ingestion program, read by the scoring program: both
get this module from the builder, so the format has one definition.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .json_files import read_json_object
from .matrix_files import FormatError, PathLike

RECORD_NAME = "ingestion_record.json"
RECORD_FORMAT = "ingestion-record/1"

OK, FAILED, TIMED_OUT, INVALID = "ok", "failed", "timed_out", "invalid"
STATUSES = (OK, FAILED, TIMED_OUT, INVALID)
# Which prediction the ingestion program wrote for the task, if any.
FINAL, ANYTIME = "final", "anytime"
PREDICTIONS = (FINAL, ANYTIME, None)


@dataclass(frozen=True)
class TaskRun:
    status: str
    wall_seconds: float
    prediction: str | None = None
    message: str = ""
    exit_code: int | None = None
    signal: str | None = None
    peak_memory_mb: float | None = None
    stderr_tail: str = ""

    @property
    def has_prediction(self) -> bool:
        """A prediction was written: a final one, or the last anytime one after a timeout."""
        return self.prediction is not None


@dataclass(frozen=True)
class RunRecord:
    tasks: dict[str, TaskRun]
    hardware: dict = field(default_factory=dict)


def write_run_record(path: PathLike, record: RunRecord) -> None:
    content = {"format": RECORD_FORMAT, "hardware": record.hardware,
               "tasks": {name: asdict(run) for name, run in sorted(record.tasks.items())}}
    Path(path).write_text(json.dumps(content, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _task_run(path: Path, name: str, raw) -> TaskRun:
    where = f"{path}: tasks.{name}"
    if not isinstance(raw, dict):
        raise FormatError(f"{where}: expected an object, found {type(raw).__name__}")
    unknown = sorted(set(raw) - set(TaskRun.__dataclass_fields__))
    if unknown:
        raise FormatError(f"{where}: unknown keys {unknown}")
    if raw.get("status") not in STATUSES:
        raise FormatError(f"{where}.status: expected one of {STATUSES}, found {raw.get('status')!r}")
    if raw.get("prediction") not in PREDICTIONS:
        raise FormatError(f"{where}.prediction: expected one of {PREDICTIONS}, "
                          f"found {raw.get('prediction')!r}")
    seconds = raw.get("wall_seconds")
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds < 0:
        raise FormatError(f"{where}.wall_seconds: expected a non-negative number, found {seconds!r}")
    return TaskRun(**raw)


def read_run_record(path: PathLike) -> RunRecord:
    path = Path(path)
    raw = read_json_object(path)
    if raw.get("format") != RECORD_FORMAT:
        raise FormatError(f"{path}: expected an object with format {RECORD_FORMAT!r}")
    tasks = raw.get("tasks")
    if not isinstance(tasks, dict):
        raise FormatError(f"{path}: 'tasks' must be an object mapping task names to runs")
    return RunRecord({name: _task_run(path, name, run) for name, run in tasks.items()},
                     raw.get("hardware") or {})

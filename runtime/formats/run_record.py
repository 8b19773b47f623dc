"""The ingestion program's record of each task's training run, which the scorer reads.

One JSON file, ``ingestion_record.json``, in the folder the ingestion program fills (the
scorer's ``res/``). Written by the ingestion program, read by the scoring program: both
get this module from the builder, so the format has one definition.

The record also lists the SHA-256 of every prediction file the ingestion wrote, and is
signed (HMAC-SHA256) with a key kept in the hidden reference data where the ingestion can
read it (CodaLab mounts the reference data for it). A zip of prediction files that skips
the ingestion program, with a record of its own making, then cannot pass for a training run.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from runtime import failures, rules

from .json_files import read_json_object
from .matrix_files import FormatError, PathLike

RECORD_NAME = "ingestion_record.json"
RECORD_FORMAT = "ingestion-record/1"
RECORD_KEY_NAME = "ingestion_record.key"        # in the hidden reference data: hex text

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
    # A task run in units (PGDL: one per network, each with a hard limit): the seconds each
    # had and the names of those that timed out, failed or were not reached; None otherwise.
    units: dict | None = None
    # The competition rules' entries for this task (runtime/rules/: their record_fields),
    # under their own names, e.g. how a budget in epochs became seconds on this machine.
    rules: dict = field(default_factory=dict)
    # wall_seconds in two parts. Start-up: starting Python, importing the participant's
    # module, loading the data, under its own allowance. Training: from the call of their
    # function on, under the budget; None when it was never called. A task run in units has
    # one start-up, its first process's: later ones start up within the budget.
    startup_seconds: float | None = None
    startup_allowance_seconds: float | None = None
    training_seconds: float | None = None
    budget_seconds: float | None = None
    # A run that delivered nothing: its category (runtime/failures.py), and the traceback of
    # the participant's own frames where it raised. A record older than both reads as None
    # and "" (failures.of_run then goes by the status).
    failure: str | None = None
    traceback: str = ""

    @property
    def train_seconds(self) -> float:
        """What the leaderboard's time column shows: the budget's part of the run. A run with
        no start-up recorded (a refused submission: nothing ran) has its wall time only."""
        if self.startup_seconds is None:
            return self.wall_seconds
        return self.training_seconds if self.training_seconds is not None else 0.0

    @property
    def has_prediction(self) -> bool:
        """A prediction was written: a final one, or the last anytime one after a timeout."""
        return self.prediction is not None


@dataclass(frozen=True)
class RunRecord:
    tasks: dict[str, TaskRun]
    hardware: dict = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)     # prediction file -> SHA-256
    signature: str | None = None
    # The competition rules' entries, top-level keys of the record under their own names
    # (runtime/rules/: a rule's ``Run`` gives them, ``record_entries`` reads them back)
    rules: dict = field(default_factory=dict)
    # Why the ingestion ran none of the submission (it carries a command the platform starts
    # outside the sandbox); the submission fails.
    refused: str | None = None
    # The digest of the submission this run ran (``submission_digest``): the record is this
    # submission's, so an earlier run's output shipped inside a later submission (Codabench
    # copies the submission over the ingestion's output before scoring) is not taken for it.
    submission: str | None = None


def file_digest(path: PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as opened:
        for block in iter(lambda: opened.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _signature(content: dict, key: bytes) -> str:
    """HMAC-SHA256 of the record's canonical JSON, its signature left out."""
    body = {name: value for name, value in content.items() if name != "signature"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def importer_key(key: bytes) -> bytes:
    """The key a CodaLab v1.5 bundle's ingestion program carries for Codabench's importer of
    v1.5 bundles, derived from the phase's key (in its reference data): Codabench mounts no
    reference data where the ingestion runs, so there the ingestion signs with this one. On
    CodaLab a submission's own container can read the ingestion program, so the scorer accepts
    a record signed with it only where Codabench runs the scorer (``codabench_layout``)."""
    return hmac.new(key, b"codabench v1.5 importer", hashlib.sha256).digest()


def codabench_layout(program_dir: PathLike, input_dir: PathLike) -> bool:
    """Whether a program runs in Codabench's container layout, ``/app/program`` beside
    ``/app/input`` (codabench_v2.md §3.4); CodaLab runs it in ``<tmp>/run/`` (codalab_v1.md
    §4.4). Participants choose neither."""
    program, given = Path(program_dir).resolve(), Path(input_dir).resolve()
    return program.parent.name == "app" and given.parent == program.parent


# Where Codabench (v1.27 on) shows the submission to both steps, beside /app/program and
# /app/input (codabench_v2.md).
INGESTED_PROGRAM = "ingested_program"
# Never part of a submission's digest: Python may write it wherever a submission is imported.
DIGEST_SKIPPED = ("__pycache__",)


def submission_digest(folder: PathLike) -> str:
    """SHA-256 over every regular file of a submission folder (its path and content, in name
    order; links and caches left out), the same wherever the folder is read from."""
    digest = hashlib.sha256()
    root = Path(folder)
    for current, folders, files in os.walk(root):
        folders[:] = sorted(name for name in folders if name not in DIGEST_SKIPPED)
        for name in sorted(files):
            path = Path(current) / name
            if path.is_symlink() or not path.is_file():
                continue
            digest.update(path.relative_to(root).as_posix().encode("utf-8", "surrogateescape"))
            digest.update(b"\0" + file_digest(path).encode("ascii") + b"\n")
    return digest.hexdigest()


def shown_submission(input_dir: PathLike) -> Path | None:
    """The submission as the scoring step sees it, where the worker shows it (Codabench v1.27
    on: ``/app/ingested_program`` beside ``/app/input``); None elsewhere (CodaLab, older
    Codabench workers)."""
    folder = Path(input_dir).parent / INGESTED_PROGRAM
    return folder if folder.is_dir() else None


def read_record_key(folder: PathLike | None) -> bytes | None:
    """The signing key in a reference-data folder, or None where there is none."""
    path = Path(folder) / RECORD_KEY_NAME if folder is not None else None
    if path is None or not path.is_file():
        return None
    try:
        return bytes.fromhex(path.read_text(encoding="ascii").strip())
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise FormatError(f"{path}: not a hexadecimal key ({error})") from None


def write_run_record(path: PathLike, record: RunRecord, key: bytes | None = None) -> None:
    content = {"format": RECORD_FORMAT, "hardware": record.hardware,
               "tasks": {name: asdict(run) for name, run in sorted(record.tasks.items())},
               "files": dict(sorted(record.files.items()))}
    content.update(record.rules)
    if record.refused is not None:
        content["refused"] = record.refused
    if record.submission is not None:
        content["submission"] = record.submission
    if key is not None:
        content["signature"] = _signature(content, key)
    Path(path).write_text(json.dumps(content, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _plain_name(name: str) -> bool:
    """A file beside the record, or in one folder of its own: a rule's run in a folder of its
    own writes there (runtime/rules/, ``Run.folder``); never a way out of it."""
    parts = name.split("/")
    return len(parts) <= 2 and all(part not in ("", ".", "..") for part in parts)


def signature_problem(path: PathLike, key: bytes) -> str | None:
    """Why the record at ``path`` is not one the ingestion program signed with ``key``, for
    the prediction files beside it; None when it is."""
    path = Path(path)
    content = read_json_object(path)
    signature = content.get("signature")
    if not isinstance(signature, str):
        return (f"{path.name} is not signed: it was not written by the ingestion program, or "
                "the ingestion could not read its key (its log then says so last)")
    if not hmac.compare_digest(signature, _signature(content, key)):
        return f"{path.name} has a wrong signature: it was not written by the ingestion program"
    files = content.get("files") if isinstance(content.get("files"), dict) else {}
    for name, digest in sorted(files.items()):
        if not _plain_name(name) or not (path.parent / name).is_file():
            return f"{name}, listed in {path.name}, is missing"
        if not hmac.compare_digest(str(digest), file_digest(path.parent / name)):
            return f"{name} differs from what the ingestion program wrote"
    return None


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
    if not isinstance(raw.get("units"), (dict, type(None))):
        raise FormatError(f"{where}.units: expected an object or null, found {raw.get('units')!r}")
    if not isinstance(raw.get("rules", {}), dict):
        raise FormatError(f"{where}.rules: expected an object, found {raw.get('rules')!r}")
    if raw.get("failure") is not None and not failures.known(raw["failure"]):
        raise FormatError(f"{where}.failure: expected one of {failures.CODES} or null, "
                          f"found {raw['failure']!r}")
    if not isinstance(raw.get("traceback", ""), str):
        raise FormatError(f"{where}.traceback: expected a string, found {raw['traceback']!r}")
    for key in ("startup_seconds", "startup_allowance_seconds", "training_seconds",
                "budget_seconds"):
        value = raw.get(key)
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)
                                  or value < 0):
            raise FormatError(f"{where}.{key}: expected a non-negative number or null, "
                              f"found {value!r}")
    return TaskRun(**raw)


def read_run_record(path: PathLike) -> RunRecord:
    path = Path(path)
    raw = read_json_object(path)
    if raw.get("format") != RECORD_FORMAT:
        raise FormatError(f"{path}: expected an object with format {RECORD_FORMAT!r}")
    tasks = raw.get("tasks")
    if not isinstance(tasks, dict):
        raise FormatError(f"{path}: 'tasks' must be an object mapping task names to runs")
    files = raw.get("files") or {}
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise FormatError(f"{path}: 'files' must map file names to SHA-256 digests")
    try:
        rule_entries = rules.record_entries(raw, str(path))
    except rules.RuleError as error:
        raise FormatError(str(error)) from None
    for name in ("refused", "submission"):
        if raw.get(name) is not None and not isinstance(raw[name], str):
            raise FormatError(f"{path}: {name!r} must be a string, "
                              f"found {type(raw[name]).__name__}")
    return RunRecord({name: _task_run(path, name, run) for name, run in tasks.items()},
                     raw.get("hardware") or {}, files, raw.get("signature"), rule_entries,
                     raw.get("refused"), raw.get("submission"))

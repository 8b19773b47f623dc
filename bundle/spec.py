"""The organizer spec: load the YAML, validate it (schema, then meaning), return typed objects.

Each key's schema, default and meaning is one record in ``bundle/spec_schema.py``; this module
validates with the schema derived from them and applies their defaults.

Validation happens before anything is written. Every error names the spec file, the key
path, the value found and what was expected; unknown keys are errors (with the nearest
known key suggested), because a typo that passes silently is the worst kind of bug here.

Dates are UTC, written ``YYYY-MM-DD`` or ``YYYY-MM-DD HH:MM[:SS]``. A date with a time-zone
offset (``2027-01-10 00:00:00+05:00``) is refused, not converted: the error gives the UTC
date to write instead, so the spec states what the site will show. An impossible date
(``2026-12-32``) is refused with its key path.

Beyond the schema, ``load_spec`` checks the meaning: tasks named by phases and tracks exist,
dates are ordered, time limits cover the budgets, ``max_submissions_per_day`` is at most
``max_submissions``, the logo is a PNG or JPEG (by its bytes), no task whose references a
results phase publishes is also scored hidden in a code phase (unless listed in
``public_reference_tasks_allowed_in_code_phases``), every task's files pass the core's
declaration reader and the kind's ``task_problems`` (``bundle/phase_plan.py``), and its
references the kind's ``unconverged_reference_problems`` (unless the task sets
``accept_unconverged_references``). What is
suspicious but buildable (dates in the past, budgets under a second) becomes a warning in
``CompetitionSpec.warnings``.
"""
from __future__ import annotations

import datetime as dt
import difflib
import json
import dataclasses
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import yaml

from ingestion_program.ingest.config import OVERHEAD_SECONDS_PER_TASK, worst_case_seconds
from ingestion_program.ingest.supervisor import MIN_BUDGET_SECONDS, POLL_SECONDS
from kinds import DEFAULT_KIND
from kinds.kind import KINDS

from . import competition_rules
from .datasets import SAFE_BUNDLE_BYTES
from .phase_plan import declaration_path, load_planned_task, task_data_problems
from .methodology import IGNORE_KEY, SHIFT_KEY
from .spec_schema import (DATE_PATTERN, LEAK_OVERRIDE_KEY, SCHEMA, UNCONVERGED_OVERRIDE_KEY,
                          is_gpu_image, with_defaults)

DEFAULT_SPEC = KINDS[DEFAULT_KIND].DEFAULT_SPEC
PER_TASK_REFUSED = (
    "codabench_tasks: per_task is refused: each task would be a child submission of its own, "
    "and Codabench's leaderboard rule cannot rank all of one submission's children: under "
    "Force_Last each child's score upload takes its siblings off, so every submission would "
    "rank on one task only (src/apps/leaderboards/strategies.py, LastestModeStrategy; "
    "codabench issue #2211), and Force_Latest_Multiple keeps every child but also every "
    "earlier submission. Use per_phase; where the budgets need more than the default queue's "
    "600 s, name a queue of your own (codabench_queue)")
IMAGE_MAGIC = {b"\x89PNG\r\n\x1a\n": "PNG", b"\xff\xd8\xff": "JPEG"}


class SpecError(ValueError):
    """All problems found in a spec, one per line."""

    def __init__(self, path: Path, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(f"{path}: {problem}" for problem in problems))


@dataclass(frozen=True)
class PhaseSpec:
    key: str
    label: str
    description: str
    start: dt.datetime
    code_submission: bool
    tasks: tuple[str, ...]
    execution_time_limit: int
    max_submissions: int
    max_submissions_per_day: int


@dataclass(frozen=True)
class TrackSpec:
    key: str
    label: str
    tasks: tuple[str, ...]


@dataclass(frozen=True)
class CompetitionSpec:
    path: Path
    kind: str                      # the competition kind (kinds/__init__.py)
    layout: str                    # "one" competition holding all phases, or one "per_phase"
    slug: str
    title: str
    description: str
    organizers: tuple[dict, ...]
    logo: Path | None
    docker_image: str
    end_date: dt.datetime | None
    data_root: Path
    budgets: dict[str, float]
    weights: dict[str, float]
    phases: tuple[PhaseSpec, ...]
    tracks: tuple[TrackSpec, ...]
    sandbox: dict
    scoring_margin_seconds: float
    pages: dict[str, str]
    warnings: tuple[str, ...] = ()      # buildable but suspicious: dates past, tiny budgets
    # A Codabench queue of the organizer's (its vhost UUID): no 600 s cap on the time limit.
    codabench_queue: str | None = None
    # Data zips uploaded apart from the bundle, and the keys the sites gave them (datasets.py)
    upload_separately: tuple[str, ...] = ()
    dataset_keys: dict = dataclasses.field(default_factory=dict)
    max_bundle_bytes: int = SAFE_BUNDLE_BYTES
    # Data kept on the organizer's Codabench workers instead of the bundle (bundle/worker_data.py)
    on_worker: tuple[str, ...] = ()
    # The competition rules' values, under their own names (bundle/competition_rules/)
    rules: dict = dataclasses.field(default_factory=dict)
    # Methodology warnings the organizer ignores (id -> reason), and the tasks whose data are
    # stated to differ from the public ones (task -> how): bundle/methodology.py
    ignored_warnings: dict = dataclasses.field(default_factory=dict)
    distribution_shifts: dict = dataclasses.field(default_factory=dict)

    def phase(self, key: str) -> PhaseSpec:
        return next(p for p in self.phases if p.key == key)

    @property
    def gpu_image(self) -> bool:
        return is_gpu_image(self.docker_image)

    def track(self, key: str) -> TrackSpec:
        return next(t for t in self.tracks if t.key == key)


class _SpecLoader(yaml.SafeLoader):
    """YAML as yaml.safe_load reads it, except that a timestamp it cannot make into a plain
    (naive) datetime stays text: the checks below then name its key (an impossible day,
    2026-12-32, would otherwise stop the YAML reader with no key; an offset would be lost)."""


def _timestamp(loader, node):
    try:
        value = yaml.SafeLoader.construct_yaml_timestamp(loader, node)
    except ValueError:
        return loader.construct_scalar(node)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return loader.construct_scalar(node)
    return value


_SpecLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp)


def _utc_hint(text) -> str:
    """For a date with a time-zone offset: the UTC date to write instead."""
    try:
        value = dt.datetime.fromisoformat(str(text).strip())
    except ValueError:
        return ""
    if value.tzinfo is None:
        return ""
    utc = value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return f"; dates are UTC without an offset: write {utc}"


def _as_plain(value):
    """YAML datetimes become 'YYYY-MM-DD HH:MM:SS' strings so the schema can check them."""
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, dt.date):
        return value.strftime("%Y-%m-%d")
    if isinstance(value, dict):
        return {key: _as_plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_plain(item) for item in value]
    return value


def _where(error: jsonschema.ValidationError) -> str:
    return ".".join(str(part) for part in error.absolute_path) or "(top level)"


def _describe(error: jsonschema.ValidationError) -> str:
    where, value = _where(error), error.instance
    if error.validator == "additionalProperties":
        known = list(error.schema.get("properties", {}))
        unknown = sorted(set(value) - set(known))
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, known, n=1)
            hints.append(f"unknown key {key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        return f"{where}: {'; '.join(hints)}; allowed keys: {', '.join(known)}"
    if error.validator == "required":
        return f"{where}: {error.message}"
    shown = json.dumps(value, default=str)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    expected = {"pattern": f"text matching {error.validator_value}",
                "enum": f"one of {error.validator_value}",
                "maxLength": f"at most {error.validator_value} characters",
                "minLength": f"at least {error.validator_value} characters",
                "minimum": f"a number >= {error.validator_value}",
                "exclusiveMinimum": f"a number > {error.validator_value}",
                "maximum": f"a number <= {error.validator_value}",
                "type": f"a value of type {error.validator_value}",
                "minItems": f"at least {error.validator_value} item(s)",
                "uniqueItems": "no repeated items",
                "minProperties": f"at least {error.validator_value} entry(ies)",
                "oneOf": "a date (YYYY-MM-DD HH:MM:SS, UTC) or null"}.get(
        error.validator, error.message)
    if error.validator == "pattern" and error.validator_value == DATE_PATTERN:
        expected = "a date, YYYY-MM-DD HH:MM:SS (UTC)" + _utc_hint(value)
    if error.validator == "oneOf" and isinstance(value, str):
        expected += _utc_hint(value)
    return f"{where}: found {shown}, expected {expected}"


def _read_yaml(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(path, ["file not found"]) from None
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(path, [f"cannot be read as UTF-8 text ({error})"]) from None
    try:
        raw = yaml.load(text, Loader=_SpecLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "?"
        raise SpecError(path, [f"{where}: not valid YAML: {error.problem}"]) from None
    if not isinstance(raw, dict):
        raise SpecError(path, [f"expected a mapping of keys at the top, found {type(raw).__name__}"])
    return raw


def _date(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text if " " in text else text + " 00:00:00")


def _invalid_dates(raw: dict) -> list[str]:
    """The schema checks the shape of a date; this checks it exists (no 2027-13-01)."""
    fields = [("end_date", raw.get("end_date"))] + [
        (f"phases.{key}.start", phase["start"]) for key, phase in raw["phases"].items()]
    problems = []
    for where, text in fields:
        if text:
            try:
                _date(text)
            except ValueError as error:
                problems.append(f"{where}: found {text!r}, which is not a real date ({error})")
    return problems


def _image_problem(path: Path, shown: str) -> str | None:
    if not path.is_file():
        return f"logo: found {shown!r}, expected an image file next to the spec"
    with path.open("rb") as handle:
        head = handle.read(8)
    if not any(head.startswith(magic) for magic in IMAGE_MAGIC):
        return (f"logo: {path} is not an image: its first bytes {head[:8]!r} are neither "
                f"PNG's nor JPEG's; expected a PNG or JPEG file")
    return None


def _budget_problems(raw: dict) -> list[str]:
    """A budget too short to time: its start-up is apart (``sandbox.startup_seconds``), but the
    ingestion's clock is read every POLL_SECONDS. A budget in epochs is converted on the
    worker; the dry run says when the build machine's conversion came out below the floor."""
    return [f"tasks.{name}.budget_seconds: found {task['budget_seconds']:g}, expected at least "
            f"{MIN_BUDGET_SECONDS:g} s: the ingestion reads its clock every {POLL_SECONDS:g} s, "
            "so a shorter budget cannot be timed to within a tenth"
            for name, task in raw["tasks"].items() if task["budget_seconds"] < MIN_BUDGET_SECONDS]


def _time_limit_problems(raw: dict, key: str, grace: float, startup: float,
                         margin: float) -> list[str]:
    """A code phase's limit covers one run of its tasks (with those the rules run besides
    them) and the scoring."""
    phase, tasks = raw["phases"][key], raw["tasks"]
    extra = competition_rules.spec_extra_tasks(raw, key)
    names = [*(name for names in extra.values() for name in names), *phase["tasks"]]
    budgets = [tasks[t]["budget_seconds"] for t in names if t in tasks]
    needed = worst_case_seconds(budgets, grace, startup) + margin
    if phase["execution_time_limit"] >= needed:
        return []
    what = "task budgets" + "".join(f" with {what}" for what in extra)
    return [f"phases.{key}.execution_time_limit: found {phase['execution_time_limit']}, "
            f"expected at least {needed:.0f} s ({what} + {startup:g} s start-up allowance + "
            f"{grace:g} s grace + {OVERHEAD_SECONDS_PER_TASK:g} s staging per task + "
            f"{margin:g} s for scoring)"]


def _leak_problems(raw: dict, data_root: Path) -> list[str]:
    """A task scored in a results phase (whose references the kind may publish there) and in
    a code phase (where they are hidden) gives the code phase's answers away."""
    results = {t: key for key, p in raw["phases"].items() if p["submission"] == "results"
               for t in p["tasks"]}
    allowed = set(raw.get(LEAK_OVERRIDE_KEY, ()))
    problems = [f"{LEAK_OVERRIDE_KEY}: {t!r} is not in tasks" for t in sorted(allowed)
                if t not in raw["tasks"]]
    kind = KINDS[raw["kind"]]
    for key, phase in raw["phases"].items():
        if phase["submission"] != "code":
            continue
        for task in phase["tasks"]:
            if task not in results or task in allowed or task not in raw["tasks"]:
                continue
            try:
                public = kind.has_public_references(load_planned_task(raw["kind"], task,
                                                                      data_root))
            except (ValueError, OSError):
                continue        # the task's own problems are reported on their own
            if public:
                problems.append(
                    f"phases.{key}.tasks: {task!r} is also scored in the results phase "
                    f"phases.{results[task]}, whose public data holds its references: the "
                    f"hidden references of this code phase would be public; use other tasks, "
                    f"or list it in {LEAK_OVERRIDE_KEY} if that is intended")
    return problems


def _warnings(raw: dict, now: dt.datetime, data_root: Path) -> list[str]:
    warnings = []
    dates = [(f"phases.{key}.start", p["start"]) for key, p in raw["phases"].items()]
    dates += [("end_date", raw["end_date"])] if raw.get("end_date") else []
    for where, text in dates:
        if _date(text) < now:
            warnings.append(f"{where}: {text} is in the past (now {now:%Y-%m-%d %H:%M} UTC); "
                            "the site opens such a phase at once")
    for name, task in raw["tasks"].items():
        if task.get(UNCONVERGED_OVERRIDE_KEY) and not _unconverged(raw["kind"], name, data_root):
            warnings.append(f"tasks.{name}.{UNCONVERGED_OVERRIDE_KEY}: the task's references "
                            "passed the kind's convergence checks (or it has none); the key "
                            "changes nothing")
    return warnings


def _worker_data_problems(raw: dict) -> list[str]:
    if not raw["on_worker"]:
        return []
    problems = []
    if not raw.get("codabench_queue"):
        problems.append("on_worker: needs codabench_queue, a queue of your own: only its "
                        "workers hold the data (Codabench's default queue runs on workers "
                        "whose data folder you cannot fill)")
    both = sorted(set(raw["on_worker"]) & set(raw["upload_separately"]))
    if both:
        problems.append(f"on_worker: {', '.join(both)} cannot go both to your workers and to an "
                        "upload apart: take it out of upload_separately or of on_worker")
    return problems


def _meaning_problems(raw: dict, data_root: Path, spec_folder: Path) -> list[str]:
    """What the schema cannot express: references between keys, order of dates, budgets."""
    problems = _invalid_dates(raw)
    if problems:
        return problems
    for key, phase in raw["phases"].items():
        total = phase["max_submissions"]
        if phase["max_submissions_per_day"] > total:
            problems.append(f"phases.{key}.max_submissions_per_day: found "
                            f"{phase['max_submissions_per_day']}, expected at most "
                            f"phases.{key}.max_submissions ({total})")
    tasks = raw["tasks"]
    if raw.get("codabench_tasks") == "per_task":
        problems.append(PER_TASK_REFUSED)
    problems += _worker_data_problems(raw)
    grace, startup = raw["sandbox"]["grace_seconds"], raw["sandbox"]["startup_seconds"]
    margin = raw["scoring_margin_seconds"]
    starts = []
    for key, phase in raw["phases"].items():
        for task in phase["tasks"]:
            if task not in tasks:
                problems.append(f"phases.{key}.tasks: {task!r} is not in tasks "
                                f"({', '.join(tasks)})")
        starts.append((key, _date(phase["start"])))
        if phase["submission"] == "code":
            problems += _time_limit_problems(raw, key, grace, startup, margin)
    for (before, first), (after, second) in zip(starts, starts[1:]):
        if second <= first:
            problems.append(f"phases.{after}.start: found {second}, expected a start after "
                            f"phases.{before}.start ({first}); phases run in the order listed")
    if raw.get("end_date") and starts and _date(raw["end_date"]) <= starts[-1][1]:
        problems.append(f"end_date: found {raw['end_date']}, expected a date after the last "
                        f"phase's start ({starts[-1][1]})")
    code_tasks = {t for p in raw["phases"].values() if p["submission"] == "code" for t in p["tasks"]}
    for key, track in raw.get("tracks", {}).items():
        for task in track["tasks"]:
            if task not in code_tasks:
                problems.append(f"tracks.{key}.tasks: {task!r} is not a task of a code phase")
    if raw.get("logo"):
        problem = _image_problem(spec_folder / raw["logo"], raw["logo"])
        problems += [problem] if problem else []
    weights = KINDS[raw["kind"]].DEFAULT_WEIGHTS
    for name in raw.get("metric_weights", {}):
        if name not in weights:
            problems.append(f"metric_weights.{name}: not a metric of kind {raw['kind']}; "
                            f"expected one of {', '.join(weights)}")
    problems += _budget_problems(raw) + competition_rules.spec_problems(
        raw, data_root, lambda name: load_planned_task(raw["kind"], name, data_root))
    for task in tasks:
        declaration = declaration_path(data_root, task)
        if not declaration.is_file():
            problems.append(f"tasks.{task}: no task declaration at {declaration} (data_root "
                            f"{data_root}; see docs/organizer_data.md)")
            continue
        data_problems = task_data_problems(raw["kind"], task, data_root)
        problems += [f"tasks.{task}: {problem}" for problem in data_problems]
        if not data_problems and not tasks[task].get(UNCONVERGED_OVERRIDE_KEY):
            problems += _unconverged_problems(raw["kind"], task, data_root)
    problems += _leak_problems(raw, data_root)
    return problems


def _unconverged(kind: str, name: str, data_root: Path) -> list[str]:
    """What the kind's own check finds unconverged in a task's references (a kind whose
    references come from a sampler says so with ``unconverged_reference_problems``)."""
    return list(KINDS[kind].unconverged_reference_problems(load_planned_task(kind, name,
                                                                             data_root)))


def _unconverged_problems(kind: str, name: str, data_root: Path) -> list[str]:
    found = _unconverged(kind, name, data_root)
    return [f"tasks.{name}: {'; '.join(found)}. Make them again with longer runs, or set "
            f"tasks.{name}.{UNCONVERGED_OVERRIDE_KEY}: true to build with them as they are "
            "(the pages then say so)"] if found else []


def load_spec(path: Path = DEFAULT_SPEC, data_root: Path | None = None) -> CompetitionSpec:
    path = Path(path)
    plain = _as_plain(_read_yaml(path))
    errors = sorted(jsonschema.Draft202012Validator(SCHEMA).iter_errors(plain),
                    key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        raise SpecError(path, [_describe(error) for error in errors])
    spec = with_defaults(plain)
    kind = KINDS[spec["kind"]]
    if data_root is None:
        data_root = (path.parent / spec["data_root"]).resolve() if spec.get("data_root") \
            else kind.EMBEDDED_ROOT
    problems = _meaning_problems(spec, Path(data_root), path.parent)
    if problems:
        raise SpecError(path, problems)
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    return CompetitionSpec(
        path=path, kind=spec["kind"], layout=spec["layout"], slug=spec["slug"],
        title=spec["title"], description=spec["description"],
        organizers=tuple(spec["organizers"]),
        logo=(path.parent / spec["logo"]) if spec.get("logo") else None,
        docker_image=spec["docker_image"], codabench_queue=spec.get("codabench_queue"),
        upload_separately=tuple(spec["upload_separately"]), dataset_keys=spec["dataset_keys"],
        max_bundle_bytes=int(spec["max_bundle_mib"] * 2**20),
        on_worker=tuple(spec["on_worker"]),
        end_date=_date(spec["end_date"]) if spec.get("end_date") else None,
        data_root=Path(data_root),
        budgets={name: float(task["budget_seconds"]) for name, task in spec["tasks"].items()},
        weights={**kind.DEFAULT_WEIGHTS, **spec["metric_weights"]},
        phases=tuple(PhaseSpec(key, p["label"], p["description"], _date(p["start"]),
                               p["submission"] == "code", tuple(p["tasks"]),
                               p["execution_time_limit"], p["max_submissions"],
                               p["max_submissions_per_day"])
                     for key, p in spec["phases"].items()),
        tracks=tuple(TrackSpec(key, t["label"], tuple(t["tasks"]))
                     for key, t in spec["tracks"].items()),
        sandbox=spec["sandbox"], scoring_margin_seconds=float(spec["scoring_margin_seconds"]),
        pages=spec["pages"], warnings=tuple(_warnings(spec, now, Path(data_root))),
        rules=competition_rules.spec_values(spec), ignored_warnings=spec[IGNORE_KEY],
        distribution_shifts={name: task[SHIFT_KEY] for name, task in spec["tasks"].items()
                             if SHIFT_KEY in task})

"""CodaLab v1.5 competition.yaml rules: the schema of codalab_v1.md §1-§2 and §4.9.

The site builds its models straight from the YAML (``Competition(**comp)``,
``CompetitionPhase(**phase)``), so an unknown key is a TypeError and a null a crash; the rules
here catch those before upload. G1..G26 are the gotchas of codalab_v1.md §6. Also the two
views of the YAML that other concerns share: ``phases`` and ``program_members``.
"""
from __future__ import annotations

import datetime as dt
import re
from typing import Iterator

from ..datasets import SEPARABLE, is_key
from .framework import REZIP, Bundle, CannotCheck, Problem, is_int, rule
from .zip_hygiene import wrapping_folder

COMPETITION_KEYS = frozenset("""
    title description image has_registration end_date start_date competition_docker_image
    force_submission_to_leaderboard disallow_leaderboard_modifying enable_detailed_results
    show_datasets_from_yaml allow_public_submissions allow_teams enable_per_submission_metadata
    enable_forum anonymous_leaderboard enable_teams require_team_approval hide_top_three hide_chart
    allow_organizer_teams enable_medical_image_viewer published reward url_redirect
    upper_bound_max_submission_size""".split())
FILE_KEYS = ("scoring_program", "reference_data", "ingestion_program", "input_data",
             "starting_kit", "public_data")
PHASE_INTS = ("max_submissions", "max_submissions_per_day", "max_submission_size",
              "participant_max_storage_use")
PHASE_BOOLS = ("is_scoring_only", "auto_migration", "force_best_submission_to_leaderboard",
               "delete_submissions_except_best_and_last", "phase_never_ends", "is_migrated",
               "disable_custom_docker_image")
PHASE_KEYS = frozenset(FILE_KEYS + PHASE_INTS + PHASE_BOOLS + tuple("""
    phasenumber label description start_date execution_time_limit color datasets
    leaderboard_management_mode scoring_program_docker_image ingestion_program_docker_image
    default_docker_image""".split()))
COLORS = ("white", "orange", "yellow", "green", "blue", "purple")
PAGES = ("overview", "evaluation", "terms", "data")
RESERVED_LABELS = ("Overview", "Evaluation", "Terms and Conditions")
COLUMN_KEYS = ("leaderboard", "label", "rank", "sort", "numeric_format", "selection_default",
               "column_group", "computed")
SAFE_KEY = re.compile(r"[A-Za-z0-9_]+")
SAFE_IMAGE = re.compile(r"[0-9A-Za-z/.:-]+")
ASSET_URL = re.compile(r"\{\{\s*ASSET_BASE_URL\s*\}\}/([^\"'\s)<>]+)")


def phases(bundle: Bundle) -> list[tuple[object, dict]]:
    """(key, phase) of each phase that is a mapping; CannotCheck if phases is not a mapping."""
    found = bundle.comp.get("phases")
    if not isinstance(found, dict):
        raise CannotCheck("'phases' is not a mapping (see phases)")
    return [(key, phase) for key, phase in found.items() if isinstance(phase, dict)]


def program_members(bundle: Bundle, *programs: str) -> Iterator[tuple[str, str]]:
    """(program, member) once per distinct program zip that a phase references."""
    pairs = {(program, phase[program]) for _, phase in phases(bundle) for program in programs
             if isinstance(phase.get(program), str)}
    return iter(sorted(pairs))


@rule("single-root-yaml", "exactly one member containing '.yaml': competition.yaml at the root; "
      "no .yml (G3)", "keep one competition.yaml at the bundle root and no other *.yaml/*.yml")
def check_single_root_yaml(bundle: Bundle) -> Iterator[Problem]:
    """G3: the site parses the first member whose name contains '.yaml'; '.yml' is unseen."""
    found = [name for name in bundle.names if ".yaml" in name]
    if found != ["competition.yaml"]:
        yield f"members containing '.yaml' are {found}, expected exactly ['competition.yaml']"
    yield from (f"member {n!r} ends in '.yml', which the site never reads"
                for n in bundle.names if n.lower().endswith(".yml"))


@rule("yaml-parses", "competition.yaml parses with PyYAML into a mapping, without duplicate keys "
      "(§1)", "fix competition.yaml at the position given")
def check_yaml_parses(bundle: Bundle) -> Iterator[Problem]:
    """§1, §2.6: syntax errors are shown verbatim; a duplicate key silently keeps the last."""
    name = bundle.yaml_name or "competition.yaml"
    if bundle.yaml_error:
        yield f"{name}: {bundle.yaml_error}"
    elif not isinstance(bundle.spec, dict):
        yield f"{name}: the top level is a {type(bundle.spec).__name__}, expected a mapping"
    for key, line in bundle.duplicates:
        yield f"{name} line {line}: duplicate key {key!r}; the site silently keeps the last one"


@rule("top-level-keys", "known Competition keys only; title <= 100; image an existing member; no "
      "queue or admin_names (§2.1, G5, G12)", "remove the key or fix its spelling (G5)")
def check_top_level_keys(bundle: Bundle) -> Iterator[Problem]:
    """§2.1, G5, G12: unknown keys are a TypeError, queue a ValueError; image: null fails."""
    comp = bundle.comp
    for key in comp:
        if key == "queue":
            yield ("top-level key 'queue' raises ValueError (it is a foreign key)",
                   "remove it; choose a queue in the competition editor")
        elif key == "admin_names":
            yield ("top-level key 'admin_names' is ignored since 2019 (G12)",
                   "remove it; add co-organisers in the competition editor")
        elif key not in COMPETITION_KEYS | {"html", "phases", "leaderboard"}:
            yield f"unknown top-level key {key!r}: \"'{key}' is an invalid keyword argument\""
    title = comp.get("title")
    if not isinstance(title, str) or not title.strip() or len(title) > 100:
        yield f"title is {title!r}: a non-empty string of at most 100 characters is required"
    image = comp.get("image")
    if "image" in comp and (not isinstance(image, str) or image not in bundle.names):
        yield (f"image is {image!r}, which is not a member of the bundle",
               "add the logo at that root path, or drop the key (never image: null)")


@rule("html-pages", "html has overview, evaluation, terms, data; pages exist, are UTF-8, have no "
      "<script>/<style>; extra page keys are valid tab labels (§2.2, G13)",
      "add the page at that root path as UTF-8 static HTML (G13)")
def check_html_pages(bundle: Bundle) -> Iterator[Problem]:
    """§2.2, G13: pages are read by exact name, decoded as UTF-8; a key is its tab label."""
    html = bundle.comp.get("html")
    if not isinstance(html, dict):
        yield f"html is {html!r}: a mapping of pages is required"
        return
    yield from (f"html has no {key!r} page (required)" for key in PAGES if key not in html)
    assets = [n.rsplit("/", 1)[-1] for n in bundle.names if n.startswith("assets/")]
    yield from (f"several assets/ members are named {a!r}; the site flattens assets/ to basenames"
                for a in sorted({a for a in assets if a and assets.count(a) > 1}))
    for key, member in html.items():
        if key not in PAGES and (not isinstance(key, str) or len(key) > 100
                                 or key in RESERVED_LABELS):
            yield (f"extra page key html.{key} is its tab label: it must be a string of at most "
                   f"100 characters other than {RESERVED_LABELS}", "rename it, e.g. faq")
        if not isinstance(member, str) or member not in bundle.names:
            yield f"html.{key} names {member!r}, which is not a member of the bundle"
            continue
        try:
            text = bundle.archive.read(member).decode("utf-8")
        except UnicodeDecodeError as error:
            yield f"html.{key}: {member!r} is not UTF-8 ({error})"
            continue
        tag = re.search(r"<\s*(script|style)\b", text, re.IGNORECASE)
        if tag:
            yield f"html.{key}: {member!r} has a <{tag.group(1)}> block, which the site strips"
        yield from ((f"html.{key}: {member!r} uses {{{{ ASSET_BASE_URL }}}}/{name} but no assets/ "
                     "member has that basename", f"add assets/{name}")
                    for name in ASSET_URL.findall(text) if name not in assets)


def _phase_problems(where: str, phase: dict) -> Iterator[Problem]:
    unknown = sorted(map(str, set(phase) - PHASE_KEYS))
    if unknown:
        yield f"{where}: unknown keys {unknown} (\"Cannot resolve keyword into field\", G5)"
    yield from ((f"{where}.{k} is null, which crashes the site (input_data: null calls "
                 "None.endswith)", "omit the key instead (G11)")
                for k in sorted(str(k) for k, v in phase.items() if v is None))
    if "start_date" not in phase:
        yield f"{where} has no start_date (KeyError at upload)"
    for key, limit in (("label", 50), ("description", 1000)):
        value = phase.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > limit):
            yield f"{where}.{key} must be a string of at most {limit} characters (G16)"
    if phase.get("color") is not None and phase["color"] not in COLORS:
        yield f"{where}.color is {phase['color']!r}, not one of {COLORS}"
    if phase.get("leaderboard_management_mode") not in (None, "default", "hide_results"):
        yield (f"{where}.leaderboard_management_mode is {phase['leaderboard_management_mode']!r};"
               " the site silently falls back to default")
    for key in PHASE_INTS:
        if phase.get(key) is not None and (not is_int(phase[key]) or phase[key] < 0):
            yield f"{where}.{key} is {phase[key]!r}: an int >= 0 is required"
    if is_int(phase.get("max_submissions_per_day")) and phase["max_submissions_per_day"] == 0:
        yield (f"{where}.max_submissions_per_day is 0, which blocks every submission",
               "omit it for the default 999 (G10)")
    for key in PHASE_BOOLS:
        if phase.get(key) is not None and not isinstance(phase[key], bool):
            yield f"{where}.{key} is {phase[key]!r}: true or false is required"


@rule("phases", "phases is a mapping; each phase has known keys, consecutive int phasenumber, "
      "start_date, valid label/description/color/types, no nulls, max_submissions_per_day != 0 "
      "(§2.3, G5, G9, G10, G11)", "fix the phase key as described (§2.3)")
def check_phases(bundle: Bundle) -> Iterator[Problem]:
    """§2.3, G5, G9, G10, G11: each phase becomes CompetitionPhase(**phase)."""
    found = bundle.comp.get("phases")
    if not isinstance(found, dict) or not found:
        yield f"phases is a {type(found).__name__}: a non-empty mapping is required (G9)"
        return
    previous = None
    for key, phase in found.items():
        if not isinstance(phase, dict):
            yield f"phases.{key} is {phase!r}, not a mapping"
            continue
        yield from _phase_problems(f"phases.{key}", phase)
        number = phase.get("phasenumber")
        if not is_int(number) or number < 0:
            yield f"phases.{key}.phasenumber is {number!r}: an int >= 0 is required"
        elif previous is not None and number != previous + 1:
            yield (f"phases.{key}.phasenumber is {number}, expected {previous + 1}: numbers must be"
                   " consecutive in YAML order", "renumber the phases 1, 2, ... (G9)")
        previous = number if is_int(number) else None


def _utc(value: dt.date) -> dt.datetime:
    if not isinstance(value, dt.datetime):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc)
    return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value


@rule("dates-unquoted-and-increasing", "start_date and end_date are unquoted YAML dates; start "
      "dates increase strictly with phasenumber; end_date after the last start (§2.5, G8, G9)",
      "write unquoted YYYY-MM-DD HH:MM:SS (UTC) dates in phase order (G8, G9)")
def check_dates(bundle: Bundle) -> Iterator[Problem]:
    """§2.5, G8, G9: a quoted date is a str, which the site rejects; naive times are UTC."""
    starts = []
    for index, (key, phase) in enumerate(phases(bundle)):
        value = phase.get("start_date")
        if "start_date" in phase and not isinstance(value, dt.date):
            yield (f"phases.{key}.start_date is {value!r} ({type(value).__name__}), not a date: "
                   "the site says 'Expected a DateTime object'")
        elif "start_date" in phase:              # a missing one is the phases rule's failure
            number = phase.get("phasenumber")
            starts.append((number if is_int(number) else index, key, value))
    starts.sort(key=lambda start: start[0])
    for (_, key_a, date_a), (_, key_b, date_b) in zip(starts, starts[1:]):
        if _utc(date_b) <= _utc(date_a):
            yield (f"phases.{key_b}.start_date {date_b} is not after phases.{key_a}.start_date "
                   f"{date_a}: start dates must increase strictly with phasenumber")
    end, last = bundle.comp.get("end_date"), max((s[2] for s in starts), key=_utc, default=None)
    if end is not None and not isinstance(end, dt.date):
        yield f"end_date is {end!r} ({type(end).__name__}), not a date"
    elif end is not None and last is not None and _utc(end) <= _utc(last):
        yield f"end_date {end} is not after the last phase start_date {last}"


def _file_problems(bundle: Bundle, where: str, key: str, value) -> Iterator[Problem]:
    if key in SEPARABLE and is_key(value):
        # data uploaded apart: the site resolves the key at upload; a local copy is checked
        if value in bundle.datasets:
            yield from _wrapping_problems(bundle, where, key, value)
        return
    if not isinstance(value, str) or not value.endswith(".zip"):
        yield (f"{where}.{key} is {value!r}: expected a member path ending in lowercase '.zip' "
               "(anything else is taken as a dataset key, G4)")
    elif value not in bundle.names:
        yield f"{where}.{key} names {value!r}, which is not a member of the bundle"
    else:
        yield from _wrapping_problems(bundle, where, key, value)


def _wrapping_problems(bundle: Bundle, where: str, key: str, value: str) -> Iterator[Problem]:
    if key in ("reference_data", "input_data"):
        try:
            folder = wrapping_folder(bundle.nested(value))
        except CannotCheck as error:
            yield f"{where}.{key}: {error}"
            return
        if folder:
            yield (f"{where}.{key}: every member of {value!r} is inside {folder!r}; data zips are "
                   "never flattened", REZIP)


@rule("phase-files", "reference_data and scoring_program on every phase; file values are existing "
      "lowercase .zip members; is_scoring_only false iff an ingestion program (§2.3, G6, G7)",
      "reference an existing root member ending in .zip")
def check_phase_files(bundle: Bundle) -> Iterator[Problem]:
    """§2.3, G4, G6, G7: values ending '.zip' (case-sensitive) are read as members."""
    for key, phase in phases(bundle):
        where = f"phases.{key}"
        yield from (f"{where} has no {name} (required, G6)"
                    for name in ("reference_data", "scoring_program") if name not in phase)
        for name in FILE_KEYS:
            if phase.get(name) is not None:           # a null is the phases rule's failure
                yield from _file_problems(bundle, where, name, phase[name])
        ingestion = phase.get("ingestion_program") is not None
        scoring_only = phase.get("is_scoring_only", True)
        if ingestion and scoring_only is not False:
            yield (f"{where} has an ingestion_program but is_scoring_only is {scoring_only!r} "
                   "(default true), so it would never run", "set is_scoring_only: false (G7)")
        elif scoring_only is False and not ingestion:
            yield (f"{where} has is_scoring_only: false but no ingestion_program",
                   "add the phase's ingestion_program.zip")



def _label_problems(where: str, label, g17: bool) -> Iterator[Problem]:
    if not isinstance(label, str) or not label.strip():
        yield f"{where} is {label!r}: a non-empty string is required"
    elif len(label) > 50 or label != label.strip():
        yield f"{where} {label!r} is longer than 50 characters or has surrounding spaces (G16)"
    elif g17 and (": " in label or " #" in label):
        yield (f"{where} {label!r} contains ': ' or ' #', which breaks the worker's YAML parse of "
               "the leaderboard CSV", "remove the colon-space or space-hash (G17)")


def _computed_problems(where: str, column: dict, plain: set) -> Iterator[Problem]:
    computed = column["computed"]
    operation = computed.get("operation") if isinstance(computed, dict) else None
    fields = computed.get("fields") if isinstance(computed, dict) else None
    if operation not in ("Avg", "MRR"):
        yield f"{where}.computed.operation is {operation!r}: only 'Avg' and 'MRR' work"
    if not isinstance(fields, str):
        yield (f"{where}.computed.fields is {fields!r}: a comma-separated string is required "
               "(a YAML list raises AttributeError)", 'write fields: "key_a, key_b"')
    else:
        names = [name.strip() for name in fields.split(",")]
        unknown = [name for name in names if name not in plain]
        if unknown:
            yield f"{where}.computed.fields {unknown} are not non-computed column keys (KeyError)"
    if operation == "Avg" and column.get("sort") != "asc":
        yield (f"{where}: an Avg column averages ranks (lower is better) but sort is "
               f"{column.get('sort', 'desc (default)')!r}", "set sort: asc (G15)")


def _column_problems(key, column, boards: set, groups: dict, plain: set) -> Iterator[Problem]:
    where = f"leaderboard.columns.{key}"
    if not isinstance(key, str) or not SAFE_KEY.fullmatch(key) or len(key) > 50 or key in groups:
        yield (f"column key {key!r} must match [A-Za-z0-9_]+, have at most 50 characters and not "
               "be a column_groups key (it is the scores.txt key)")
    if not isinstance(column, dict):
        yield f"{where} is {column!r}, not a mapping"
        return
    unknown = sorted(map(str, set(column) - set(COLUMN_KEYS)))
    if unknown:
        yield (f"{where}: unknown sub-keys {unknown} are silently ignored by the site ('sorting' "
               "leaves sort: desc)", f"use only {list(COLUMN_KEYS)} (G5)")
    board = column.get("leaderboard")
    label = board.get("label") if isinstance(board, dict) else None
    if not (isinstance(label, str) and label in boards):
        yield f"{where}.leaderboard.label is {label!r}, not a leaderboards label {sorted(boards)}"
    if "label" in column:
        yield from _label_problems(f"{where}.label", column["label"], g17=True)
    for name in ("rank", "selection_default"):
        if name in column and not is_int(column[name]):
            yield f"{where}.{name} is {column[name]!r}: an int is required"
    if column.get("sort", "desc") not in ("asc", "desc"):
        yield f"{where}.sort is {column['sort']!r}: asc or desc is required"
    number_format = column.get("numeric_format", 2)
    if not is_int(number_format) or not 1 <= number_format <= 10:
        yield f"{where}.numeric_format is {number_format!r}: an int in 1..10 is required (G16)"
    if "column_group" in column:
        group = column["column_group"]
        labels = {(g or {}).get("label", "") for g in groups.values() if isinstance(g, dict | None)}
        if not (isinstance(group, dict) and isinstance(group.get("label"), str)
                and group["label"] in labels):
            yield f"{where}.column_group is {group!r}, not a column_groups label"
    if "computed" in column:
        yield from _computed_problems(where, column, plain)


@rule("leaderboard", "leaderboards, column_groups and columns well formed: labels (G17), keys, "
      "sort, numeric_format, computed Avg/MRR, one top selection_default (§2.4, G15-G17)",
      "fix the leaderboard entry as described (§2.4)")
def check_leaderboard(bundle: Bundle) -> Iterator[Problem]:
    """§2.4, G5, G15, G16, G17: lookups by label, computed columns, the ranking column."""
    board = bundle.comp.get("leaderboard")
    if not isinstance(board, dict):
        yield "leaderboard is missing or not a mapping: nothing would be ranked"
        return
    boards, groups = board.get("leaderboards"), board.get("column_groups") or {}
    if not isinstance(boards, dict) or not boards:
        yield "leaderboard.leaderboards must be a non-empty mapping (UnboundLocalError)"
        boards = {}
    if not isinstance(groups, dict):
        yield "leaderboard.column_groups must be a mapping"
        groups = {}
    for key, spec in boards.items():
        spec, where = spec if isinstance(spec, dict) else {}, f"leaderboard.leaderboards.{key}"
        yield from _label_problems(f"{where}.label", spec.get("label"), g17=False)
        if not is_int(spec.get("rank")):
            yield f"{where}.rank is {spec.get('rank')!r}: an int is required"
    for key, spec in groups.items():
        if isinstance(spec, dict) and "label" in spec:
            yield from _label_problems(f"leaderboard.column_groups.{key}.label", spec["label"],
                                       g17=True)
    columns = board.get("columns")
    if not isinstance(columns, dict) or not columns:
        yield "leaderboard.columns must be a non-empty mapping"
        return
    labels = {s["label"] for s in boards.values() if isinstance(s, dict)
              and isinstance(s.get("label"), str)}
    plain = {k for k, c in columns.items() if isinstance(c, dict) and "computed" not in c}
    for key, column in columns.items():
        yield from _column_problems(key, column, labels, groups, plain)
    defaults = {k: c.get("selection_default", 0) for k, c in columns.items()
                if isinstance(c, dict) and is_int(c.get("selection_default", 0))}
    top = max(defaults.values(), default=0)
    holders = sorted(str(k) for k, v in defaults.items() if v == top)
    if top <= 0 or len(holders) > 1:
        yield (f"the highest selection_default is {top}, held by {holders}: exactly one column "
               "must hold it and it must be > 0", "give the ranking column selection_default: 1")


@rule("docker-image", "competition_docker_image is set and matches [0-9A-Za-z/.:-]+ (G22)",
      "set it to a plain name:tag such as codalab/codalab-legacy:py312 (G22)")
def check_docker_image(bundle: Bundle) -> Iterator[Problem]:
    """G22, §4.9: the worker strips every other character ('_', '@'); the default drifts."""
    image = bundle.comp.get("competition_docker_image")
    if not isinstance(image, str) or not SAFE_IMAGE.fullmatch(image) or len(image) > 128:
        yield (f"competition_docker_image is {image!r}: a name of at most 128 characters from "
               "[0-9A-Za-z/.:-] is required (the worker strips '_' and '@'; the default drifts)")


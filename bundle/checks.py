"""Checks on an emitted bundle zip, reopened from disk (codalab_v1.md §1-§4, §6, §7).

``check_bundle`` opens the zip, parses the YAML member the site would pick (the first name
containing ``.yaml``) with PyYAML, and runs every rule of ``RULES``. A rule yields
``CheckFailure``s naming the member, key or value at fault and how to fix it; a rule that
cannot run (unparseable YAML, missing nested zip) reports that as its own failure instead
of raising. Gotcha numbers (G1..G26) refer to codalab_v1.md §6.
"""
from __future__ import annotations

import datetime as dt
import json
import re
import zipfile
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Callable, Iterator

import yaml

from ingestion_program.ingest.config import CONFIG_NAME as INGESTION_CONFIG_NAME
from ingestion_program.ingest.config import OVERHEAD_SECONDS_PER_TASK
from scoring_program.scorer.config import CONFIG_NAME as SCORING_CONFIG_NAME


@dataclass(frozen=True)
class CheckFailure:
    rule: str        # short stable name, a key of RULES
    message: str     # what is wrong, naming the member/key/value
    fix: str         # how to fix it


class CannotCheck(Exception):
    """A rule's input is missing or unreadable; reported as a failure of that rule."""


COMPETITION_KEYS = frozenset("""
    title description image has_registration end_date start_date competition_docker_image
    force_submission_to_leaderboard disallow_leaderboard_modifying enable_detailed_results
    show_datasets_from_yaml allow_public_submissions allow_teams enable_per_submission_metadata
    enable_forum anonymous_leaderboard enable_teams require_team_approval hide_top_three hide_chart
    allow_organizer_teams enable_medical_image_viewer published reward url_redirect
    upper_bound_max_submission_size""".split())
TOP_LEVEL_KEYS = COMPETITION_KEYS | {"html", "phases", "leaderboard"}
FILE_KEYS = ("scoring_program", "reference_data", "ingestion_program", "input_data",
             "starting_kit", "public_data")
PHASE_INT_KEYS = ("max_submissions", "max_submissions_per_day", "max_submission_size",
                  "participant_max_storage_use")
PHASE_BOOL_KEYS = ("is_scoring_only", "auto_migration", "force_best_submission_to_leaderboard",
                   "delete_submissions_except_best_and_last", "phase_never_ends", "is_migrated",
                   "disable_custom_docker_image")
PHASE_KEYS = frozenset(FILE_KEYS + PHASE_INT_KEYS + PHASE_BOOL_KEYS + tuple("""
    phasenumber label description start_date execution_time_limit color
    leaderboard_management_mode scoring_program_docker_image ingestion_program_docker_image
    default_docker_image datasets""".split()))
COLORS = ("white", "orange", "yellow", "green", "blue", "purple")
REQUIRED_PAGES = ("overview", "evaluation", "terms", "data")
RESERVED_PAGE_LABELS = ("Overview", "Evaluation", "Terms and Conditions")
COLUMN_KEYS = frozenset({"leaderboard", "label", "rank", "sort", "numeric_format",
                         "selection_default", "column_group", "computed"})
JUNK = frozenset({"__MACOSX", ".DS_Store", "__pycache__"})
SHELL_SYNTAX = ("&", "|", ">", "<", ";", "`", "$(", "'", '"')
_COMMON_VARIABLES = frozenset({"program", "input", "output", "tmp", "shared", "predictions"})
VARIABLES = {"scoring_program": _COMMON_VARIABLES,
             "ingestion_program": _COMMON_VARIABLES | {"ingestion_program", "submission_program",
                                                       "hidden"}}
DEFAULT_TIME_LIMIT = 300
KEY_PATTERN = re.compile(r"[A-Za-z0-9_]+")
DOCKER_PATTERN = re.compile(r"[0-9A-Za-z/.:-]+")
ASSET_REFERENCE = re.compile(r"\{\{\s*ASSET_BASE_URL\s*\}\}/([^\"'\s)<>]+)")
FIX_ZIP = "rebuild the zip with Python zipfile from the folder's contents, skipping junk (G1, G2)"


class _Loader(yaml.SafeLoader):
    """SafeLoader that records duplicate mapping keys (the site silently keeps the last)."""

    def __init__(self, stream):
        super().__init__(stream)
        self.duplicates: list[tuple[object, int]] = []

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    if key in seen:
                        self.duplicates.append((key, key_node.start_mark.line + 1))
                    seen.add(key)
                except TypeError:       # unhashable: SafeConstructor reports it
                    pass
        return super().construct_mapping(node, deep)


class Bundle:
    """The parsed view the rules read: member names, the YAML as the site picks it, nested zips."""

    def __init__(self, archive: zipfile.ZipFile, margin: float):
        self.archive, self.margin = archive, margin
        self.names = archive.namelist()
        self.yaml_name = next((n for n in self.names if ".yaml" in n), None)     # §1
        self.spec, self.yaml_error, self.duplicates = None, None, []
        self._nested: dict[str, zipfile.ZipFile] = {}
        if self.yaml_name is None:
            self.yaml_error = "no member name contains '.yaml' (the site fails with IndexError)"
            return
        loader = _Loader(self.archive.read(self.yaml_name))
        try:
            self.spec = loader.get_single_data()
        except Exception as error:      # noqa: BLE001 - any parse error is a finding
            self.yaml_error = f"{type(error).__name__}: {error}"
        finally:
            loader.dispose()
        self.duplicates = loader.duplicates

    @property
    def comp(self) -> dict:
        if not isinstance(self.spec, dict):
            raise CannotCheck("competition.yaml did not parse into a mapping (see yaml-parses)")
        return self.spec

    def phases(self) -> list[tuple[object, dict]]:
        phases = self.comp.get("phases")
        if not isinstance(phases, dict):
            raise CannotCheck("'phases' is not a mapping (see phases)")
        return [(key, phase) for key, phase in phases.items() if isinstance(phase, dict)]

    def columns(self) -> dict:
        board = self.comp.get("leaderboard")
        columns = board.get("columns") if isinstance(board, dict) else None
        if not isinstance(columns, dict):
            raise CannotCheck("'leaderboard.columns' is not a mapping (see leaderboard)")
        return columns

    def nested(self, member: str) -> zipfile.ZipFile:
        if member not in self._nested:
            if member not in self.names:
                raise CannotCheck(f"member {member!r} is not in the bundle (see phase-files)")
            try:
                self._nested[member] = zipfile.ZipFile(BytesIO(self.archive.read(member)))
            except zipfile.BadZipFile as error:
                raise CannotCheck(f"member {member!r} is not a valid zip ({error})") from None
        return self._nested[member]

    def programs(self, kinds: tuple[str, ...]) -> Iterator[tuple[str, str]]:
        """(kind, member) once per distinct program zip that a phase references."""
        seen = set()
        for _, phase in self.phases():
            for kind in kinds:
                member = phase.get(kind)
                if isinstance(member, str) and (kind, member) not in seen:
                    seen.add((kind, member))
                    yield kind, member

    def read_json(self, member: str, name: str) -> dict:
        archive = self.nested(member)
        if name not in archive.namelist():
            raise CannotCheck(f"{member} has no {name} at its root")
        try:
            config = json.loads(archive.read(name))
        except ValueError as error:
            raise CannotCheck(f"{member}::{name} is not valid JSON ({error})") from None
        if not isinstance(config, dict):
            raise CannotCheck(f"{member}::{name} is not a JSON object")
        return config


Problem = tuple[str, str]                                   # (message, fix)
RULES: dict[str, str] = {}
_CHECKS: dict[str, Callable[[Bundle], list[CheckFailure]]] = {}


def rule(name: str, description: str):
    """Register a generator of problems as a rule returning CheckFailures, never raising."""
    def register(find: Callable[[Bundle], Iterator[Problem]]):
        def run(bundle: Bundle) -> list[CheckFailure]:
            failures = []
            try:
                for message, fix in find(bundle):
                    failures.append(CheckFailure(name, message, fix))
            except CannotCheck as error:
                failures.append(CheckFailure(name, f"not checked: {error}",
                                             "fix the failure it names, then check again"))
            except Exception as error:  # noqa: BLE001 - a crash must not hide other rules
                failures.append(CheckFailure(name, f"the check crashed: {type(error).__name__}: "
                                             f"{error}", "fix the malformed value it names"))
            return failures
        run.__doc__ = find.__doc__
        RULES[name], _CHECKS[name] = description, run
        return run
    return register


def check_bundle(path: Path, scoring_margin_seconds: float = 60.0) -> list[CheckFailure]:
    """Every rule's failures on the bundle zip at ``path``; empty means valid."""
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as error:
        return [CheckFailure("zip-structure", f"{path}: not a readable zip ({error})", FIX_ZIP)]
    with archive:
        bundle = Bundle(archive, scoring_margin_seconds)
        return [failure for check in _CHECKS.values() for failure in check(bundle)]


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _wrapping_folder(archive: zipfile.ZipFile) -> str | None:
    names = archive.namelist()
    tops = {name.split("/")[0] for name in names}
    return tops.pop() if names and len(tops) == 1 and all("/" in n for n in names) else None


def _name_problems(name: str) -> list[str]:
    parts = name.split("/")
    problems = []
    if name.startswith("/") or "\\" in name or re.match(r"[A-Za-z]:", name):
        problems.append("is an absolute or Windows-style path")
    if "." in parts or ".." in parts:
        problems.append("has a './' or '..' component (names must match the YAML exactly, G4)")
    if any(p in JUNK or p.startswith("._") for p in parts) or name.endswith(".pyc"):
        problems.append("is junk (__MACOSX, ._*, .DS_Store, __pycache__, *.pyc), G2")
    return problems


def _walk(archive: zipfile.ZipFile, where: str, depth: int) -> Iterator[Problem]:
    for name in archive.namelist():
        for problem in _name_problems(name):
            yield f"member {where + name!r} {problem}", FIX_ZIP
        if name.lower().endswith(".zip") and depth < 2:
            try:
                inner = zipfile.ZipFile(BytesIO(archive.read(name)))
            except zipfile.BadZipFile as error:
                yield f"member {where + name!r} is not a valid zip ({error})", FIX_ZIP
                continue
            with inner:
                yield from _walk(inner, f"{where}{name}::", depth + 1)


@rule("zip-structure", "no wrapping folder; no junk, './', absolute or '..' members, "
      "nested zips included (G1, G2, G4)")
def check_zip_structure(bundle: Bundle) -> Iterator[Problem]:
    """G1, G2, G4: the site reads every path from the zip root; junk lands in ref/, res/."""
    folder = _wrapping_folder(bundle.archive)
    if not bundle.names:
        yield "the bundle zip has no members", FIX_ZIP
    elif folder is not None:
        yield (f"every member is inside the folder {folder + '/'!r}: the site reads "
               "competition.yaml, pages and zips from the zip root", FIX_ZIP)
    yield from _walk(bundle.archive, "", 0)


@rule("single-root-yaml", "exactly one member containing '.yaml': competition.yaml at the "
      "root; no .yml (G3)")
def check_single_root_yaml(bundle: Bundle) -> Iterator[Problem]:
    """G3: the site parses the first member whose name contains '.yaml'; '.yml' is unseen."""
    found = [name for name in bundle.names if ".yaml" in name]
    if found != ["competition.yaml"]:
        yield (f"members whose name contains '.yaml': {found}; expected exactly "
               "['competition.yaml'] (the site parses the first one it lists)",
               "keep one competition.yaml at the bundle root and no other *.yaml member")
    for name in bundle.names:
        if name.lower().endswith(".yml"):
            yield (f"member {name!r} ends in '.yml', which the site never reads",
                   "name the competition file competition.yaml; remove other .yml members")


@rule("yaml-parses", "competition.yaml parses with PyYAML into a mapping, without duplicate "
      "keys (§1)")
def check_yaml_parses(bundle: Bundle) -> Iterator[Problem]:
    """§1, §2.6: syntax errors are shown verbatim; duplicate keys silently keep the last value."""
    name = bundle.yaml_name or "competition.yaml"
    if bundle.yaml_error:
        yield f"{name}: {bundle.yaml_error}", "fix the YAML syntax at the position given"
    elif not isinstance(bundle.spec, dict):
        yield (f"{name}: top level is {type(bundle.spec).__name__}, expected a mapping",
               "write competition.yaml as a mapping of keys (title, html, phases, ...)")
    for key, line in bundle.duplicates:
        yield (f"{name} line {line}: duplicate key {key!r}; the site silently keeps the last",
               "remove or rename the duplicate key")


@rule("top-level-keys", "known Competition keys only, title <= 100, image an existing member, "
      "no queue/admin_names (§2.1, G5, G12)")
def check_top_level_keys(bundle: Bundle) -> Iterator[Problem]:
    """§2.1, G5, G12: unknown keys are a TypeError; queue raises; image: null fails."""
    comp = bundle.comp
    for key in comp:
        if key == "queue":
            yield ("top-level key 'queue' is a foreign key: any YAML value raises ValueError",
                   "remove it; choose a queue in the competition editor")
        elif key == "admin_names":
            yield ("top-level key 'admin_names' is ignored since 2019 (G12)",
                   "remove it; add co-organisers in the competition editor")
        elif key not in TOP_LEVEL_KEYS:
            yield (f"unknown top-level key {key!r}: the site fails with \"'{key}' is an invalid "
                   "keyword argument\"", "remove it or fix its spelling (G5)")
    title = comp.get("title")
    if not isinstance(title, str) or not title.strip() or len(title) > 100:
        yield (f"title is {title!r}: a non-empty string of at most 100 characters is required",
               "set a title of at most 100 characters (G16)")
    if "image" in comp and (not isinstance(comp["image"], str) or comp["image"] not in bundle.names):
        yield (f"image is {comp['image']!r}, which is not a member of the bundle",
               "add the logo at that root path, or drop the key (never image: null)")


@rule("html-pages", "html has overview/evaluation/terms/data; pages exist, are UTF-8, have no "
      "<script>/<style>; valid extra page keys (§2.2, G13)")
def check_html_pages(bundle: Bundle) -> Iterator[Problem]:
    """§2.2, G13: pages are read by exact name and decoded as UTF-8; the key is the tab label."""
    html = bundle.comp.get("html")
    if not isinstance(html, dict):
        yield f"html is {html!r}: a mapping of pages is required", "add html: {overview: ...}"
        return
    for key in REQUIRED_PAGES:
        if key not in html:
            yield f"html has no {key!r} page, which the site requires", f"add html.{key}: {key}.html"
    assets = [n.rsplit("/", 1)[-1] for n in bundle.names
              if n.startswith("assets/") and not n.endswith("/")]
    for name in sorted({a for a in assets if assets.count(a) > 1}):
        yield (f"several assets/ members are named {name!r}; the site flattens assets/ to "
               "basenames, so one overwrites the others", "give asset files unique basenames")
    for key, member in html.items():
        where = f"html.{key}"
        if key not in REQUIRED_PAGES and (not isinstance(key, str) or len(key) > 100
                                          or key in RESERVED_PAGE_LABELS):
            yield (f"extra page key {key!r} is its tab label: it must be a string of at most 100 "
                   f"characters other than {list(RESERVED_PAGE_LABELS)}",
                   "rename the key to a distinct label such as faq or timeline")
        if not isinstance(member, str) or member not in bundle.names:
            yield (f"{where} names {member!r}, which is not a member of the bundle",
                   "add the page at that root path or fix the name")
            continue
        try:
            text = bundle.archive.read(member).decode("utf-8")
        except UnicodeDecodeError as error:
            yield f"{where}: {member!r} is not UTF-8 ({error})", "save the page as UTF-8"
            continue
        blocked = re.search(r"<\s*(script|style)\b", text, re.IGNORECASE)
        if blocked:
            yield (f"{where}: {member!r} contains a <{blocked.group(1)}> block, which the site "
                   "strips", "remove it; pages are static HTML without JS or <style> (G13)")
        for name in ASSET_REFERENCE.findall(text):
            if name not in assets:
                yield (f"{where}: {member!r} uses {{{{ ASSET_BASE_URL }}}}/{name} but no assets/ "
                       "member has that basename", f"add assets/{name} to the bundle")


@rule("phases", "phases is a mapping of known keys; phasenumber consecutive, start_date present, "
      "label/description/color/types valid, no nulls, max_submissions_per_day != 0 "
      "(§2.3, G5, G9, G10, G11)")
def check_phases(bundle: Bundle) -> Iterator[Problem]:
    """§2.3, G5, G9, G10, G11: each phase goes to CompetitionPhase(**phase)."""
    phases = bundle.comp.get("phases")
    if not isinstance(phases, dict) or not phases:
        yield (f"phases is {type(phases).__name__}: a non-empty mapping is required (a list "
               "breaks the site)", "write phases: {1: {phasenumber: 1, ...}}")
        return
    previous = None
    for key, phase in phases.items():
        where = f"phases.{key}"
        if not isinstance(phase, dict):
            yield f"{where} is {phase!r}, not a mapping", "write each phase as a mapping of keys"
            continue
        unknown = sorted(map(str, set(phase) - PHASE_KEYS))
        if unknown:
            yield (f"{where}: unknown keys {unknown}; the site fails with \"Cannot resolve "
                   "keyword into field\"", "remove them or fix their spelling (G5)")
        for name in sorted(str(k) for k, v in phase.items() if v is None):
            yield (f"{where}.{name} is null: null phase values crash the site (input_data: null "
                   "calls None.endswith)", "omit the key instead (G11)")
        number = phase.get("phasenumber")
        if not _is_int(number) or number < 0:
            yield (f"{where}.phasenumber is {number!r}: an int >= 0 is required",
                   "number the phases 1, 2, ... in YAML order")
        elif previous is not None and number != previous + 1:
            yield (f"{where}.phasenumber is {number}, expected {previous + 1}: numbers must be "
                   "consecutive in YAML order", "renumber the phases 1, 2, ... (G9)")
        previous = number if _is_int(number) else None
        if "start_date" not in phase:
            yield f"{where} has no start_date (KeyError at upload)", "add an unquoted start_date"
        for name, limit in (("label", 50), ("description", 1000)):
            value = phase.get(name)
            if value is not None and (not isinstance(value, str) or len(value) > limit):
                yield (f"{where}.{name} must be a string of at most {limit} characters, found "
                       f"{len(value) if isinstance(value, str) else value!r}", "shorten it (G16)")
        if phase.get("color") is not None and phase["color"] not in COLORS:
            yield f"{where}.color is {phase['color']!r}, not one of {COLORS}", "use an allowed color"
        mode = phase.get("leaderboard_management_mode")
        if mode is not None and mode not in ("default", "hide_results"):
            yield (f"{where}.leaderboard_management_mode is {mode!r}; the site silently falls "
                   "back to default", "use default or hide_results")
        for name in PHASE_INT_KEYS:
            value = phase.get(name)
            if value is not None and (not _is_int(value) or value < 0):
                yield f"{where}.{name} is {value!r}: an int >= 0 is required", "write an integer"
        if _is_int(phase.get("max_submissions_per_day")) and phase["max_submissions_per_day"] == 0:
            yield (f"{where}.max_submissions_per_day is 0, which blocks every submission (it "
                   "does not mean unlimited)", "omit it for the default 999 (G10)")
        for name in PHASE_BOOL_KEYS:
            if phase.get(name) is not None and not isinstance(phase[name], bool):
                yield f"{where}.{name} is {phase[name]!r}: true or false is required", "use a bool"
        datasets = phase.get("datasets")
        if datasets is not None and not (isinstance(datasets, dict) and all(
                isinstance(d, dict) and "name" in d and ("url" in d or "key" in d)
                for d in datasets.values())):
            yield (f"{where}.datasets must map to {{name, url}} or {{name, key}} entries",
                   "fix or remove the datasets entries")


def _utc(value: dt.date) -> dt.datetime:
    if not isinstance(value, dt.datetime):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc)
    return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value


@rule("dates-unquoted-and-increasing", "phase start_date and end_date are YAML dates (unquoted), "
      "strictly increasing with phasenumber; end_date after the last start (§2.5, G8, G9)")
def check_dates(bundle: Bundle) -> Iterator[Problem]:
    """§2.5, G8, G9: a quoted date is a str, which the site rejects; naive times are UTC."""
    fix = "write it unquoted as YYYY-MM-DD HH:MM:SS (UTC), e.g. 2027-01-10 00:00:00 (G8)"
    starts = []
    for index, (key, phase) in enumerate(bundle.phases()):
        value = phase.get("start_date")
        if "start_date" not in phase:
            continue                                     # reported by the phases rule
        if not isinstance(value, dt.date):
            yield (f"phases.{key}.start_date is {value!r} ({type(value).__name__}), not a date: "
                   "the site says 'Expected a DateTime object'", fix)
            continue
        number = phase.get("phasenumber")
        starts.append((number if _is_int(number) else index, key, value))
    starts.sort(key=lambda start: start[0])
    for (_, key_a, date_a), (_, key_b, date_b) in zip(starts, starts[1:]):
        if _utc(date_b) <= _utc(date_a):
            yield (f"phases.{key_b}.start_date {date_b} is not after phases.{key_a}.start_date "
                   f"{date_a}: start dates must increase strictly with phasenumber",
                   "reorder the phases or fix the dates (G9)")
    end = bundle.comp.get("end_date")
    if end is not None and not isinstance(end, dt.date):
        yield f"end_date is {end!r} ({type(end).__name__}), not a date", fix
    elif end is not None and starts and _utc(end) <= max(_utc(s[2]) for s in starts):
        yield (f"end_date {end} is not after the last phase start_date "
               f"{max(starts, key=lambda s: _utc(s[2]))[2]}", "move end_date after the last start")


@rule("phase-files", "reference_data and scoring_program on every phase; file values are "
      "existing lowercase .zip members; is_scoring_only false iff ingestion (§2.3, G4, G6, G7)")
def check_phase_files(bundle: Bundle) -> Iterator[Problem]:
    """§2.3, G1, G4, G6, G7: values ending '.zip' (case-sensitive) are read as members."""
    for key, phase in bundle.phases():
        where = f"phases.{key}"
        for name in ("reference_data", "scoring_program"):
            if name not in phase:
                yield f"{where} has no {name} (required; G6)", f"add {name}: <member>.zip"
        for name in FILE_KEYS:
            value = phase.get(name)
            if value is None:
                continue                                 # absent, or null (phases rule)
            if not isinstance(value, str) or not value.endswith(".zip"):
                yield (f"{where}.{name} is {value!r}: expected a member path ending in lowercase "
                       "'.zip' (anything else is taken as a dataset key)", "fix the path (G4)")
            elif value not in bundle.names:
                yield (f"{where}.{name} names {value!r}, which is not a member of the bundle",
                       "add the zip at that root path or fix the name")
            elif name in ("reference_data", "input_data"):
                try:
                    folder = _wrapping_folder(bundle.nested(value))
                except CannotCheck as error:
                    yield f"{where}.{name}: {error}", FIX_ZIP
                    continue
                if folder is not None:
                    yield (f"{where}.{name}: every member of {value!r} is inside {folder + '/'!r}; "
                           "data zips are never flattened", FIX_ZIP)
        has_ingestion = phase.get("ingestion_program") is not None
        scoring_only = phase.get("is_scoring_only", True)
        if has_ingestion and scoring_only is not False:
            yield (f"{where} has an ingestion_program but is_scoring_only is {scoring_only!r} "
                   "(default true): the ingestion program would never run",
                   "set is_scoring_only: false (G7)")
        if scoring_only is False and not has_ingestion:
            yield (f"{where} has is_scoring_only: false but no ingestion_program",
                   "add the phase's ingestion_program.zip, or set is_scoring_only: true")


def _command_problems(command, allowed: frozenset) -> list[str]:
    if not isinstance(command, str) or not command.strip():
        return ["is not a non-empty string"]
    problems = []
    if "\n" in command or "\r" in command:
        problems.append("spans several lines")
    if command != command.strip():
        problems.append("has leading or trailing whitespace")
    if "  " in command or "\t" in command:
        problems.append("has a double space or a tab (an empty or mangled argument)")
    shell = [token for token in SHELL_SYNTAX if token in command]
    if shell or "=" in command.split(" ")[0]:
        problems.append(f"uses shell syntax {shell or ['VAR=value']}, but no shell runs it")
    unknown = sorted(set(re.findall(r"\$(\w*)", command)) - allowed)
    if unknown:
        problems.append(f"uses {['$' + name for name in unknown]}, which the worker does not "
                        f"replace for this program (allowed: {sorted('$' + v for v in allowed)})")
    return problems


@rule("program-metadata", "each scoring/ingestion zip has a root metadata with only command and "
      "description; one single-spaced command line, no shell syntax, known variables "
      "(§3.3, G18, G19)")
def check_program_metadata(bundle: Bundle) -> Iterator[Problem]:
    """§3.3, G1, G18, G19: the command is str.replace'd and split on single spaces, no shell."""
    fix = "write one line such as: command: python3 $program/score.py $input $output (G19)"
    for kind, member in bundle.programs(("scoring_program", "ingestion_program")):
        try:
            names = bundle.nested(member).namelist()
        except CannotCheck as error:
            yield f"{kind} {member!r} not checked: {error}", "fix phase-files first"
            continue
        if "metadata" not in names:
            inner = [n for n in names if n.count("/") == 1 and n.endswith("/metadata")]
            where = f" (it is in {inner[0]!r}; we emit program zips flat)" if inner else ""
            yield f"{member}: no 'metadata' at the zip root{where}", FIX_ZIP
            continue
        try:
            metadata = yaml.safe_load(bundle.nested(member).read("metadata"))
        except yaml.YAMLError as error:
            yield f"{member}::metadata is not valid YAML ({error})", fix
            continue
        if not isinstance(metadata, dict):
            yield f"{member}::metadata is {metadata!r}, not a mapping", fix
            continue
        extra = sorted(map(str, set(metadata) - {"command", "description"}))
        if extra:
            yield (f"{member}::metadata has keys {extra}: the worker downloads other string "
                   "values as URLs", "keep only command and description (G18)")
        for problem in _command_problems(metadata.get("command"), VARIABLES[kind]):
            yield f"{member}::metadata command {metadata.get('command')!r} {problem}", fix


def _label_problems(where: str, label, g17: bool) -> Iterator[Problem]:
    if not isinstance(label, str) or not label.strip():
        yield f"{where} is {label!r}: a non-empty string is required", "set a label"
        return
    if len(label) > 50:
        yield f"{where} {label!r} is longer than 50 characters", "shorten it (G16)"
    if label != label.strip():
        yield f"{where} {label!r} has surrounding spaces", "strip the label"
    if g17 and (": " in label or " #" in label):
        yield (f"{where} {label!r} contains ': ' or ' #', which breaks the worker's YAML parse of "
               "the leaderboard CSV header", "remove the colon-space / space-hash (G17)")


def _computed_problems(where: str, column: dict, plain: set) -> Iterator[Problem]:
    computed = column["computed"]
    if not isinstance(computed, dict):
        yield f"{where}.computed is {computed!r}, not a mapping", "write {operation, fields}"
        return
    operation, fields = computed.get("operation"), computed.get("fields")
    if operation not in ("Avg", "MRR"):
        yield (f"{where}.computed.operation is {operation!r}: only 'Avg' and 'MRR' work "
               "(case-sensitive)", "use Avg or MRR")
    if not isinstance(fields, str):
        yield (f"{where}.computed.fields is {fields!r}: a comma-separated string is required "
               "(a YAML list raises AttributeError)", 'write fields: "key_a, key_b"')
    else:
        names = [name.strip() for name in fields.split(",")]
        unknown = [name for name in names if name not in plain]
        if unknown:
            yield (f"{where}.computed.fields {unknown} are not non-computed column keys "
                   "(KeyError at upload)", "list existing non-computed column keys")
        weights = computed.get("weights")
        if weights is not None:
            try:
                parsed = [float(w) for w in str(weights).split(",")]
            except ValueError:
                parsed = []
            if len(parsed) != len(names):
                yield (f"{where}.computed.weights {weights!r} must be one float per field",
                       'write weights: "1.0, 1.0"')
    if operation == "Avg" and column.get("sort") != "asc":
        yield (f"{where}: an Avg column averages ranks (lower is better) but sort is "
               f"{column.get('sort', 'desc (default)')!r}", "set sort: asc (G15)")


def _column_problems(key, column, boards: set, groups: dict, plain: set) -> Iterator[Problem]:
    where = f"leaderboard.columns.{key}"
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key) or len(key) > 50:
        yield (f"column key {key!r} must match [A-Za-z0-9_]+ and be at most 50 characters "
               "(it is the scores.txt key)", "rename the column key")
    if key in groups:
        yield f"column key {key!r} is also a column_groups key", "rename one of them"
    if not isinstance(column, dict):
        yield f"{where} is {column!r}, not a mapping", "write the column as a mapping"
        return
    unknown = sorted(map(str, set(column) - COLUMN_KEYS))
    if unknown:
        yield (f"{where}: unknown sub-keys {unknown} are silently ignored by the site (e.g. "
               "'sorting' leaves sort: desc)", f"use only {sorted(COLUMN_KEYS)} (G5)")
    board = column.get("leaderboard")
    label = board.get("label") if isinstance(board, dict) else None
    if not (isinstance(label, str) and label in boards):
        yield (f"{where}.leaderboard.label is {label!r}, not one of the leaderboards labels "
               f"{sorted(boards)} (KeyError at upload)", "set leaderboard: *RESULTS")
    if "label" in column:
        yield from _label_problems(f"{where}.label", column["label"], g17=True)
    for name in ("rank", "selection_default"):
        if name in column and not _is_int(column[name]):
            yield f"{where}.{name} is {column[name]!r}: an int is required", "write an integer"
    if column.get("sort", "desc") not in ("asc", "desc"):
        yield f"{where}.sort is {column['sort']!r}: asc or desc is required", "use asc or desc"
    if "numeric_format" in column and not (_is_int(column["numeric_format"])
                                           and 1 <= column["numeric_format"] <= 10):
        yield (f"{where}.numeric_format is {column['numeric_format']!r}: an int in 1..10 is "
               "required (the site clamps)", "use 1 to 10 decimals (G16)")
    if "column_group" in column:
        group = column["column_group"]
        group_label = group.get("label") if isinstance(group, dict) else None
        labels = {(g or {}).get("label", "") for g in groups.values() if g is None or isinstance(g, dict)}
        if not (isinstance(group_label, str) and group_label in labels):
            yield (f"{where}.column_group.label is {group_label!r}, not a column_groups label",
                   "declare the group under leaderboard.column_groups")
    if "computed" in column:
        yield from _computed_problems(where, column, plain)


@rule("leaderboard", "leaderboards/columns/column_groups well-formed: labels (G17), keys, sort, "
      "numeric_format, computed Avg/MRR, one top selection_default (§2.4, G5, G15-G17)")
def check_leaderboard(bundle: Bundle) -> Iterator[Problem]:
    """§2.4, G5, G15, G16, G17: lookups by label, computed columns, the ranking column."""
    board = bundle.comp.get("leaderboard")
    if not isinstance(board, dict):
        yield "leaderboard is missing or not a mapping: nothing would be ranked", "add one (§2.4)"
        return
    boards = board.get("leaderboards")
    labels: set = set()
    if not isinstance(boards, dict) or not boards:
        yield ("leaderboard.leaderboards must be a non-empty mapping (UnboundLocalError)",
               "add leaderboards: {Results: &RESULTS {label: Results, rank: 1}}")
        boards = {}
    for key, spec in boards.items():
        where = f"leaderboard.leaderboards.{key}"
        spec = spec if isinstance(spec, dict) else {}
        yield from _label_problems(f"{where}.label", spec.get("label"), g17=False)
        if isinstance(spec.get("label"), str):
            labels.add(spec["label"])
        if not _is_int(spec.get("rank")):
            yield f"{where}.rank is {spec.get('rank')!r}: an int is required", "add rank: 1"
    groups = board.get("column_groups") or {}
    if not isinstance(groups, dict):
        yield "leaderboard.column_groups must be a mapping", "write column_groups as a mapping"
        groups = {}
    for key, spec in groups.items():
        if isinstance(spec, dict) and "label" in spec:
            yield from _label_problems(f"leaderboard.column_groups.{key}.label", spec["label"], True)
    columns = board.get("columns")
    if not isinstance(columns, dict) or not columns:
        yield "leaderboard.columns must be a non-empty mapping", "declare the score columns"
        return
    plain = {k for k, c in columns.items() if isinstance(c, dict) and "computed" not in c}
    for key, column in columns.items():
        yield from _column_problems(key, column, labels, groups, plain)
    defaults = {k: c.get("selection_default", 0) for k, c in columns.items()
                if isinstance(c, dict) and _is_int(c.get("selection_default", 0))}
    top = max(defaults.values(), default=0)
    holders = sorted(str(k) for k, v in defaults.items() if v == top)
    if top <= 0:
        yield ("no column has selection_default > 0: the site ranks by the first non-computed "
               "column in YAML order", "give the ranking column selection_default: 1 (G15)")
    elif len(holders) > 1:
        yield (f"columns {holders} share the highest selection_default {top}: the ranking "
               "column is ambiguous", "give exactly one column the highest selection_default")


@rule("docker-image", "competition_docker_image is set and matches [0-9A-Za-z/.:-]+ (G22)")
def check_docker_image(bundle: Bundle) -> Iterator[Problem]:
    """G22, §4.9: the worker strips every other character ('_', '@'); the default drifts."""
    image = bundle.comp.get("competition_docker_image")
    if not isinstance(image, str) or not image:
        yield (f"competition_docker_image is {image!r}: the platform default image changed over "
               "time", "set it, e.g. codalab/codalab-legacy:py312 (G22)")
    elif not DOCKER_PATTERN.fullmatch(image) or len(image) > 128:
        yield (f"competition_docker_image {image!r} has characters outside [0-9A-Za-z/.:-] (the "
               "worker strips '_' and '@') or exceeds 128", "use a plain name:tag (G22)")


def _ingestion_seconds(config: dict) -> tuple[float, str]:
    grace = config["limits"]["grace_seconds"]
    budgets = [task["budget_seconds"] for task in config["tasks"]]
    if not budgets or not all(_is_number(x) for x in [*budgets, grace]):
        raise ValueError(f"budgets {budgets} and grace_seconds {grace!r} must be numbers")
    total = sum(budget + grace + OVERHEAD_SECONDS_PER_TASK for budget in budgets)
    return total, (f"{len(budgets)} tasks: sum of (budget + grace {grace:g} s + "
                   f"{OVERHEAD_SECONDS_PER_TASK:g} s) = {total:g} s, budgets {budgets}")


@rule("time-limit", "execution_time_limit is a positive int covering the ingestion budgets, "
      "grace and overhead plus the scoring margin (§4.5, G23)")
def check_time_limit(bundle: Bundle) -> Iterator[Problem]:
    """§4.5, G23: the worker kills the step at execution_time_limit (default 300 s)."""
    for key, phase in bundle.phases():
        where = f"phases.{key}.execution_time_limit"
        limit = phase.get("execution_time_limit", DEFAULT_TIME_LIMIT)
        if not _is_int(limit) or limit <= 0:
            yield f"{where} is {limit!r}: a positive int of seconds is required", "write one"
            continue
        member = phase.get("ingestion_program")
        if not isinstance(member, str):
            continue
        try:
            total, detail = _ingestion_seconds(bundle.read_json(member, INGESTION_CONFIG_NAME))
        except CannotCheck as error:
            yield f"{where} not checked: {error}", "emit the ingestion config in the program zip"
            continue
        except (KeyError, TypeError, ValueError) as error:
            yield (f"{member}::{INGESTION_CONFIG_NAME} is malformed ({type(error).__name__}: "
                   f"{error})", "regenerate the ingestion config")
            continue
        needed = total + bundle.margin
        if limit < needed:
            yield (f"{where} is {limit} s but {member} needs {needed:g} s ({detail}, plus the "
                   f"scoring margin {bundle.margin:g} s)",
                   f"raise execution_time_limit to at least {int(-(-needed // 1))} or cut budgets")


@rule("scoring-keys", "each scoring program's scoring_config.json columns are exactly the "
      "leaderboard's non-computed column keys (§4.8, G14, G26)")
def check_scoring_keys(bundle: Bundle) -> Iterator[Problem]:
    """§4.8, G14, G26: unwritten keys show '-'; extra keys are silently dropped."""
    columns = bundle.columns()
    expected = [k for k, c in columns.items() if not (isinstance(c, dict) and "computed" in c)]
    for _, member in bundle.programs(("scoring_program",)):
        try:
            keys = [column["key"] for column in
                    bundle.read_json(member, SCORING_CONFIG_NAME)["columns"]]
        except CannotCheck as error:
            yield f"scoring keys not checked: {error}", "emit the scoring config in the program zip"
            continue
        except (KeyError, TypeError) as error:
            yield (f"{member}::{SCORING_CONFIG_NAME} is malformed ({type(error).__name__}: "
                   f"{error})", "regenerate the scoring config")
            continue
        where = f"{member}::{SCORING_CONFIG_NAME}"
        duplicates = sorted({str(k) for k in keys if keys.count(k) > 1})
        missing = [k for k in expected if k not in keys]
        extra = [k for k in keys if k not in expected]
        if duplicates:
            yield f"{where} writes keys {duplicates} twice (the site raises)", "write each once"
        if missing:
            yield (f"{where} never writes leaderboard keys {missing} (their cells show '-')",
                   "derive the scorer's columns from the same leaderboard columns")
        if extra:
            yield (f"{where} writes keys {extra} that are not non-computed leaderboard columns "
                   "(the site drops them silently)", "remove them or add the columns")

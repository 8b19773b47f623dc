"""Checks on an emitted Codabench (``version: 2``) bundle, from codabench_v2.md §1, §3, §5.

Codabench drops unknown keys silently, so here an unknown key is an error at every level,
as it is for our v1.5 bundles. Each rule returns CheckFailures; none raises.
"""
from __future__ import annotations

import datetime as dt
import io
import json
import zipfile
from pathlib import Path
from typing import Callable, Iterator

import yaml

from .checks import CheckFailure, _command_problems, _ingestion_seconds, _walk
from .codabench import DEFAULT_QUEUE_LIMIT_SECONDS

TOP_KEYS = {"version", "title", "image", "terms", "pages", "tasks", "solutions", "phases",
            "leaderboards", "description", "registration_auto_approve", "docker_image",
            "enable_detailed_results", "show_detailed_results_in_submission_panel",
            "show_detailed_results_in_leaderboard", "auto_run_submissions",
            "can_participants_make_submissions_public", "make_programs_available",
            "make_input_data_available", "competition_type", "fact_sheet", "reward",
            "contact_email", "forum_enabled", "queue"}
PAGE_KEYS = {"title", "file"}
TASK_KEYS = {"index", "key", "name", "description", "ingestion_only_during_scoring",
             "scoring_program", "ingestion_program", "input_data", "reference_data"}
PHASE_KEYS = {"index", "name", "description", "start", "end", "tasks", "max_submissions",
              "max_submissions_per_day", "execution_time_limit", "auto_migrate_to_this_phase",
              "hide_output", "hide_prediction_output", "hide_score_output", "public_data",
              "starting_kit"}
BOARD_KEYS = {"title", "key", "columns", "hidden", "primary_index", "submission_rule"}
COLUMN_KEYS = {"title", "key", "index", "sorting", "computation", "computation_indexes",
               "precision", "hidden"}
RULES = ("Add", "Add_And_Delete", "Add_And_Delete_Multiple", "Force_Last",
         "Force_Latest_Multiple", "Force_Best")
KEY_LIMIT, TITLE_LIMIT, BOARD_TITLE_LIMIT = 36, 36, 64
IMAGE_MAGIC = {b"\x89PNG": "png", b"\xff\xd8\xff": "jpeg", b"GIF8": "gif", b"RIFF": "webp"}
PROGRAM_VARIABLES = frozenset({"program", "input", "output", "tmp", "shared", "predictions",
                               "ingestion_program", "submission_program", "hidden"})

Problem = tuple[str, str]        # (message, fix)


def _unknown(where: str, item, known: set) -> Iterator[Problem]:
    if isinstance(item, dict):
        for key in sorted(set(item) - known):
            yield (f"{where}: unknown key {key!r}; Codabench silently drops it",
                   f"remove it or use one of {', '.join(sorted(known))}")


def _list(comp: dict, key: str) -> list:
    value = comp.get(key)
    return value if isinstance(value, list) else []


def rule_structure(names, comp, read) -> Iterator[Problem]:
    if comp.get("version") != 2 or isinstance(comp.get("version"), bool):
        yield (f"version: found {comp.get('version')!r}, expected the integer 2",
               "write version: 2 (unquoted)")
    yield from _unknown("(top level)", comp, TOP_KEYS)
    for key, message in (("tasks", "No tasks listed in this competition"),
                         ("phases", "Unable to find any phases for this competition"),
                         ("leaderboards", "Could not find leaderboards in the competition yaml"),
                         ("pages", "the pages loop crashes without it")):
        if not isinstance(comp.get(key), list):
            yield (f"{key}: missing or not a list ({message})", f"emit {key} as a YAML list")
    if not isinstance(comp.get("title"), str) or not comp["title"]:
        yield "title: missing", "set a title"


def rule_files(names, comp, read) -> Iterator[Problem]:
    image = comp.get("image")
    if image not in names:
        yield (f"image: {image!r} is not a member ('Unable to find image')",
               "ship a png or jpg logo and name it in image")
    elif not any(read(image).startswith(magic) for magic in IMAGE_MAGIC):
        yield f"image: {image} is not a png, jpeg, gif or webp image", "use a png logo"
    for where, path in [("terms", comp.get("terms"))] + [
            (f"pages[{i}].file", page.get("file")) for i, page in enumerate(_list(comp, "pages"))
            if isinstance(page, dict)]:
        if path not in names:
            yield f"{where}: {path!r} is not a member ('Unable to find page')", "ship the file"
        elif not read(path).strip():
            yield f"{where}: {path} is empty, it must contain content", "write the page"
    for i, page in enumerate(_list(comp, "pages")):
        yield from _unknown(f"pages[{i}]", page, PAGE_KEYS)
        if isinstance(page, dict) and not page.get("title"):
            yield f"pages[{i}]: no title", "give every page a title"


def rule_tasks(names, comp, read) -> Iterator[Problem]:
    indexes = [task.get("index") for task in _list(comp, "tasks") if isinstance(task, dict)]
    if len(indexes) != len(set(map(str, indexes))):
        yield f"tasks: duplicate indexes {indexes}", "give each task its own index"
    for i, task in enumerate(_list(comp, "tasks")):
        yield from _unknown(f"tasks[{i}]", task, TASK_KEYS)
        if "scoring_program" not in task:
            yield f"tasks[{i}]: no scoring_program", "name the scoring program zip"
        for key in ("scoring_program", "ingestion_program", "input_data", "reference_data"):
            if key in task and task[key] not in names:
                yield (f"tasks[{i}].{key}: {task[key]!r} is not a member ('Cannot find dataset')",
                       "ship the zip at the bundle root")


def _date(where: str, value) -> tuple[dt.datetime | None, list[Problem]]:
    if not isinstance(value, str):
        return None, [(f"{where}: found {value!r} ({type(value).__name__}); an unquoted date "
                       "loses its time of day on Codabench", 'quote it: "YYYY-MM-DD HH:MM:SS"')]
    try:
        return dt.datetime.fromisoformat(value), []
    except ValueError:
        return None, [(f"{where}: {value!r} is not a date", 'write "YYYY-MM-DD HH:MM:SS" (UTC)')]


def rule_phases(names, comp, read) -> Iterator[Problem]:
    phases = [p for p in _list(comp, "phases") if isinstance(p, dict)]
    task_indexes = {str(t.get("index")) for t in _list(comp, "tasks") if isinstance(t, dict)}
    previous_end = None
    for i, phase in enumerate(phases):
        where = f"phases[{i}]"
        yield from _unknown(where, phase, PHASE_KEYS)
        start, problems = _date(f"{where}.start", phase.get("start"))
        yield from problems
        end = None
        if "end" in phase:
            end, problems = _date(f"{where}.end", phase["end"])
            yield from problems
        elif i < len(phases) - 1:
            yield (f"{where}: no end, but a phase follows ('Phase: {phase.get('name')} must have "
                   "an end time because it has a phase after it')", "give every non-last phase an end")
        if previous_end and start and start < previous_end + dt.timedelta(seconds=1):
            yield (f"{where}.start: {start} is not at least 1 s after the previous phase's end "
                   f"{previous_end} ('Phases dates conflict')", "start one second after the end")
        previous_end = end
        if not phase.get("tasks") or any(str(t) not in task_indexes for t in phase["tasks"]):
            yield f"{where}.tasks: {phase.get('tasks')!r} must list existing task indexes", \
                "list the phase's task indexes"
        for key in ("public_data", "starting_kit"):
            if key in phase and phase[key] not in names:
                yield f"{where}.{key}: {phase[key]!r} is not a member", "ship the zip"


def _column_problems(where: str, columns: list) -> Iterator[Problem]:
    indexes = [c.get("index") for c in columns if isinstance(c, dict)]
    keys = [c.get("key") for c in columns if isinstance(c, dict)]
    if len(set(indexes)) != len(indexes):
        yield f"{where}: Columns must have unique indexes! {indexes}", "renumber the columns"
    if len(set(keys)) != len(keys):
        yield f"{where}: Columns must have unique keys!", "rename the duplicates"
    if 0 not in indexes:
        yield f"{where}: no column has index 0 (the ranking column)", "give the ranking column index 0"
    for column in columns:
        label = f"{where}[{column.get('key')}]"
        yield from _unknown(label, column, COLUMN_KEYS)
        for field, limit in (("key", KEY_LIMIT), ("title", TITLE_LIMIT)):
            value = column.get(field)
            if not isinstance(value, str) or not value or len(value) > limit:
                yield (f"{label}.{field}: {value!r} ({len(str(value))} characters), expected "
                       f"1 to {limit} characters", f"shorten the {field} to {limit} characters")
        if column.get("sorting", "desc") not in ("asc", "desc"):
            yield f"{label}.sorting: {column['sorting']!r}, expected asc or desc", "fix the sorting"
        if column.get("computation") is not None:
            chosen = column.get("computation_indexes")
            if column["computation"] not in ("avg", "sum", "min", "max") or not isinstance(chosen, list) \
                    or not chosen or not set(chosen) <= set(indexes) - {column.get("index")}:
                yield (f"{label}: computation {column['computation']!r} over {chosen!r} needs a "
                       "list of other columns' indexes", "emit computation_indexes as a YAML list")


def rule_leaderboards(names, comp, read) -> Iterator[Problem]:
    for i, board in enumerate(_list(comp, "leaderboards")):
        where = f"leaderboards[{i}]"
        yield from _unknown(where, board, BOARD_KEYS)
        if not isinstance(board.get("key"), str) or len(board["key"]) > KEY_LIMIT:
            yield f"{where}.key: {board.get('key')!r}, expected at most 36 characters", "shorten it"
        if not isinstance(board.get("title"), str) or len(board["title"]) > BOARD_TITLE_LIMIT:
            yield f"{where}.title: {board.get('title')!r}, expected at most 64 characters", "shorten it"
        if board.get("submission_rule") not in RULES:
            yield (f"{where}.submission_rule: {board.get('submission_rule')!r}; set it explicitly "
                   f"to one of {', '.join(RULES)} (the default 'Add' is manual)",
                   "write submission_rule: Force_Last")
        columns = board.get("columns")
        if not isinstance(columns, list) or not columns:
            yield f"{where}: Leaderboards require at least 1 column", "add columns"
        else:
            yield from _column_problems(f"{where}.columns", columns)


def _program_metadata(archive: zipfile.ZipFile) -> dict | None:
    for name in ("metadata.yaml", "metadata"):
        if name in archive.namelist():
            return yaml.safe_load(archive.read(name))
    return None


def rule_programs(names, comp, read) -> Iterator[Problem]:
    for i, task in enumerate(_list(comp, "tasks")):
        for kind in ("scoring_program", "ingestion_program"):
            member = task.get(kind)
            if member not in names:
                continue
            with zipfile.ZipFile(io.BytesIO(read(member))) as archive:
                metadata = _program_metadata(archive)
                if not isinstance(metadata, dict) or "command" not in metadata:
                    yield (f"tasks[{i}].{kind}: {member} has no metadata.yaml with a command "
                           "('Could not find scores file' / 'missing command')",
                           "put metadata.yaml with command: at the zip root")
                    continue
                for problem in _command_problems(metadata["command"], PROGRAM_VARIABLES):
                    yield f"tasks[{i}].{kind}: command {problem}", "one plain command line"
                for junk in _walk(archive, f"{member}::", 1):
                    yield (junk if isinstance(junk, str) else junk[0]), "rezip without junk"


def rule_time_and_keys(names, comp, read, margin: float) -> Iterator[Problem]:
    tasks = {str(t.get("index")): t for t in _list(comp, "tasks") if isinstance(t, dict)}
    columns = [c for board in _list(comp, "leaderboards")[:1] for c in board.get("columns", [])
               if isinstance(c, dict) and c.get("computation") is None]
    for i, phase in enumerate(_list(comp, "phases")):
        limit = phase.get("execution_time_limit", 600)
        for index in phase.get("tasks", []):
            task = tasks.get(str(index), {})
            if task.get("ingestion_program") in names:
                with zipfile.ZipFile(io.BytesIO(read(task["ingestion_program"]))) as archive:
                    needed, detail = _ingestion_seconds(json.loads(archive.read("ingestion_config.json")))
                needed += margin
                for bound, what in ((limit, "execution_time_limit"),
                                    (DEFAULT_QUEUE_LIMIT_SECONDS, "the default queue's cap")):
                    if bound < needed:
                        yield (f"phases[{i}]: {what} is {bound} s but the run needs {needed:g} s "
                               f"({detail} + {margin:g} s scoring)",
                               "raise the limit, use a custom queue, or cut the budgets")
            if task.get("scoring_program") in names:
                with zipfile.ZipFile(io.BytesIO(read(task["scoring_program"]))) as archive:
                    written = [c["key"] for c in json.loads(archive.read("scoring_config.json"))["columns"]]
                expected = [c.get("key") for c in columns]
                if sorted(written) != sorted(expected):
                    yield (f"phases[{i}]: the scorer writes {sorted(set(written) - set(expected))} "
                           f"not on the leaderboard and misses {sorted(set(expected) - set(written))}",
                           "derive the columns and the scoring config from the same plan")


CHECKS: dict[str, Callable] = {
    "v2-structure": rule_structure, "v2-files": rule_files, "v2-tasks": rule_tasks,
    "v2-phases": rule_phases, "v2-leaderboards": rule_leaderboards, "v2-programs": rule_programs,
}


def check_bundle_v2(path: Path, scoring_margin_seconds: float = 60.0) -> list[CheckFailure]:
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as error:
        return [CheckFailure("v2-structure", f"{path}: not a readable zip ({error})", "rezip")]
    failures = []
    with archive:
        names = set(archive.namelist())
        for junk in _walk(archive, "", 0):
            failures.append(CheckFailure("v2-zip", junk if isinstance(junk, str) else junk[0],
                                         "zip the contents flat, without junk"))
        yaml_members = [n for n in names if n.endswith((".yaml", ".yml")) and "/" not in n]
        if yaml_members != ["competition.yaml"]:
            return failures + [CheckFailure("v2-structure", f"root yaml members {yaml_members}, "
                                            "expected exactly competition.yaml", "keep one")]
        try:
            comp = yaml.safe_load(archive.read("competition.yaml"))
        except yaml.YAMLError as error:
            return failures + [CheckFailure("v2-structure", f"competition.yaml: {error}", "fix it")]
        if not isinstance(comp, dict):
            return failures + [CheckFailure("v2-structure", "competition.yaml is not a mapping", "fix it")]
        checks = {**CHECKS, "v2-time-and-keys":
                  lambda n, c, r: rule_time_and_keys(n, c, r, scoring_margin_seconds)}
        for name, check in checks.items():
            try:
                failures += [CheckFailure(name, message, fix)
                             for message, fix in check(names, comp, archive.read)]
            except Exception as error:     # noqa: BLE001 - one broken rule must not hide others
                failures.append(CheckFailure(name, f"the check crashed: {type(error).__name__}: "
                                             f"{error}", "fix what it names"))
    return failures

"""Codabench ``version: 2`` competition.yaml rules, from codabench_v2.md §0, §1 and §5.

Codabench drops unknown keys silently, so here an unknown key is an error at every level, as
it is for our v1.5 bundles. Every problem carries its own fix. Also the view of the YAML that
other concerns share: ``items`` (a top-level list, or none when it is not one).
"""
from __future__ import annotations

import datetime as dt
from typing import Iterator

from runtime import rules as worker_rules
from scoring_program.scorer.config import CONFIG_NAME as SCORING_CONFIG

from ..platforms.codabench_site import SCORES_API
from ..datasets import SEPARABLE, is_key
from .framework import CODABENCH, Bundle, CannotCheck, rule

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
# leaderboards/models.py, Column.COMPUTATION_CHOICES; avg_rank since v1.29 (migration 0010)
COMPUTATIONS = ("avg", "sum", "min", "max", "avg_rank")
SUBMISSION_RULES = ("Add", "Add_And_Delete", "Add_And_Delete_Multiple", "Force_Last",
                    "Force_Latest_Multiple", "Force_Best")
KEY_LIMIT, TITLE_LIMIT, BOARD_TITLE_LIMIT = 36, 36, 64
IMAGE_MAGIC = {b"\x89PNG": "png", b"\xff\xd8\xff": "jpeg", b"GIF8": "gif", b"RIFF": "webp"}

Problem = tuple[str, str]        # (message, fix): every problem here names its own fix


# Keys Codabench's documentation names but its source reads nowhere (codabench_v2.md §1.1):
# what does the job instead.
DOCUMENTED_BUT_IGNORED = {
    "accepts_only_result_submissions": (
        "a phase takes result submissions only when its tasks have no ingestion_program; "
        "build it as a results phase (the spec's submission: results)"),
}


def _unknown(where: str, item, known: set) -> Iterator[Problem]:
    if isinstance(item, dict):
        for key in sorted(set(item) - known):
            if key in DOCUMENTED_BUT_IGNORED:
                yield (f"{where}: {key!r} is in Codabench's documentation, but Codabench ignores "
                       "it (no source file reads it)", f"remove it: {DOCUMENTED_BUT_IGNORED[key]}")
                continue
            yield (f"{where}: unknown key {key!r}; Codabench silently drops it",
                   f"remove it or use one of {', '.join(sorted(known))}")


def items(comp: dict, key: str) -> list:
    """The top-level list ``key``; other rules report it when it is missing or not a list."""
    value = comp.get(key)
    return value if isinstance(value, list) else []


@rule("v2-structure", "the zip opens; competition.yaml is the one root YAML member and parses "
      "into a mapping; version: 2, title, and tasks, phases, leaderboards, pages as lists; known "
      "top-level keys (codabench_v2.md §0, §1)", "fix competition.yaml as described (§1)",
      CODABENCH)
def check_structure(bundle: Bundle) -> Iterator[Problem]:
    """§0: the unpacker needs competition.yaml at the root; §1: it unpacks lists by key."""
    root_yaml = [n for n in bundle.names if n.endswith((".yaml", ".yml")) and "/" not in n]
    if root_yaml != ["competition.yaml"]:
        yield f"root yaml members {root_yaml}, expected exactly competition.yaml", "keep one"
    if bundle.yaml_error:
        yield f"competition.yaml: {bundle.yaml_error}", "fix it"
        return
    if not isinstance(bundle.spec, dict):
        yield "competition.yaml is not a mapping", "fix it"
        return
    comp = bundle.spec
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


@rule("v2-files", "image is a png/jpeg/gif/webp member; terms and every page file exist and are "
      "not empty; pages have a title and known keys (codabench_v2.md §1)",
      "ship the file the key names at that path", CODABENCH)
def check_files(bundle: Bundle) -> Iterator[Problem]:
    """§1: the unpacker reads each named file from the zip ('Unable to find page')."""
    comp, names, read = bundle.comp, bundle.names, bundle.read
    image = comp.get("image")
    if image not in names:
        yield (f"image: {image!r} is not a member ('Unable to find image')",
               "ship a png or jpg logo and name it in image")
    elif not any(read(image).startswith(magic) for magic in IMAGE_MAGIC):
        yield f"image: {image} is not a png, jpeg, gif or webp image", "use a png logo"
    for where, path in [("terms", comp.get("terms"))] + [
            (f"pages[{i}].file", page.get("file")) for i, page in enumerate(items(comp, "pages"))
            if isinstance(page, dict)]:
        if path not in names:
            yield f"{where}: {path!r} is not a member ('Unable to find page')", "ship the file"
        elif not read(path).strip():
            yield f"{where}: {path} is empty, it must contain content", "write the page"
    for i, page in enumerate(items(comp, "pages")):
        yield from _unknown(f"pages[{i}]", page, PAGE_KEYS)
        if isinstance(page, dict) and not page.get("title"):
            yield f"pages[{i}]: no title", "give every page a title"


@rule("v2-tasks", "tasks have distinct indexes, known keys, a scoring_program, and name existing "
      "member zips (codabench_v2.md §1)", "ship the zip at the bundle root", CODABENCH)
def check_tasks(bundle: Bundle) -> Iterator[Problem]:
    """§1: each task's programs and data are datasets made from members ('Cannot find dataset')."""
    comp, names = bundle.comp, bundle.names
    indexes = [task.get("index") for task in items(comp, "tasks") if isinstance(task, dict)]
    if len(indexes) != len(set(map(str, indexes))):
        yield f"tasks: duplicate indexes {indexes}", "give each task its own index"
    for i, task in enumerate(items(comp, "tasks")):
        yield from _unknown(f"tasks[{i}]", task, TASK_KEYS)
        if "scoring_program" not in task:
            yield f"tasks[{i}]: no scoring_program", "name the scoring program zip"
        for key in ("scoring_program", "ingestion_program", "input_data", "reference_data"):
            if key in task and task[key] not in names and not _dataset_key(key, task[key]):
                yield (f"tasks[{i}].{key}: {task[key]!r} is not a member ('Cannot find dataset')",
                       "ship the zip at the bundle root")


def _dataset_key(file_key: str, value) -> bool:
    """Data named by a dataset's UUID key (uploaded apart; §1.2): the site resolves it at upload
    ('Cannot find <type> with key'), the dry run reads its local copy."""
    return file_key in SEPARABLE and is_key(value)


def _date(where: str, value) -> tuple[dt.datetime | None, list[Problem]]:
    if not isinstance(value, str):
        return None, [(f"{where}: found {value!r} ({type(value).__name__}); an unquoted date "
                       "loses its time of day on Codabench", 'quote it: "YYYY-MM-DD HH:MM:SS"')]
    try:
        return dt.datetime.fromisoformat(value), []
    except ValueError:
        return None, [(f"{where}: {value!r} is not a date", 'write "YYYY-MM-DD HH:MM:SS" (UTC)')]


@rule("v2-phases", "phases have known keys, quoted dates, an end when a phase follows, starts 1 s "
      "after the previous end, existing task indexes and member zips (codabench_v2.md §1, §5)",
      'quote dates as "YYYY-MM-DD HH:MM:SS" (UTC) and order the phases', CODABENCH)
def check_phases(bundle: Bundle) -> Iterator[Problem]:
    """§1, §5: phases are ordered by date and may not overlap ('Phases dates conflict')."""
    comp, names = bundle.comp, bundle.names
    phases = [p for p in items(comp, "phases") if isinstance(p, dict)]
    task_indexes = {str(t.get("index")) for t in items(comp, "tasks") if isinstance(t, dict)}
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
                   "an end time because it has a phase after it')",
                   "give every non-last phase an end")
        if previous_end and start and start < previous_end + dt.timedelta(seconds=1):
            yield (f"{where}.start: {start} is not at least 1 s after the previous phase's end "
                   f"{previous_end} ('Phases dates conflict')", "start one second after the end")
        previous_end = end
        if not phase.get("tasks") or any(str(t) not in task_indexes for t in phase["tasks"]):
            yield f"{where}.tasks: {phase.get('tasks')!r} must list existing task indexes", \
                "list the phase's task indexes"
        for key in ("public_data", "starting_kit"):
            if key in phase and phase[key] not in names and not _dataset_key(key, phase[key]):
                yield f"{where}.{key}: {phase[key]!r} is not a member", "ship the zip"
        if phase.get("auto_migrate_to_this_phase") is True and len(phase.get("tasks") or []) > 1:
            yield (f"{where}: auto_migrate_to_this_phase into a phase of "
                   f"{len(phase['tasks'])} tasks: Codabench's migration of submissions into a "
                   "phase of several tasks is broken (codabench issue #2247, open as of "
                   "2026-09)", "leave it off, and ask participants to submit again in this phase")


def _column_problems(where: str, columns: list) -> Iterator[Problem]:
    indexes = [c.get("index") for c in columns if isinstance(c, dict)]
    keys = [c.get("key") for c in columns if isinstance(c, dict)]
    if len(set(indexes)) != len(indexes):
        yield f"{where}: Columns must have unique indexes! {indexes}", "renumber the columns"
    if len(set(keys)) != len(keys):
        yield f"{where}: Columns must have unique keys!", "rename the duplicates"
    if 0 not in indexes:
        yield (f"{where}: no column has index 0 (the ranking column)",
               "give the ranking column index 0")
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
            others = set(indexes) - {column.get("index")}
            if column["computation"] not in COMPUTATIONS \
                    or not isinstance(chosen, list) or not chosen or not set(chosen) <= others:
                yield (f"{label}: computation {column['computation']!r} over {chosen!r} needs a "
                       "list of other columns' indexes", "emit computation_indexes as a YAML list")


@rule("v2-leaderboards", "leaderboards have known keys, short keys and titles, an explicit "
      "submission_rule, columns with unique keys and indexes, an index 0, valid sorting and "
      "computations (codabench_v2.md §1, §5)", "fix the leaderboard entry as described",
      CODABENCH)
def check_leaderboards(bundle: Bundle) -> Iterator[Problem]:
    """§1, §5: keys and titles are length-limited columns; index 0 ranks; 'Add' is manual."""
    comp = bundle.comp
    for i, board in enumerate(items(comp, "leaderboards")):
        where = f"leaderboards[{i}]"
        yield from _unknown(where, board, BOARD_KEYS)
        if not isinstance(board.get("key"), str) or len(board["key"]) > KEY_LIMIT:
            yield f"{where}.key: {board.get('key')!r}, expected at most 36 characters", "shorten it"
        if not isinstance(board.get("title"), str) or len(board["title"]) > BOARD_TITLE_LIMIT:
            yield (f"{where}.title: {board.get('title')!r}, expected at most 64 characters",
                   "shorten it")
        if board.get("submission_rule") not in SUBMISSION_RULES:
            yield (f"{where}.submission_rule: {board.get('submission_rule')!r}; set it explicitly "
                   f"to one of {', '.join(SUBMISSION_RULES)} (the default 'Add' is manual)",
                   "write submission_rule: Force_Last")
        columns = board.get("columns")
        if not isinstance(columns, list) or not columns:
            yield f"{where}: Leaderboards require at least 1 column", "add columns"
        else:
            yield from _column_problems(f"{where}.columns", columns)





@rule("v2-hidden-scores", "figures the scorer keeps for the organizers (the full figures of "
      "tasks scored on a public part) are no leaderboard column, hidden or not, since the "
      "submissions API shows every column to anyone; and the phase hides the scoring output "
      "that holds them (codabench_v2.md §3.9)",
      "remove those columns; set hide_score_output: true on the phase", CODABENCH)
def check_hidden_scores(bundle: Bundle) -> Iterator[Problem]:
    """§3.9: what only organizers may read must not reach a column or a readable output."""
    columns = {column.get("key") for board in items(bundle.comp, "leaderboards")
               if isinstance(board, dict) for column in board.get("columns") or []
               if isinstance(column, dict)}
    tasks = {str(t.get("index")): t for t in items(bundle.comp, "tasks") if isinstance(t, dict)}
    for i, phase in enumerate(items(bundle.comp, "phases")):
        if not isinstance(phase, dict):
            continue
        for index in phase.get("tasks") or []:
            program = tasks.get(str(index), {}).get("scoring_program")
            if program not in bundle.names:
                continue
            try:
                config = bundle.read_json(program, SCORING_CONFIG)
            except CannotCheck as error:
                yield f"phases[{i}]: hidden scores not checked: {error}", "rebuild the bundle"
                continue
            kept = [c.get("key") for c in config.get("columns", [])
                    if c.get("statistic") in worker_rules.private_statistics()]
            public = sorted(set(kept) & columns)
            if public:
                yield (f"leaderboards: columns {public[:3]} would hold figures kept from "
                       f"participants, and {SCORES_API} shows every column to anyone",
                       "remove those columns")
            if kept and not (phase.get("hide_score_output") is True
                             or phase.get("hide_output") is True):
                yield (f"phases[{i}]: its scoring output holds the full figures {kept[:3]} "
                       "(private/) but hide_score_output is not true: participants could "
                       "download them", "set hide_score_output: true")

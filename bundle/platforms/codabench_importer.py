"""Codabench's importer of v1.5 bundles (``V15Unpacker``, src/apps/competitions/unpackers/v1.py
at c7dbc756; codabench_v2.md §2): what a CodaLab v1.5 bundle becomes when it is uploaded to
Codabench, as a ``version: 2`` competition, and every key the importer drops or changes.

``build_bundle.py --check BUNDLE --via-codabench-importer`` writes that competition into a copy
of the bundle and dry-runs it as Codabench's worker would (``bundle/platforms/codabench.py``).
"""
from __future__ import annotations

import datetime as dt
import tempfile
import zipfile
from pathlib import Path

import yaml

from ..dry_run import StepResult

DEFAULT_IMAGE = "codalab/codalab-legacy:py37"       # a blank competition_docker_image
LEADERBOARD_RULE = "Add"        # the importer sets none: the model's default, a manual board
TOP_LEVEL_READ = {"title", "has_registration", "description", "competition_docker_image",
                  "enable_detailed_results", "show_detailed_results_in_submission_panel",
                  "show_detailed_results_in_leaderboard", "auto_run_submissions",
                  "make_programs_available", "make_input_data_available", "end_date", "html",
                  "phases", "leaderboard", "image", "queue"}
PHASE_READ = {"phasenumber", "label", "description", "start_date", "max_submissions_per_day",
              "max_submissions", "auto_migration", "hide_output", "hide_prediction_output",
              "hide_score_output", "execution_time_limit", "public_data", "starting_kit",
              "ingestion_program_only_during_scoring", "is_parallel_parent",
              "parent_phasenumber"}
PROGRAMS_AND_DATA = ("ingestion_program", "input_data", "scoring_program", "reference_data")
COLUMN_READ = {"label", "rank", "sort", "numeric_format", "hidden", "leaderboard"}


def importable(competition: dict) -> bool:
    """The importer takes a yaml whose ``version`` is absent, 1 or 1.5 (codabench_v2.md §2)."""
    return str(competition.get("version", "1")) in ("1", "1.5")


def _written(value) -> dt.datetime:
    """A v1.5 date as CodaLab reads it: with its time of day."""
    return value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))


def _date(value) -> dt.datetime:
    """A v1.5 date as the importer reads it (``get_datetime``, unpackers/utils.py): a YAML
    timestamp is also a ``date``, and a date becomes 00:00 of its day, so the time of day
    is lost; only a quoted string keeps it (our v1.5 yaml writes timestamps, codalab_v1.md
    G8)."""
    if isinstance(value, dt.date):
        return dt.datetime.combine(value, dt.time())
    return dt.datetime.fromisoformat(str(value))


def _start(phase: dict, changes: list[str]) -> str:
    """The phase's start as imported, and the change where its time of day is lost."""
    written, imported_start = _written(phase["start_date"]), _date(phase["start_date"])
    if written != imported_start:
        changes.append(f"phases.{phase['phasenumber']} ({phase.get('label')}): starts "
                       f"{_when(imported_start)}, not {_when(written)}: the importer drops "
                       "the time of day of an unquoted date")
    return _when(imported_start)


def _when(moment: dt.datetime | None) -> str | None:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else None


def imported(v15: dict) -> tuple[dict, list[str]]:
    """(the competition Codabench makes of a v1.5 yaml, in v2 form; what it dropped or changed)"""
    changes = [f"{key}: not read by the importer (dropped)"
               for key in sorted(set(v15) - TOP_LEVEL_READ)]
    image = v15.get("competition_docker_image") or DEFAULT_IMAGE
    if not v15.get("competition_docker_image"):
        changes.append(f"competition_docker_image: blank, so the image is {DEFAULT_IMAGE}")
    pages = dict(v15.get("html") or {})
    tasks, phases = _phases(v15, changes)
    code = [phase["name"] for phase, task in zip(phases, tasks) if task.get("ingestion_program")]
    if code:
        changes.append(
            f"code phases ({', '.join(code)}): Codabench mounts no reference data where the "
            "ingestion runs, so the ingestion signs its run record with the key derived for "
            "this importer, which its program carries; the scorer accepts that key only in "
            "Codabench's container layout (on CodaLab a submission's own command can read the "
            "ingestion program)")
    competition = {
        "version": 2, "title": v15.get("title"), "description": v15.get("description", ""),
        "image": v15.get("image"), "docker_image": image,
        "registration_auto_approve": not v15.get("has_registration", True),
        "enable_detailed_results": v15.get("enable_detailed_results", False),
        "terms": pages.pop("terms", None),
        "pages": [{"title": title, "file": path} for title, path in pages.items()],
        "tasks": tasks, "phases": phases, "leaderboards": [_leaderboard(v15, changes)],
    }
    if v15.get("queue"):
        competition["queue"] = v15["queue"]
    return competition, changes


def _phases(v15: dict, changes: list[str]) -> tuple[list[dict], list[dict]]:
    ordered = sorted((v15.get("phases") or {}).values(), key=lambda p: p["phasenumber"])
    if any(p.get("is_parallel_parent") or p.get("parent_phasenumber") for p in ordered):
        changes.append(f"phases: a v1.8 parent phase, {ordered[0].get('label')}, is dropped")
        ordered = ordered[1:]
    tasks, phases = [], []
    for index, phase in enumerate(ordered):
        label = phase.get("label")
        changes += [f"phases.{phase.get('phasenumber')}.{key}: not read by the importer (dropped)"
                    for key in sorted(set(phase) - PHASE_READ - set(PROGRAMS_AND_DATA))]
        tasks.append({"index": index, "name": f"{label} Task", "description": phase.get("description"),
                      "ingestion_only_during_scoring":
                          phase.get("ingestion_program_only_during_scoring", False),
                      **{key: phase[key] for key in PROGRAMS_AND_DATA if key in phase}})
        phases.append({
            "index": index, "name": label, "description": phase.get("description"),
            "start": _start(phase, changes), "end": _end(v15, ordered, index, changes),
            "tasks": [index],
            "max_submissions_per_day": phase.get("max_submissions_per_day", 5),
            "max_submissions": phase.get("max_submissions", 100),
            "auto_migrate_to_this_phase": phase.get("auto_migration", False),
            **{key: phase.get(key, False) for key in ("hide_output", "hide_prediction_output",
                                                      "hide_score_output")},
            **({"execution_time_limit": phase["execution_time_limit"]}
               if phase.get("execution_time_limit") else {}),
            **{key: phase[key] for key in ("public_data", "starting_kit") if key in phase}})
    return tasks, phases


def _end(v15: dict, ordered: list[dict], index: int, changes: list[str]) -> str | None:
    """A phase ends one day before the next starts (v1 phases have no end): a gap CodaLab does
    not have; the last ends at the competition's end_date. Both at 00:00 (``_date``)."""
    phase = ordered[index]
    if index + 1 < len(ordered):
        next_start = ordered[index + 1]["start_date"]
        end = _date(next_start) - dt.timedelta(days=1)
        changes.append(f"phases.{phase['phasenumber']}: ends {_when(end)}, a day before the "
                       "next phase starts: no submissions in that day (on CodaLab it runs "
                       f"until the next phase starts, {_when(_written(next_start))})")
        return _when(end)
    end = v15.get("end_date")
    if not end or end == "null":
        return None
    if _written(end) != _date(end):
        changes.append(f"phases.{phase['phasenumber']} ({phase.get('label')}): ends "
                       f"{_when(_date(end))}, not {_when(_written(end))} (end_date): the "
                       "importer drops the time of day of an unquoted date")
    return _when(_date(end))


def _leaderboard(v15: dict, changes: list[str]) -> dict:
    board = v15.get("leaderboard") or {}
    declared = board.get("leaderboards") or {}
    key, first = next(iter(declared.items()), ("results", {}))
    if len(declared) > 1:
        changes.append(f"leaderboard.leaderboards: only the first, {key}, is attached")
    # columns sorted by rank (1 where none), the first ranks: its index is 0
    columns = sorted(({"title": name, **spec} for name, spec in (board.get("columns") or {}).items()),
                     key=lambda column: column.get("rank", 1))
    kept = []
    for column in columns:
        if str(column.get("leaderboard", {}).get("label", "")).lower() != \
                str(first.get("label", "")).lower():
            continue
        for field in sorted(set(column) - COLUMN_READ - {"title", "computed", "selection_default"}):
            changes.append(f"leaderboard.columns.{column['title']}.{field}: dropped")
        if "computed" in column:
            changes.append(f"leaderboard.columns.{column['title']}: its computed "
                           f"{column['computed'].get('operation')} is not converted: the column "
                           "shows no figure on Codabench (left out of this dry run)")
            continue
        kept.append({"title": column.get("label", column["title"]), "key": column["title"],
                     "index": len(kept), "sorting": column.get("sort") or "desc",
                     "precision": column.get("numeric_format", 2),
                     "hidden": column.get("hidden", False)})
    ranking = [name for name, spec in (board.get("columns") or {}).items()
               if isinstance(spec, dict) and spec.get("selection_default")]
    if kept and ranking and ranking[0] != kept[0]["key"]:
        changes.append(f"leaderboard: ranks by {kept[0]['key']} (the first column by rank), not "
                       f"by {ranking[0]}, which ranks on CodaLab (selection_default)")
    changes.append(f"leaderboard: submission_rule {LEADERBOARD_RULE} (the importer sets none): "
                   "nothing reaches the leaderboard until each participant puts a submission "
                   "on it, or the organizer sets Force_Last in the competition's editor")
    return {"title": first.get("label", key), "key": key, "submission_rule": LEADERBOARD_RULE,
            "columns": kept}


def converted_bundle(bundle_zip: Path, destination: Path) -> tuple[Path, list[str]]:
    """A copy of the v1.5 bundle holding the competition Codabench makes of it."""
    with zipfile.ZipFile(bundle_zip) as source:
        v15 = yaml.safe_load(source.read("competition.yaml"))
        competition, changes = imported(v15)
        with zipfile.ZipFile(destination, "w", zipfile.ZIP_DEFLATED) as copy:
            for name in source.namelist():
                if name != "competition.yaml":
                    copy.writestr(name, source.read(name))
            copy.writestr("competition.yaml", yaml.safe_dump(competition, sort_keys=False))
    return destination, changes


def dry_run(bundle_zip: Path, python: str, submission_zip: Path | None = None,
            datasets: dict[str, Path] | None = None) -> tuple[list[StepResult], list[str]]:
    """The v1.5 bundle as Codabench imports and runs it: its steps, and the importer's changes.
    The leaderboard step is left out: the imported board is manual (``Add``)."""
    from . import platform
    with tempfile.TemporaryDirectory(prefix="codabench-import-") as work:
        converted, changes = converted_bundle(bundle_zip, Path(work) / "imported.zip")
        steps = platform("codabench").dry_run(converted, python, submission_zip, datasets)
    return [step for step in steps if step.step != "leaderboard"], changes

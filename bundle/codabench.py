"""The Codabench (competition.yaml ``version: 2``) form of a phase: yaml and member layout.

Facts from codabench_v2.md: phases, tasks and leaderboards are lists; dates are quoted UTC
strings (an unquoted timestamp loses its time of day); keys and titles of columns are at
most 36 characters; a column of index 0 ranks; ``submission_rule`` is set explicitly
(``Add``, the default, is manual). Codabench's ``avg`` computation averages values, not
ranks, so CodaLab's average-rank column has no Codabench form: the weighted loss (several
tasks) or the task's primary metric (one task) ranks instead.
"""
from __future__ import annotations

import datetime as dt

import yaml

from .leaderboard import LeaderboardColumn, codabench_columns
from .render import environment, yaml_scalar
from .spec import CompetitionSpec, PhaseSpec

LEADERBOARD_KEY = "results"
SUBMISSION_RULE = "Force_Last"
# The default queue caps execution_time_limit at this (MAX_EXECUTION_TIME_LIMIT, §3.1).
DEFAULT_QUEUE_LIMIT_SECONDS = 600
# A phase without execution_time_limit gets this (codabench_v2.md §3.1): another fact that
# happens to be the same number.
DEFAULT_EXECUTION_TIME_LIMIT_SECONDS = 600
PAGE_FILES = {"Overview": "pages/overview.html", "Evaluation": "pages/evaluation.html",
              "Data": "pages/data.html", "Starting kit": "pages/starting_kit.html"}
TERMS_FILE = "pages/terms.html"


def quoted(value) -> str:
    """A YAML scalar for Codabench: strings and dates quoted (dates as UTC text)."""
    return yaml_scalar(value, quote_dates=True)


def _phase_end(spec: CompetitionSpec, phases: list[PhaseSpec], index: int):
    """Codabench phases must not overlap, and one may not end as the next starts (§1.4): a
    phase ends a second before the next opens; the last at the competition's end date."""
    if index + 1 < len(phases):
        return phases[index + 1].start - dt.timedelta(seconds=1)
    return spec.end_date


def _phase_fields(spec, phases, index, files, hide_scores: bool,
                  task_indexes: list[int]) -> list[tuple[str, str]]:
    phase = phases[index]
    fields = [("name", phase.label), ("description", phase.description), ("start", phase.start)]
    end = _phase_end(spec, phases, index)
    if end:
        fields.append(("end", end))
    fields += [("max_submissions", phase.max_submissions),
               ("max_submissions_per_day", phase.max_submissions_per_day),
               ("execution_time_limit", phase.execution_time_limit),
               ("public_data", files["public_data"]), ("starting_kit", files["starting_kit"])]
    if hide_scores:      # its scoring output holds the full figures in private/ (§3.9)
        fields.append(("hide_score_output", True))
    return [(k, quoted(v)) for k, v in fields] + [
        ("tasks", "[" + ", ".join(map(str, task_indexes)) + "]")]


PROGRAM_KEYS = ("scoring_program", "reference_data", "ingestion_program", "input_data")


def _tasks(phases: list[PhaseSpec], files: list[dict]) -> tuple[list[dict], list[list[int]]]:
    """The Codabench tasks, and each phase's task indexes: one Codabench task per phase, which
    runs and scores all its tasks in one run. With several, a submission would become one child
    per task, and the leaderboard's Force_Last rule would keep one child of each submission
    (§3.10; spec key codabench_tasks)."""
    tasks = [{"index": index, "fields": [
        ("name", quoted(f"{phase.label} tasks")),
        ("description", quoted("All tasks of the phase, scored together")),
        *((key, quoted(phase_files[key])) for key in PROGRAM_KEYS if key in phase_files)]}
        for index, (phase, phase_files) in enumerate(zip(phases, files))]
    return tasks, [[task["index"]] for task in tasks]


def competition_yaml_v2(spec: CompetitionSpec, phases: list[PhaseSpec], files: list[dict],
                        columns: list[LeaderboardColumn], logo: str,
                        hide_scores: list[bool] | None = None) -> str:
    """The version 2 yaml of a competition holding ``phases``, each with its own Codabench
    task; every phase shares ``leaderboards[0]`` (§1.4). ``hide_scores``: per phase, whether
    its scoring output holds full figures only organizers may read."""
    hide_scores = hide_scores or [False] * len(phases)
    top_level = [("title", spec.title), ("description", spec.description), ("image", logo),
                 ("terms", TERMS_FILE), ("docker_image", spec.docker_image),
                 ("registration_auto_approve", False), ("enable_detailed_results", True),
                 ("make_programs_available", False), ("make_input_data_available", False),
                 ("competition_type", "competition")]
    if spec.codabench_queue:
        top_level.append(("queue", spec.codabench_queue))
    tasks, indexes = _tasks(phases, files)
    contacts = [o["contact"] for o in spec.organizers if "@" in o.get("contact", "")]
    if contacts:
        top_level.append(("contact_email", contacts[0]))
    context = {
        "spec_name": spec.path.name,
        "top_level": [(k, quoted(v)) for k, v in top_level],
        "pages": [{"title": quoted(title), "file": quoted(path)} for title, path in PAGE_FILES.items()],
        "tasks": tasks,
        "phases": [{"index": index, "fields": _phase_fields(spec, phases, index, phase_files,
                                                            hide_scores[index], indexes[index])}
                   for index, phase_files in enumerate(files)],
        "leaderboards": [{"title": quoted("Results"), "key": quoted(LEADERBOARD_KEY),
                          "submission_rule": quoted(SUBMISSION_RULE),
                          "columns": [{"index": index, "fields": [
                              ("title", quoted(c.label)), ("key", quoted(c.key)),
                              ("sorting", quoted(c.sort)), ("precision", quoted(c.numeric_format))]}
                              for index, c in enumerate(codabench_columns(columns))]}],
    }
    text = environment().get_template("competition_v2.yaml.j2").render(context)
    parsed = yaml.safe_load(text)
    assert parsed["version"] == 2 and all(isinstance(p["start"], str) for p in parsed["phases"])
    return text

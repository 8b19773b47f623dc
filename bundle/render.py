"""Render the HTML pages and the kit's guide from Jinja2 templates (StrictUndefined); each
platform writes its competition.yaml (``bundle/platforms/``).

All decisions happen here, in code that builds the templates' context: what a page says, what
a table row holds. Templates only loop.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import jinja2

from ingestion_program.ingest.config import MEMORY_RULE_TEXT
from kinds.kind import kind, scoring_runtime
from runtime import failures
from scoring_program.ranks import DEFAULT_ALPHA, DEFAULT_REPLICATES, DEFAULT_SEED, REFERENCE
from scoring_program.scorer.score_types import AGGREGATE, AVERAGE_RANK

from . import competition_rules, platforms
from .data_examples import data_page_tasks
from .leaderboard import LeaderboardColumn, aggregate_description
from .markdown_text import markdown_html
from .phase_plan import PhasePlan, local_scores
from .programs import DEFAULT_LIMITS
from .spec import CompetitionSpec, PhaseSpec

TEMPLATES = Path(__file__).resolve().parent / "templates"
PAGES = ("overview", "evaluation", "data", "terms", "starting_kit")


def when(moment: dt.datetime) -> str:
    """A date as pages show it. Both platforms take the yaml's naive dates as UTC; seconds are
    shown when set, so that a page never rounds a deadline such as 23:59:59 away."""
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC" if moment.second else "%Y-%m-%d %H:%M UTC")


def environment(kind_templates: Path | None = None) -> jinja2.Environment:
    """Core templates, and the kind's (``kind_*.html.j2``) where a page includes them."""
    folders = [TEMPLATES] + ([kind_templates] if kind_templates else [])
    return jinja2.Environment(loader=jinja2.FileSystemLoader(folders),
                              undefined=jinja2.StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True, keep_trailing_newline=True,
                              autoescape=jinja2.select_autoescape(["html.j2"]))


def logo_member(spec: CompetitionSpec) -> str:
    return "logo" + spec.logo.suffix.lower()


def _timeline(spec: CompetitionSpec, phases: list[PhaseSpec]) -> list[dict]:
    """Every phase of the spec with its opening and closing dates, each closing as its own
    competition's yaml says (``_closes``). Where the spec's phases are separate competitions
    (layout per_phase, one phase each), this one's are marked and the others named as
    separate."""
    mine = {phase.key: index for index, phase in enumerate(phases)}
    separate = len(mine) < len(spec.phases)
    return [{"label": phases[mine[p.key]].label if p.key in mine else p.label,
             "submission": "code submissions" if p.code_submission else "prediction files",
             "start": when(p.start),
             "end": _closes(spec, phases, mine[p.key]) if p.key in mine
             else _closes(spec, [p], 0),
             "marker": (" (this competition)" if p.key in mine else " (a separate competition)")
             if separate else "",
             "description": p.description} for p in spec.phases]


def _closes(spec: CompetitionSpec, phases: list[PhaseSpec], index: int) -> str:
    """A phase ends when the competition's next phase opens, the last at the end date."""
    if index + 1 < len(phases):
        return when(phases[index + 1].start) + f" (when {phases[index + 1].label} opens)"
    return when(spec.end_date) if spec.end_date else "no end date is set"


def _weights(plan: PhasePlan) -> str:
    """The weights of the metrics this phase's tasks have, as the weighted loss uses them."""
    types = kind(plan.kind).task_types
    metrics = {t.name for task in plan.tasks for t in types[task.task_type].score_types}
    weights = {name: weight for name, weight in plan.weights.items() if name in metrics}
    weighted = [f"{name} {weight:g}" for name, weight in weights.items() if weight]
    unweighted = [name for name, weight in weights.items() if not weight]
    return ", ".join(weighted) + (f" (reported, not weighted: {', '.join(unweighted)})"
                                  if unweighted else "")


def _phase_facts(spec: CompetitionSpec, phases: list[PhaseSpec], index: int,
                 plan: PhasePlan, limit_note: str = "") -> list[tuple[str, str]]:
    """Dates and limits of one phase, worded from the same values the competition.yaml is
    written from, so that the pages cannot tell participants other numbers than the site uses.
    ``limit_note``: what the platform's worker makes of the time limit, if it differs."""
    phase = phases[index]
    facts = [("Phase", phase.label), ("Opens", when(phase.start)),
             ("Closes", _closes(spec, phases, index))]
    facts.append(("Submissions", f"at most {phase.max_submissions} in total and "
                                 f"{phase.max_submissions_per_day} per day"))
    if phase.code_submission:
        runs = "the run of your code (all tasks) and its scoring are limited separately"
        facts.append(("Execution time limit",
                      f"{phase.execution_time_limit} s for each program run: {runs}"
                      + (f"; {limit_note}" if limit_note else "")))
        facts.append(("Training time budget per task", "; ".join(filter(None, [
            ", ".join(f"{task.name} {task.budget_text()}" for task in plan.tasks),
            *competition_rules.budget_facts(plan.tasks)]))))
    else:
        facts.append(("Execution time limit", f"{phase.execution_time_limit} s for the scoring of "
                      "each submission"))
    facts += competition_rules.phase_facts(plan)
    facts.append(("Metric weights in the weighted loss", _weights(plan)))
    return facts


# What the ingestion enforces on each platform (docs/sandbox.md); one text for both
# platforms' pages, so it names the difference instead of promising the stronger one.
ISOLATION_LINES = (
    "on both platforms a seccomp filter refuses every socket except local Unix ones and any "
    "signal or trace aimed at the ingestion program; where the worker's kernel offers Landlock, "
    "your code can write only in its working folder, read only the system, Python and its own "
    "task's files, and cannot open TCP connections",
    "on CodaLab your code also runs as a separate unprivileged user in an empty network "
    "namespace; Codabench drops every privilege, so neither is possible there, and its isolation "
    "rests on the seccomp filter and Landlock alone: on a worker without Landlock (a kernel "
    "older than 5.13, or one that does not enable it) your code could reach the key that signs "
    "its run, so there the ingestion runs nothing and the submission fails without counting "
    "toward the limits (the organizers must move the competition to another worker); every "
    "process of a task must install the same protections, or it is stopped before your code "
    "starts",
    "a submission whose metadata file holds a command: is refused and fails: both platforms "
    "start such a command in a container of its own, beside the ingestion and outside this "
    "sandbox (with the network and the output folder), so nothing of it is run; keep only "
    "description: (the kit's submission_zip.py writes it so)",
    "the log of every submission lists each protection as active or NOT ACTIVE for that run; "
    "do not rely on the network or on multiprocessing; threads work (on CodaLab, where your "
    f"code runs as a user of its own, its processes and threads together are limited to "
    f"{DEFAULT_LIMITS['processes']}); memfd_create and SysV shared memory are refused, and no "
    "process of yours can start a session or process group of its own",
    f"at most {DEFAULT_LIMITS['max_entries']:,} files and folders in the working folder")


def budget_lines(spec: CompetitionSpec, code: bool) -> list[str]:
    sandbox = spec.sandbox
    if not code:
        return ["this phase scores uploaded prediction files: no training runs on the platform"]
    return [f"each task's budget is wall-clock time from the call of your function; after it, "
            f"SIGTERM goes to all your processes and SIGKILL {sandbox['grace_seconds']:g} s "
            "later; your last checkpoint is scored",
            f"before that call, the task's start-up (starting Python, importing your module, "
            f"loading the task's data) has an allowance of {sandbox['startup_seconds']:g} s of "
            "its own, not taken from the budget; a start-up past it fails the task; the log "
            "and the run record show both (training used of the budget, start-up used of the "
            "allowance), so work done at import time instead of in your function is visible "
            "to the organizers",
            f"memory: {sandbox['memory_gib']:g} GiB of "
            f"{MEMORY_RULE_TEXT[sandbox['memory_limit']]}",
            f"files up to {sandbox['max_file_mib']:g} MiB, {sandbox['disk_mib']:g} MiB of disk "
            "in all (working folder and scratch folders); nothing your code writes outlives its "
            "task, and only validated predictions are kept",
            *ISOLATION_LINES,
            "the machine (CPU model, cores, memory, GPU) is printed at the top of the "
            "ingestion log of every submission"]


def _phase_context(spec, phases, index, plan, baseline_results, limit_note: str = "") -> dict:
    """What the pages and the phase's kit guide show of one phase of this competition;
    ``kind`` for the kind's parts."""
    phase = phases[index]
    definition = kind(plan.kind)
    kind_context = definition.page_context(plan, phase, baseline_results)
    return {"label": phase.label, "code_submission": phase.code_submission,
            "facts": _phase_facts(spec, phases, index, plan, limit_note),
            "budget_lines": budget_lines(spec, phase.code_submission),
            "steps": _kit_steps(phase.code_submission, definition.EXAMPLE_BASELINE,
                                local_scores(spec, plan), competition_rules.kit_steps(
                                    plan, SAMPLE_FOLDERS[phase.code_submission])),
            "sample": SAMPLE_FOLDERS[phase.code_submission],
            "example_baseline": definition.EXAMPLE_BASELINE,
            # the kit ships the table the overview shows, and only that one
            "results_file": RESULTS_FILE if kind_context["baselines"]["rows"] else "",
            "kind": kind_context}


def _ranking_text(columns: list[LeaderboardColumn], aggregate: str) -> str:
    ranking = next(c for c in columns if c.selection_default)
    how = (f"{AVERAGE_RANK.description.lower()}" if ranking.computed else
           f"the {ranking.label} column")
    return (f"Ranking: {how}. {AGGREGATE.label.capitalize()}: "
            f"{aggregate[:1].lower()}{aggregate[1:]}.")


def _standard_error_text(kind_name: str) -> str:
    """What the evaluation page says of the ± in the detailed results: the kind's method."""
    return ("The detailed results give every figure with its standard error (±): how far it "
            "would move with another draw of what it was measured on, here "
            f"{scoring_runtime(kind_name).STANDARD_ERROR}. A gap between two submissions "
            "smaller than about two standard errors can be chance.")


def _rank_intervals(plans: list[PhasePlan]) -> list[str]:
    """The evaluation page's account of the rank intervals and tie groups the organizers
    publish after the final phase (``scoring_program/ranks.py``, whose defaults it states)."""
    across_tasks = (
        " Where the scores carry no standard errors, entries are compared across the tasks "
        "instead, by an exact sign-flip test of every pair with Holm's correction: the "
        "intervals are then about tasks like these, not these tasks' scores, and with too few "
        "tasks for any such test to reach the level none are published."
        if any(len(plan.tasks) > 1 for plan in plans) else "")
    return [
        "After the final phase the organizers can publish, next to the final leaderboard, each "
        "entry's rank interval and tie group, computed from that leaderboard by the scoring "
        "program's ranks.py.",
        f"A rank interval [a, b] says that the entry's rank, as the scores would put it without "
        f"measurement noise, lies between a and b; the intervals of all entries hold together "
        f"with probability at least {1 - DEFAULT_ALPHA:.0%}. A tie group holds the entries "
        "that cannot be told apart from the group's best entry at that level: within a group, "
        "a higher place on the leaderboard is no evidence of a better method.",
        f"Method: from each score's standard error, simultaneous confidence intervals for every "
        f"pairwise difference, with a max-|t| critical value over all pairs ({REFERENCE}), "
        f"from {DEFAULT_REPLICATES} seeded draws (seed {DEFAULT_SEED}, unless the published "
        f"table states another); an average rank is bounded through each column's pairs, "
        f"which holds where entries tie exactly.{across_tasks}",
    ]


def failure_rows(any_code: bool) -> list[dict]:
    """The categories a penalised task can be put in, as the log and the detailed results
    name them (runtime/failures.py); without a code phase, those of prediction files only."""
    return [{"title": failure.title, "meaning": failure.meaning, "remedy": failure.remedy}
            for failure in failures.FAILURES
            if any_code or failure.code in failures.RESULTS_FAILURES]


def page_contexts(spec: CompetitionSpec, phases: list[PhaseSpec], plans: list[PhasePlan],
                  columns: list[LeaderboardColumn], title: str,
                  baseline_results: dict | None,
                  platform: str = platforms.DEFAULT_PLATFORM) -> dict[str, dict]:
    """Each page's context: the competition's facts, and per phase (``phases``) its facts
    and, under ``kind``, what the kind's templates show for it. The leaderboard columns and
    the ranking are the platform's (Codabench has no average-rank column)."""
    site = platforms.platform(platform)
    ranking_note = site.ranking_note(columns)
    hidden_figures = site.hidden_figures_text if any(c.hidden for c in columns) else ""
    columns = [column for column in site.leaderboard_columns(columns) if not column.hidden]
    per_phase = [_phase_context(spec, phases, index, plan, baseline_results,
                                site.execution_limit_text)
                 for index, plan in enumerate(plans)]
    shared = ("All phases share this one leaderboard (both platforms attach one leaderboard to "
              "every phase); a phase leaves the columns of the others' tasks empty."
              if len(plans) > 1 else "")
    merged = dataclasses.replace(plans[-1], tasks=tuple(
        {task.name: task for plan in plans for task in plan.tasks}.values()))
    common = {"title": title, "phases": per_phase,
              # what the kind says once for the whole competition (metrics of all its tasks)
              "competition_kind": kind(merged.kind).page_context(merged, phases[-1], None),
              "any_code": any(phase.code_submission for phase in phases),
              "code_zip_rule": site.code_zip_rule,
              "prediction_files_in_code_phase": site.prediction_files_in_code_phase}
    return {
        "overview": {**common, "heading": spec.title,
                     "intro": markdown_html(spec.pages["overview"]),
                     "timeline": _timeline(spec, phases),
                     "end": when(spec.end_date) if spec.end_date else None,
                     "organizers": [o["name"] + (f" ({o['contact']})" if o.get("contact") else "")
                                    for o in spec.organizers]},
        "evaluation": {**common, "heading": "Evaluation",
                       "failures": failure_rows(common["any_code"]),
                       "references_kept": (site.worker_references_text
                                           if "reference_data" in spec.on_worker else ""),
                       "standard_errors": _standard_error_text(spec.kind),
                       "columns": [{"label": c.label, "key": c.key, "sort": c.sort,
                                    "description": c.description} for c in columns],
                       "ranking": " ".join(filter(None, [
                           _ranking_text(columns, aggregate_description(plans[0])),
                           ranking_note, shared,
                           hidden_figures])),
                       "rank_intervals": _rank_intervals(plans)},
        # the figures and example images of each phase's public training data
        "data": {**common, "heading": "Data", "training": data_page_tasks(plans)},
        "terms": {**common, "heading": "Terms and conditions",
                  "terms": markdown_html(spec.pages["terms"])},
        "starting_kit": {**common, "heading": "Starting kit"},
    }


# The kit's tool that turns code into a results phase's prediction files (starting_kit/).
PREDICTIONS_TOOL = "predictions_zip.py"
# The sample submission of a code phase's kit and of a results phase's (folder and zip).
SAMPLE_FOLDERS = {True: "sample_code_submission", False: "sample_result_submission"}
# The baselines' results, in a kit whose pages show them.
RESULTS_FILE = "baseline_results.json"
GUIDE = "README.md.j2"


SCORES_TEXT = {"references": "prints your scores",
               "stand_in": "prints your scores on the kit's public stand-in (this phase's "
                           "references are hidden; the output says which data)",
               "none": "checks that it runs in time and returns valid predictions (this "
                       "phase's references are hidden and the kit has no public stand-in)"}


def _kit_steps(code: bool, example: str, scores: str, rules_steps: list[dict] = ()
               ) -> list[dict]:
    """The commands of the starting kit page and guide, run from the unzipped kit's folder,
    each as written there (on the kit's own sample and ``example`` baseline): a ``command``
    (or None) and what it does. ``scores``: what a local run scores on
    (``phase_plan.local_scores``); ``rules_steps``: the competition rules' commands
    (``competition_rules.kit_steps``), before the upload."""
    flag, name = ("--code", "submission.zip") if code else ("--results", "predictions.zip")
    own_code = [] if code else [
        {"command": f"python {PREDICTIONS_TOOL} baselines/{example} {name}",
         "does": "or, from your code (a folder, a code zip or a baseline file, here a "
                 "baseline), runs it on this phase's input data with the kit's ingestion "
                 "program, as a code phase runs it, and zips the prediction files it writes: "
                 "one .npy array per task under the same name, exactly what a code phase "
                 "scores, which this phase reads too"}]
    checked = ("checks that zip as this site would take it (the references being hidden, "
               "prediction files are not scored here)" if scores != "references" and not code
               else f"runs that zip as this site does, {SCORES_TEXT[scores]} or what the site "
                    "would refuse")
    stand_in_run = [] if code or scores != "stand_in" else [
        {"command": f"python run_local.py --code baselines/{example}",
         "does": f"runs code (a folder, a zip or, here, a baseline file) and "
                 f"{SCORES_TEXT[scores]}"}]
    return [{"command": f"python submission_zip.py {SAMPLE_FOLDERS[code]}/ {name}",
             "does": "makes the zip as the platform needs it (files at its root"
                     + (", a description-only metadata file)" if code else ")")
                     + "; here of the kit's sample, put your folder in its place"},
            *own_code,
            {"command": f"python run_local.py {flag} {name}",
             "does": f"{checked}, and exits non-zero if anything is wrong"},
            *stand_in_run,
            *rules_steps,
            {"command": None, "does": f"upload {name} on the Participate tab"}]


def render_pages(contexts: dict[str, dict], kind_templates: Path) -> dict[str, str]:
    env = environment(kind_templates)
    return {f"{page}.html": env.get_template(f"{page}.html.j2").render(context)
            for page, context in contexts.items()}


def guide_contexts(contexts: dict[str, dict]) -> list[dict]:
    """Each phase's starting-kit guide: the evaluation page's context (ranking, columns) with
    that phase's own as ``phase``, so that the guide says what the pages say."""
    evaluation = contexts["evaluation"]
    return [{**evaluation, "phase": phase} for phase in evaluation["phases"]]


def render_guide(context: dict, kit_templates: Path) -> str:
    """The kit's README.md: the kind's ``README.md.j2``, which includes the core's
    ``guide_*.md.j2`` parts (plain text: markdown is not escaped)."""
    return environment(kit_templates).get_template(GUIDE).render(context)

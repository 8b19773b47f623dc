"""Render competition.yaml and the HTML pages from Jinja2 templates (StrictUndefined).

All decisions happen here, in code that builds the templates' context: which keys a phase
gets, how a value is written as YAML, what a table row says. Templates only loop.
"""
from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import jinja2
import yaml
from markupsafe import Markup, escape

from scoring_program.scorer.score_types import AGGREGATE, AVERAGE_RANK, SCORE_TYPES

from .leaderboard import LeaderboardColumn
from .phase_plan import PhasePlan
from .spec import CompetitionSpec, PhaseSpec

TEMPLATES = Path(__file__).resolve().parent / "templates"
PAGES = ("overview", "evaluation", "data", "terms", "starting_kit")
LEADERBOARD_LABEL = "Results"
# Metric definitions as participants read them. They are plain text (Unicode symbols, never HTML
# entities) in which `_{...}` marks a subscript; formula_html turns them into markup. Writing them
# as HTML source here and handing that to an autoescaping template is what once showed
# participants "&Sigma;<sub>i</sub>" literally: the template escaped the markup a second time.
FORMULAS = {
    "agreement": "(1/N) Σ_{i} 1[argmax_{c} p(c|x_{i}) = argmax_{c} p_{HMC}(c|x_{i})]; "
                 "ties go to the lowest class index",
    "total_variation": "(1/N) Σ_{i} ½ Σ_{c} |p(c|x_{i}) - p_{HMC}(c|x_{i})|",
    "w2": "(1/N) Σ_{i} W_{2}(your samples of y_{i}, HMC samples of y_{i}), with W_{2} the root mean "
          "squared gap between sorted samples (quantile matching for unequal counts)",
    "w1": "(1/N) Σ_{i} W_{1}, the mean absolute gap between sorted samples: what the 2021 "
          "competition's code computed under the name W2",
}
_SUBSCRIPT = re.compile(r"_\{([^{}]*)\}")


def formula_html(text: str) -> Markup:
    """A FORMULAS entry as HTML: every piece of text escaped exactly once, `_{x}` as <sub>x</sub>.

    The result is Markup, so the autoescaping template inserts it as it is; any other string
    in a page context stays plain text and is escaped by the template (once).
    """
    pieces = _SUBSCRIPT.split(text)          # text, subscript, text, subscript, ..., text
    return Markup("").join(Markup("<sub>{}</sub>").format(piece) if odd else escape(piece)
                           for odd, piece in ((i % 2 == 1, p) for i, p in enumerate(pieces)))


def when(moment: dt.datetime) -> str:
    """A date as pages show it. Both platforms take the yaml's naive dates as UTC; seconds are
    shown when set, so that a page never rounds a deadline such as 23:59:59 away."""
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC" if moment.second else "%Y-%m-%d %H:%M UTC")


def environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                              undefined=jinja2.StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True, keep_trailing_newline=True,
                              autoescape=jinja2.select_autoescape(["html.j2"]))


def yaml_scalar(value, quote_dates: bool = False) -> str:
    """A value as the platform's YAML loader must read it: strings quoted; dates unquoted for
    CodaLab (G8: a quoted date fails there), quoted UTC text for Codabench (an unquoted one
    loses its time of day there)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (dt.date, dt.datetime)):
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        return json.dumps(text) if quote_dates else text
    return json.dumps(str(value), ensure_ascii=False)     # a valid YAML double-quoted string


def _phase_fields(phase: PhaseSpec, files: dict[str, str]) -> list[tuple[str, str]]:
    fields = {"phasenumber": None, "label": phase.label, "description": phase.description,
              "start_date": phase.start, "max_submissions": phase.max_submissions,
              "max_submissions_per_day": phase.max_submissions_per_day,
              "is_scoring_only": not phase.code_submission,
              "execution_time_limit": phase.execution_time_limit,
              "color": "blue" if phase.code_submission else "green", **files}
    return [(key, yaml_scalar(value)) for key, value in fields.items() if key != "phasenumber"]


def _column_fields(column: LeaderboardColumn, rank: int) -> list[tuple[str, str]]:
    fields = [("label", yaml_scalar(column.label)), ("rank", yaml_scalar(rank)),
              ("sort", yaml_scalar(column.sort)),
              ("numeric_format", yaml_scalar(column.numeric_format))]
    if column.selection_default:
        fields.append(("selection_default", yaml_scalar(column.selection_default)))
    if column.computed:     # fields must be one comma-separated string (a list crashes the site)
        fields.append(("computed", "{operation: Avg, fields: "
                       + json.dumps(",".join(column.computed_fields)) + "}"))
    return fields


def logo_member(spec: CompetitionSpec) -> str:
    return "logo" + spec.logo.suffix.lower()


def competition_yaml(spec: CompetitionSpec, phase: PhaseSpec, files: dict[str, str],
                     columns: list[LeaderboardColumn], title: str) -> str:
    top_level = [("title", title), ("description", spec.description),
                 ("competition_docker_image", spec.docker_image), ("has_registration", True),
                 ("force_submission_to_leaderboard", True), ("enable_detailed_results", True)]
    if spec.end_date:
        top_level.append(("end_date", spec.end_date))
    if spec.logo:
        top_level.append(("image", logo_member(spec)))
    context = {
        "spec_name": spec.path.name,
        "top_level": [(key, yaml_scalar(value)) for key, value in top_level],
        "html": [(page, yaml_scalar(f"{page}.html")) for page in PAGES],
        "phases": [{"number": 1, "fields": [("phasenumber", "1")] + _phase_fields(phase, files)}],
        "leaderboard_label": yaml_scalar(LEADERBOARD_LABEL),
        "columns": [{"key": c.key, "fields": _column_fields(c, rank)}
                    for rank, c in enumerate(columns, start=1)],
    }
    text = environment().get_template("competition.yaml.j2").render(context)
    _verify_yaml(text, title, phase, columns)
    return text


def _verify_yaml(text: str, title: str, phase: PhaseSpec, columns) -> None:
    """Read back what we wrote the way the site will, and compare with what we meant."""
    parsed = yaml.safe_load(text)
    assert parsed["title"] == title, "title did not survive YAML"
    assert parsed["phases"][1]["start_date"] == phase.start, "start date not read as a datetime"
    assert list(parsed["leaderboard"]["columns"]) == [c.key for c in columns]


def _task_rows(plan: PhasePlan, phase: PhaseSpec) -> list[dict]:
    rows = []
    for task in plan.tasks:
        d = task.declaration
        rows.append({
            "name": task.name, "phase": phase.label, "kind": d["kind"],
            "sizes": f"{d['n_train']} / {d['n_test']}",
            "predict": (f"{d['num_classes']} class probabilities" if d["kind"] == "classification"
                        else f"{d['num_samples']} samples of y"),
            "model": f"{'-'.join(map(str, d['model']['layer_sizes']))} tanh MLP "
                     f"({d['model']['num_parameters']})",
            "prior_variance": f"{d['prior']['variance']:g}",
            "budget": f"{task.budget_seconds:g} s" if phase.code_submission else "-",
            "summary": d.get("summary", "")})
    return rows


def _timeline(spec: CompetitionSpec, phase: PhaseSpec) -> list[dict]:
    """Every phase of the spec with its opening date; the bundle's own phase is marked, since
    each bundle is its own competition on the site and the others are separate uploads."""
    return [{"label": p.label if p.key != phase.key else phase.label,
             "kind": "code submissions" if p.code_submission else "prediction files",
             "start": when(p.start), "marker": " (this competition)" if p.key == phase.key else "",
             "description": p.description} for p in spec.phases]


def _phase_facts(spec: CompetitionSpec, phase: PhaseSpec, plan: PhasePlan) -> list[tuple[str, str]]:
    """Dates and limits of this bundle's phase, worded from the same values the competition.yaml
    is written from, so that the pages cannot tell participants other numbers than the site uses."""
    facts = [("Phase", phase.label), ("Opens", when(phase.start)),
             ("Closes", when(spec.end_date) if spec.end_date else "no end date is set")]
    facts.append(("Submissions", f"at most {phase.max_submissions} in total and "
                                 f"{phase.max_submissions_per_day} per day"))
    if phase.code_submission:
        facts.append(("Execution time limit", f"{phase.execution_time_limit} s for each program "
                      "run: the run of your code (all tasks) and its scoring are limited separately"))
        facts.append(("Training time budget per task",
                      ", ".join(f"{task.name} {task.budget_seconds:g} s" for task in plan.tasks)))
    else:
        facts.append(("Execution time limit", f"{phase.execution_time_limit} s for the scoring of "
                      "each submission"))
    return facts


def _formats(kinds: set[str], public_references: bool) -> list[str]:
    """The file formats a participant of this phase meets: only its kinds of task, and the
    reference layouts only where the references can be downloaded."""
    lines = []
    if "classification" in kinds:
        lines.append("class probabilities: N rows of C numbers, space or comma separated "
                     "(np.savetxt writes the canonical form), a header row allowed, or .npy")
    if "regression" in kinds:
        lines.append("regression samples: N rows of S samples of y" + (
            "; the references are stored transposed, S x N, as in the 2021 competition"
            if public_references else ""))
    if public_references:
        lines.append("per-chain references (.npy): (chains, N, C) or (chains, S, N)")
    return lines


def _baseline_table(plan: PhasePlan, results: dict | None):
    if not results:
        return "Baseline results are not available for these tasks.", [], []
    methods = results["methods"]
    header = ["task", "metric", *methods.values(), "exact-posterior expectation"]
    rows = []
    for task in plan.tasks:
        entry = results["tasks"].get(task.name)
        if not entry:
            continue
        for metric, expected in entry["exact_posterior_expectation"].items():
            cells = []
            for method in methods:
                value = entry["methods"][method]["metrics"][metric]
                cells.append(f"{value['value']:.3f}" + (f" ± {value['chain_std']:.3f}"
                                                        if value["chain_std"] else ""))
            rows.append([task.name, metric, *cells, f"{expected['value']:.3f}"])
    budgets = sorted({results["budgets"][task.name] for task in plan.tasks
                      if task.name in results.get("budgets", {})})
    trained = (f"trained with a {budgets[0]:g} s budget per task" if len(budgets) == 1 else
               "trained with each task's budget")
    if not plan.code_submission:
        trained += " on the organizers' machine (this phase takes prediction files)"
    note = (f"Baselines of the starting kit, {trained}; "
            "± is the standard deviation over HMC chains; the exact-posterior expectation is what "
            "an exact sampler's submission is expected to score against this finite HMC reference "
            "(not a bound: a submission may land on either side of it by chance).")
    return note, header, rows


# What the ingestion enforces on each platform (docs/sandbox.md); one text for both
# platforms' pages, so it names the difference instead of promising the stronger one.
ISOLATION_LINES = (
    "on both platforms a seccomp filter refuses every socket except local Unix ones and any "
    "signal or trace aimed at the ingestion program; where the worker's kernel offers Landlock, "
    "your code can write only in its working folder, read only the system, Python and its own "
    "task's files, and cannot open TCP connections",
    "on CodaLab your code also runs as a separate unprivileged user in an empty network "
    "namespace; Codabench drops every privilege, so neither is possible there, and its isolation "
    "rests on the seccomp filter and Landlock alone",
    "the log of every submission lists each protection as active or NOT ACTIVE for that run; "
    "do not rely on the network or on multiprocessing (threads work)")


def page_contexts(spec: CompetitionSpec, phase: PhaseSpec, plan: PhasePlan,
                  columns: list[LeaderboardColumn], title: str,
                  baseline_results: dict | None) -> dict[str, dict]:
    note, header, rows = _baseline_table(plan, baseline_results)
    kinds = {task.kind for task in plan.tasks}
    metrics = [{"name": t.label, "formula": formula_html(FORMULAS[t.name]),
                "better": "higher" if t.higher_is_better else "lower"}
               for kind in sorted(kinds) for t in SCORE_TYPES[kind]]
    sandbox = spec.sandbox
    budget_lines = ([f"each task's budget is wall-clock time; after it, SIGTERM goes to all your "
                     f"processes and SIGKILL {sandbox['grace_seconds']:g} s later; your last "
                     "checkpoint is scored",
                     f"memory {sandbox['memory_gib']:g} GiB (address space), files up to "
                     f"{sandbox['max_file_mib']:g} MiB, {sandbox['disk_mib']:g} MiB of disk in all "
                     "(working folder and scratch folders); nothing your code writes outlives its "
                     "task, and only validated predictions are kept",
                     *ISOLATION_LINES,
                     "the machine (CPU model, cores, memory, GPU) is printed at the top of the "
                     "ingestion log of every submission"]
                    if phase.code_submission else
                    ["this phase scores uploaded prediction files: no training runs on the platform"])
    facts = _phase_facts(spec, phase, plan)
    common = {"title": title}
    data_rows = []
    for task in plan.tasks:
        d = task.declaration
        width = d.get("num_classes") or d.get("num_samples")
        predictive_shape = (f"{d['n_test']} x {width}" if d["kind"] == "classification"
                            else f"{width} x {d['n_test']} (samples x points)")
        public = "public data" + (", input data" if phase.code_submission else "")
        data_rows.append({"task": task.name, "file": f"{task.name}.npz",
                          "content": "x_train, y_train, x_test, y_test (y_test all zeros)",
                          "shape": f"x: {d['n_train']}+{d['n_test']} x {'x'.join(map(str, d['input_shape']))}",
                          "where": public})
        data_rows.append({"task": task.name, "file": task.files.declaration.name,
                          "content": "the declaration: model, likelihood, prior, split, test blocks",
                          "shape": "JSON", "where": "public data"})
        if phase.code_submission:
            # The scorer's copy is hidden; its file name and format are of no use to anyone.
            data_rows.append({"task": task.name, "file": "(not downloadable)",
                              "content": "HMC predictive (model average of all chains)",
                              "shape": predictive_shape, "where": "hidden, read by the scoring program"})
            continue
        # A results phase publishes its references (bundle/phase_data.py, stage_public_data).
        data_rows.append({"task": task.name, "file": task.files.reference.name,
                          "content": "HMC predictive (model average of all chains)",
                          "shape": predictive_shape, "where": "public data"})
        if task.files.chain_reference.is_file():
            chains = task.files.chain_reference
            data_rows.append({"task": task.name, "file": chains.name,
                              "content": "each HMC chain's own predictive",
                              "shape": ("chains x " + predictive_shape if d["kind"] == "classification"
                                        else f"chains x {width} x {d['n_test']}"),
                              "where": "public data"})
    submission_text = (
        "A zip with, at its root, submission.py defining predict(task, x_train, y_train, x_test, "
        "checkpoint), and a file named metadata holding only a description line "
        "(description: my submission). The platform runs predict once per task under the task's "
        "budget. Without that metadata file CodaLab takes the zip for prediction files and never "
        "runs your code; a command line in it would be started next to ours, so it is refused. "
        "submission_zip.py writes it for you."
        if phase.code_submission else
        "A zip with one prediction file per task at its root: <task>_probs.csv (N rows of class "
        "probabilities) or <task>_samples.csv (N rows of samples of y), and no file named "
        "metadata (with one, Codabench scores nothing).")
    example = (
        "def predict(task, x_train, y_train, x_test, checkpoint):\n"
        "    ...  # task.time_left() seconds; checkpoint(predictions) any time\n"
        "    return predictions  # (task.n_test, task.num_classes) or (task.n_test, task.num_samples)"
        if phase.code_submission else
        _results_example(plan.tasks[0]))
    return {
        "overview": {**common, "heading": spec.title, "intro": spec.pages["overview"],
                     "tasks": _task_rows(plan, phase),
                     "timeline": _timeline(spec, phase),
                     "end": when(spec.end_date) if spec.end_date else None, "facts": facts,
                     "baseline_note": note, "baseline_header": header, "baseline_rows": rows,
                     "organizers": [o["name"] + (f" ({o['contact']})" if o.get("contact") else "")
                                    for o in spec.organizers]},
        "evaluation": {**common, "heading": "Evaluation", "metrics": metrics,
                       "error_bars": "Each score is also computed with each HMC chain alone as the "
                                     "target; the standard deviation over chains is its error bar "
                                     "(the leaderboard's sd columns, keys ending in _std). The "
                                     "exact-posterior expectation, in the "
                                     "detailed results, is the score an exact sampler's submission "
                                     "(the exact model average; for regression as many exact draws as "
                                     "a submission holds) is expected to get: the reference is a finite "
                                     "HMC run, so even the exact posterior does not score perfectly. It "
                                     "is estimated by scoring half of the HMC chains against the other "
                                     "half, rescaled to the submission's and the reference's sizes by "
                                     "the central-limit rate. It is an expectation, not a bound.",
                       "penalties": "A task whose predictions are missing, malformed or invalid, or "
                                    "whose training run failed or timed out without a checkpoint, gets "
                                    "the worst value of every metric (agreement 0, total variation 1, "
                                    "Wasserstein distances 10 reference standard deviations; its sd "
                                    "the metric's whole range, its training time the task's budget); "
                                    "the reason is in the detailed results. Other tasks are scored "
                                    "normally, and a failed task never fails the whole submission. "
                                    + ("Only predictions the ingestion program wrote are scored: a "
                                       "zip of prediction files, which CodaLab takes a zip without "
                                       "its metadata file for, is penalised on every task."
                                       if phase.code_submission else ""),
                       "budget_lines": budget_lines, "facts": facts,
                       "columns": [{"label": c.label, "key": c.key, "sort": c.sort,
                                    "description": c.description} for c in columns],
                       "ranking": f"Ranking: {AVERAGE_RANK.description.lower()} when the phase has "
                                  "several tasks, otherwise that task's primary metric. "
                                  f"{AGGREGATE.label.capitalize()}: "
                                  f"{AGGREGATE.description[:1].lower()}{AGGREGATE.description[1:]}."},
        "data": {**common, "heading": "Data",
                 "intro": "Inputs are standardised with training statistics only; test labels are "
                          "never given (y_test is all zeros). Each task's declaration "
                          "(<task>_task.json in the public data) states the model, likelihood, "
                          "prior, split and test blocks.",
                 "files": data_rows,
                 "formats": _formats(kinds, public_references=not phase.code_submission)},
        "terms": {**common, "heading": "Terms and conditions", "terms": spec.pages["terms"]},
        "starting_kit": {**common, "heading": "Starting kit", "submission_text": submission_text,
                         "example": example,
                         "steps": _kit_steps(phase.code_submission)},
    }


def _results_example(task) -> str:
    if task.kind == "classification":
        return (f"import numpy as np\nnp.savetxt('{task.name}_probs.csv', probabilities)"
                "  # N x C, rows sum to 1")
    return f"import numpy as np\nnp.savetxt('{task.name}_samples.csv', samples)  # N x S"


def _kit_steps(code: bool) -> list[str]:
    """The starting kit page's commands, run from the unzipped kit's folder."""
    folder, flag, name = (("my_submission/", "--code", "submission.zip") if code
                          else ("my_predictions/", "--results", "predictions.zip"))
    return [f"python submission_zip.py {folder} {name} makes the zip as the platform needs it "
            "(files at its root" + (", a description-only metadata file)" if code else ")"),
            f"python run_local.py {flag} {name} runs that zip as this site does, prints your "
            "scores or what the site would refuse, and exits non-zero if anything is wrong",
            f"upload {name} on the Participate tab"]


def render_pages(contexts: dict[str, dict]) -> dict[str, str]:
    env = environment()
    return {f"{page}.html": env.get_template(f"{page}.html.j2").render(context)
            for page, context in contexts.items()}

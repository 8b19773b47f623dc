"""The scoring report: one self-contained HTML page with every task's numbers and plots.

Opened directly from the CodaLab submission's output, not through its page sanitiser, so
an inline <style> is fine; it references nothing external and has no scripts. The same
results always give byte-identical HTML (no timestamps). The page, the summary and each
task's status and penalty are the core's; what a task's section shows is its kind's.
"""
from __future__ import annotations

from html import escape

from runtime import failures
from runtime.report import cell, metric_types, number, standard_error, table
from runtime.scoring import TaskResult

from .score_types import AGGREGATE, TRAIN_SECONDS

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
       color: #222; background: #fff; margin: 0; line-height: 1.45; }
main { max-width: 1000px; margin: 0 auto; padding: 1.5rem 1rem 3rem; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; }
h2 { font-size: 1.25rem; margin: 0 0 .5rem; }
h3 { font-size: 1rem; margin: 1.2rem 0 .4rem; }
section { border-top: 1px solid #ddd; margin-top: 1.8rem; padding-top: 1.2rem; }
table { border-collapse: collapse; margin: .5rem 0; font-size: .92rem; }
th, td { border: 1px solid #ddd; padding: .3rem .6rem; text-align: left; vertical-align: top; }
th { background: #f4f5f7; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.extra td { color: #555; font-size: .85rem; }
abbr { text-decoration: underline dotted; cursor: help; }
.muted, figcaption { color: #666; font-size: .85rem; }
.status { display: inline-block; padding: 0 .45rem; border-radius: .6rem; font-size: .8rem; }
.scored { background: #e3f1e6; color: #1d5c2a; }
.penalised { background: #fbe3e1; color: #8a1f12; }
.cap { margin-left: .3rem; font-size: .75rem; color: #8a4b00; }
.penalty { border-left: 4px solid #c0392b; background: #fdf0ee; padding: .6rem .9rem;
           margin: .6rem 0; }
.penalty pre { white-space: pre-wrap; font-size: .8rem; margin: .4rem 0; }
.problems { border-left: 4px solid #d68910; background: #fef6e7; padding: .4rem .9rem; }
.aggregate { font-size: 1.1rem; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(340px, 1fr));
         gap: 1rem; margin-top: .8rem; }
figure { margin: 0; }
"""


def _status(result: TaskResult) -> str:
    """Scored, or the penalty's category (the failure's title says more than "penalised")."""
    if not result.penalised:
        return '<span class="status scored">scored</span>'
    return f'<span class="status penalised">{escape(failures.title(result.failure))}</span>'


def _value(result: TaskResult, score) -> str:
    """"label value ± se", the standard error left out where there is none."""
    metric = result.metrics[score.name]
    error = standard_error(result, metric, score.precision)
    return (f"{escape(score.label)} {number(metric.value, score.precision)}"
            + (f" {error}" if error.startswith("±") else ""))


def _summary(results: list[TaskResult]) -> str:
    """One row per task: status, its metric values with their standard errors, and training
    time."""
    rows = []
    for result in results:
        values = " · ".join(_value(result, score) for score in metric_types(result))
        name = escape(result.task.name)
        rows.append("<tr>" + "".join([
            cell(f'<a href="#task-{name}">{name}</a>'), cell(escape(result.task.task_type.name)),
            cell(_status(result)), cell(values or "–"),
            cell(number(result.train_seconds, TRAIN_SECONDS.precision), True)]) + "</tr>")
    return table(["task", "type", "status", "metrics", escape(TRAIN_SECONDS.label)], rows)


def _task_section(result: TaskResult, scoring) -> str:
    task = result.task
    parts = [f'<section id="task-{escape(task.name)}">',
             f"<h2>{escape(task.name)} {_status(result)}</h2>",
             f'<p class="muted">{escape(scoring.task_summary(result))}'
             + (f", trained in {number(result.train_seconds, TRAIN_SECONDS.precision)} s"
                if result.train_seconds is not None else "")
             + (f" (budget {number(task.budget_seconds, TRAIN_SECONDS.precision)} s)"
                if task.budget_seconds is not None else "") + "</p>"]
    if result.penalised:
        parts.append(_penalty_box(result))
    if result.notes:
        parts.append("<ul>" + "".join(f"<li>{escape(n)}</li>" for n in result.notes) + "</ul>")
    parts.append(scoring.report_section(result))
    return "\n".join(parts + ["</section>"])


def _penalty_box(result: TaskResult) -> str:
    """The category and its remedy first, then the reason and their own traceback."""
    failure = failures.BY_CODE[result.failure]
    trace = (f"<pre>{escape(result.traceback)}</pre>" if result.traceback else "")
    return (f'<div class="penalty"><strong>{escape(failure.title)}:</strong> '
            f"{escape(result.penalty)}{trace}<br>{escape(failure.remedy)}"
            "<br><span class=\"muted\">The task was penalised with the worst value of "
            "every leaderboard column: each metric, its sd (the metric's whole range) and, "
            "in a code phase, the whole budget as training time.</span></div>")


def render_report(results: list[TaskResult], scoring, *, phase: str,
                  weighted_loss: float | None, problems: list[str],
                  heading: str = "Scoring report") -> str:
    """The whole report as one HTML5 document; ``scoring`` is the record of the kind's
    runtime scoring module; ``heading``: what the report is (a rule's: a smoke test)."""
    head = [f"<h1>{escape(heading)}: {escape(phase)}</h1>",
            f'<p class="muted">{escape(scoring.REPORT_INTRO)} ± is one standard error: how far '
            f"a figure would move with another draw of what it was measured on, here "
            f"{escape(scoring.STANDARD_ERROR)}. A gap between two submissions smaller than about "
            "two standard errors can be chance.</p>"]
    if weighted_loss is not None:
        head.append(f'<p class="aggregate"><abbr title="{escape(AGGREGATE.description)}">'
                    f"{escape(AGGREGATE.label)}</abbr> ↓ "
                    f"<strong>{number(weighted_loss, AGGREGATE.precision)}</strong></p>")
    if problems:
        head.append('<div class="problems"><h2>Problems</h2><ul>'
                    + "".join(f"<li>{escape(p)}</li>" for p in problems) + "</ul></div>")
    body = ["<header>", *head, _summary(results), "</header>",
            *(_task_section(result, scoring) for result in results)]
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(heading)}: {escape(phase)}</title>", f"<style>{STYLE}</style>", "</head>",
        "<body>", "<main>", *body, "</main>", "</body>", "</html>", ""])

"""The scoring report: one self-contained HTML page with every task's numbers and plots.

Opened directly from the CodaLab submission's output, not through its page sanitiser, so
an inline <style> is fine; it references nothing external and has no scripts. The same
results always give byte-identical HTML (no timestamps). The page, the summary and each
task's status and penalty are the core's; what a task's section shows is its kind's.

A submission that fails (the scorer exits non-zero) gets a page too, on every path: the
platforms show the detailed results of a failed submission, often its only explanation
(Codabench shows "Child task failed or non-zero return code" and may hide the logs). It
states the failure first (``SubmissionFailed``): the reason, each category with its remedy,
and where their code raised, its own innermost line; never a reference's path or content.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from html import escape
from pathlib import PurePosixPath

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
.failed { border-left: 6px solid #c0392b; background: #fdf0ee; padding: .6rem 1rem;
          margin: 1rem 0; }
.failed pre { white-space: pre-wrap; font-size: .85rem; margin: .3rem 0; }
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


@dataclass(frozen=True)
class SubmissionFailed:
    """Why the submission failed, as its page states it."""
    reason: str                                 # one sentence, shown as it is
    categories: tuple[failures.Failure, ...]    # what happened and what to do, each once
    tracebacks: tuple[tuple[str, str], ...] = ()    # (task, their own frames' traceback)


# Failures that are not the submission's: the page says who must act, and no more (the
# error's text may name a reference file or quote it).
ORGANIZERS_FAULT = failures.Failure(
    "organizers_fault", "The competition's scoring is broken",
    "The scoring program found the competition's reference data or settings unusable, so it "
    "could not score any submission.",
    "Nothing to change in your submission: tell the organizers, who must fix the competition, "
    "then submit again.")
INTERNAL_FAULT = failures.Failure(
    "internal_error", "Internal error of the scoring program",
    "The scoring program stopped on an error of its own before it finished scoring.",
    "Tell the organizers which submission it was, so that they can read the scoring log and "
    "fix the program, then submit again.")
RULE_FAULT = failures.Failure(
    "rule_failed", "Stopped by a rule of the phase",
    "Your code did not meet a condition the phase sets before it scores a submission.",
    "Read the reason above; the Evaluation page states the phase's rules.")
FAILED_NOTE = ("A failed submission is not ranked and counts toward no submission limit, so "
               "you may submit again.")

# A traceback's frame line, as Python prints it: '  File "path", line 12, in name'.
FRAME_LINE = re.compile(r'File "(?P<file>[^"]*)", line \d+')


def their_lines(trace: str) -> tuple[str, ...]:
    """Their file and line, and the exception: the innermost frame in the folder of the
    traceback's first one (the runtime's frames are cut from it, so the first is their entry
    file's; a library's frames lie elsewhere), then the last line, the exception's."""
    lines = [line.strip() for line in trace.splitlines() if line.strip()]
    frames = [(PurePosixPath(match["file"]).parent, line) for line in lines
              for match in [FRAME_LINE.match(line)] if match]
    if not frames:
        return tuple(lines[-1:])
    folder = frames[0][0]
    own = [line for parent, line in frames if parent == folder or folder in parent.parents]
    return (own[-1], lines[-1]) if own[-1] != lines[-1] else (lines[-1],)


def _by_line(tracebacks) -> dict[tuple[str, ...], list[str]]:
    """The tasks whose code raised at the same line with the same exception, together."""
    grouped: dict[tuple[str, ...], list[str]] = {}
    for task, trace in tracebacks:
        grouped.setdefault(their_lines(trace), []).append(task)
    return grouped


def _failure_box(failed: SubmissionFailed) -> str:
    """The failure first: the reason, each category's meaning and remedy, their own line."""
    parts = ['<div class="failed" id="failure">', "<h2>Your submission failed</h2>",
             f"<p><strong>Why:</strong> {escape(_sentence(failed.reason))}</p>"]
    parts += [f"<p><strong>{escape(failure.title)}:</strong> {escape(failure.meaning)}<br>"
              f"What to do: {escape(failure.remedy)}</p>" for failure in failed.categories]
    for lines, tasks in _by_line(failed.tracebacks).items():
        parts.append(f"<p>{'Tasks' if len(tasks) > 1 else 'Task'} {escape(', '.join(tasks))} "
                     f"raised, in your code:</p><pre>{escape(chr(10).join(lines))}</pre>")
    parts.append(f'<p class="muted">{escape(FAILED_NOTE)}</p></div>')
    return "\n".join(parts)


def _sentence(text: str) -> str:
    text = text.strip()
    return text + ("" if text.endswith((".", "!", "?")) else ".")


def render_failure(failed: SubmissionFailed, phase: str | None) -> str:
    """The page of a submission that failed before any task was scored; ``phase`` None:
    the scorer could not read which (its config is broken)."""
    title = f"Scoring report: {phase}" if phase else "Scoring report"
    return _document(title, [f"<h1>{escape(title)}</h1>", _failure_box(failed)])


def _document(title: str, body: list[str]) -> str:
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>", f"<style>{STYLE}</style>", "</head>",
        "<body>", "<main>", *body, "</main>", "</body>", "</html>", ""])


def render_report(results: list[TaskResult], scoring, *, phase: str,
                  weighted_loss: float | None, problems: list[str],
                  heading: str = "Scoring report", failed: SubmissionFailed | None = None
                  ) -> str:
    """The whole report as one HTML5 document; ``scoring`` is the record of the kind's
    runtime scoring module; ``heading``: what the report is (a rule's: a smoke test);
    ``failed``: why the submission failed, shown first (no task could be scored)."""
    failure = [_failure_box(failed)] if failed else []
    head = [f"<h1>{escape(heading)}: {escape(phase)}</h1>", *failure,
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
    return _document(f"{heading}: {phase}", [
        "<header>", *head, _summary(results), "</header>",
        *(_task_section(result, scoring) for result in results)])

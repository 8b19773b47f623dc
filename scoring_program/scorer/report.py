"""The scoring report: one self-contained HTML page with every task's numbers and plots.

Opened directly from the CodaLab submission's output, not through its page sanitiser, so
an inline <style> is fine; it references nothing external and has no scripts. The same
results always give byte-identical HTML (no timestamps).
"""
from __future__ import annotations

import math
from html import escape

import numpy as np

from . import svg_charts
from .results import BlockResult, Curves, MetricResult, TaskResult
from .score_types import AGGREGATE, TRAIN_SECONDS, ScoreType, score_type

DASH = "–"
EXPECTATION_NOTE = (
    "± std over HMC chains: the spread of the metric when the submission is scored against each "
    "HMC chain alone. Exact-posterior expectation: the score an exact sampler's submission "
    "(the exact model average; for regression as many exact draws as a submission holds) is "
    "expected to get against this reference, which is itself a finite HMC run, so even the "
    "exact posterior does not score perfectly. Estimated by scoring half of the HMC chains "
    "against the other half and rescaling to the submission's and the reference's sizes; ± is "
    "its spread over the ways to split the chains, roughly how far an exact submission lands "
    "from it by chance. A submission can land on either side of it; well beyond it on the good "
    "side is luck or a match to HMC's own Monte Carlo noise, not a better posterior.")

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
.problems { border-left: 4px solid #d68910; background: #fef6e7; padding: .4rem .9rem; }
.aggregate { font-size: 1.1rem; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(340px, 1fr));
         gap: 1rem; margin-top: .8rem; }
figure { margin: 0; }
"""


def _number(value: float | None, precision: int) -> str:
    if value is None:
        return DASH
    return f"{value:.{precision}f}" if math.isfinite(value) else str(value)


def _cell(text: str, numeric: bool = False) -> str:
    return f'<td class="num">{text}</td>' if numeric else f"<td>{text}</td>"


def _metric_types(result: TaskResult) -> list[ScoreType]:
    """The task's metrics in declaration order, so row order never depends on dict order."""
    known = [name for name in result.task.metric_names if name in result.metrics]
    return [score_type(name) for name in known + sorted(set(result.metrics) - set(known))]


def _label(kind: ScoreType) -> str:
    arrow = "↑" if kind.higher_is_better else "↓"
    better = "higher" if kind.higher_is_better else "lower"
    return (f'<abbr title="{escape(kind.description)}; {better} is better">'
            f"{escape(kind.label)}</abbr> {arrow}")


def _status(result: TaskResult) -> str:
    word = "penalised" if result.penalised else "scored"
    return f'<span class="status {word}">{word}</span>'


def _summary(results: list[TaskResult]) -> str:
    """One row per task: status, its metric values and training time."""
    rows = []
    for result in results:
        values = " · ".join(
            f"{escape(kind.label)} {_number(result.metrics[kind.name].value, kind.precision)}"
            for kind in _metric_types(result))
        name = escape(result.task.name)
        rows.append("<tr>" + "".join([
            _cell(f'<a href="#task-{name}">{name}</a>'), _cell(escape(result.task.kind)),
            _cell(_status(result)), _cell(values or DASH),
            _cell(_number(result.train_seconds, TRAIN_SECONDS.precision), True)]) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("task", "kind", "status", "metrics",
                                             escape(TRAIN_SECONDS.label)))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _metric_row(kind: ScoreType, metric: MetricResult) -> str:
    value = _number(metric.value, kind.precision)
    if metric.capped:
        value += ('<span class="cap" title="the raw distance exceeded the cap and was clipped">'
                  "capped</span>")
    spread = DASH if metric.chain_std is None else "± " + _number(metric.chain_std, kind.precision)
    expected = _number(metric.expected, kind.precision)
    if metric.expected is not None and metric.expected_spread is not None:
        expected += " ± " + _number(metric.expected_spread, kind.precision)
    return ("<tr>" + _cell(_label(kind)) + _cell(value, True) + _cell(spread, True)
            + _cell(expected, True) + "</tr>")


def _metrics_table(result: TaskResult) -> str:
    """Metric values with their chain spread and exact-posterior expectation, then the extras."""
    rows = [_metric_row(kind, result.metrics[kind.name]) for kind in _metric_types(result)]
    rows += [f'<tr class="extra">{_cell(escape(name.replace("_", " ")))}'
             f'{_cell(_number(value, 4), True)}{_cell(DASH, True)}{_cell("not ranked")}</tr>'
             for name, value in result.extras.items()]
    head = "".join(f"<th>{h}</th>" for h in
                   ("metric", "value", "± std over HMC chains", "exact-posterior expectation"))
    return (f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f'<p class="muted">{escape(EXPECTATION_NOTE)}</p>')


def _block_section(result: TaskResult) -> str:
    """Per-metric bar charts over the shift blocks, and the table of block metrics."""
    blocks: tuple[BlockResult, ...] = result.blocks
    kinds = [kind for kind in _metric_types(result)
             if any(kind.name in block.metrics for block in blocks)]
    names = [block.name for block in blocks]
    charts = []
    for kind in kinds:
        values = np.array([block.metrics.get(kind.name, np.nan) for block in blocks], float)
        bounded = (kind.minimum, kind.maximum) if kind.maximum is not None else None
        charts.append(svg_charts.bar_chart(names, [("submission", values)], kind.label,
                                           f"{kind.label} per block", y_range=bounded))
    head = "".join(["<th>block</th><th>size</th>"] + [f"<th>{_label(k)}</th>" for k in kinds])
    rows = ["<tr>" + _cell(escape(block.name)) + _cell(str(block.size), True) + "".join(
        _cell(_number(block.metrics.get(k.name), k.precision), True) for k in kinds) + "</tr>"
        for block in blocks]
    return (f"<h3>Per block</h3><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>{_grid(charts)}")


def _grid(charts: list[str]) -> str:
    return ('<div class="plots">' + "".join(f"<figure>{c}</figure>" for c in charts) + "</div>"
            if charts else "")


def _curve_charts(curves: Curves) -> list[str]:
    """The spread histogram and the reliability diagram or coverage curve."""
    charts = [svg_charts.overlaid_histograms(
        [("HMC", curves.reference_spread), ("submission", curves.submission_spread)], 30,
        curves.spread_label, curves.spread_label[:1].upper() + curves.spread_label[1:])]
    if curves.submission_reliability is not None:
        pairs = (("HMC", curves.reference_reliability),
                 ("submission", curves.submission_reliability))
        series = [(label, r[0], r[1]) for label, r in pairs if r is not None]
        charts.append(svg_charts.line_chart(series, "mean confidence", "accuracy",
                                            "Reliability diagram", diagonal="perfect calibration"))
    if curves.coverage_levels is not None:
        series = [(label, curves.coverage_levels, c) for label, c in
                  (("HMC", curves.reference_coverage), ("submission", curves.submission_coverage))
                  if c is not None]
        charts.append(svg_charts.line_chart(series, "nominal coverage", "empirical coverage",
                                            "Coverage of central intervals", diagonal="nominal"))
    return charts


def _task_section(result: TaskResult) -> str:
    task = result.task
    parts = [f'<section id="task-{escape(task.name)}">',
             f"<h2>{escape(task.name)} {_status(result)}</h2>",
             f'<p class="muted">{escape(task.kind)}, {task.n_test} test points'
             + (f", trained in {_number(result.train_seconds, TRAIN_SECONDS.precision)} s"
                if result.train_seconds is not None else "")
             + (f" (budget {_number(task.budget_seconds, TRAIN_SECONDS.precision)} s)"
                if task.budget_seconds is not None else "") + "</p>"]
    if result.penalised:
        parts.append(f'<div class="penalty"><strong>Penalised:</strong> {escape(result.penalty)}'
                     "<br><span class=\"muted\">The task got the worst value of every "
                     "leaderboard column: each metric, its sd (the metric's whole range) and, "
                     "in a code phase, the whole budget as training time.</span></div>")
    parts.append(_metrics_table(result))
    if result.notes:
        parts.append("<ul>" + "".join(f"<li>{escape(n)}</li>" for n in result.notes) + "</ul>")
    if not result.penalised:
        parts.append(_grid(_curve_charts(result.curves) if result.curves is not None else []))
        parts.append(_block_section(result) if len(result.blocks) > 1 else "")
    return "\n".join(parts + ["</section>"])


def render_report(results: list[TaskResult], *, phase: str, weighted_loss: float | None,
                  problems: list[str]) -> str:
    """The whole report as one HTML5 document."""
    head = [f"<h1>Scoring report: {escape(phase)}</h1>",
            '<p class="muted">Submitted predictive distributions compared with Hamiltonian '
            "Monte Carlo (HMC) reference distributions, one section per task.</p>"]
    if weighted_loss is not None:
        head.append(f'<p class="aggregate"><abbr title="{escape(AGGREGATE.description)}">'
                    f"{escape(AGGREGATE.label)}</abbr> ↓ "
                    f"<strong>{_number(weighted_loss, AGGREGATE.precision)}</strong></p>")
    if problems:
        head.append('<div class="problems"><h2>Problems</h2><ul>'
                    + "".join(f"<li>{escape(p)}</li>" for p in problems) + "</ul></div>")
    body = ["<header>", *head, _summary(results), "</header>",
            *(_task_section(result) for result in results)]
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Scoring report: {escape(phase)}</title>", f"<style>{STYLE}</style>", "</head>",
        "<body>", "<main>", *body, "</main>", "</body>", "</html>", ""])

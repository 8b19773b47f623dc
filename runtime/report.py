"""HTML pieces that the scoring report and a kind's report section share.

Every text goes through ``escape`` exactly once, here or in the caller; numbers are formatted
with the score type's precision, so the report shows what the leaderboard shows.
"""
from __future__ import annotations

import math
from html import escape

from .scoring import MetricResult, ScoreType, TaskResult

DASH = "–"


def number(value: float | None, precision: int) -> str:
    if value is None:
        return DASH
    return f"{value:.{precision}f}" if math.isfinite(value) else str(value)


def cell(text: str, numeric: bool = False) -> str:
    return f'<td class="num">{text}</td>' if numeric else f"<td>{text}</td>"


def table(header: list[str], rows: list[str]) -> str:
    """``header`` cells are HTML (escaped by the caller); ``rows`` are whole <tr> elements."""
    head = "".join(f"<th>{h}</th>" for h in header)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def grid(charts: list[str]) -> str:
    return ('<div class="plots">' + "".join(f"<figure>{c}</figure>" for c in charts) + "</div>"
            if charts else "")


def metric_label(score: ScoreType) -> str:
    arrow = "↑" if score.higher_is_better else "↓"
    better = "higher" if score.higher_is_better else "lower"
    return (f'<abbr title="{escape(score.description)}; {better} is better">'
            f"{escape(score.label)}</abbr> {arrow}")


def metric_types(result: TaskResult) -> list[ScoreType]:
    """The task's metrics in declaration order, so row order never depends on dict order."""
    return [t for t in result.task.score_types if t.name in result.metrics]


def capped_mark(capped: bool) -> str:
    return ('<span class="cap" title="the raw value exceeded the cap and was clipped">capped</span>'
            if capped else "")


def standard_error(result: TaskResult, metric: MetricResult, precision: int) -> str:
    """"± se" in the metric's precision (one more decimal, so a small one does not read as 0);
    a dash where none was measured, or the task was penalised (its values are not measured)."""
    if result.penalised or metric.se is None:
        return DASH
    return "± " + number(metric.se, precision + 1)


STANDARD_ERROR_HEADER = '<abbr title="how far the value would move with another draw of what ' \
                        'it was measured on">standard error</abbr>'


def metrics_table(result: TaskResult, extra_rows: list[str] = ()) -> str:
    """The task's leaderboard metrics, each with its standard error, then ``extra_rows``
    (whole <tr> elements of three cells: figures shown, not ranked)."""
    rows = ["<tr>" + cell(metric_label(t))
            + cell(number(result.metrics[t.name].value, t.precision), True)
            + cell(standard_error(result, result.metrics[t.name], t.precision), True) + "</tr>"
            for t in metric_types(result)]
    return table(["metric", "value", STANDARD_ERROR_HEADER], rows + list(extra_rows))

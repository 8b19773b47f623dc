"""HTML pieces that the scoring report and a kind's report section share.

Every text goes through ``escape`` exactly once, here or in the caller; numbers are formatted
with the score type's precision, so the report shows what the leaderboard shows.
"""
from __future__ import annotations

import math
from html import escape

from .scoring import ScoreType, TaskResult

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

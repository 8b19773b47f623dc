"""The BDL section of a task in the scoring report: metrics with their spread over HMC chains
and the exact-posterior expectation, the predictive-spread histogram, the reliability diagram
or HMC's coverage curve, and the per-block metrics; what it draws of the hidden test rows is
bounded by ``disclosure``."""
from __future__ import annotations

import math
from html import escape

import numpy as np

from runtime import svg_charts
from runtime.report import (DASH, STANDARD_ERROR_HEADER, capped_mark, cell, grid, metric_label,
                            metric_types, number, standard_error, table)
from runtime import disclosure
from runtime.scoring import MetricResult, ScoreType, TaskResult

REFERENCE = "HMC"
REPORT_INTRO = ("Submitted predictive distributions compared with Hamiltonian Monte Carlo (HMC) "
                "reference distributions, one section per task.")
EXPECTATION_NOTE = (
    "± std over HMC chains: the spread of the metric when the submission is scored against each "
    "HMC chain alone. Exact-posterior expectation: the score an exact sampler's submission "
    "(the exact model average; for regression as many exact draws as a submission holds) is "
    "expected to get against this reference, which is itself a finite HMC run, so even the "
    "exact posterior does not score perfectly. Estimated from the reference's own draws, cut "
    "into batches: in each of 400 random halves, the reference is scored against half of its "
    "batches (regression: draws of one half against draws of the other). The range after it "
    "holds an exact submission's score 95% of the time (a simulation test checks that rate); "
    "where every half scored the same, no range is given, since none was seen. "
    "A submission can land on either side of the value; well beyond the range on the good side "
    "is luck or a match to HMC's own Monte Carlo noise, not a better posterior.")


def decimals_showing(size, precision: int, significant: int = 1) -> int:
    """Decimals enough that ``size`` (a range's width, a standard error) shows ``significant``
    figures: at least ``precision``, at most 8 (a TV of 0.0012 is not 0.001 ± 0.000)."""
    if not size or not size > 0:
        return precision
    return max(precision, min(8, significant - 1 - math.floor(math.log10(size))))


def expectation_text(value, interval, precision: int) -> str:
    """The expected value and its 95% range, with enough decimals that the range's width
    shows two figures."""
    if value is None:
        return DASH
    decimals = precision
    if interval and interval[1] == interval[0]:
        # Every half scored the same (an agreement of 1 on a small test set): a range of
        # width 0 would read as certainty; it only says no half differed.
        return f"{value:.{decimals}f} (every half: {interval[0]:.{decimals}f}; no spread seen)"
    if interval:
        decimals = decimals_showing(interval[1] - interval[0], precision, significant=2)
        return (f"{value:.{decimals}f} (95%: {interval[0]:.{decimals}f} to "
                f"{interval[1]:.{decimals}f})")
    return f"{value:.{decimals}f}"


def _metric_row(result: TaskResult, score: ScoreType, metric: MetricResult) -> str:
    value = number(metric.value, score.precision) + capped_mark(metric.capped)
    spread = DASH if metric.std is None else "± " + number(metric.std, score.precision)
    expected = expectation_text(metric.details.get("exact_posterior_expectation"),
                                metric.details.get("exact_posterior_expectation_interval"),
                                score.precision)
    return ("<tr>" + cell(metric_label(score)) + cell(value, True)
            + cell(standard_error(result, metric, score.precision), True) + cell(spread, True)
            + cell(expected, True) + "</tr>")


def _metrics_table(result: TaskResult) -> str:
    rows = [_metric_row(result, score, result.metrics[score.name])
            for score in metric_types(result)]
    rows += [f'<tr class="extra">{cell(escape(name.replace("_", " ")))}'
             f'{cell(number(value, 4), True)}{cell(DASH, True)}{cell(DASH, True)}'
             f'{cell("not ranked")}</tr>' for name, value in result.extras.items()]
    header = ["metric", "value", STANDARD_ERROR_HEADER, "± std over HMC chains",
              "exact-posterior expectation"]
    return table(header, rows) + f'<p class="muted">{escape(EXPECTATION_NOTE)}</p>'


HIDDEN_ROWS_NOTE = (
    f"The test rows' labels and targets are hidden. {disclosure.COARSE_NOTE} The reliability "
    f"diagram groups the rows by confidence (equal confidences stay together); the coverage "
    f"curve is HMC's alone, since a submission's own would tell where single rows' targets "
    f"lie (your 90% coverage is in the table above). Blocks of fewer than "
    f"{disclosure.MIN_ROWS} rows are listed without their figures.")


def _curve_charts(curves) -> list[str]:
    """The spread histogram and the reliability diagram or HMC's coverage curve.

    The histogram stays: its reference side is the distribution of HMC's spreads over the
    test rows, the same for every submission and tied to no row."""
    charts = [svg_charts.overlaid_histograms(
        [(REFERENCE, curves.reference_spread), ("submission", curves.submission_spread)], 30,
        curves.spread_label, curves.spread_label[:1].upper() + curves.spread_label[1:],
        reference=REFERENCE)]
    if curves.submission_reliability is not None:
        pairs = ((REFERENCE, curves.reference_reliability),
                 ("submission", curves.submission_reliability))
        series = [(label, r[0], r[1]) for label, r in pairs if r is not None and len(r[0])]
        if series:
            charts.append(svg_charts.line_chart(
                series, "mean confidence", "accuracy",
                "Reliability diagram (groups of rows)", diagonal="perfect calibration",
                reference=REFERENCE))
    if curves.coverage_levels is not None and curves.reference_coverage is not None:
        charts.append(svg_charts.line_chart(
            [(REFERENCE, curves.coverage_levels, curves.reference_coverage)],
            "nominal coverage", "empirical coverage", "Coverage of HMC's central intervals",
            diagonal="nominal", reference=REFERENCE))
    return charts


def _block_cells(block, scores) -> str:
    """A block's figures; none for a block too small to show (see HIDDEN_ROWS_NOTE)."""
    if block.size < disclosure.MIN_ROWS:
        return "".join(cell(DASH, True) for _ in scores)
    return "".join(cell(number(block.metrics.get(s.name), s.precision), True) for s in scores)


def _block_section(result: TaskResult) -> str:
    """Per-metric bar charts over the shift blocks, and the table of block metrics."""
    blocks = result.blocks
    scores = [score for score in metric_types(result)
              if any(score.name in block.metrics for block in blocks)]
    names = [block.name for block in blocks]
    charts = []
    for score in scores:
        values = np.array([block.metrics.get(score.name, np.nan)
                           if block.size >= disclosure.MIN_ROWS else np.nan
                           for block in blocks], float)
        bounded = (score.minimum, score.maximum) if score.maximum is not None else None
        charts.append(svg_charts.bar_chart(names, [("submission", values)], score.label,
                                           f"{score.label} per block", y_range=bounded))
    rows = ["<tr>" + cell(escape(block.name)) + cell(str(block.size), True)
            + _block_cells(block, scores) + "</tr>" for block in blocks]
    return ("<h3>Per block</h3>" + table(["block", "size", *map(metric_label, scores)], rows)
            + grid(charts))


def task_summary(result: TaskResult) -> str:
    """The line under the task's heading."""
    settings = result.task.settings
    return f"{settings.task_type}, {settings.n_test} test points"


def report_section(result: TaskResult) -> str:
    parts = [_metrics_table(result)]
    if not result.penalised:
        parts.append(grid(_curve_charts(result.figures) if result.figures is not None else []))
        parts.append(_block_section(result) if len(result.blocks) > 1 else "")
        parts.append(f'<p class="muted">{escape(HIDDEN_ROWS_NOTE)}</p>')
    return "\n".join(part for part in parts if part)

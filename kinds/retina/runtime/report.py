"""The Retina task's section of the detailed results: its leaderboard figures, every figure
of the benchmark per evaluation set, and the plots RETINA draws (ROC curves with the NHS
screening point, referral curves against random and oracle referral, uncertainty by true
grade for right and wrong predictions, the reliability diagram)."""
from __future__ import annotations

from html import escape

import numpy as np

from runtime import svg_charts
from runtime.report import DASH, cell, grid, metrics_table, number, table
from runtime.scoring import TaskResult

from . import metrics
from .scoring import NHS_SENSITIVITY, NHS_SPECIFICITY, SETS, set_mask

UNDEFINED = "undefined"
HISTOGRAM_BINS = 12


def _set_table(figures: dict) -> str:
    names = list(dict.fromkeys(metric for row in figures["table"].values() for metric in row))
    rows = []
    for metric in names:
        values = [figures["table"][name].get(metric, DASH) for name in SETS]
        shown = [DASH if v == DASH else (UNDEFINED if v is None else number(v, 4))
                 for v in values]
        rows.append("<tr>" + cell(escape(metric)) + "".join(cell(v, True) for v in shown)
                    + "</tr>")
    sizes = [int(set_mask(figures, name).sum()) for name in SETS]
    header = ["figure", *(f"{name} ({size})" for name, size in zip(SETS, sizes))]
    return ("<h3>Every figure, per evaluation set</h3>" + table(header, rows)
            + f'<p class="muted">"{UNDEFINED}": the set holds one class only (AUROC, AUPRC and '
              "the ROC need both). The joint set's balanced figures weigh the shifted patients "
              "as much as the in-domain ones.</p>")


def _screening_text(figures: dict) -> str:
    label = f"sensitivity at {NHS_SPECIFICITY:.0%} specificity"
    parts = []
    for name in SETS:
        value = figures["table"][name].get(label)
        if value is not None:
            verdict = "meets" if value >= NHS_SENSITIVITY else "misses"
            parts.append(f"{name}: {verdict} it ({value:.0%})")
    return (f'<p>NHS screening standard ({NHS_SENSITIVITY:.0%} sensitivity at '
            f'{NHS_SPECIFICITY:.0%} specificity): {escape("; ".join(parts))}.</p>'
            if parts else "")


def _roc_chart(figures: dict) -> str:
    series = []
    for name in SETS:
        keep = set_mask(figures, name)
        try:
            fpr, tpr = metrics.roc_points(figures["y"][keep], figures["p"][keep])
        except ValueError:
            continue                  # one class: no curve
        series.append((name, fpr, tpr))
    series.append(("NHS standard", np.array([1 - NHS_SPECIFICITY]), np.array([NHS_SENSITIVITY])))
    return svg_charts.line_chart(series, "false positive rate (1 - specificity)",
                                 "true positive rate (sensitivity)", "ROC curves",
                                 diagonal="chance", max_markers=1, reference="NHS standard")


def _referral_curves(y, p, u) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """The submission's accuracy referral curve, random referral's expectation (the accuracy
    of all rows at every fraction, 1 when all are referred) and the oracle's (wrong rows
    referred first)."""
    correct = metrics.correct_predictions(y, p)
    fractions = np.arange(y.size + 1) / y.size
    random = np.r_[np.full(y.size, correct.mean()), 1.0]
    oracle = metrics.retention_curve(correct, 1.0 - correct, fully_referred=1.0)
    return [("submission", fractions, metrics.accuracy_retention_curve(y, p, u)),
            ("random referral", fractions, random), ("oracle referral", fractions, oracle)]


def _referral_charts(figures: dict) -> list[str]:
    charts = []
    for name in SETS:
        keep = set_mask(figures, name)
        if name == "joint":
            keep = metrics.balanced_indices(figures["shifted"].astype(np.int64))
            name = "joint (balanced)"
        y, p, u = figures["y"][keep], figures["p"][keep], figures["u"][keep]
        low = float(metrics.correct_predictions(y, p).mean())
        charts.append(svg_charts.line_chart(
            _referral_curves(y, p, u), "fraction referred", "accuracy of the rows kept",
            f"Referral: {name}", y_range=(min(low, 0.5), 1.0), max_markers=1,
            reference="random referral"))
    return charts


def _reliability_chart(figures: dict) -> str:
    series = []
    for name in ("in-domain", "shifted"):
        keep = set_mask(figures, name)
        bins = metrics.calibration_bins(figures["y"][keep], figures["p"][keep])
        series.append((name, bins["confidence"], bins["accuracy"]))
    return svg_charts.line_chart(series, "confidence max(p, 1 - p), 15 bins", "accuracy",
                                 "Reliability diagram", diagonal="perfect calibration",
                                 x_range=(0.5, 1.0), y_range=(0.0, 1.0))


def _histograms_by_grade(figures: dict) -> list[str]:
    correct = metrics.correct_predictions(figures["y"], figures["p"]).astype(bool)
    charts = []
    for grade in np.unique(figures["grade"]):
        rows = figures["grade"] == grade
        right, wrong = figures["u"][rows & correct], figures["u"][rows & ~correct]
        charts.append(svg_charts.overlaid_histograms(
            [(f"correct ({right.size})", right), (f"wrong ({wrong.size})", wrong)],
            HISTOGRAM_BINS, "uncertainty", f"Uncertainty, true grade {grade}"))
    return charts


def report_section(result: TaskResult) -> str:
    parts = [metrics_table(result)]
    figures = result.figures
    if figures is None or result.penalised:
        return "\n".join(parts)
    parts += [_set_table(figures), _screening_text(figures),
              "<h3>ROC, reliability and referral</h3>",
              grid([_roc_chart(figures), _reliability_chart(figures),
                    *_referral_charts(figures)]),
              "<h3>Uncertainty by true grade, for right and wrong predictions</h3>"
              '<p class="muted">Good uncertainty puts the right predictions near 0 and the wrong '
              "ones higher; wrong predictions at low uncertainty are the dangerous ones.</p>",
              grid(_histograms_by_grade(figures))]
    return "\n".join(parts)

"""The Retina task's section of the detailed results: its leaderboard figures, every figure
of the benchmark per evaluation set, and the plots RETINA draws (ROC curves with the NHS
screening point, referral curves against random and oracle referral, uncertainty by true
grade for right and wrong predictions, the reliability diagram).

The page is public on Codabench once a competition is published, so the plots follow
``runtime.disclosure``: each point or bar summarises a group of at least ``MIN_ROWS`` rows,
at a fixed grid, and the figures are rounded; the leaderboard's scores use every row."""
from __future__ import annotations

from html import escape

import numpy as np

from runtime import disclosure, svg_charts
from runtime.report import DASH, cell, grid, metrics_table, number, table
from runtime.scoring import TaskResult

from . import metrics
from .sets import BALANCE_SEED, NHS_SENSITIVITY, NHS_SPECIFICITY, SETS, set_mask

UNDEFINED = "undefined"


def _set_table(figures: dict) -> str:
    names = list(dict.fromkeys(metric for row in figures["table"].values() for metric in row))
    rows = []
    for metric in names:
        values = [figures["table"][name].get(metric, DASH) for name in SETS]
        shown = [DASH if v == DASH else UNDEFINED if v is None
                 else number(v, disclosure.DECIMALS) for v in values]
        rows.append("<tr>" + cell(escape(metric)) + "".join(cell(v, True) for v in shown)
                    + "</tr>")
    sizes = [int(set_mask(figures, name).sum()) for name in SETS]
    header = ["figure", *(f"{name} ({size})" for name, size in zip(SETS, sizes))]
    return ("<h3>Every figure, per evaluation set</h3>" + table(header, rows)
            + f'<p class="muted">"{UNDEFINED}": the set holds one class only (AUROC, AUPRC and '
              "the ROC need both). The joint set's balanced figures weigh the shifted patients "
              f"as much as the in-domain ones. Rounded to {disclosure.DECIMALS} decimals: "
              "crafted predictions could otherwise hide hidden labels in the last decimal "
              "places of an average.</p>")


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
    """Each set's ROC read at thresholds between groups of its rows by descending probability
    (``disclosure.grouped_rows``, equal probabilities one threshold): a point per row would
    give each row's label back to a submission whose probabilities are the row order."""
    series = []
    for name in SETS:
        keep = set_mask(figures, name)
        y, p = figures["y"][keep], figures["p"][keep]
        positives, negatives = int(y.sum()), int(y.size - y.sum())
        groups = disclosure.grouped_rows(p, descending=True)
        if not positives or not negatives or not groups:
            continue                  # one class, or too few rows: no curve
        true = np.cumsum([y[g.rows].sum() for g in groups])
        false = np.cumsum([g.rows.size for g in groups]) - true
        series.append((name, disclosure.rounded(np.r_[0.0, false / negatives]),
                       disclosure.rounded(np.r_[0.0, true / positives])))
    series.append(("NHS standard", np.array([1 - NHS_SPECIFICITY]), np.array([NHS_SENSITIVITY])))
    return svg_charts.line_chart(series, "false positive rate (1 - specificity)",
                                 "true positive rate (sensitivity)", "ROC curves",
                                 diagonal="chance", reference="NHS standard")


def _referral_curves(correct, u, ids=None) -> list[tuple[str, np.ndarray, np.ndarray]] | None:
    """The accuracy referral curve of ``correct`` (1 where the prediction is right) referring
    the most uncertain first (ties: the row order, as the score's curve), read where whole
    groups of at least ``disclosure.MIN_ROWS`` rows have been referred; random referral's
    expectation (the accuracy of all rows, 1 when all are referred) and the oracle's (wrong
    rows referred first) at the same fractions. ``ids``: the row each entry is, where a
    reweighted set holds a row several times. None when the set is too small."""
    groups = disclosure.grouped_rows(u, ids=ids, keep_ties=False)
    if not groups:
        return None
    sizes = np.array([g.rows.size for g in groups])
    hits = np.array([correct[g.rows].sum() for g in groups])
    kept = np.r_[np.cumsum(sizes[::-1])[::-1], 0]          # after referring the last j groups
    kept_hits = np.r_[np.cumsum(hits[::-1])[::-1], 0]
    fractions = 1.0 - kept / kept[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        submission = np.where(kept > 0, kept_hits / kept, 1.0)
        oracle = np.where(kept > 0, np.minimum(1.0, kept_hits[0] / kept), 1.0)
    random = np.where(kept > 0, kept_hits[0] / kept[0], 1.0)
    return [(label, disclosure.rounded(fractions), disclosure.rounded(curve))
            for label, curve in (("submission", submission), ("random referral", random),
                                 ("oracle referral", oracle))]


def _referral_charts(figures: dict) -> list[str]:
    correct = metrics.correct_predictions(figures["y"], figures["p"])
    charts = []
    for name in SETS:
        keep, ids = np.flatnonzero(set_mask(figures, name)), None
        if name == "joint":
            keep = ids = metrics.balanced_indices(figures["shifted"].astype(np.int64),
                                                  BALANCE_SEED)
            name = "joint (balanced)"
        curves = _referral_curves(correct[keep], figures["u"][keep], ids)
        if curves is None:
            charts.append(_too_few(f"Referral: {name}"))
            continue
        low = float(curves[1][2][0])
        charts.append(svg_charts.line_chart(
            curves, "fraction referred", "accuracy of the rows kept",
            f"Referral: {name}", y_range=(min(low, 0.5), 1.0), reference="random referral"))
    return charts


def _too_few(title: str) -> str:
    return svg_charts.line_chart([], "", "", f"{title}: fewer than {disclosure.MIN_ROWS} "
                                 "patients, not drawn")


def _reliability_chart(figures: dict) -> str:
    """Accuracy against confidence max(p, 1 - p) in groups of at least
    ``disclosure.MIN_ROWS`` rows of each set: all rows are cut at fixed fractions of their
    confidence, which the participant chose and knows, and the slices joined until a group
    holds enough of the set's rows. A bin of fixed width (the ECE's) could hold one row and
    say whether it is right; a group's mean confidence could say which rows are in the set."""
    confidence = np.maximum(figures["p"], 1 - figures["p"])
    correct = metrics.correct_predictions(figures["y"], figures["p"])
    series = []
    for name in ("in-domain", "shifted"):
        groups = disclosure.grouped_rows(confidence, members=set_mask(figures, name))
        series.append((name, disclosure.rounded([(g.low + g.high) / 2 for g in groups]),
                       disclosure.rounded([correct[g.rows].mean() for g in groups])))
    return svg_charts.line_chart(series, "confidence max(p, 1 - p): middle of each group's "
                                 "range", "accuracy", "Reliability diagram",
                                 diagonal="perfect calibration", x_range=(0.5, 1.0),
                                 y_range=(0.0, 1.0))


def _grade_chart(figures: dict, grade, correct: np.ndarray) -> str:
    """Where in the participant's uncertainty the right and wrong predictions of one true
    grade fall: each bar the share of them in a group of at least ``disclosure.MIN_ROWS``
    rows of the grade (all rows cut at fixed fractions of the uncertainty, slices joined), so
    no uncertainty can set one row apart."""
    rows = figures["grade"] == grade
    groups = disclosure.grouped_rows(figures["u"], members=rows)
    title = f"Uncertainty, true grade {grade}"
    if not groups:
        return _too_few(title)
    right = np.array([correct[g.rows].sum() for g in groups])
    wrong = np.array([g.rows.size for g in groups]) - right
    labels = [f"{g.low:.3g} to {g.high:.3g}" for g in groups]
    shares = [(f"{label} ({int(counts.sum())})",
               disclosure.rounded(counts / counts.sum() if counts.sum() else counts * 0.0))
              for label, counts in (("correct", right), ("wrong", wrong))]
    return svg_charts.bar_chart(labels, shares, "share of the grade's predictions", title,
                                y_range=(0.0, 1.0))


def _histograms_by_grade(figures: dict) -> list[str]:
    correct = metrics.correct_predictions(figures["y"], figures["p"])
    return [_grade_chart(figures, grade, correct) for grade in np.unique(figures["grade"])]


def report_section(result: TaskResult) -> str:
    parts = [metrics_table(result)]
    figures = result.figures
    if figures is None or result.penalised:
        return "\n".join(parts)
    parts += [_set_table(figures), _screening_text(figures),
              "<h3>ROC, reliability and referral</h3>",
              f'<p class="muted">{escape(disclosure.COARSE_NOTE)}</p>',
              grid([_roc_chart(figures), _reliability_chart(figures),
                    *_referral_charts(figures)]),
              "<h3>Uncertainty by true grade, for right and wrong predictions</h3>"
              '<p class="muted">Each bar: the share of the grade\'s right (or wrong) '
              "predictions whose uncertainty lies in that range. Good uncertainty puts the right "
              "predictions in the low ranges and the wrong ones higher; wrong predictions at low "
              "uncertainty are the dangerous ones.</p>",
              grid(_histograms_by_grade(figures))]
    return "\n".join(parts)

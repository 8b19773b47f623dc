"""The HTML scoring report, on label_accuracy's results (the core tests' kind): well-formed,
self-contained, deterministic, each task in its section with the kind's part, penalties with
their category and remedy; and the SVG charts on degenerate input. BDL's report parts (its
charts, blocks and ranges) are kinds/bdl2021/tests/test_bdl_report.py's."""
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import numpy as np
import pytest

from kinds.kind import scoring_runtime
from runtime import disclosure, failures, svg_charts
from runtime.scoring import MetricResult, TaskConfig, TaskResult
from scoring_program.scorer.report import render_report as render_any

SCORING = scoring_runtime("label_accuracy")
VOID = {"meta", "br", "link", "img", "input", "hr", "col", "wbr", "source"}


def render_report(results, **kwargs):
    return render_any(results, SCORING, **kwargs)


def task_config(name, n_test=60, classes=3, budget=600.0):
    settings = SCORING.parse_settings("labels", {
        "n_test": n_test, "num_classes": classes, "submission_stem": f"{name}_labels",
        "test_labels": f"{name}_test_labels.npy"}, name)
    return TaskConfig(name, SCORING.TASK_TYPES["labels"], {"accuracy": 1.0}, budget, settings)


def metrics(accuracy, balanced, se=None):
    return {"accuracy": MetricResult("accuracy", accuracy, se=se),
            "balanced_accuracy": MetricResult("balanced_accuracy", balanced,
                                              se=None if se is None else 2 * se)}


def scored_result():
    """60 test points of 3 classes; class 2 predicted for 5 of them only (fewer than
    disclosure.MIN_ROWS): its column is left out of the confusion matrix."""
    confusion = np.array([[20, 3, 1], [2, 25, 1], [3, 2, 3]])
    return TaskResult(task_config("iris"), metrics(0.912345, 0.87654, 0.0123),
                      notes=("3 labels given as floats",), train_seconds=123.45,
                      figures=confusion)


def second_result():
    return TaskResult(task_config("wine", budget=None), metrics(0.75, 0.7, 0.03),
                      figures=np.diag([20, 20, 20]))


def penalised_result():
    return TaskResult(task_config("digits"), metrics(0.0, 0.0),
                      penalty="res/digits_labels.csv: row 3 is 7.0; expected a class label 0..2",
                      failure=failures.INVALID_OUTPUT)


def degenerate_result():
    """A NaN accuracy, no confusion counts at all, and a name that needs escaping."""
    return TaskResult(task_config("odd<task>", n_test=0), metrics(float("nan"), float("nan")),
                      figures=np.zeros((3, 3), int))


def render(results=None, **kwargs):
    results = [scored_result(), second_result(), penalised_result()] \
        if results is None else results
    options = dict(phase="Development", weighted_loss=0.2468, problems=["missing wine_labels"])
    return render_report(results, **{**options, **kwargs})


class TagChecker(HTMLParser):
    """Records errors and unbalanced tags (void elements aside)."""

    def __init__(self):
        super().__init__()
        self.stack, self.errors = [], []

    def handle_starttag(self, tag, attrs):
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(f"unbalanced </{tag}>")


def section(page: str, task: str) -> str:
    return page.split(f'<section id="task-{task}">')[1].split("</section>")[0]


@pytest.fixture(scope="module")
def page():
    return render()


def test_document_parses_with_balanced_tags(page):
    checker = TagChecker()
    checker.feed(page)
    checker.close()
    assert checker.errors == [] and checker.stack == []
    assert page.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in page
    # (label_accuracy draws no chart: BDL's report, which does, checks its svg elements)
    for tag in ("html", "head", "body", "main", "header", "table"):
        assert page.count(f"<{tag}") - page.count(f"<{tag}d") >= 1


def test_every_task_has_a_section_and_the_header_its_facts(page):
    for name in ("iris", "wine", "digits"):
        assert f'<section id="task-{name}">' in page
        assert f'href="#task-{name}"' in page
    assert "Development" in page and "0.2468" in page and "missing wine_labels" in page
    assert "penalised" in page and "scored" in page
    assert SCORING.REPORT_INTRO in page and SCORING.STANDARD_ERROR in page.replace("&#x27;", "'")


def test_penalty_is_shown_and_its_kinds_part_skipped(page):
    penalised = section(page, "digits")
    assert "row 3 is 7.0; expected a class label 0..2" in penalised
    assert 'class="penalty"' in penalised and "Confusion matrix" not in penalised
    invalid = failures.BY_CODE[failures.INVALID_OUTPUT]
    assert ('<div class="penalty"><strong>Wrote invalid output:</strong> res/digits_labels.csv: '
            "row 3") in penalised and invalid.remedy in penalised


def test_the_summary_names_a_penalised_tasks_category(page):
    summary = page.split("</header>")[0]
    row = summary.split('href="#task-digits"')[1].split("</tr>")[0]
    assert '<span class="status penalised">Wrote invalid output</span>' in row


def test_values_use_each_metrics_precision(page):
    assert "0.9123" in page and "0.8765" in page and "0.7500" in page
    assert "± 0.01230" in page and "± 0.02460" in page      # one more decimal than the value
    assert "123.5" in page                                   # train seconds, 1 decimal
    assert "(budget 600.0 s)" in section(page, "iris") and "budget" not in section(page, "wine")
    assert "0.912345" not in page


def test_a_task_section_holds_its_notes_and_the_kinds_part(page):
    scored = section(page, "iris")
    assert "3 labels given as floats" in scored and "3 classes, 60 test points" in scored
    assert "Confusion matrix" in scored and "<td class=\"num\">25</td>" in scored
    # class 2 was predicted for 5 points, fewer than MIN_ROWS: its counts are not shown
    assert f"fewer than {disclosure.MIN_ROWS} test points" in scored
    assert "Confusion matrix" in section(page, "wine")
    assert f"fewer than {disclosure.MIN_ROWS}" not in section(page, "wine")


def test_no_external_references(page):
    assert "http://" not in page and "https://" not in page
    assert "<script" not in page
    assert not re.search(r"""(src|href)\s*=\s*["'](?!#)""", page)


def test_rendering_is_deterministic():
    assert render() == render()


def test_degenerate_input_does_not_raise():
    page = render([degenerate_result()], weighted_loss=None, problems=[])
    assert "odd&lt;task&gt;" in page and "<odd" not in page
    checker = TagChecker()
    checker.feed(page)
    checker.close()
    assert checker.errors == [] and checker.stack == []


@pytest.mark.parametrize("chart", [
    lambda: svg_charts.overlaid_histograms([], 10, "x", "t"),
    lambda: svg_charts.overlaid_histograms([("a", np.array([np.inf, np.nan]))], 0, "x", "t"),
    lambda: svg_charts.line_chart([("a", np.empty(0), np.empty(0))], "x", "y", "t", None,
                                  None, None),
    lambda: svg_charts.line_chart([("a", np.ones(3), np.ones(3))], "x", "y", "t", "d",
                                  None, (2.0, 2.0)),
    lambda: svg_charts.bar_chart([], [], "y", "t"),
    lambda: svg_charts.bar_chart(["a" * 40, "b"], [("s", np.array([np.nan, -1.0]))], "y",
                                 "t<&>", error=[np.array([0.1, np.nan])]),
])
def test_charts_handle_degenerate_input(chart):
    svg = chart()
    ET.fromstring(svg)
    assert "nan" not in svg.lower().replace("no data", "") and "inf" not in svg.lower()

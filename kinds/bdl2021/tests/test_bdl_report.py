"""The HTML scoring report of BDL's results: its sections (test blocks, the spread and
reliability charts, the coverage of HMC, ECE, the exact-posterior range, capped values) in a
report that stays well-formed, self-contained and deterministic. The report itself, on
label_accuracy's results, and the SVG charts on degenerate input are tests/test_report.py's."""
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from kinds.kind import scoring_runtime
from runtime import failures
from kinds.bdl2021.runtime.evaluate import Curves
from kinds.bdl2021.runtime.score_types import TASK_TYPES
from kinds.bdl2021.runtime.settings import Block, TaskSettings
from runtime.scoring import BlockResult, MetricResult, TaskConfig, TaskResult
from scoring_program.scorer.report import render_report as render_any
from test_report import TagChecker

SCORING = scoring_runtime("bdl2021")


def render_report(results, **kwargs):
    return render_any(results, SCORING, **kwargs)


def metric(name, value, std=None, chain_values=(), expected=None, spread=None, capped=False):
    interval = None if spread is None else [expected - 2 * spread, expected + 2 * spread]
    return MetricResult(name, value, std, capped, {
        "chain_values": list(chain_values), "exact_posterior_expectation": expected,
        "exact_posterior_expectation_spread": spread,
        "exact_posterior_expectation_interval": interval})

def task_config(name, kind, n_test=200, blocks=None):
    settings = TaskSettings(
        task_type=kind, n_test=n_test,
        num_classes=10 if kind == "classification" else None,
        num_samples=None if kind == "classification" else 100,
        blocks=blocks or (Block("clean", 0, n_test),), submission_stem=name,
        reference=f"{name}_probs.csv", chain_reference=None, test_labels=None,
        exact_posterior_expectation=None)
    return TaskConfig(name, TASK_TYPES[kind], {}, 600.0, settings)


def reliability(rng, bins=10):
    confidence = np.linspace(0.05, 0.95, bins)
    accuracy = np.clip(confidence + rng.normal(0, 0.05, bins), 0, 1)
    counts = rng.integers(0, 50, bins)
    confidence[:3] = accuracy[:3] = np.nan
    return confidence, accuracy, counts


def classification_result():
    rng = np.random.default_rng(0)
    blocks = (Block("clean", 0, 100), Block("gaussian_noise_2", 100, 200))
    metrics = {"agreement": metric("agreement", 0.912345, 0.0123, (0.9, 0.92), 0.95, 0.004),
               "total_variation": metric("total_variation", 0.08765, 0.002, (), 0.03, 0.001)}
    curves = Curves(rng.gamma(2, 0.3, 200), rng.gamma(2, 0.35, 200), "entropy (nats)",
                    submission_reliability=reliability(rng), reference_reliability=reliability(rng))
    return TaskResult(
        task_config("cifar10", "classification", 200, blocks), metrics,
        blocks=(BlockResult("clean", 100, {"agreement": 0.95, "total_variation": 0.06}),
                BlockResult("gaussian_noise_2", 100, {"agreement": 0.87, "total_variation": 0.11})),
        notes=("3 rows renormalised",), train_seconds=123.45, figures=curves,
        extras={"ece_submission": 0.031, "ece_hmc": 0.024})


def regression_result():
    rng = np.random.default_rng(1)
    levels = np.linspace(0.05, 0.95, 19)
    metrics = {"w2": metric("w2", 0.4321, 0.01, (), 0.2, 0.02),
               "w1": metric("w1", 7.5, None, (), None, None, capped=True)}
    curves = Curves(rng.gamma(3, 0.2, 100), rng.gamma(3, 0.25, 100), "std of y",
                    coverage_levels=levels, submission_coverage=levels ** 1.2,
                    reference_coverage=levels)
    return TaskResult(task_config("uci_energy", "regression", 100), metrics, figures=curves)


def penalised_result():
    metrics = {"agreement": metric("agreement", 0.0), "total_variation":
               metric("total_variation", 1.0)}
    return TaskResult(task_config("medmnist", "classification"), metrics,
                      penalty="res/medmnist.csv: 12 rows have negative probabilities",
                      failure=failures.INVALID_OUTPUT)


def degenerate_result():
    """Empty, NaN-only and constant arrays everywhere the report draws."""
    nan = np.full(10, np.nan)
    curves = Curves(np.ones(50), np.empty(0), "entropy", submission_reliability=(nan, nan, nan),
                    reference_reliability=(np.empty(0), np.empty(0), np.empty(0)))
    blocks = (Block("a", 0, 5), Block("b", 5, 10))
    return TaskResult(
        task_config("odd<task>", "classification", 10, blocks),
        {"agreement": metric("agreement", float("nan")),
         "total_variation": metric("total_variation", 0.5)},
        blocks=(BlockResult("a", 5, {"agreement": 1.0, "total_variation": 0.0}),
                BlockResult("b", 5, {"agreement": float("nan")})), figures=curves)


def render(results=None, **kwargs):
    results = [classification_result(), regression_result(), penalised_result()] \
        if results is None else results
    options = dict(phase="Development", weighted_loss=0.2468, problems=["missing uci_yacht"])
    return render_report(results, **{**options, **kwargs})


@pytest.fixture(scope="module")
def page():
    return render()


def test_document_parses_with_balanced_tags(page):
    checker = TagChecker()
    checker.feed(page)
    checker.close()
    assert checker.errors == [] and checker.stack == []
    assert page.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in page
    for tag in ("html", "head", "body", "main", "header", "table", "svg"):
        assert page.count(f"<{tag}") - page.count(f"<{tag}d") >= 1


def test_every_task_has_a_section_and_the_header_its_facts(page):
    for name in ("cifar10", "uci_energy", "medmnist"):
        assert f'<section id="task-{name}">' in page
        assert f'href="#task-{name}"' in page
    assert "Development" in page and "0.2468" in page and "missing uci_yacht" in page
    assert "penalised" in page and "scored" in page


def test_penalty_is_shown_and_its_plots_skipped(page):
    section = page.split('<section id="task-medmnist">')[1].split("</section>")[0]
    assert "12 rows have negative probabilities" in section
    assert 'class="penalty"' in section and "<svg" not in section
    invalid = failures.BY_CODE[failures.INVALID_OUTPUT]
    assert ('<div class="penalty"><strong>Wrote invalid output:</strong> res/medmnist.csv: 12 '
            "rows") in section and invalid.remedy in section


def test_the_summary_names_a_penalised_tasks_category(page):
    summary = page.split("</header>")[0]
    row = summary.split('href="#task-medmnist"')[1].split("</tr>")[0]
    assert '<span class="status penalised">Wrote invalid output</span>' in row


def test_values_use_each_metrics_precision(page):
    assert "0.9123" in page and "0.0877" in page and "0.4321" in page
    assert "± 0.0123" in page and "0.9500 (95%: 0.9420 to 0.9580)" in page
    assert "7.5000" in page and "capped" in page
    assert "123.5" in page                                   # train seconds, 1 decimal
    assert "0.912345" not in page


def test_classification_section_has_blocks_curves_and_extras(page):
    section = page.split('<section id="task-cifar10">')[1].split("</section>")[0]
    assert section.count("<svg") == 4                        # spread, reliability, 2 blocks
    assert "gaussian_noise_2" in section and "Reliability diagram" in section
    assert "ece submission" in section and "3 rows renormalised" in section
    regression = page.split('<section id="task-uci_energy">')[1].split("</section>")[0]
    assert regression.count("<svg") == 2 and "Coverage of HMC" in regression
    # the submission's own coverage of hidden targets is not drawn (test_bdl_disclosure.py)
    coverage = regression[regression.index("Coverage of HMC"):]
    assert ">submission</text>" not in coverage[:coverage.index("</svg>")]


def test_no_external_references(page):
    assert "http://" not in page and "https://" not in page
    assert "<script" not in page
    assert not re.search(r"""(src|href)\s*=\s*["'](?!#)""", page)


def test_every_svg_is_well_formed_xml(page):
    svgs = re.findall(r"<svg.*?</svg>", page, re.S)
    assert len(svgs) == 6
    for svg in svgs:
        root = ET.fromstring(svg)
        assert root.tag == "svg" and root.get("viewBox")
        assert root.find("title") is not None


def test_rendering_is_deterministic():
    assert render() == render()


def test_degenerate_input_does_not_raise():
    page = render([degenerate_result()], weighted_loss=None, problems=[])
    assert "odd&lt;task&gt;" in page and "no data" in page
    for svg in re.findall(r"<svg.*?</svg>", page, re.S):
        ET.fromstring(svg)
        assert "nan" not in svg.lower().replace("no data", "")

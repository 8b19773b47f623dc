"""The PGDL detailed results give away no network's hidden generalisation gap.

A hostile participant submits a measure whose values it knows (a shuffled index: every
network a distinct, known number), lets the real scoring program render the detailed
results, and reads back every number the page holds: points of every chart (mapped back to
data through the axis ticks), bars, tables. From them it rebuilds an ordering of the
networks by gap, the only thing PGDL's scores use (CMI and Kendall's tau are functions of
the two orderings). It must do no better than a random ordering, and no hidden gap may be
among the page's numbers."""
import math
import re

import numpy as np
import pytest

from bundle.phase_data import stage_reference_data
from bundle.phase_plan import phase_plan
from bundle.programs import assemble_scoring_program
from bundle.spec import load_spec
from kinds.kind import kind
from kinds.pgdl2020.runtime.formats import read_model_configs
from kinds.pgdl2020.runtime.metrics import kendall_tau
from kinds.pgdl2020.runtime.scoring import predict_json
from scoring_harness import new_run, run_scoring

SVG = re.compile(r"<svg.*?</svg>", re.S)
CIRCLE = re.compile(r'<circle cx="([-0-9.]+)" cy="([-0-9.]+)"')
Y_TICK = re.compile(r'<text x="[-0-9.]+" y="([-0-9.]+)" text-anchor="end">(-?[0-9.]+)</text>')
NUMBER = re.compile(r"-?\d+\.\d+(?:e-?\d+)?")
SEED = 20


@pytest.fixture(scope="module", params=["phase1", "convolutional"])
def scored_page(request, tmp_path_factory):
    """Per task of the phase: the zoo, the hostile measure and the page the scorer wrote."""
    root = tmp_path_factory.mktemp(f"pgdl-{request.param}")
    plan = phase_plan(load_spec(kind("pgdl2020").DEFAULT_SPEC), request.param,
                      code_submission=False)
    assemble_scoring_program(plan, root / "program")
    stage_reference_data(plan, root / "ref")
    run = new_run(root, root / "run")
    zoos, measures = {}, {}
    for task in plan.tasks:
        zoos[task.name] = read_model_configs(root / "ref" / f"{task.name}_model_configs.json")
        measures[task.name] = _hostile_measure(zoos[task.name].gaps)
        (run / "input" / "res" / f"{task.name}.predict").write_text(
            predict_json(zoos[task.name].ids, measures[task.name]))
    result = run_scoring(run)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    page = (run / "output" / "detailed_results.html").read_text()
    return {name: (zoos[name], measures[name], _section(page, name)) for name in zoos}, page


def _hostile_measure(gaps: np.ndarray) -> np.ndarray:
    """Distinct known values in a seeded order that itself tells little of the gaps, so that
    what the attacker knows beyond it can only have come from the page."""
    rng = np.random.default_rng(SEED)
    while True:                       # seeded: the same draws, the same measure, every run
        measure = rng.permutation(len(gaps)).astype(float)
        if abs(kendall_tau(measure, gaps)) < 0.25 * _chance_bound(len(gaps)):
            return measure


def _chance_bound(n: int) -> float:
    """Three standard deviations of Kendall's tau between a random ordering of n networks and
    any fixed one: its variance is 2(2n + 5) / (9 n (n - 1)) (Kendall 1938; ties in the gaps
    only lower it). n = 32: 0.37; n = 16: 0.52."""
    return 3 * math.sqrt(2 * (2 * n + 5) / (9 * n * (n - 1)))


def _section(page: str, task: str) -> str:
    start = page.index(f'<section id="task-{task}">')
    return page[start:page.index("</section>", start)]


def _points_read_back(svg: str) -> np.ndarray | None:
    """(x pixel, y value) of every point of a chart, the value mapped back through the y
    axis's tick labels; None if the chart has no points or no two ticks."""
    points = np.array([(float(x), float(y)) for x, y in CIRCLE.findall(svg)])
    ticks = np.array([(float(y) - 4.0, float(value)) for y, value in Y_TICK.findall(svg)])
    if len(points) == 0 or len(ticks) < 2:
        return None
    slope, offset = np.polyfit(ticks[:, 0], ticks[:, 1], 1)
    return np.column_stack([points[:, 0], slope * points[:, 1] + offset])


def recovered_gaps(section: str, measure: np.ndarray) -> np.ndarray:
    """The attacker's best estimate of each network's gap: from a chart with a point per
    network, the point at the network's place along the measure's axis; else, knowing
    nothing, the order it submitted."""
    for svg in SVG.findall(section):
        points = _points_read_back(svg)
        if points is not None and len(points) >= len(measure):
            by_x = points[np.argsort(points[:, 0], kind="stable")][:len(measure)]
            estimate = np.empty(len(measure))
            estimate[np.argsort(measure, kind="stable")] = by_x[:, 1]
            return estimate
    return measure.copy()


def test_the_page_gives_no_ordering_of_the_gaps_beyond_chance(scored_page):
    tasks, _ = scored_page
    for name, (zoo, measure, section) in tasks.items():
        tau = kendall_tau(recovered_gaps(section, measure), zoo.gaps)
        assert abs(tau) <= _chance_bound(len(zoo.gaps)), (
            f"{name}: the page's charts order the hidden gaps with Kendall tau {tau:.3f}")


def test_no_hidden_gap_is_among_the_pages_numbers(scored_page):
    """A number shown to 5 decimals or more that equals a gap at those decimals gives it
    away (the tables show 4, standard errors 5)."""
    tasks, page = scored_page
    shown = [(float(text), len(text.split(".")[1].split("e")[0])) for text in NUMBER.findall(page)]
    for name, (zoo, _, _) in tasks.items():
        for gap in np.unique(zoo.gaps):
            found = [value for value, decimals in shown
                     if decimals >= 5 and abs(value - gap) <= 0.5 * 10.0 ** -decimals]
            assert not found, f"{name}: the hidden gap {gap} is shown as {found}"


def test_the_section_draws_only_the_measure_and_whole_zoo_figures(scored_page):
    tasks, _ = scored_page
    for name, (zoo, measure, section) in tasks.items():
        assert "Your measure over the zoo" in section and "Granulated tau per" in section
        assert f"{len(measure)} distinct values among {len(measure)} networks" in section
        assert "<circle" not in section, f"{name}: a point per network is drawn"

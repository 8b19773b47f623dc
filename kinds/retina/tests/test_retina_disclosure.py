"""The Retina kind's detailed results must not give the hidden labels back.

A hostile participant crafts a submission for each chart of the page, the real scoring
program scores it on the embedded image tasks and writes the page, and an attack reads every
number it can find in the chart (coordinates, bar titles) and rebuilds the labels (and
grades) of the rows the chart covers as well as it can. It is told which rows are in which
evaluation set and each set's class counts (more than a participant knows), so a page that
withstands it withstands less. Against the per-row charts the attacks recovered nearly every
label; the page must leave them no better than chance: the majority class's rate plus
``MARGIN``. The rules themselves (``runtime/disclosure.py``) are tested on random sizes,
ties and tiny sets.
"""
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from bundle.phase_data import stage_reference_data
from bundle.phase_plan import phase_plan
from bundle.programs import assemble_scoring_program
from bundle.spec import load_spec
from kinds.kind import scoring_runtime
from kinds.retina.reference.make_tasks import EMBEDDED
from kinds.retina.runtime import metrics, tables
from runtime import disclosure
from runtime.scoring import TaskConfig, score_task
from scoring_harness import new_run, run_scoring
from scoring_program.scorer.config import CONFIG_NAME

REPO = Path(__file__).resolve().parents[3]
SPEC = REPO / "kinds" / "retina" / "default_spec.yaml"
TASKS = ("digits_acquisition", "digits_severity")
SCORING = scoring_runtime("retina")


def _majority_gain(rows: int) -> float:
    """How much better than the majority class one labels a group of ``rows`` rows, knowing
    its class count, by giving every row the group's majority class: E[max(K, n - K)] / n
    - 1/2 for K ~ Binomial(n, 1/2), the largest over the class rate."""
    return sum(math.comb(rows, k) * max(k, rows - k) for k in range(rows + 1)) \
        / 2 ** rows / rows - 0.5


# Each point of the page may give a group of MIN_ROWS rows' class count (0.088 for 20 rows);
# rounded up for the few targeted rows of the reliability and grade attacks.
MARGIN = round(_majority_gain(disclosure.MIN_ROWS) + 0.012, 3)


# ---- the real scoring program on the embedded image tasks ---------------------------------

@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("retina-disclosure")
    plan = phase_plan(load_spec(SPEC), "images")
    assert {task.name for task in plan.tasks} >= set(TASKS)
    assemble_scoring_program(plan, root / "program")
    config_file = root / "program" / CONFIG_NAME        # predictions straight into res/
    config_file.write_text(json.dumps({**json.loads(config_file.read_text()),
                                       "record": "optional"}))
    stage_reference_data(plan, root / "ref")
    return root


def truth(task: str) -> dict[str, np.ndarray]:
    return tables.reference(EMBEDDED / task / tables.REFERENCE_FILE)


def score(prepared: Path, tmp_path: Path, submission) -> dict[str, str]:
    """{task: its section of detailed_results.html} for ``submission(task, reference)`` ->
    (p, u), scored by the assembled scoring program as the worker runs it."""
    run = new_run(prepared, tmp_path / "run")
    for task in TASKS:
        p, u = submission(task, truth(task))
        np.savetxt(run / "input" / "res" / f"{task}_predictions.csv", np.column_stack([p, u]),
                   delimiter=",", header="probability,uncertainty", comments="", fmt="%.12g")
    result = run_scoring(run)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    page = (run / "output" / "detailed_results.html").read_text(encoding="utf-8")
    return dict(re.findall(r'<section id="task-([\w-]+)">(.*?)</section>', page, re.S))


# ---- reading the charts back, as an attacker would ----------------------------------------

NUMBER = r"-?\d+(?:\.\d+)?(?:e-?\d+)?"


def charts(section: str) -> dict[str, str]:
    return {re.search(r"<title>(.*?)</title>", svg, re.S).group(1): svg
            for svg in re.findall(r"<svg.*?</svg>", section, re.S)}


def _fit(pixels, values):
    slope, intercept = np.polyfit(np.asarray(pixels, float), np.asarray(values, float), 1)
    return lambda pixel: intercept + slope * np.asarray(pixel, float)


def axes(svg: str):
    """Pixel -> data maps of the x and y axes, from the tick labels."""
    y_ticks = re.findall(rf'<text x="62\.0" y="({NUMBER})" text-anchor="end">({NUMBER})</text>',
                         svg)
    to_y = _fit([float(y) - 4 for y, _ in y_ticks], [float(v) for _, v in y_ticks])
    base = re.search(rf'<line x1="({NUMBER})" y1="({NUMBER})" x2="\1" y2="{NUMBER}" '
                     r'stroke="#555"/>', svg)
    if base is None:                      # a bar chart has no numeric x axis
        return None, to_y
    label_y = f"{float(base.group(2)) + 16:.1f}"
    x_ticks = re.findall(rf'<text x="({NUMBER})" y="{label_y}" text-anchor="middle">'
                         rf"({NUMBER})</text>", svg)
    return _fit([float(x) for x, _ in x_ticks], [float(v) for _, v in x_ticks]), to_y


def legend(svg: str) -> dict[str, str]:
    """{series label: colour}."""
    lines = re.findall(r'stroke="(#\w+)" stroke-width="2"/>\s*<text [^>]*text-anchor="start">'
                       r"([^<]*)</text>", svg)
    boxes = re.findall(r'fill="(#\w+)" fill-opacity="0\.35" stroke="#\w+"/>\s*<text [^>]*'
                       r'text-anchor="start">([^<]*)</text>', svg)
    return {label: colour for colour, label in lines + boxes}


def series_points(svg: str, label: str) -> np.ndarray:
    """The (x, y) data points of one line series: its polylines' points, else its markers."""
    to_x, to_y = axes(svg)
    colour = legend(svg)[label]
    pixels = [tuple(map(float, pair.split(","))) for points in
              re.findall(rf'<polyline points="([^"]*)" fill="none" stroke="{colour}"', svg)
              for pair in points.split()]
    pixels = pixels or [(float(x), float(y)) for x, y in re.findall(
        rf'<circle cx="({NUMBER})" cy="({NUMBER})" r="3" fill="{colour}"/>', svg)]
    pixels = np.array(pixels or np.empty((0, 2)))
    return np.column_stack([to_x(pixels[:, 0]), to_y(pixels[:, 1])]) if pixels.size else pixels


def filled_ranges(svg: str, label: str) -> list[tuple[float, float]]:
    """The value ranges where a histogram or bar series has mass: a step histogram's flat
    tops above zero, or a bar's own "low to high: share" title."""
    colour = legend(svg).get(label)
    ranges = [(float(lo), float(hi)) for lo, hi, share in re.findall(
        rf'fill="{colour}" fill-opacity="0\.8"><title>({NUMBER}) to ({NUMBER}): ({NUMBER})'
        r"</title>", svg) if float(share) > 0]
    for points in re.findall(rf'<polygon points="([^"]*)" fill="{colour}"', svg):
        to_x, to_y = axes(svg)
        xy = np.array([tuple(map(float, pair.split(","))) for pair in points.split()])
        x, y = to_x(xy[:, 0]), to_y(xy[:, 1])
        pixel = abs(float(to_y(1.0) - to_y(0.0)))          # below a pixel is nothing
        ranges += [(x[i], x[i + 1]) for i in range(len(x) - 1)
                   if abs(y[i] - y[i + 1]) < pixel / 2 and y[i] > pixel / 2 and x[i + 1] > x[i]]
    return ranges


# ---- rebuilding labels from counts at chart points ----------------------------------------

def guesses_from_counts(ordered_rows, passed, hits, fallback: int) -> dict[int, int]:
    """Rows in the order the chart walks them; ``passed[k]`` rows walked by point k, of which
    ``hits[k]`` had the property: each stretch between two points gets its majority (or
    ``fallback`` on a tie). A chart with a point per row gives every row's value exactly."""
    guess = {}
    pairs = sorted(zip(np.rint(passed).astype(int), np.rint(hits).astype(int)))
    for (start, hit_start), (end, hit_end) in zip(pairs, pairs[1:]):
        if end <= start:
            continue
        rate = (hit_end - hit_start) / (end - start)
        value = fallback if rate == 0.5 else int(rate > 0.5)
        for row in ordered_rows[start:end]:
            guess.setdefault(int(row), value)
    return guess


def assert_no_better_than_chance(guess: dict[int, int], values: np.ndarray, rows, what: str,
                                 strata=None) -> None:
    """The guessed ``values`` of ``rows`` are right no more often than by giving each stratum
    (the attacker is told which evaluation set each row is in) its most common value, plus
    ``MARGIN``; a row the attack could not read gets that value too."""
    rows = np.asarray(rows)
    strata = np.zeros(rows.size, int) if strata is None else np.asarray(strata)
    truth_of, guessed, chance = values[rows], np.empty(rows.size, values.dtype), 0
    for stratum in np.unique(strata):
        inside = strata == stratum
        common = np.bincount(truth_of[inside]).argmax()
        chance += np.bincount(truth_of[inside]).max()
        guessed[inside] = [guess.get(int(row), common) for row in rows[inside]]
    accuracy, chance = float((guessed == truth_of).mean()), chance / rows.size
    assert accuracy <= chance + MARGIN, (
        f"{what}: the page gave back {accuracy:.3f} of {rows.size} hidden values "
        f"(chance {chance:.3f})")


def set_rows(reference, name: str) -> np.ndarray:
    shifted = reference["shifted"]
    return np.flatnonzero({"in-domain": ~shifted, "shifted": shifted,
                           "joint": np.ones_like(shifted)}[name])


# ---- the attacks --------------------------------------------------------------------------

@pytest.mark.parametrize("uncertainty", ["constant", "row index"])
def test_a_referral_curve_in_a_chosen_order_does_not_give_the_labels_back(
        uncertainty, prepared, tmp_path):
    """Everyone predicted referable (p = 1), so a row is right exactly when it is referable;
    the uncertainty, constant or the row index, refers rows in the file's order. Each step
    of the curve then says whether the row referred was right."""
    def submission(task, reference):
        n = reference["label"].size
        return np.ones(n), (np.zeros(n) if uncertainty == "constant" else np.arange(n))
    sections = score(prepared, tmp_path, submission)
    for task in TASKS:
        reference, found = truth(task), charts(sections[task])
        labels = reference["label"]
        for name in ("in-domain", "shifted"):
            rows = set_rows(reference, name)         # in file order: most certain first
            curve = series_points(found[f"Referral: {name}"], "submission")
            kept = (1 - curve[:, 0]) * rows.size
            guess = guesses_from_counts(rows, kept, curve[:, 1] * np.rint(kept),
                                        int(labels[rows].mean() >= 0.5))
            assert_no_better_than_chance(guess, labels, rows, f"{task} referral {name}")
        # the balanced joint set holds shifted rows once or more (a seeded draw), in order
        entries = metrics.balanced_indices(reference["shifted"].astype(np.int64), 0)
        entries = entries[np.argsort(np.zeros(entries.size) if uncertainty == "constant"
                                     else entries, kind="stable")]
        curve = series_points(found["Referral: joint (balanced)"], "submission")
        kept = (1 - curve[:, 0]) * entries.size
        per_entry = guesses_from_counts(np.arange(entries.size), kept,
                                        curve[:, 1] * np.rint(kept), 1)
        votes = {}
        for position, value in per_entry.items():
            votes.setdefault(int(entries[position]), []).append(value)
        guess = {row: int(np.mean(v) > 0.5) for row, v in votes.items()}
        assert_no_better_than_chance(guess, labels, np.unique(entries),
                                     f"{task} referral joint")


def test_a_roc_curve_of_distinct_scores_does_not_give_the_labels_back(prepared, tmp_path):
    """Probabilities that are the row order, all distinct: each step of a per-row ROC curve
    goes up for a referable row and right for another."""
    def submission(task, reference):
        n = reference["label"].size
        return (n - np.arange(n)) / (n + 1), np.zeros(n)      # row 0 scores highest
    sections = score(prepared, tmp_path, submission)
    for task in TASKS:
        reference, roc = truth(task), charts(sections[task])["ROC curves"]
        labels = reference["label"]
        for name in ("in-domain", "joint"):                 # the shifted digits: one class
            rows = set_rows(reference, name)                # by descending probability
            positives = int(labels[rows].sum())
            negatives = rows.size - positives
            curve = series_points(roc, name)
            true = np.rint(curve[:, 1] * positives)
            passed = np.rint(curve[:, 0] * negatives) + true
            guess = guesses_from_counts(rows, passed, true, int(positives >= negatives))
            assert_no_better_than_chance(guess, labels, rows, f"{task} ROC {name}")


# The ECE's 15 equal-width bins of the confidence max(p, 1 - p): bins 7 to 13 each get one
# targeted row, every other row sits in bin 14 (p = 1).
RELIABILITY_TARGETS = np.arange(7)
TARGET_PROBABILITIES = (np.arange(7, 14) + 0.6) / metrics.ECE_BINS


def test_a_reliability_bin_holding_one_row_does_not_give_its_label_back(prepared, tmp_path):
    def submission(task, reference):
        p = np.ones(reference["label"].size)
        p[RELIABILITY_TARGETS] = TARGET_PROBABILITIES
        return p, np.zeros(p.size)
    sections = score(prepared, tmp_path, submission)
    guess, labels, targets, strata, offset = {}, [], [], [], 0
    for task in TASKS:
        reference, diagram = truth(task), charts(sections[task])["Reliability diagram"]
        for row, probability in zip(RELIABILITY_TARGETS, TARGET_PROBABILITIES):
            name = "shifted" if reference["shifted"][row] else "in-domain"
            points = series_points(diagram, name)
            nearest = points[np.argmin(np.abs(points[:, 0] - probability))]
            guess[offset + int(row)] = int(nearest[1] > 0.5)    # right means referable
        labels += list(reference["label"][RELIABILITY_TARGETS])
        targets += list(offset + RELIABILITY_TARGETS)
        strata += list(2 * offset + reference["shifted"][RELIABILITY_TARGETS])
        offset += reference["label"].size
    full = np.zeros(offset, np.int64)
    full[targets] = labels
    assert_no_better_than_chance(guess, full, targets, "reliability diagram", strata)


GRADE_TARGETS = np.arange(11)          # uncertainties 1 to 11, every other row 0


def test_an_uncertainty_set_apart_does_not_give_a_rows_grade_back(prepared, tmp_path):
    """Eleven rows each get an uncertainty of their own, far from the others' 0: in a
    histogram by true grade, right and wrong, each shows up alone in a bin of one grade."""
    def submission(task, reference):
        u = np.zeros(reference["label"].size)
        u[GRADE_TARGETS] = GRADE_TARGETS + 1.0
        return np.ones(u.size), u
    sections = score(prepared, tmp_path, submission)
    label_guess, grade_guess, labels, grades, targets, strata = {}, {}, [], [], [], []
    offset = 0
    for task in TASKS:
        reference, found = truth(task), charts(sections[task])
        candidates = {int(row): set() for row in GRADE_TARGETS}
        for title, svg in found.items():
            grade = re.fullmatch(r"Uncertainty, true grade (\d+)", title)
            if grade is None:
                continue
            for label in legend(svg):
                right = label.startswith("correct")
                for low, high in filled_ranges(svg, label):
                    for row in GRADE_TARGETS:
                        if low - 0.02 <= row + 1.0 <= high + 0.02:
                            candidates[int(row)].add((int(grade.group(1)), right))
        for row, found_in in candidates.items():
            if len(found_in) == 1:                   # set apart: its grade and its label
                (grade, right), = found_in
                grade_guess[offset + row], label_guess[offset + row] = grade, int(right)
        labels += list(reference["label"][GRADE_TARGETS])
        grades += list(reference["grade"][GRADE_TARGETS])
        targets += list(offset + GRADE_TARGETS)
        strata += list(2 * offset + reference["shifted"][GRADE_TARGETS])
        offset += reference["label"].size
    full_labels, full_grades = np.zeros(offset, np.int64), np.zeros(offset, np.int64)
    full_labels[targets], full_grades[targets] = labels, grades
    assert_no_better_than_chance(label_guess, full_labels, targets, "grade charts: labels",
                                 strata)
    assert_no_better_than_chance(grade_guess, full_grades, targets, "grade charts: grades",
                                 strata)


def test_the_page_states_the_rule_and_rounds_its_figures(prepared, tmp_path):
    rng = np.random.default_rng(5)
    sections = score(prepared, tmp_path, lambda task, reference: (
        rng.random(reference["label"].size), rng.random(reference["label"].size)))
    section = sections[TASKS[0]]
    assert f"at least {disclosure.MIN_ROWS} hidden rows" in section
    table = section[section.index("Every figure, per evaluation set"):]
    table = table[:table.index("</table>")]
    shown = re.findall(r'<td class="num">(-?\d+\.\d+)</td>', table)
    assert shown and all(len(value.split(".")[1]) == disclosure.DECIMALS for value in shown)
    for title, svg in charts(section).items():
        if "points" in svg:
            for points in re.findall(r'<polyline points="([^"]*)"', svg):
                assert len(points.split()) <= disclosure.GRID_STEPS + 1, title


# ---- the rules themselves -----------------------------------------------------------------

@pytest.mark.parametrize("seed", range(12))
def test_every_group_holds_enough_rows_at_a_fixed_grid(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.choice([0, 1, 5, 19, 20, 21, 39, 40, 57, 200, 1003]))
    values = rng.integers(0, rng.integers(1, 40), n).astype(float) if seed % 3 == 0 \
        else rng.random(n)
    members = rng.random(n) < rng.choice([1.0, 0.5, 0.1])
    ids = rng.integers(0, max(1, n // 2), n) if seed % 4 == 1 else np.arange(n)
    for keep_ties in (True, False):
        for descending in (False, True):
            groups = disclosure.grouped_rows(values, members, ids, keep_ties=keep_ties,
                                             descending=descending)
            rows = np.concatenate([g.rows for g in groups] or [np.empty(0, int)])
            enough = np.unique(ids[members]).size >= disclosure.MIN_ROWS
            # every member once, in value order, in at most GRID_STEPS groups of enough rows
            assert sorted(rows.tolist()) == (np.flatnonzero(members).tolist() if enough else [])
            assert len(groups) <= disclosure.GRID_STEPS
            for group in groups:
                assert np.unique(ids[group.rows]).size >= disclosure.MIN_ROWS
                assert members[group.rows].all()
            ordered = values[rows] * (-1 if descending else 1)
            assert (np.diff(ordered) >= 0).all()
            if keep_ties:        # equal values are one threshold: never in two groups
                for a, b in zip(groups, groups[1:]):
                    assert not set(values[a.rows]) & set(values[b.rows])


def test_the_grid_is_fixed_fractions_when_the_rows_allow():
    assert disclosure.grid_bounds(np.arange(1000.0), min_rows=20) == list(range(0, 1001, 100))
    assert disclosure.grid_bounds(np.arange(50.0), min_rows=20) == [0, 20, 50]
    assert disclosure.grid_bounds(np.arange(19.0), min_rows=20) == []
    assert disclosure.grid_bounds(np.zeros(500), min_rows=20) == [0, 500]   # one threshold
    assert disclosure.rounded(0.123456) == 0.123


def tiny_task(tmp_path: Path, in_domain: int, shifted: int, seed: int = 0):
    """A generated task of a few rows through the kind's own scorer and report."""
    rng = np.random.default_rng(seed)
    n = in_domain + shifted
    grade = rng.integers(0, 5, n)
    ref = tmp_path / "ref"
    ref.mkdir()
    rows = [f"{int(g >= 2)},{g},{int(i >= in_domain)}" for i, g in enumerate(grade)]
    (ref / tables.REFERENCE_FILE).write_text("label,grade,shifted\n" + "\n".join(rows) + "\n")
    res = tmp_path / "res"
    res.mkdir()
    np.savetxt(res / "tiny_predictions.csv", np.column_stack([rng.random(n), rng.random(n)]),
               delimiter=",", header="probability,uncertainty", comments="", fmt="%.10g")
    settings = SCORING.parse_settings("diagnosis", {
        "n_test": n, "submission_stem": "tiny_predictions",
        "reference": tables.REFERENCE_FILE}, "test")
    config = TaskConfig("tiny", SCORING.TASK_TYPES["diagnosis"], {"auroc_in": 0.5,
                                                                  "referral_joint": 0.5},
                        20.0, settings)
    return score_task(SCORING, config, ref, res, None)


@pytest.mark.parametrize("in_domain, shifted", [(4, 3), (12, 9), (25, 15), (60, 60)])
def test_small_sets_draw_coarser_charts_or_none_with_a_note(in_domain, shifted, tmp_path):
    result = tiny_task(tmp_path, in_domain, shifted)
    section = SCORING.report_section(result)
    found = charts(section)
    assert {"ROC curves", "Reliability diagram"} <= set(found)
    too_few = [title for title in found if "not drawn" in title]
    if in_domain < disclosure.MIN_ROWS:
        assert "Referral: in-domain: fewer than 20 patients, not drawn" in too_few
    else:
        curve = series_points(found["Referral: in-domain"], "submission")
        assert 2 <= len(curve) <= 1 + in_domain // disclosure.MIN_ROWS

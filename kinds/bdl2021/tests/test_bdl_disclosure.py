"""The BDL detailed results give away no hidden test label.

A hostile participant of the evaluation phase submits probabilities built to isolate test
rows: every row says class 0, most with confidence 0.55, four chosen rows with 0.65, 0.75,
0.85 and 0.95 (one per bin of a reliability diagram on fixed tenths, where each would be
alone). It reads the rendered page back (every point of every chart mapped to data through
the axis ticks, and the tables) and, round after round, reconstructs the label of every row.
It must do no better than guessing the majority class, which it learns from the accuracy the
page states. Rounds run the scorer's own functions in process (48 rounds through the
subprocess would take minutes); one round runs the real scoring program to show that it
renders the same page. Regression: the page draws no coverage curve of the submission's
own intervals."""
import math
import re

import numpy as np
import pytest

from kinds.bdl2021.kind import files
from kinds.bdl2021.runtime.formats import read_chain_samples
from runtime.formats import write_matrix
from runtime.scoring import score_task
from scoring_harness import new_run, prepare_phase, run_scoring
from scoring_program.scorer.config import CONFIG_NAME, load_config
from scoring_program.scorer.report import render_report

TASK, REGRESSION = "breast_cancer", "diabetes_gap"
BASE, TARGETS = 0.55, (0.65, 0.75, 0.85, 0.95)
SVG = re.compile(r"<svg.*?</svg>", re.S)
CIRCLE = re.compile(r'<circle cx="([-0-9.]+)" cy="([-0-9.]+)" r="3" fill="(#[0-9a-f]+)"')
LEGEND = re.compile(r'stroke="(#[0-9a-f]+)"[^>]*/>\n<text [^>]*>submission</text>')
Y_TICK = re.compile(r'<text x="[-0-9.]+" y="([-0-9.]+)" text-anchor="end">(-?[0-9.]+)</text>')
X_TICK = re.compile(r'<text x="([-0-9.]+)" y="[-0-9.]+" text-anchor="middle">(-?[0-9.]+)</text>')
ACCURACY = re.compile(r"<td>accuracy \(submission\)</td><td class=\"num\">([0-9.]+)</td>")


@pytest.fixture(scope="module")
def phase(tmp_path_factory):
    root = tmp_path_factory.mktemp("bdl-disclosure")
    plan = prepare_phase(root, "evaluation", tasks=[TASK, REGRESSION])
    config = load_config(root / "program" / CONFIG_NAME)
    tasks = {task.name: task for task in config.tasks}
    labels = np.load(root / "ref" / tasks[TASK].settings.test_labels).ravel().astype(int)
    return root, plan, config, tasks, labels


def hostile_probabilities(n: int, targets: list[int]) -> np.ndarray:
    """Class 0 everywhere; ``targets`` at the confidences of TARGETS, the rest at BASE."""
    confidence = np.full(n, BASE)
    confidence[targets] = TARGETS[:len(targets)]
    return np.column_stack([confidence, 1 - confidence])


def _axis(ticks) -> tuple[float, float]:
    pixels = np.array([(float(p), float(v)) for p, v in ticks])
    return tuple(np.polyfit(pixels[:, 0], pixels[:, 1], 1))


def points_read_back(page: str) -> list[tuple[float, float]]:
    """(x, y) in data units of every point the submission's series draws on the page."""
    points = []
    for svg in SVG.findall(page):
        circles, y_ticks, x_ticks = CIRCLE.findall(svg), Y_TICK.findall(svg), X_TICK.findall(svg)
        legend = LEGEND.search(svg)
        if not circles or not legend or len(y_ticks) < 2 or len(x_ticks) < 2:
            continue
        (x_slope, x_offset), (y_slope, y_offset) = _axis(x_ticks), _axis(
            [(float(p) - 4.0, v) for p, v in y_ticks])
        points += [(x_slope * float(x) + x_offset, y_slope * float(y) + y_offset)
                   for x, y, colour in circles if colour == legend.group(1)]
    return points


def recovered_labels(page: str, targets: list[int]) -> dict[int, int]:
    """Each target's label as the page tells it: a point at its confidence (alone in its
    bin) is right (class 0) or wrong (class 1); else the class the page says is commoner."""
    majority = 0 if float(ACCURACY.search(page).group(1)) >= 0.5 else 1
    points = points_read_back(page)
    guesses = {}
    for row, confidence in zip(targets, TARGETS):
        near = [accuracy for x, accuracy in points if abs(x - confidence) < 0.004]
        guesses[row] = (0 if near[0] >= 0.5 else 1) if near else majority
    return guesses


def _page(phase, tmp_path, probabilities) -> str:
    """The page of one round, through the scorer's functions in this process."""
    root, _, config, tasks, _ = phase
    res = tmp_path / "res"
    res.mkdir(exist_ok=True)
    np.save(res / f"{TASK}_probs.npy", probabilities)
    result = score_task(config_scoring(config), tasks[TASK], root / "ref", res, None)
    return render_report([result], config_scoring(config), phase="evaluation",
                         weighted_loss=None, problems=[])


def config_scoring(config):
    from kinds.kind import scoring_runtime
    return scoring_runtime(config.kind)


def test_the_real_program_renders_the_same_page(phase, tmp_path):
    root, _, _, tasks, labels = phase
    probabilities = hostile_probabilities(len(labels), [0, 1, 2, 3])
    run = new_run(root, tmp_path / "run")
    np.save(run / "input" / "res" / f"{TASK}_probs.npy", probabilities)
    write_matrix(run / "input" / "res" / f"{REGRESSION}_samples.csv",
                 read_chain_samples(files_of(phase, REGRESSION).chain_reference)[0])
    result = run_scoring(run)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    page = (run / "output" / "detailed_results.html").read_text()
    section = page[page.index(f'<section id="task-{TASK}">'):]
    section = section[:section.index("</section>")]
    assert recovered_labels(section, [0, 1, 2, 3]) == recovered_labels(
        _page(phase, tmp_path, probabilities), [0, 1, 2, 3])


def files_of(phase, name):
    _, plan, _, _, _ = phase
    return files(next(task for task in plan.tasks if task.name == name))


def test_rounds_of_hostile_submissions_recover_no_label_beyond_the_majority(phase, tmp_path):
    _, _, _, _, labels = phase
    n = len(labels)
    recovered = {}
    for start in range(0, n, len(TARGETS)):
        targets = list(range(start, min(n, start + len(TARGETS))))
        recovered.update(recovered_labels(_page(phase, tmp_path,
                                                hostile_probabilities(n, targets)), targets))
    rate = np.mean([recovered[row] == labels[row] for row in range(n)])
    majority = max(np.mean(labels == 0), np.mean(labels == 1))
    # Three binomial standard deviations over the n rows: what guesses that know only the
    # class shares could reach by luck (n = 190, a majority of 0.63: +0.105).
    margin = 3 * math.sqrt(majority * (1 - majority) / n)
    assert rate <= majority + margin, (f"the page's charts give {rate:.3f} of the hidden "
                                       f"labels; guessing the majority gives {majority:.3f}")


def test_no_chart_draws_the_submissions_coverage_of_hidden_targets(phase, tmp_path):
    root, _, config, tasks, _ = phase
    res = tmp_path / "res"
    res.mkdir()
    write_matrix(res / f"{REGRESSION}_samples.csv",
                 read_chain_samples(files_of(phase, REGRESSION).chain_reference)[0])
    result = score_task(config_scoring(config), tasks[REGRESSION], root / "ref", res, None)
    page = render_report([result], config_scoring(config), phase="evaluation",
                         weighted_loss=None, problems=[])
    coverage = [svg for svg in SVG.findall(page) if "Coverage" in svg]
    assert coverage and all(">submission</text>" not in svg for svg in coverage)

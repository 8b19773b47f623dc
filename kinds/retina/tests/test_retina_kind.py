"""The Retina kind end to end (its default competition's build and dry run on both platforms are
test_kind_conformance.py's): the baselines run through the code phase and are scored, the scorer
reads both submission forms and refuses bad ones with the row named, no participant file says
which rows are shifted, and an organizer's broken task folder is refused with the file named."""
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from bundle.phase_data import stage_input_data, stage_public_data
from bundle.phase_plan import phase_plan
from bundle.spec import load_spec
from runtime.formats import TaskRun
from kinds.kind import scoring_runtime
from kinds.retina.reference.make_tasks import EMBEDDED
from kinds.retina.runtime import metrics, tables
from runtime.scoring import ReferenceDataError, TaskConfig, score_task
from in_process_commands import run_main
from kit_runs import run_kit_locally
from local_runs import scores_of

REPO = Path(__file__).resolve().parents[3]
SPEC = REPO / "kinds" / "retina" / "default_spec.yaml"
SCORING = scoring_runtime("retina")


def build(*args):
    """``build_bundle.py *args``, its main run in this process (in_process_commands.py): what
    is tested is what the builder refuses and says, not a new interpreter's start."""
    import build_bundle
    return run_main(build_bundle.main, *args)


def test_no_participant_file_says_which_rows_are_shifted(tmp_path):
    """The shifted/in-domain split is the scorer's alone: no public or input file of any phase
    holds it (the default competition's build and dry run: test_kind_conformance.py)."""
    spec = load_spec(SPEC)
    for phase in spec.phases:
        plan = phase_plan(spec, phase.key)
        folders = (stage_public_data(plan, tmp_path / phase.key / "public"),
                   stage_input_data(plan, tmp_path / phase.key / "input"))
        names = [path.name for folder in folders for path in folder.rglob("*") if path.is_file()]
        assert names and not any("reference" in name for name in names), names
    arrays = np.load(tmp_path / "final" / "input" / "severity_test_inputs.npz")
    assert sorted(arrays.files) == ["grades_train", "x_test", "x_train", "y_train"]


def task_config(name="severity_test") -> TaskConfig:
    n_test = len(tables.read_table(EMBEDDED / name / tables.FEATURES_FILE)[1])
    settings = SCORING.parse_settings("diagnosis", {
        "n_test": n_test, "submission_stem": f"{name}_predictions",
        "reference": tables.REFERENCE_FILE}, "test")
    return TaskConfig(name, SCORING.TASK_TYPES["diagnosis"], {"auroc_in": 0.5,
                                                               "referral_joint": 0.5}, 20.0,
                      settings)


def write(res: Path, name: str, columns, header="probability,uncertainty") -> None:
    res.mkdir(exist_ok=True)
    np.savetxt(res / f"{name}_predictions.csv", np.column_stack(columns), delimiter=",",
               header=header, comments="", fmt="%.10g")


def test_the_leaderboard_figures_follow_the_benchmarks_definitions(tmp_path):
    config, ref = task_config(), tables.reference(EMBEDDED / "severity_test" /
                                                   tables.REFERENCE_FILE)
    rng = np.random.default_rng(3)
    p = np.clip(0.6 * ref["label"] + 0.4 * rng.random(ref["label"].size), 0, 1)
    u = rng.random(p.size)
    write(tmp_path / "res", "severity_test", [p, u])
    result = score_task(SCORING, config, EMBEDDED / "severity_test", tmp_path / "res", None)
    assert not result.penalised
    keep, y = ~ref["shifted"], ref["label"]
    value = {name: m.value for name, m in result.metrics.items()}
    assert value["auroc_in"] == pytest.approx(metrics.auroc(y[keep], p[keep]), abs=1e-12)
    assert value["ece_shifted"] == pytest.approx(
        metrics.expected_calibration_error(y[~keep], p[~keep]))
    assert value["ood_auroc"] == pytest.approx(metrics.auroc(ref["shifted"].astype(int), u))
    # the balanced joint set by hand: in-domain rows, shifted rows tiled, a seeded remainder
    chosen = metrics.balanced_indices(ref["shifted"].astype(int), seed=0)
    assert (ref["shifted"][chosen]).sum() == (~ref["shifted"][chosen]).sum()
    curve = metrics.accuracy_retention_curve(y[chosen], p[chosen], u[chosen])
    assert value["referral_joint"] == pytest.approx(curve.mean())
    assert result.extras["shifted AUPRC"] == 1.0 and "shifted AUROC" not in result.extras


def test_an_oracle_uncertainty_beats_random_referral_and_a_lone_probability_uses_entropy(
        tmp_path):
    config, ref = task_config(), tables.reference(EMBEDDED / "severity_test" /
                                                   tables.REFERENCE_FILE)
    p = np.where(np.arange(ref["label"].size) % 3 == 0, 1 - ref["label"], ref["label"]) * 0.8 + 0.1
    wrong = (metrics.predicted_class(p) != ref["label"]).astype(float)
    write(tmp_path / "oracle", "severity_test", [p, wrong])
    write(tmp_path / "random", "severity_test", [p, np.zeros_like(p)])
    write(tmp_path / "alone", "severity_test", [p], header="probability")
    oracle, random, alone = (score_task(SCORING, config, EMBEDDED / "severity_test",
                                                tmp_path / name, None)
                             for name in ("oracle", "random", "alone"))
    accuracy = 1 - wrong.mean()
    assert oracle.metrics["referral_joint"].value > random.metrics["referral_joint"].value + 0.2
    # every uncertainty tied: the referral order is the file's, so the area is computable
    n = (~ref["shifted"]).sum()
    kept_correct = 1 - wrong[~ref["shifted"]]
    expected = np.r_[[kept_correct[:n - k].mean() for k in range(n)], 1.0].mean()
    assert random.metrics["referral_in"].value == pytest.approx(expected)
    assert abs(random.metrics["accuracy_shifted"].value - (1 - wrong[ref["shifted"]].mean())) < 1e-12
    assert accuracy > 0.6
    assert alone.notes and "entropy" in alone.notes[0]
    write(tmp_path / "entropy", "severity_test", [p, metrics.predictive_entropy(p)])
    explicit = score_task(SCORING, config, EMBEDDED / "severity_test", tmp_path / "entropy", None)
    assert {k: m.value for k, m in alone.metrics.items()} == \
        {k: m.value for k, m in explicit.metrics.items()}


@pytest.mark.parametrize("rows, expected", [
    (lambda p, u: [np.r_[p[:-1], 1.5], u], r"row 182, probability: 1\.5; expected a value in"),
    (lambda p, u: [p[:-1], u[:-1]], r"expected 182 rows|182 rows"),
    (lambda p, u: [p, np.r_[u[:4], np.nan, u[5:]]], r"line 6, column 2: expected a finite number"),
])
def test_a_bad_file_penalises_the_task_and_names_the_row(rows, expected, tmp_path):
    config = task_config()
    p, u = np.full(182, 0.4), np.linspace(0, 1, 182)
    write(tmp_path / "res", "severity_test", rows(p, u))
    result = score_task(SCORING, config, EMBEDDED / "severity_test", tmp_path / "res", None)
    assert result.penalised and re.search(expected, result.penalty), result.penalty
    assert result.metrics["auroc_in"].value == 0.0 and result.metrics["ece_in"].value == 1.0
    run = TaskRun("timeout", 20.0, prediction=None, message="budget exceeded")
    assert score_task(SCORING, config, EMBEDDED / "severity_test", tmp_path / "res", run).penalised


def test_a_broken_reference_names_the_file_and_line(tmp_path):
    shutil.copytree(EMBEDDED / "severity_test", tmp_path / "ref")
    path = tmp_path / "ref" / tables.REFERENCE_FILE
    lines = path.read_text().splitlines()
    lines[3] = "1,2,7"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ReferenceDataError, match=r"test_reference\.csv: line 4, column shifted"):
        score_task(SCORING, task_config(), tmp_path / "ref", tmp_path, None)


@pytest.mark.parametrize("baseline", ["map", "mc_dropout", "deep_ensemble"])
def test_the_baselines_run_through_the_code_phase_and_referral_helps(baseline,
                                                                     shared_local_runs):
    # The same run as the browser's report test (tests/test_pages_browser.py) makes of
    # mc_dropout: one run a test run (conftest.py's shared_local_runs) serves both.
    result, out = shared_local_runs(SPEC, "final", baseline=baseline, score_hidden=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    scores = scores_of(result.stdout)
    for task in ("severity_test", "population_test"):
        assert scores[f"{task}_auroc_in"] > 0.65
        # referring the most uncertain patients raises the accuracy of those kept
        assert scores[f"{task}_referral_shifted"] > scores[f"{task}_accuracy_shifted"] + 0.05
    report = (out / "scoring" / "run" / "output" / "detailed_results.html").read_text()
    for title in ("ROC curves", "Reliability diagram", "Referral: joint (balanced)",
                  "Uncertainty, true grade 4", "NHS screening standard"):
        assert title in report


IMPOSSIBLE = '''
import numpy as np

def predict(task, x_train, y_train, x_test):
    return np.full(len(x_test), 7.0), np.zeros(len(x_test))
'''
HANGS_AFTER_A_CHECKPOINT = '''
import time
import numpy as np

def predict(task, x_train, y_train, x_test):
    task.checkpoint(np.full(len(x_test), 0.3))
    while True:
        time.sleep(1)
'''


def run_code(tmp_path, source: str):
    """`python -m bundle.local_run --phase final --score-hidden --budget 2 --code ...`, its
    kit built in this process (kit_runs.py)."""
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "submission.py").write_text(source)
    return run_kit_locally(SPEC, "final", tmp_path / "run", code=folder, budget=2,
                           score_hidden=True)


def test_impossible_probabilities_penalise_the_task_with_the_row_named(tmp_path):
    result = run_code(tmp_path, IMPOSSIBLE)
    assert result.returncode == 1
    assert ("severity_test penalised: Wrote invalid output: training run invalid: the returned "
            "predictions: row 1, "
            "probability: 7.0; expected a value in [0, 1]") in result.stdout + result.stderr
    # both tasks penalised: nothing scored, the submission fails; the report keeps the values
    assert "the platform would fail the submission: not scored: no task could be scored" \
        in result.stderr
    from scoring_harness import read_unscored
    assert read_unscored(tmp_path / "run" / "scoring" / "run")["severity_test_auroc_in"] == 0.0


def test_code_killed_at_its_budget_is_scored_on_its_last_checkpoint(tmp_path):
    result = run_code(tmp_path, HANGS_AFTER_A_CHECKPOINT)
    scores = scores_of(result.stdout)
    # a constant 0.3 and no uncertainty: every AUROC is a half, nothing is penalised
    assert scores["severity_test_auroc_in"] == 0.5 and scores["population_test_ood_auroc"] == 0.5
    assert "penalised" not in result.stdout, result.stdout[-3000:]


def organizer_tasks(tmp_path, change) -> Path:
    root = tmp_path / "tasks"
    for folder in (path for path in EMBEDDED.iterdir() if path.is_dir()):
        shutil.copytree(folder, root / folder.name)
    change(root)
    spec = yaml.safe_load(SPEC.read_text())
    spec["data_root"] = str(root)
    shutil.copyfile(SPEC.parent / "logo.png", tmp_path / "logo.png")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return tmp_path / "spec.yaml"


def _one_class_in_domain(root: Path) -> None:
    path = root / "severity_test" / tables.REFERENCE_FILE
    header, values = tables.read_table(path)
    values[values[:, 2] == 0, 0] = 0
    np.savetxt(path, values, fmt="%d", delimiter=",", header=",".join(header), comments="")


def _renamed_test_column(root: Path) -> None:
    path = root / "population_val" / tables.FEATURES_FILE
    path.write_text(path.read_text().replace("age,", "years,", 1))


def _sorted_by_domain(root: Path) -> None:
    """In-domain rows first, then the shifted ones, as two files pasted together would be."""
    test, reference = (root / "severity_val" / name
                       for name in (tables.FEATURES_FILE, tables.REFERENCE_FILE))
    features, rows = test.read_text().splitlines(), reference.read_text().splitlines()
    order = sorted(range(1, len(rows)), key=lambda i: rows[i].split(",")[2])
    for path, lines in ((test, features), (reference, rows)):
        path.write_text("\n".join([lines[0]] + [lines[i] for i in order]) + "\n")


def _extra_test_column(root: Path) -> None:
    """The labels left in test.csv."""
    path = root / "severity_test" / tables.FEATURES_FILE
    lines = path.read_text().splitlines()
    labels = ["label"] + ["0"] * (len(lines) - 1)
    path.write_text("".join(f"{line},{label}\n" for line, label in zip(lines, labels)))


def _no_grade_in_train(root: Path) -> None:
    path = root / "population_test" / tables.TRAIN_FILE
    lines = [line.rsplit(",", 1)[0] for line in path.read_text().splitlines()]
    path.write_text("\n".join(lines) + "\n")


def _text_in_train(root: Path) -> None:
    path = root / "severity_val" / tables.TRAIN_FILE
    lines = path.read_text().splitlines()
    lines[6] = "n/a," + lines[6].split(",", 1)[1]
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("change, expected", [
    (lambda root: None, None),            # the documented format, as given: it builds
    (_one_class_in_domain, r"severity_test/test_reference\.csv: the in-domain rows .* need both"),
    (_renamed_test_column, r"population_val/test\.csv: column 1 is 'years'; expected 'age' "
                           r"\(column 1 of train\.csv"),
    (_extra_test_column, r"severity_test/test\.csv: column 11 is 'label'; expected no column "
                         r"after 's6'"),
    (_sorted_by_domain, r"severity_val/test\.csv: its rows are ordered by shifted .*"
                        r"shuffle the data rows of test\.csv and test_reference\.csv"),
    (_text_in_train, r"severity_val/train\.csv: line 7, column age: 'n/a' is not a finite"),
    (_no_grade_in_train, r"population_test/train\.csv: no column grade; the header has age"),
])
def test_an_organizers_broken_task_is_refused_with_the_file_named(change, expected, tmp_path):
    spec = organizer_tasks(tmp_path, change)
    result = build("--config", str(spec), "--phase", "all", "--out", str(tmp_path / "out"))
    if expected is None:
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        return
    assert result.returncode != 0
    assert re.search(expected, result.stdout + result.stderr), result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def test_the_embedded_tasks_are_what_the_generator_makes():
    """Byte for byte on any machine: no float of the generation depends on a summation order
    or a SIMD width. The tables are scikit-learn's values printed, grades by percentiles
    (sorting, one interpolation); the images are integer scans scaled, blurred and noised by
    elementwise IEEE operations in a fixed order, rounded to uint8 and resized by Pillow's
    fixed-point bilinear filter (checked with numpy's AVX/AVX2/FMA dispatch off and
    OpenBLAS's Prescott kernels)."""
    from reference_data.__main__ import main
    # `python -m reference_data --kind retina verify`'s main, in this process: the claim is
    # the generation's, not a new interpreter's (in_process_commands.py)
    result = run_main(main, "--kind", "retina", "verify")
    assert result.returncode == 0 and "retina tasks: ok" in result.stdout, result.stderr


def test_only_an_order_no_shuffle_would_give_is_refused():
    """The runs test behind the refusal of a test.csv sorted by domain: sorted or pasted-together
    files are refused, shuffles of any size are not, and a sorted file too small to tell from a
    shuffle passes."""
    from kinds.retina.kind import _order_problem
    rng = np.random.default_rng(0)
    for zeros, ones in ((150, 60), (60, 60), (12, 12), (500, 40)):
        column = np.r_[np.zeros(zeros), np.ones(ones)]
        assert "ordered by shifted" in _order_problem("shifted", column)
        assert "ordered by shifted" in _order_problem("shifted", column[::-1])
        assert "ordered by label" in _order_problem("label", column)
        pasted = np.r_[np.zeros(zeros // 2), np.ones(ones), np.zeros(zeros - zeros // 2)]
        assert (_order_problem("shifted", pasted) is None) == (zeros == 12)   # 3 runs of 24
        for _ in range(200):
            assert _order_problem("shifted", rng.permutation(column)) is None
    assert _order_problem("shifted", np.r_[np.zeros(11), np.ones(11)]) is None
    assert _order_problem("shifted", np.r_[np.zeros(500), np.ones(1)]) is None

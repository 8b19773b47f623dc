"""Standard errors of the leaderboard figures: the bootstrap itself, and every kind's default
competition showing one for each metric in its detailed results."""
import dataclasses
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from plans import embedded_phase
from bundle.programs import scoring_config
from kinds.kind import KINDS, kind, scoring_runtime
from runtime import failures, rules, uncertainty
from runtime.scoring import ScoreType, penalised
from scoring_program.scorer.config import parse_config

REPO = Path(__file__).resolve().parents[1]


def _proportion(correct):
    return float(np.mean(correct))


PROPORTION = ScoreType("share", "share", "share of ones", True, 0.0, 1.0, 4, _proportion,
                       ("correct",))


def test_stratified_draws_resample_each_stratum_within_itself_at_its_size():
    strata = np.array([0] * 30 + [1] * 70)
    indices = np.array(list(uncertainty.resampled_rows(100, strata, draws=50)))
    assert indices.shape == (50, 100)
    assert np.all(strata[indices] == np.sort(strata))        # 30 of stratum 0, then 70 of 1
    assert not np.all(indices == indices[0])                 # draws differ
    assert np.array_equal(indices, list(uncertainty.resampled_rows(100, strata, draws=50)))


def test_the_bootstrap_and_the_closed_form_of_a_proportion_match_the_binomial_formula():
    """sqrt(p (1 - p) / n) is the standard error of a proportion; the closed form of a mean
    of per-row terms gives it (with n - 1), and 200 bootstrap draws estimate it within about
    5% (one standard deviation), so 20% is four."""
    correct = (np.arange(2000) % 10 < 3).astype(float)       # p = 0.3
    exact = math.sqrt(0.3 * 0.7 / 2000)
    by_terms = dataclasses.replace(PROPORTION, name="by_terms", per_row=lambda c: c)
    errors = uncertainty.row_errors([PROPORTION, by_terms], {"correct": correct},
                                    uncertainty.take_rows(["correct"]), 2000)
    assert errors["share"] == pytest.approx(exact, rel=0.2)
    assert errors["by_terms"] == pytest.approx(exact * math.sqrt(2000 / 1999), rel=1e-12)


def test_a_stratified_mean_weighs_each_stratums_variance_by_its_share():
    terms = np.array([0.0, 1.0, 0.0, 1.0, 5.0, 5.0, 5.0, 5.0])
    strata = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    # stratum 0: variance 1/3 over 4 rows, weight 1/2; stratum 1: constant
    assert uncertainty.stratified_mean_se(terms, strata) == pytest.approx(
        math.sqrt(0.25 * (1 / 3) / 4))
    assert uncertainty.stratified_mean_se(terms[:1]) is None


def test_a_statistic_undefined_on_many_draws_has_no_standard_error():
    def undefined_half_the_time(rows):
        if rows[0] % 2:
            raise ValueError("one class only")
        return float(rows.mean())
    errors = uncertainty.bootstrap_errors(
        {"undefined": undefined_half_the_time, "mean": lambda rows: float(rows.mean())},
        uncertainty.resampled_rows(50))
    assert errors["undefined"] is None and errors["mean"] > 0


def per_row_terms_checked(cases) -> int:
    """For each score type of ``cases`` ((task type, arrays of its own shapes)) that declares
    per-row terms: one term per row, their mean its value. Returns how many were checked."""
    declared = 0
    for task_type, arrays in cases:
        for score_type in task_type.score_types:
            if score_type.per_row is not None:
                declared += 1
                terms = score_type.terms(arrays)
                assert terms.shape == (50,)
                assert np.mean(terms) == pytest.approx(score_type.evaluate(arrays), rel=1e-12)
    return declared


def test_a_score_types_per_row_terms_average_to_its_value():
    """label_accuracy's accuracy, its one score type with per-row terms (BDL's four:
    kinds/bdl2021/tests/test_bdl_metrics.py)."""
    rng = np.random.default_rng(5)
    cases = [(scoring_runtime("label_accuracy").TASK_TYPES["labels"],
              {"predicted": rng.integers(0, 3, 50), "labels": rng.integers(0, 3, 50)})]
    assert per_row_terms_checked(cases) == 1


def test_independent_sources_add_in_quadrature_and_replicates_give_a_t_widened_mean_se():
    assert uncertainty.combined_se(0.3, 0.4) == pytest.approx(0.5)
    assert uncertainty.combined_se(None, 0.4) == pytest.approx(0.4)
    assert uncertainty.combined_se(None, None) is None
    # sd over 4 replicates / sqrt(4), times t_3 / z = 3.1824 / 1.96
    replicates = [1.0, 2.0, 3.0, 2.0]
    assert uncertainty.replicates_se(replicates) == pytest.approx(
        np.std(replicates, ddof=1) / 2 * 3.1824 / 1.959964, rel=1e-4)
    assert uncertainty.replicates_se([1.0]) is None


def test_students_t_point_is_tabulated_then_expanded():
    from scipy.stats import t
    for freedom in (1, 3, 29, 30, 31, 100, 10_000):
        assert uncertainty.student_t95(freedom) == pytest.approx(t.ppf(0.975, freedom),
                                                                 abs=1e-4)


def test_every_kind_states_how_it_measures_its_standard_errors():
    for name in KINDS:
        assert len(scoring_runtime(name).STANDARD_ERROR) > 20, name


def _local_run(name: str, out: Path) -> Path:
    """The kind's example baseline on its default competition's first phase, as an organizer
    runs it; the folder of the scoring output."""
    result = subprocess.run(
        [sys.executable, "-m", "bundle.local_run", "--config", str(kind(name).DEFAULT_SPEC),
         "--baseline", Path(kind(name).EXAMPLE_BASELINE).stem, "--budget", "2", "--score-hidden",
         "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0 or only_budget_overruns(result.stderr), \
        result.stdout[-2000:] + result.stderr[-2000:]
    report = re.search(r"^detailed results: (.+)$", result.stdout, re.MULTILINE)
    assert report, result.stdout[-2000:]
    return Path(report.group(1)).parent


NOT_AS_INTENDED = "the platform would not score this as intended:\n"


def only_budget_overruns(stderr: str) -> bool:
    """Whether run_local failed only because tasks ran out of their budget: on a loaded
    machine a baseline whose predictive is slow (BDL's on digits_cnn) may not finish in 2 s
    before its first checkpoint, and the task is penalised. The scored tasks still show their
    standard errors, which is what is tested here; the baselines' fit to their budgets is
    tested where they are."""
    if NOT_AS_INTENDED not in stderr:
        return False
    problems = [line.strip() for line in stderr.split(NOT_AS_INTENDED, 1)[1].splitlines()
                if line.startswith("  ")]
    return bool(problems) and all(": timed_out (" in line or "training run timed out" in line
                                  for line in problems)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(KINDS))
def test_each_default_competition_shows_standard_errors_in_its_detailed_results(name, tmp_path):
    output = _local_run(name, tmp_path)
    details = json.loads((output / "detailed_results.json").read_text())
    html = (output / "detailed_results.html").read_text()
    assert scoring_runtime(name).STANDARD_ERROR in html.replace("&#x27;", "'")
    scored = {task: entry for task, entry in details["tasks"].items() if not entry["penalty"]}
    assert scored, details
    for task, entry in scored.items():
        errors = {metric: figures["se"] for metric, figures in entry["metrics"].items()}
        # none only at an end of the metric's range (uncertainty.unless_collapsed)
        assert all(0 <= se < 0.5 if se is not None else
                   entry["metrics"][metric]["value"] in (-1.0, 0.0, 1.0)
                   for metric, se in errors.items()), (task, errors)
        assert any(se and se > 0 for se in errors.values()), (task, errors)
        for metric, figures in entry["metrics"].items():
            chains = figures.get("chain_values") or []
            if len(chains) > 1:           # BDL: the chains' part is in it
                assert figures["se"] >= np.std(chains, ddof=1) / math.sqrt(len(chains)), metric
        # the summary shows each value with its standard error, as the report rounds it
        assert re.search(rf'href="#task-{task}".*?± \d', html, re.DOTALL), task


def test_pgdl_scores_with_equal_weights_are_the_unweighted_ones_and_a_light_model_fades():
    """A Bayesian bootstrap reweighs a zoo's networks (the naive method the coverage tests
    hold the retrained zoos against): equal weights change nothing, and a network of
    vanishing weight drops out of a pairwise score."""
    from kinds.pgdl2020.runtime.metrics import (conditional_mutual_information,
                                                granulated_kendall, kendall_tau)
    rng = np.random.default_rng(3)
    hparams = {"depth": np.repeat([1, 2, 3], 4), "width": np.tile(np.repeat([8, 16], 2), 3),
               "lr": np.tile([0.1, 0.01], 6)}
    gaps, measure = rng.normal(size=12), rng.normal(size=12)
    same = np.full(12, 2.5)
    assert conditional_mutual_information(gaps, measure, hparams, weights=same)[0] == \
        pytest.approx(conditional_mutual_information(gaps, measure, hparams)[0], rel=1e-12)
    assert granulated_kendall(measure, gaps, hparams, same)["overall"] == \
        pytest.approx(granulated_kendall(measure, gaps, hparams)["overall"], rel=1e-12)
    light = np.ones(12)
    light[5] = 1e-9
    kept = np.arange(12) != 5
    assert kendall_tau(measure, gaps, light) == pytest.approx(
        kendall_tau(measure[kept], gaps[kept]), abs=1e-6)
    with pytest.raises(ValueError, match="positive"):
        kendall_tau(measure, gaps, -light)


def test_the_spec_can_ask_for_a_standard_error_column_after_each_metric(tmp_path):
    """Built and dry-run as the platform would run it: the scorer writes every column."""
    spec = yaml.safe_load(kind("label_accuracy").DEFAULT_SPEC.read_text())
    spec["standard_error_columns"] = True
    shutil.copy(kind("label_accuracy").DEFAULT_SPEC.parent / spec["logo"], tmp_path)
    config = tmp_path / "spec.yaml"
    config.write_text(yaml.safe_dump(spec))
    result = subprocess.run(
        [sys.executable, "build_bundle.py", "--config", str(config), "--phase", "all",
         "--check", "--out", str(tmp_path / "dist")],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "dry run passed" in result.stdout
    written = dict(re.findall(r"(\w+_se)=([0-9.e-]+)", result.stdout))
    # (the sample's one class gets a balanced accuracy of 1/K on any resample: se 0)
    assert {"iris_accuracy_se", "iris_balanced_accuracy_se"} <= set(written), result.stdout
    assert all(0 <= float(value) < 0.5 for value in written.values()), written
    assert float(written["iris_accuracy_se"]) > 0


def test_a_penalised_task_gets_each_metrics_whole_range_as_its_standard_error():
    plan = embedded_phase("development")
    plan = dataclasses.replace(plan, rules={**plan.rules, "standard_error_columns": True})
    config = scoring_config(plan)
    keys = [column["key"] for column in config["columns"]]
    errors = [c for c in config["columns"] if c["key"].endswith("_se")]
    assert len(errors) == sum(len(t.score_types) for t in parse_config(config).tasks)
    task = parse_config(config).tasks[0]
    result = penalised(task, "no prediction", None, cap=7.0, failure=failures.NOTHING)
    for score_type in task.score_types:
        upper = score_type.maximum if score_type.maximum is not None else 7.0
        assert rules.column_value("se", result, score_type.name) == pytest.approx(
            upper - score_type.minimum)
    assert keys.index(f"{task.name}_{task.score_types[0].name}_se") > keys.index(
        f"{task.name}_{task.score_types[0].name}")


def test_a_share_of_one_keeps_a_standard_error_and_inside_the_range_the_closed_form_stays():
    """Wilson's interval holds a share's standard error up where few rows are on one side;
    with at least 15 on each side the closed form sqrt(p (1 - p) / (n - 1)) is left as it is."""
    z = uncertainty.Z95
    assert uncertainty.stratified_mean_se(np.ones(190)) == pytest.approx(z / (190 + z * z))
    assert uncertainty.stratified_mean_se(np.zeros(50)) == pytest.approx(z / (50 + z * z))
    one_wrong = np.r_[np.zeros(1), np.ones(599)]
    assert uncertainty.stratified_mean_se(one_wrong) > math.sqrt(1 / 600 * 599 / 600 / 599)
    inside = (np.arange(2000) % 10 < 3).astype(float)
    assert uncertainty.stratified_mean_se(inside) == pytest.approx(
        math.sqrt(0.3 * 0.7 / 1999), rel=1e-9)
    # per block: a block of 599 all agreeing keeps a share of its own
    blocks = np.repeat([0, 1], 599)
    assert uncertainty.stratified_mean_se(np.ones(1198), blocks) > 0


def test_a_zero_at_an_end_of_the_range_is_none_and_a_zero_inside_it_is_exact():
    always_one = dataclasses.replace(PROPORTION, name="always_one",
                                     function=lambda correct: 1.0)
    always_half = dataclasses.replace(PROPORTION, name="always_half",
                                      function=lambda correct: 0.5)
    correct = np.ones(100)
    errors = uncertainty.row_errors([always_one, always_half], {"correct": correct},
                                    uncertainty.take_rows(["correct"]), 100)
    assert errors == {"always_one": None, "always_half": 0.0}
    assert uncertainty.unless_collapsed(0.0, 0.0, 0.0, None) is None
    assert uncertainty.unless_collapsed(0.0, 3.0, 0.0, None) == 0.0
    assert uncertainty.unless_collapsed(0.01, 1.0, 0.0, 1.0) == 0.01


def test_the_board_shows_a_standard_error_the_scorer_could_not_measure_as_the_range():
    from runtime.scoring import MetricResult, TaskConfig, TaskResult, TaskType
    from runtime.rules import se_columns
    distance = ScoreType("distance", "distance", "a distance", False, 0.0, None, 4, _proportion,
                         ("correct",))
    task_type = TaskType("t", (PROPORTION, distance), PROPORTION)
    task = TaskConfig("task", task_type, {"share": 1.0}, None, None)
    result = TaskResult(task, {"share": MetricResult("share", 1.0, se=None),
                               "distance": MetricResult("distance", 0.25, se=None)})
    assert rules.column_value("se", result, "share") == pytest.approx(1.0)
    assert rules.column_value("se", result, "distance") == pytest.approx(0.25)
    measured = TaskResult(task, {"share": MetricResult("share", 0.9, se=0.01)})
    assert se_columns.RULE.column_value("se", measured, "share") == pytest.approx(0.01)

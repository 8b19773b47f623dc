"""scoring_program/ranks.py: rank intervals with simultaneous coverage and tie groups.

Their coverage, simulated for each method, is tests/test_rank_coverage.py's; here the
statistics, the sign-flip tests, the refusals, the inputs and the command line.
"""
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from bundle.leaderboard import phase_columns
from bundle.programs import scoring_config
from plans import embedded_phase
from runtime.scoring import ScoreType
from scoring_program import ranks
from scoring_program.scorer.config import ConfigError, parse_config

REPO = Path(__file__).resolve().parents[1]
PHASE = "development"


def _score_type(higher_is_better=True, maximum=1.0):
    return ScoreType("acc", "accuracy", "", higher_is_better, 0.0, maximum, 4, lambda p, r: 0.0)


def _column_rule(higher_is_better=True) -> ranks.RankingRule:
    criterion = ranks.Criterion("t_acc", "t accuracy", "t", _score_type(higher_is_better), 0.0)
    return ranks.RankingRule("column", "t_acc", "t accuracy", (criterion,))


def _names(n):
    return [f"entry{i:02d}" for i in range(n)]


def test_well_separated_entries_get_singleton_intervals_and_their_own_groups():
    values = np.array([[0.9], [0.1], [0.5], [0.7], [0.3]])
    table = ranks.Table(_names(5), values, np.full((5, 1), 0.001), "separated")
    analysis = ranks.analyse(_column_rule(), table, replicates=500)
    assert list(analysis.lower) == list(analysis.upper) == list(analysis.observed_rank)
    assert list(analysis.observed_rank) == [1, 5, 3, 2, 4]
    assert sorted(analysis.group) == [1, 2, 3, 4, 5]
    assert list(analysis.group[analysis.order]) == [1, 2, 3, 4, 5]


def test_identical_entries_share_a_group_and_their_whole_interval():
    """Two identical entries between well-separated ones: both get ranks [2, 3] and one
    group, and they keep the order of their names."""
    values = np.array([[0.9], [0.5], [0.1], [0.5]])
    table = ranks.Table(["top", "twin_b", "last", "twin_a"], values, np.full((4, 1), 0.01), "t")
    analysis = ranks.analyse(_column_rule(), table, replicates=500)
    twins = [1, 3]
    assert list(analysis.lower[twins]) == [2, 2] and list(analysis.upper[twins]) == [3, 3]
    assert analysis.group[1] == analysis.group[3] != analysis.group[0]
    assert analysis.group[2] not in (analysis.group[0], analysis.group[1])
    assert [analysis.names[j] for j in analysis.order] == ["top", "twin_a", "twin_b", "last"]


def test_identical_entries_under_the_sign_flip_test_differ_by_exactly_nothing():
    """8 tasks, the fewest for 4 entries: every other pair's per-task difference keeps its
    sign on all 8, p = 2/2^8 = 0.0078, below Holm's first threshold 0.05/6 = 0.0083."""
    rule = _average_rank_rule(tasks=8)
    best, twin, worst = np.linspace(0.9, 0.7, 8), np.linspace(0.5, 0.4, 8), np.full(8, 0.1)
    values = np.array([best, twin, twin, worst])
    analysis = ranks.analyse(rule, ranks.Table(_names(4), values, None, "t"))
    assert analysis.method == "sign_flip" and analysis.critical_value is None
    assert analysis.statistic[1] == analysis.statistic[2] == 2.5
    assert analysis.group[1] == analysis.group[2] != analysis.group[0]
    assert list(analysis.lower) == [1, 2, 2, 4] and list(analysis.upper) == [1, 3, 3, 4]


def test_column_orders_settle_only_what_the_intervals_exclude():
    """Two exact equal scores tie; 0.03 apart with se 0.01 each (half-width 3 x 0.0141) is
    unsettled; 1.0 below 1.03, and the exact ones below both, are settled."""
    losses = np.array([[0.0], [0.0], [1.0], [1.03], [1.1]])
    se = np.array([[0.0], [0.0], [0.01], [0.01], [0.01]])
    surely, tied = ranks.column_orders(losses, se, critical=3.0)
    assert tied[0, 0, 1] and not tied[0, 0, 2] and not tied[0, 2, 3]
    assert surely[0].tolist() == [[False, False, True, True, True],
                                  [False, False, True, True, True],
                                  [False, False, False, False, True],
                                  [False, False, False, False, True],
                                  [False, False, False, False, False]]


def test_rank_difference_bounds_use_the_order_of_a_settled_pair():
    """Of three entries, 0 surely better than 1 and 2 unsettled against both: apart, 0's
    rank could be 2 and 1's also 2, but 2 beats 1 wherever it beats 0, so r_0 - r_1 <= -1.
    r_1 - r_0 may be +2 (0 first, 1 last), r_0 - r_2 and r_2 - r_1 +1; exact ties differ by 0."""
    surely = np.array([[False, True, False], [False, False, False], [False, False, False]])
    upper = ranks.rank_difference_bounds(surely, np.zeros((3, 3), dtype=bool))
    assert upper[0, 1] == -1 and upper[1, 0] == 2 and upper[0, 2] == upper[2, 1] == 1
    tied = np.array([[False, True, False], [True, False, False], [False, False, False]])
    assert ranks.rank_difference_bounds(np.zeros((3, 3), dtype=bool), tied)[0, 1] == 0


def test_an_average_rank_claim_needs_its_bound_below_zero_over_all_columns():
    """Entry 0 surely better than 1 on one column, unsettled on the other (bounds -1 and +1):
    no claim; settled on both, a claim."""
    rule = _average_rank_rule(tasks=2)
    values = np.array([[0.9, 0.51], [0.5, 0.5]])
    se = np.full((2, 2), 0.01)
    assert not ranks.average_rank_better(rule, values, se, critical=3.0).any()
    values[0, 1] = 0.9
    assert ranks.average_rank_better(rule, values, se, critical=3.0).tolist() == [
        [False, True], [False, False]]


def test_monte_carlo_quantile_is_the_order_statistic_a_new_draw_stays_below():
    draws = np.arange(1.0, 20.0)                        # B = 19: rank ceil(0.95 x 20) = 19
    assert ranks.monte_carlo_quantile(draws, 0.95) == 19.0
    assert ranks.monte_carlo_quantile(draws[:10], 0.95) == float("inf")


def test_sign_flip_p_values_count_every_pattern():
    """Brute force over all 2^m patterns, with zero and tied per-task differences among them;
    the sampled p-values of the many-task case agree within their Monte Carlo error."""
    import itertools
    rng = np.random.default_rng(3)
    for tasks in (1, 2, 5, 9):
        differences = np.round(rng.standard_normal((5, tasks)), 1)
        differences[0], differences[1, ::2] = 1.0, 0.0
        patterns = np.array(list(itertools.product((-1.0, 1.0), repeat=tasks)))
        sums = np.abs(differences @ patterns.T)
        brute = (sums >= np.abs(differences.sum(axis=1))[:, None] - 1e-9).mean(axis=1)
        assert np.allclose(ranks.exact_sign_flip_p_values(differences), brute)
        sampled = ranks.sampled_sign_flip_p_values(differences, 20_000, rng)
        assert np.all(np.abs(sampled - brute) <= 4 * np.sqrt(brute * (1 - brute) / 20_000) + 1e-4)
    assert ranks.exact_sign_flip_p_values(np.ones((1, 6)))[0] == pytest.approx(2 / 2 ** 6)


def test_many_tasks_are_tested_with_seeded_random_sign_patterns():
    """Above EXACT_SIGN_FLIP_TASKS the patterns are drawn: enough that p can reach Holm's
    thresholds; the same order on every task still separates every pair."""
    tasks = ranks.EXACT_SIGN_FLIP_TASKS + 2
    values = np.array([np.full(tasks, 0.9), np.full(tasks, 0.5), np.full(tasks, 0.1)])
    rule = _average_rank_rule(tasks=tasks)
    analysis = ranks.analyse(rule, ranks.Table(_names(3), values, None, "t"), seed=5)
    assert analysis.inference.seeded and "random sign patterns" in analysis.inference.draws
    assert list(analysis.lower) == list(analysis.upper) == [1, 2, 3]


def test_holm_steps_down_and_stops_at_the_first_p_above_its_threshold():
    # sorted: 0.005 <= 0.05/4, 0.01 <= 0.05/3, 0.03 > 0.05/2: the last two stay
    assert list(ranks.holm_rejections(np.array([0.01, 0.04, 0.03, 0.005]), 0.05)) == [
        True, False, False, True]
    assert ranks.holm_rejections(np.array([0.01, 0.02, 0.03, 0.012]), 0.05).all()
    assert not ranks.holm_rejections(np.array([0.02, 0.001]), 0.001).any()


@pytest.mark.parametrize("entries, tasks", [(2, 6), (4, 8), (5, 9), (12, 12)])
def test_tasks_needed_is_the_fewest_whose_smallest_p_reaches_holms_first_threshold(entries,
                                                                                    tasks):
    pairs = entries * (entries - 1) / 2
    assert ranks.tasks_needed(entries, 0.05) == tasks
    assert 2 / 2 ** tasks <= 0.05 / pairs < 2 / 2 ** (tasks - 1)


def test_too_few_tasks_without_standard_errors_are_refused_in_one_line():
    """The BDL evaluation phase's 4 tasks: a bootstrap over them claimed differences between
    identical entries in most leaderboards; no test over 4 tasks can reach the level."""
    values = np.random.default_rng(0).standard_normal((7, 4))
    with pytest.raises(ranks.InputError) as refused:
        ranks.analyse(_average_rank_rule(tasks=4), ranks.Table(_names(7), values, None, "b.csv"))
    message = str(refused.value)
    assert "\n" not in message and "2/2^4 = 0.125" in message and "0.05/21" in message
    assert "at least 10 tasks" in message and "SE columns" in message


def _average_rank_rule(tasks: int) -> ranks.RankingRule:
    criteria = tuple(ranks.Criterion(f"t{i}_acc", f"t{i} accuracy", f"t{i}", _score_type(), 1.0)
                     for i in range(tasks))
    return ranks.RankingRule("average_rank", "average_rank", "average rank", criteria)


def test_statistics_follow_their_formulas():
    """Mid-ranks for ties; the weighted loss with each score type's as_loss; each task's
    contribution sums its columns' terms, so the statistic is their sum over the normaliser."""
    values = np.array([[0.9, 0.2], [0.9, 0.4], [0.5, 0.1]])
    # column 0: the tied 0.9s share positions 1 and 2 (1.5 each); column 1: 2, 1, 3
    assert list(ranks.ranking_statistic(_average_rank_rule(2), values)) == [1.75, 1.25, 3.0]
    loss_type = _score_type(higher_is_better=False, maximum=None)
    rule = ranks.RankingRule("weighted_loss", "weighted_loss", "weighted loss", (
        ranks.Criterion("a_acc", "a accuracy", "a", _score_type(), 3.0),
        ranks.Criterion("b_err", "b error", "b", loss_type, 1.0)))
    expected = [(3 * (1 - 0.9) + 0.2) / 4, (3 * (1 - 0.9) + 0.4) / 4, (3 * (1 - 0.5) + 0.1) / 4]
    assert np.allclose(ranks.ranking_statistic(rule, values), expected)
    assert np.allclose(ranks.task_contributions(rule, values).sum(axis=1) / 4, expected)
    two_columns_one_task = ranks.RankingRule("average_rank", "r", "r", (
        ranks.Criterion("a_acc", "a accuracy", "a", _score_type(), 1.0),
        ranks.Criterion("a_err", "a error", "a", loss_type, 1.0)))
    # task a's two columns: ranks 1.5 + 2, 1.5 + 3, 3 + 1 (the error ranks ascending)
    assert np.allclose(ranks.task_contributions(two_columns_one_task, values)[:, 0],
                       [3.5, 4.5, 4.0])


def test_one_task_without_standard_errors_is_refused():
    table = ranks.Table(_names(3), np.array([[0.1], [0.2], [0.3]]), None, "board.csv")
    with pytest.raises(ranks.InputError, match="nothing to compare across tasks"):
        ranks.analyse(_column_rule(), table)


# ---------------------------------------------------------------- the config's ranking entry

@pytest.fixture(scope="module")
def config_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("config") / "scoring_config.json"
    path.write_text(json.dumps(scoring_config(embedded_phase(PHASE))))
    return path


def test_ranking_entry_names_what_the_leaderboard_ranks_by(config_file):
    raw = json.loads(config_file.read_text())
    ranking = next(c for c in phase_columns(embedded_phase(PHASE))
                   if c.selection_default)
    assert raw["ranking"] == {"statistic": "average_rank", "key": ranking.key,
                              "label": ranking.label, "keys": list(ranking.computed_fields)}
    older = {key: value for key, value in raw.items() if key != "ranking"}
    assert parse_config(older).ranking is None
    with pytest.raises(ranks.InputError, match="rebuild the bundle"):
        ranks.ranking_rule(parse_config(older), "old.json")


@pytest.mark.parametrize("ranking, message", [
    ({"statistic": "median", "key": "k", "label": "l", "keys": ["iris_accuracy"]}, "statistic"),
    ({"statistic": "column", "key": "k", "label": "l", "keys": ["nope"]}, "not a value column"),
    ({"statistic": "column", "key": "k", "label": "l",
      "keys": ["iris_accuracy", "wine_accuracy"]}, "one key"),
])
def test_a_broken_ranking_entry_is_refused(config_file, ranking, message):
    raw = {**json.loads(config_file.read_text()), "ranking": ranking}
    with pytest.raises(ConfigError, match=message):
        parse_config(raw)


# ------------------------------------------------------------------------------ the inputs

# label_accuracy's development phase ranks by the average rank over iris_accuracy and
# wine_accuracy: one column given by its label, the other by its key, each SE in its own form,
# and a column the ranking does not read (iris balanced accuracy)
HEADER = ["#", "Username", "average rank", "iris accuracy", "iris accuracy SE",
          "iris balanced accuracy", "wine_accuracy", "wine_accuracy_se"]


def _csv(path: Path, rows: list[list], header=HEADER) -> Path:
    path.write_text("\n".join(",".join(map(str, row)) for row in [header, *rows]) + "\n")
    return path


def _run(*argv) -> tuple[int, str, str]:
    from contextlib import redirect_stderr, redirect_stdout
    from io import StringIO
    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = ranks.main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


ROWS = [[1, "alice", 1.0, 0.95, 0.001, 0.9, 0.92, 0.001],
        [2, "bob", 2.0, 0.94, 0.001, 0.9, 0.91, 0.001],
        [3, "carol", 3.0, 0.60, 0.001, 0.5, 0.70, 0.001],
        [4, "dan", 4.0, 0.50, 0.001, "-", 0.40, 0.001]]


def test_leaderboard_csv_with_labels_keys_and_both_se_forms(config_file, tmp_path):
    board = _csv(tmp_path / "board.csv", ROWS)
    status, out, err = _run(board, "--config", config_file, "--json", tmp_path / "out.json",
                            "--seed", 7, "-B", 500)
    assert status == 0, err
    result = json.loads((tmp_path / "out.json").read_text())
    assert (result["seed"], result["B"], result["alpha"]) == (7, 500, 0.05)
    assert result["method"]["draws"] == "column_rank_bounds"
    by_name = {e["name"]: e for e in result["entries"]}
    # ranks over iris_accuracy and wine_accuracy (higher better), averaged
    assert by_name["alice"]["statistic"] == pytest.approx((1 + 1) / 2)
    assert by_name["bob"]["statistic"] == pytest.approx((2 + 2) / 2)
    # standard errors far below every gap: no draw changes any column's order
    assert [by_name[n]["rank_interval"] for n in ("alice", "bob", "carol", "dan")] == [
        [1, 1], [2, 2], [3, 3], [4, 4]]
    assert [by_name[n]["group"] for n in ("alice", "bob", "carol", "dan")] == [1, 2, 3, 4]
    assert "seed 7" in out and "B = 500" in out and "max-|t|" in out and "conservative" in out
    assert "about: these tasks" in out


def test_missing_cells_leave_the_entry_out_with_a_warning(config_file, tmp_path):
    rows = [*ROWS, [5, "erin", 5.0, "", 0.001, 0.1, 0.2, 0.001]]
    status, out, err = _run(_csv(tmp_path / "board.csv", rows), "--config", config_file)
    assert status == 0
    assert "row 6: entry 'erin' left out: no iris accuracy" in err
    assert "erin" not in out and "4 entries" in out


def test_without_standard_errors_two_tasks_are_too_few(config_file, tmp_path):
    """The same order on both tasks is still p = 2/2^2 = 0.5 for a sign-flip test: the
    bootstrap over tasks this replaced called every rank here known."""
    header = ["name", "iris_accuracy", "wine_accuracy"]
    rows = [["a", 0.9, 0.9], ["b", 0.5, 0.5], ["c", 0.1, 0.1]]
    status, out, err = _run(_csv(tmp_path / "board.csv", rows, header), "--config", config_file)
    assert status == 2 and err.count("\n") == 1, err
    assert "2 tasks" in err and "2/2^2 = 0.5" in err and "at least 7 tasks" in err


def test_without_standard_errors_the_report_names_the_population_of_tasks():
    rule = _average_rank_rule(tasks=8)
    values = np.array([np.full(8, 0.9), np.full(8, 0.5), np.full(8, 0.1)])
    analysis = ranks.analyse(rule, ranks.Table(_names(3), values, None, "t"))
    text = "\n".join(ranks.report_lines(analysis, rule))
    assert "about: tasks like these" in text and "not these 8 tasks' scores" in text
    assert "2^8 sign patterns (exact)" in text and "seed" not in text
    assert [list(pair) for pair in zip(analysis.lower, analysis.upper)] == [[1, 1], [2, 2],
                                                                             [3, 3]]


def _scoring_output(folder: Path, values: dict, se: dict | None) -> Path:
    """A scoring output as the scorer writes it, with the SE field of MetricResult."""
    folder.mkdir(parents=True)
    tasks = {}
    for key, value in values.items():
        task, metric = key.rsplit("_", 1)
        tasks.setdefault(task, {"metrics": {}})["metrics"][metric] = {
            "value": value, "std": None, "capped": False, "se": (se or {}).get(key)}
    (folder / "detailed_results.json").write_text(json.dumps({"phase": PHASE, "tasks": tasks}))
    (folder / "scores.json").write_text(json.dumps(values))
    return folder


def test_runs_read_values_and_standard_errors_of_scoring_outputs(config_file, tmp_path):
    keys = ["iris_accuracy", "wine_accuracy"]
    folders = [_scoring_output(tmp_path / name, dict.fromkeys(keys, level),
                               dict.fromkeys(keys, 0.02))
               for name, level in (("first", 0.9), ("second", 0.89), ("third", 0.2))]
    status, out, err = _run("--runs", *folders, "--config", config_file, "--json",
                            tmp_path / "out.json")
    assert status == 0, err
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["method"]["draws"] == "column_rank_bounds"
    entries = {e["name"]: e for e in result["entries"]}
    assert entries["first"]["group"] == entries["second"]["group"] != entries["third"]["group"]
    # first and second (0.01 apart, se 0.02) may rank 1 or 2 on every column, third is surely
    # 3rd on each: intervals [1, 2], [1, 2], [3, 3]
    assert [entries[name]["rank_interval"] for name in ("first", "second", "third")] == [
        [1, 2], [1, 2], [3, 3]]


@pytest.mark.parametrize("case, expected", [
    ("missing file", "board.csv: cannot read"),
    ("not text", "board.csv: cannot read"),
    ("unknown column", "column 4 'iris speed' is not a leaderboard column"),
    ("text cell", "row 3, column 'iris accuracy': 'high' is not a number"),
    ("negative se", "row 2, column 'iris accuracy SE': standard error -0.1 is negative"),
    ("one entry", "1 entry with every ranking column; expected at least 2"),
    ("column empty for all", "the ranking column 'iris accuracy' is missing for every entry"),
    ("ranking column absent", "no column 'wine_accuracy'"),
])
def test_bad_input_gets_one_line_and_status_2(config_file, tmp_path, case, expected):
    board = tmp_path / "board.csv"
    rows = [list(row) for row in ROWS]
    header = list(HEADER)
    if case == "not text":
        board.write_bytes(b"\xff\xfe\x00\x81binary")
    elif case == "unknown column":
        header[3] = "iris speed"
    elif case == "text cell":
        rows[1][3] = "high"
    elif case == "negative se":
        rows[0][4] = -0.1
    elif case == "one entry":
        rows = rows[:1]
    elif case == "column empty for all":
        for row in rows:
            row[3] = "-"
    elif case == "ranking column absent":
        header, rows = header[:6], [row[:6] for row in rows]
    if case not in ("missing file", "not text"):
        _csv(board, rows, header)
    status, out, err = _run(board, "--config", config_file)
    assert status == 2
    assert err.count("\n") == 1 and expected in err and "Traceback" not in err, err


# -------------------------------------------------------------- a built scoring program

@pytest.fixture(scope="module")
def built(built_bundles) -> Path:
    """label_accuracy's Codabench bundle, one for both phases (its default spec's layout),
    built once a test run (conftest.py); read only."""
    from kinds.kind import KINDS
    bundles = list(built_bundles(KINDS["label_accuracy"].DEFAULT_SPEC, "codabench").glob("*.zip"))
    assert len(bundles) == 1, bundles
    return bundles[0]


def test_runs_from_the_unzipped_scoring_program_and_from_the_bundle(built, tmp_path):
    with zipfile.ZipFile(built) as bundle:
        program = bundle.read(f"{PHASE}_scoring_program.zip")
    (tmp_path / "scoring_program.zip").write_bytes(program)
    with zipfile.ZipFile(tmp_path / "scoring_program.zip") as inner:
        inner.extractall(tmp_path / "program")
    board = _csv(tmp_path / "board.csv", ROWS)
    started = subprocess.run([sys.executable, "ranks.py", str(board), "--json",
                              str(tmp_path / "out.json")], cwd=tmp_path / "program",
                             capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr
    shipped = json.loads((tmp_path / "out.json").read_text())
    assert shipped["statistic"]["columns"] == json.loads(
        (tmp_path / "program" / "scoring_config.json").read_text())["ranking"]["keys"]
    assert not list((tmp_path / "program").rglob("__pycache__"))
    status, out, err = _run(board, "--bundle", built, "--json", tmp_path / "again.json")
    assert status == 2 and "name one with --phase" in err       # the bundle holds two phases
    status, out, err = _run(board, "--bundle", built, "--phase", PHASE, "--json",
                            tmp_path / "again.json")
    assert status == 0, err
    assert json.loads((tmp_path / "again.json").read_text())["entries"] == shipped["entries"]
    status, out, err = _run(board, "--bundle", built, "--phase", "final")
    assert status == 2 and "no phase 'final'" in err


def test_codalab_csv_headers_and_cells_are_read(config_file, tmp_path):
    """CodaLab v1.5 writes header cells as b'<label>' (codalab_v1.md G17) and may show a
    cell as 'value (rank)'; a name column found by its values, not its title."""
    labels = ["iris accuracy", "wine accuracy"]
    header = ["b'team'", *(f"b'{label}'" for label in labels), *(f"b'{l} SE'" for l in labels)]
    rows = [["x", "0.9 (1)", "0.9 (1)", *["0.01"] * 2],
            ["y", "0.5 (2)", "0.5 (2)", *["0.01"] * 2],
            ["z", "0.1 (3)", "0.1 (3)", *["0.01"] * 2]]
    status, out, err = _run(_csv(tmp_path / "board.csv", rows, header), "--config", config_file,
                            "--json", tmp_path / "out.json")
    assert status == 0, err
    entries = json.loads((tmp_path / "out.json").read_text())["entries"]
    assert [(e["name"], e["statistic"]) for e in entries] == [("x", 1.0), ("y", 2.0), ("z", 3.0)]


# ---- the baselines' own scores: each kind's committed table, through the tool ---------------

def _baseline_rows(kind_name: str, tasks: list[str]) -> list[dict]:
    """Each baseline of the kind's committed table as a leaderboard row: every figure of the
    phase's tasks with its standard error, in the kind's table layout."""
    table = json.loads((REPO / "kinds" / kind_name / "kit" / "baseline_results.json").read_text())
    methods = table.get("methods") or table["measures"]
    rows = []
    for method in methods:
        if any(method not in table["tasks"][task].get("methods", table["tasks"][task])
               for task in tasks):
            continue                  # a method of another kind of input (Retina: images)
        row = {"entry": method}
        for task in tasks:
            entry = table["tasks"][task]
            if kind_name == "bdl2021":
                figures = {name: (m["value"], m["se"])
                           for name, m in entry["methods"][method]["metrics"].items()}
            else:
                figures = {name: (value, entry[method]["se"][name])
                           for name, value in entry[method].items() if name in entry[method]["se"]}
            for name, (value, se) in figures.items():
                row[f"{task}_{name}"], row[f"{task}_{name}_se"] = value, se
        rows.append(row)
    return rows


@pytest.mark.parametrize("kind_name, phase, tasks, floor", [
    ("bdl2021", "evaluation", ["breast_cancer", "diabetes_gap", "digits_shift", "wine"], "trivial"),
    ("retina", "development", ["severity_val", "population_val"], None),
    ("pgdl2020", "convolutional", ["digits_vgg", "digits_nin"], None),
])
def test_the_tool_ranks_each_kinds_baselines_from_their_committed_scores(
        kind_name, phase, tasks, floor, tmp_path):
    """The acceptance's check: intervals and groups on the baselines' own scores, with the
    standard errors the scorer gave them; a floor (BDL's trivial submission) stands alone."""
    import csv
    from bundle.phase_plan import phase_plan
    from bundle.spec import load_spec
    from kinds.kind import kind
    plan = phase_plan(load_spec(kind(kind_name).DEFAULT_SPEC), phase)
    config = tmp_path / "scoring_config.json"
    config.write_text(json.dumps(scoring_config(plan)))
    rows = _baseline_rows(kind_name, tasks)
    leaderboard = tmp_path / "leaderboard.csv"
    with leaderboard.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    out = tmp_path / "ranks.json"
    result = subprocess.run([sys.executable, "-m", "scoring_program.ranks", str(leaderboard),
                             "--config", str(config), "--json", str(out)],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    found = json.loads(out.read_text())
    entries = found["entries"]
    assert len(rows) >= 3 and {e["name"] for e in entries} == {row["entry"] for row in rows}
    for entry in entries:
        assert entry["rank_interval"][0] <= entry["observed_rank"] <= entry["rank_interval"][1]
    if floor:
        last = next(e for e in entries if e["name"] == floor)
        assert last["rank_interval"] == [len(rows), len(rows)]
        assert sum(e["group"] == last["group"] for e in entries) == 1
    print(result.stdout)


def test_phases_sharing_one_leaderboard_carry_its_ranking_not_their_own():
    """Both platforms give a competition one leaderboard; phases with different tasks share it
    ranked by the weighted loss (``competition_columns``), whatever a phase alone would rank
    by, and the tool must recompute that statistic. (label_accuracy's phases score the same
    tasks, and share the ranking each has alone: its final phase is cut to wine here.)"""
    import dataclasses

    from bundle.leaderboard import competition_columns
    development, evaluation = embedded_phase("development"), embedded_phase("evaluation")
    assert scoring_config(development, leaderboard=competition_columns(
        [development, evaluation]))["ranking"] == scoring_config(development)["ranking"]
    plans = [development, dataclasses.replace(
        evaluation, tasks=tuple(t for t in evaluation.tasks if t.name == "wine"))]
    alone = scoring_config(plans[0])["ranking"]
    shared = scoring_config(plans[0], leaderboard=competition_columns(plans))["ranking"]
    assert alone["statistic"] == "average_rank"
    assert shared["statistic"] == "weighted_loss" and shared["key"] == "weighted_loss"
    assert {key.split("_")[0] for key in shared["keys"]} <= {t.name.split("_")[0]
                                                              for t in plans[0].tasks}

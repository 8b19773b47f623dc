"""scoring_program/ranks.py: rank intervals with simultaneous coverage and tie groups.

The coverage test simulates leaderboards whose true order is known and holds the tool to its
stated rate, and shows on the same draws that unadjusted pairwise intervals fall below it.
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


def _covers(lower, upper, true_rank) -> bool:
    return bool(np.all((lower <= true_rank) & (true_rank <= upper)))


def test_simultaneous_coverage_holds_where_unadjusted_intervals_fail():
    """12 entries in three clusters of near-ties (0.05 apart, standard errors 0.3 to 0.6);
    each Monte Carlo replication observes truth + N(0, se^2), and the event counted is that
    every entry's true rank lies in its interval at once. B = 200 inside the loop: the max-t
    quantile is then estimated from 200 draws, a noisier critical value, which moves the
    coverage by far less than the margins asserted (with B = 400 it changed by 0.001)."""
    truth = np.array([0, .05, .1, .15, 2, 2.05, 2.1, 2.15, 4, 4.05, 4.1, 4.15])
    se = np.linspace(0.3, 0.6, len(truth))
    true_rank = len(truth) - np.argsort(np.argsort(truth))        # higher is better
    rule, names, alpha, replications = _column_rule(), _names(len(truth)), 0.05, 1000
    rng = np.random.default_rng(20240531)
    covered = naive_covered = 0
    for replication in range(replications):
        observed = (truth + se * rng.standard_normal(len(truth)))[:, None]
        table = ranks.Table(names, observed, se[:, None], "simulation")
        analysis = ranks.analyse(rule, table, replicates=200, alpha=alpha, seed=replication)
        covered += _covers(analysis.lower, analysis.upper, true_rank)
        # the same draws, each pair tested on its own at 1.96: no correction for many pairs
        draws = ranks.parametric_replicates(rule, observed, se[:, None], 200,
                                            np.random.default_rng(replication))
        losses = -observed[:, 0]
        naive = ranks.significantly_better(losses, ranks.pairwise_sd(-draws), 1.959964)
        naive_covered += _covers(*ranks.rank_intervals(naive), true_rank)
    stated = 1 - alpha
    monte_carlo_se = np.sqrt(stated * alpha / replications)
    assert covered / replications >= stated - 3 * monte_carlo_se, covered / replications
    assert naive_covered / replications < stated - 3 * monte_carlo_se, naive_covered / replications


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


def test_identical_entries_under_the_task_bootstrap_differ_by_exactly_nothing():
    rule = _average_rank_rule(tasks=4)
    values = np.array([[0.9, 0.8, 0.9, 0.7], [0.5, 0.6, 0.4, 0.5], [0.5, 0.6, 0.4, 0.5],
                       [0.1, 0.2, 0.1, 0.3]])
    analysis = ranks.analyse(rule, ranks.Table(_names(4), values, None, "t"), replicates=500)
    assert analysis.method == "task_bootstrap"
    assert analysis.statistic[1] == analysis.statistic[2] == 2.5
    assert analysis.group[1] == analysis.group[2]
    assert list(analysis.lower[[1, 2]]) == [2, 2] and list(analysis.upper[[1, 2]]) == [3, 3]


def _average_rank_rule(tasks: int) -> ranks.RankingRule:
    criteria = tuple(ranks.Criterion(f"t{i}_acc", f"t{i} accuracy", f"t{i}", _score_type(), 1.0)
                     for i in range(tasks))
    return ranks.RankingRule("average_rank", "average_rank", "average rank", criteria)


def test_statistics_follow_their_formulas():
    """Mid-ranks for ties; the weighted loss with each score type's as_loss; a column as is."""
    values = np.array([[0.9, 0.2], [0.9, 0.4], [0.5, 0.1]])
    # column 0: the tied 0.9s share positions 1 and 2 (1.5 each); column 1: 2, 1, 3
    assert list(ranks.ranking_statistic(_average_rank_rule(2), values)) == [1.75, 1.25, 3.0]
    loss_type = _score_type(higher_is_better=False, maximum=None)
    rule = ranks.RankingRule("weighted_loss", "weighted_loss", "weighted loss", (
        ranks.Criterion("a_acc", "a accuracy", "a", _score_type(), 3.0),
        ranks.Criterion("b_err", "b error", "b", loss_type, 1.0)))
    expected = [(3 * (1 - 0.9) + 0.2) / 4, (3 * (1 - 0.9) + 0.4) / 4, (3 * (1 - 0.5) + 0.1) / 4]
    assert np.allclose(ranks.ranking_statistic(rule, values), expected)
    doubled = ranks.ranking_statistic(rule, values, np.array([2.0, 0.0]))
    assert np.allclose(doubled, 1 - values[:, 0])             # only task a drawn


def test_one_task_without_standard_errors_is_refused():
    table = ranks.Table(_names(3), np.array([[0.1], [0.2], [0.3]]), None, "board.csv")
    with pytest.raises(ranks.InputError, match="nothing to resample"):
        ranks.analyse(_column_rule(), table)


# ---------------------------------------------------------------- the config's ranking entry

@pytest.fixture(scope="module")
def config_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("config") / "scoring_config.json"
    path.write_text(json.dumps(scoring_config(embedded_phase(PHASE))))
    return path


def test_ranking_entry_names_what_the_leaderboard_ranks_by(config_file):
    raw = json.loads(config_file.read_text())
    ranking = next(c for c in phase_columns(embedded_phase(PHASE)) if c.selection_default)
    assert raw["ranking"] == {"statistic": "average_rank", "key": ranking.key,
                              "label": ranking.label, "keys": list(ranking.computed_fields)}
    older = {key: value for key, value in raw.items() if key != "ranking"}
    assert parse_config(older).ranking is None
    with pytest.raises(ranks.InputError, match="rebuild the bundle"):
        ranks.ranking_rule(parse_config(older), "old.json")


@pytest.mark.parametrize("ranking, message", [
    ({"statistic": "median", "key": "k", "label": "l", "keys": ["iris_agreement"]}, "statistic"),
    ({"statistic": "column", "key": "k", "label": "l", "keys": ["nope"]}, "not a value column"),
    ({"statistic": "column", "key": "k", "label": "l",
      "keys": ["iris_agreement", "digits_agreement"]}, "one key"),
])
def test_a_broken_ranking_entry_is_refused(config_file, ranking, message):
    raw = {**json.loads(config_file.read_text()), "ranking": ranking}
    with pytest.raises(ConfigError, match=message):
        parse_config(raw)


# ------------------------------------------------------------------------------ the inputs

HEADER = ["#", "Username", "average rank", "iris agreement", "iris agreement SE", "iris TV",
          "digits_agreement", "digits_agreement_se", "digits_cnn agreement",
          "digits_cnn agreement SE"]


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


ROWS = [[1, "alice", 1.3, 0.95, 0.001, 0.1, 0.90, 0.001, 0.88, 0.001],
        [2, "bob", 1.7, 0.94, 0.001, 0.1, 0.91, 0.001, 0.87, 0.001],
        [3, "carol", 3.0, 0.60, 0.001, 0.3, 0.70, 0.001, 0.60, 0.001],
        [4, "dan", 4.0, 0.50, 0.001, "-", 0.40, 0.001, 0.30, 0.001]]


def test_leaderboard_csv_with_labels_keys_and_both_se_forms(config_file, tmp_path):
    board = _csv(tmp_path / "board.csv", ROWS)
    status, out, err = _run(board, "--config", config_file, "--json", tmp_path / "out.json",
                            "--seed", 7, "-B", 500)
    assert status == 0, err
    result = json.loads((tmp_path / "out.json").read_text())
    assert (result["seed"], result["B"], result["alpha"]) == (7, 500, 0.05)
    assert result["method"]["draws"] == "parametric"
    by_name = {e["name"]: e for e in result["entries"]}
    # mid-ranks over digits_agreement, digits_cnn_agreement, iris_agreement (higher better)
    assert by_name["alice"]["statistic"] == pytest.approx((2 + 1 + 1) / 3)
    assert by_name["bob"]["statistic"] == pytest.approx((1 + 2 + 2) / 3)
    # standard errors far below every gap: no draw changes any column's order
    assert [by_name[n]["rank_interval"] for n in ("alice", "bob", "carol", "dan")] == [
        [1, 1], [2, 2], [3, 3], [4, 4]]
    assert [by_name[n]["group"] for n in ("alice", "bob", "carol", "dan")] == [1, 2, 3, 4]
    assert "seed 7" in out and "B = 500" in out and "max-|t|" in out and "conservative" in out


def test_missing_cells_leave_the_entry_out_with_a_warning(config_file, tmp_path):
    rows = [*ROWS, [5, "erin", 5.0, "", 0.001, 0.1, 0.2, 0.001, 0.2, 0.001]]
    status, out, err = _run(_csv(tmp_path / "board.csv", rows), "--config", config_file)
    assert status == 0
    assert "row 6: entry 'erin' left out: no iris agreement" in err
    assert "erin" not in out and "4 entries" in out


def test_without_standard_errors_several_tasks_are_resampled(config_file, tmp_path):
    header = ["name", "iris_agreement", "digits_agreement", "digits_cnn_agreement"]
    rows = [["a", 0.9, 0.9, 0.9], ["b", 0.5, 0.5, 0.5], ["c", 0.1, 0.1, 0.1]]
    status, out, err = _run(_csv(tmp_path / "board.csv", rows, header), "--config", config_file,
                            "--json", tmp_path / "out.json")
    assert status == 0, err
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["method"]["draws"] == "task_bootstrap"
    assert "paired bootstrap over the 3 tasks" in out
    # the same order on every task: every resample agrees, so each rank is known
    assert [e["rank_interval"] for e in result["entries"]] == [[1, 1], [2, 2], [3, 3]]


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
    keys = ["iris_agreement", "digits_agreement", "digits_cnn_agreement"]
    folders = [_scoring_output(tmp_path / name, dict.fromkeys(keys, level),
                               dict.fromkeys(keys, 0.02))
               for name, level in (("first", 0.9), ("second", 0.89), ("third", 0.2))]
    status, out, err = _run("--runs", *folders, "--config", config_file, "--json",
                            tmp_path / "out.json")
    assert status == 0, err
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["method"]["draws"] == "parametric"
    entries = {e["name"]: e for e in result["entries"]}
    assert entries["first"]["group"] == entries["second"]["group"] != entries["third"]["group"]
    # the average rank is discrete: where first and second swap on every task, second's
    # difference from third doubles, so that pair is not significant (conservative)
    assert entries["third"]["observed_rank"] == entries["third"]["rank_interval"][1] == 3


@pytest.mark.parametrize("case, expected", [
    ("missing file", "board.csv: cannot read"),
    ("not text", "board.csv: cannot read"),
    ("unknown column", "column 4 'iris speed' is not a leaderboard column"),
    ("text cell", "row 3, column 'iris agreement': 'high' is not a number"),
    ("negative se", "row 2, column 'iris agreement SE': standard error -0.1 is negative"),
    ("one entry", "1 entry with every ranking column; expected at least 2"),
    ("column empty for all", "the ranking column 'iris agreement' is missing for every entry"),
    ("ranking column absent", "no column 'digits_cnn_agreement'"),
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
        header, rows = header[:8], [row[:8] for row in rows]
    if case not in ("missing file", "not text"):
        _csv(board, rows, header)
    status, out, err = _run(board, "--config", config_file)
    assert status == 2
    assert err.count("\n") == 1 and expected in err and "Traceback" not in err, err


# -------------------------------------------------------------- a built scoring program

@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The development phase's Codabench bundle, built by the command line."""
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run([sys.executable, str(REPO / "build_bundle.py"), "--phase", PHASE,
                             "--out", str(out)], cwd=REPO, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return next(out.glob("*.zip"))


def test_runs_from_the_unzipped_scoring_program_and_from_the_bundle(built, tmp_path):
    with zipfile.ZipFile(built) as bundle:
        program = bundle.read("scoring_program.zip")
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
    assert status == 0, err
    assert json.loads((tmp_path / "again.json").read_text())["entries"] == shipped["entries"]
    status, out, err = _run(board, "--bundle", built, "--phase", "final")
    assert status == 2 and "no phase 'final'" in err


def test_codalab_csv_headers_and_cells_are_read(config_file, tmp_path):
    """CodaLab v1.5 writes header cells as b'<label>' (codalab_v1.md G17) and may show a
    cell as 'value (rank)'; a name column found by its values, not its title."""
    header = ["b'team'", "b'iris agreement'", "b'digits agreement'", "b'digits_cnn agreement'"]
    rows = [["x", "0.9 (1)", "0.9 (1)", "0.9 (1)"], ["y", "0.5 (2)", "0.5 (2)", "0.5 (2)"],
            ["z", "0.1 (3)", "0.1 (3)", "0.1 (3)"]]
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
    by, and the tool must recompute that statistic."""
    from bundle.leaderboard import competition_columns
    plans = [embedded_phase("development"), embedded_phase("evaluation")]
    alone = scoring_config(plans[0])["ranking"]
    shared = scoring_config(plans[0], leaderboard=competition_columns(plans))["ranking"]
    assert alone["statistic"] == "average_rank"
    assert shared["statistic"] == "weighted_loss" and shared["key"] == "weighted_loss"
    assert {key.split("_")[0] for key in shared["keys"]} <= {t.name.split("_")[0]
                                                              for t in plans[0].tasks}

"""PGDL 2020: the task score (conditional mutual information), Kendall's tau and its granulated
form, and the readers of model_configs.json and .predict files (kinds/pgdl2020/runtime)."""

from __future__ import annotations

import itertools
import json
import math
import time
from collections import defaultdict

import numpy as np
import pytest

from runtime.formats import FormatError
from kinds.pgdl2020.runtime.formats import (EXCEEDED, ModelZoo, read_model_configs, read_predict,
                                            write_predict)
from kinds.pgdl2020.runtime.metrics import (conditional_mutual_information, granulated_kendall,
                                            kendall_tau)


def grid(*sizes: int, names: str = "abcdefgh") -> dict[str, np.ndarray]:
    """A complete grid: hyperparameter k takes the values 0..sizes[k]-1, the last varies fastest."""
    combos = list(itertools.product(*(range(s) for s in sizes)))
    return {names[k]: np.array([c[k] for c in combos]) for k in range(len(sizes))}


def lexicographic_gaps(hparams: dict[str, np.ndarray]) -> np.ndarray:
    """Gaps ordered by the hyperparameters, the first most significant: all distinct."""
    gaps = np.zeros(len(next(iter(hparams.values()))))
    for values in hparams.values():
        gaps = gaps * 10 + values
    return gaps / gaps.max()


# ---------------------------------------------------------------------- an independent CMI

def slow_cmi(gaps, measure, hparams) -> tuple[float, tuple[str, str] | None]:
    """PGDL's score written the long way: loops over the pairs of models and dictionaries of
    cells, math.log2; the +1e-12 in the entropy's log only."""
    n = len(gaps)
    names = list(hparams)

    def score(conditioning) -> float:
        tables: dict[tuple, dict[tuple[bool, bool], int]] = defaultdict(lambda: defaultdict(int))
        for i in range(n):
            for j in range(n):
                cell = tuple(v for h in conditioning for v in (hparams[h][i], hparams[h][j]))
                tables[cell][(gaps[i] > gaps[j], measure[i] > measure[j])] += 1
        mi_total = entropy_total = 0.0
        for table in tables.values():
            total = sum(table.values())
            p_a = {a: sum(c for (x, _), c in table.items() if x == a) / total
                   for a in (True, False)}
            p_b = {b: sum(c for (_, y), c in table.items() if y == b) / total
                   for b in (True, False)}
            for (a, b), count in table.items():
                joint = count / total
                mi_total += joint * math.log2(joint / (p_a[a] * p_b[b]))
            entropy_total -= sum(p * math.log2(p + 1e-12) for p in p_a.values())
        return (mi_total / len(tables)) / (entropy_total / len(tables))

    if len(names) < 2:
        return score(names), None
    scores = {(h1, h2): score((h1, h2)) for h1 in names for h2 in names if h1 != h2}
    pair = min(scores, key=scores.get)
    return scores[pair], pair


# ---------------------------------------------------------------------- CMI fidelity

def test_perfect_measure_scores_one():
    hparams = grid(2, 3, 2)
    gaps = lexicographic_gaps(hparams)
    score, pair = conditional_mutual_information(gaps, gaps.copy(), hparams)
    # Slightly above 1: the entropy's log2(p + 1e-12) is a hair smaller than the MI's log2(p).
    assert score == pytest.approx(1.0, abs=1e-9)
    assert pair is not None and pair[0] != pair[1]


def test_perfect_measure_with_random_gaps_scores_one():
    rng = np.random.default_rng(3)
    hparams = grid(2, 2, 3)
    gaps = rng.random(12)
    score, _ = conditional_mutual_information(gaps, 5 * gaps + 1, hparams)
    assert score == pytest.approx(1, abs=1e-9)


def test_inverse_measure_is_not_penalised_for_its_direction():
    """mu = -g: on every pair i != j, B = not A, which carries as much information as B = A.
    Only the i = j pairs (A = B = 0) break the symmetry, and they lie in the diagonal cells
    (h1_i = h1_j and h2_i = h2_j). With lexicographic gaps on a 2x2x2 grid, conditioned on the
    two most significant hyperparameters, every other cell has a constant A (MI_c = H_c = 0),
    and a diagonal cell (2 models a side: 4 pairs, 2 with i = j) holds
    p(A,B) = {(0,0): 1/2, (1,0): 1/4, (0,1): 1/4}: MI = (1/2) log2(32/27), H = H(1/4)."""
    hparams = grid(2, 2, 2)
    gaps = lexicographic_gaps(hparams)
    score, pair = conditional_mutual_information(gaps, -gaps, hparams)
    h_quarter = -(0.25 * math.log2(0.25) + 0.75 * math.log2(0.75))
    expected = 0.5 * math.log2(32 / 27) / h_quarter
    assert expected == pytest.approx(0.151065639789, abs=1e-12)
    assert score == pytest.approx(expected, abs=1e-9)
    assert set(pair) == {"a", "b"}


def test_inverse_measure_on_a_larger_random_grid_scores_high():
    """The more cells without i = j pairs, the closer the inverse measure gets to 1."""
    rng = np.random.default_rng(11)
    hparams = grid(2, 2, 2, 2, 2, 3)          # PGDL's task 1 shape: 96 models
    gaps = rng.random(96)
    inverse, _ = conditional_mutual_information(gaps, -gaps, hparams)
    assert 0.9 < inverse < 1.0
    assert inverse == pytest.approx(slow_cmi(gaps, -gaps, hparams)[0], abs=1e-12)


def test_measure_tracking_one_hyperparameter_scores_zero_when_conditioned_on_it():
    hparams = grid(3, 2, 2)
    rng = np.random.default_rng(5)
    gaps = rng.random(12) + hparams["a"]         # the gaps depend strongly on a ...
    measure = hparams["a"].astype(float)         # ... and the measure knows nothing else
    # Unconditioned, such a measure looks good:
    assert kendall_tau(measure, gaps) > 0.5
    score, pair = conditional_mutual_information(gaps, measure, hparams)
    assert score == 0.0 and "a" in pair          # B is constant in every cell fixing a_i, a_j


def test_two_hyperparameters_leave_one_pair_per_cell_so_everything_scores_zero():
    hparams = grid(3, 3)
    gaps = lexicographic_gaps(hparams)
    assert conditional_mutual_information(gaps, gaps, hparams)[0] == 0.0


def test_constant_measure_scores_zero():
    hparams = grid(2, 2, 2)
    assert conditional_mutual_information(np.arange(8.0), np.ones(8), hparams)[0] == 0.0


@pytest.mark.parametrize("seed", range(6))
def test_vectorised_cmi_matches_explicit_loops(seed):
    rng = np.random.default_rng(seed)
    sizes = [(2, 2, 2), (3, 2, 2), (2, 3, 2, 2), (3, 3, 2)][seed % 4]
    hparams = grid(*sizes)
    n = len(hparams["a"])
    gaps = np.round(rng.random(n), 1)               # ties on purpose
    measure = rng.integers(0, 4, n).astype(float)   # ties in the measure too
    fast = conditional_mutual_information(gaps, measure, hparams)
    slow = slow_cmi(gaps, measure, hparams)
    assert fast[0] == pytest.approx(slow[0], abs=1e-12)


def test_single_hyperparameter_conditions_on_it_alone():
    rng = np.random.default_rng(2)
    hparams = {"depth": np.array([1, 2, 3, 1, 2, 3])}   # each value twice: not a unique grid
    with pytest.raises(ValueError, match="not complete"):
        conditional_mutual_information(rng.random(6), rng.random(6), hparams)
    hparams = {"depth": np.array([1, 2, 3, 4])}
    gaps, measure = rng.random(4), rng.random(4)
    score, pair = conditional_mutual_information(gaps, measure, hparams)
    assert pair is None
    assert score == pytest.approx(slow_cmi(gaps, measure, hparams)[0], abs=1e-12)


def test_cmi_value_order_changes_only_the_summation_order():
    rng = np.random.default_rng(9)
    hparams = {"lr": np.array([0.1, 0.01] * 4), "w": np.repeat(["x", "y"], 4),
               "d": np.array([1, 1, 2, 2] * 2)}
    gaps, measure = rng.random(8), rng.random(8)
    plain = conditional_mutual_information(gaps, measure, hparams)
    ordered = conditional_mutual_information(
        gaps, measure, hparams, value_order={"lr": [0.01, 0.1], "w": ["y", "x"], "d": [2, 1]})
    assert plain[0] == pytest.approx(ordered[0], abs=1e-14)


def test_cmi_refuses_bad_input():
    hparams = grid(2, 2, 2)
    with pytest.raises(ValueError, match="non-finite"):
        conditional_mutual_information(np.arange(8.0), np.r_[np.nan, np.ones(7)], hparams)
    with pytest.raises(ValueError, match="gaps has 7 values, measure has 8"):
        conditional_mutual_information(np.arange(7.0), np.arange(8.0), hparams)
    with pytest.raises(ValueError, match="hyperparameter 'a': 8 values for 7 models"):
        conditional_mutual_information(np.arange(7.0), np.arange(7.0), hparams)
    duplicated = {k: v.copy() for k, v in hparams.items()}
    duplicated["c"][1] = 0                        # two models now share (0, 0, 0)
    with pytest.raises(ValueError, match="not complete and unique"):
        conditional_mutual_information(np.arange(8.0), np.arange(8.0), duplicated)


def test_cmi_is_fast_on_pgdl_sized_tasks():
    hparams = grid(2, 2, 2, 2, 2, 3)
    rng = np.random.default_rng(0)
    gaps, measure = rng.random(96), rng.random(96)
    started = time.process_time()       # CPU time: a loaded machine does not inflate it
    conditional_mutual_information(gaps, measure, hparams)
    granulated_kendall(measure, gaps, hparams)
    assert time.process_time() - started < 0.5


# ---------------------------------------------------------------------- Kendall

def brute_tau(mu, g) -> float:
    n = len(mu)
    sign = lambda x: int(x > 0) - int(x < 0)
    total = sum(sign(mu[i] - mu[j]) * sign(g[i] - g[j]) for i in range(n) for j in range(i + 1, n))
    return 2 * total / (n * (n - 1))


@pytest.mark.parametrize("seed", range(5))
def test_kendall_tau_matches_a_loop(seed):
    rng = np.random.default_rng(seed)
    n = 5 + 7 * seed
    mu, g = rng.integers(0, 5, n).astype(float), np.round(rng.random(n), 1)
    assert kendall_tau(mu, g) == pytest.approx(brute_tau(mu, g), abs=1e-15)


def test_kendall_tau_is_tau_a_not_tau_b():
    assert kendall_tau([1, 2, 3], [1, 2, 3]) == 1.0
    assert kendall_tau([3, 2, 1], [1, 2, 3]) == -1.0
    assert kendall_tau([1, 1, 2], [1, 2, 3]) == pytest.approx(2 / 3)   # tau-b would give 0.816...


def test_granulated_kendall_on_a_hand_computed_two_by_two_grid():
    # models (a, b): (0,0) (0,1) (1,0) (1,1)
    hparams = grid(2, 2)
    gaps = np.array([0.1, 0.2, 0.3, 0.4])
    measure = np.array([1.0, 2.0, 4.0, 3.0])
    # psi_a: groups b=0 {(0,0),(1,0)}: mu 1<4, g .1<.3 -> +1; b=1 {(0,1),(1,1)}: 2<3, .2<.4 -> +1
    # psi_b: groups a=0 {(0,0),(0,1)}: 1<2, .1<.2 -> +1; a=1 {(1,0),(1,1)}: 4>3, .3<.4 -> -1
    result = granulated_kendall(measure, gaps, hparams)
    assert result == {"a": 1.0, "b": 0.0, "overall": 0.5}


def test_granulated_kendall_matches_loops_on_a_random_grid():
    rng = np.random.default_rng(4)
    hparams = grid(3, 2, 2)
    gaps, measure = rng.random(12), rng.random(12)
    result = granulated_kendall(measure, gaps, hparams)
    for name in hparams:
        others = [h for h in hparams if h != name]
        groups = defaultdict(list)
        for m in range(12):
            groups[tuple(hparams[h][m] for h in others)].append(m)
        taus = [brute_tau(measure[idx], gaps[idx]) for idx in groups.values()]
        assert result[name] == pytest.approx(np.mean(taus), abs=1e-15)
    assert result["overall"] == pytest.approx(np.mean([result[h] for h in hparams]), abs=1e-15)


def test_granulated_kendall_skips_single_valued_hyperparameters():
    hparams = {"a": np.array([0, 1, 0, 1]), "b": np.array([0, 0, 1, 1]), "c": np.zeros(4, int)}
    result = granulated_kendall(np.arange(4.0), np.arange(4.0), hparams)
    assert set(result) == {"a", "b", "overall"}
    with pytest.raises(ValueError, match="overall"):
        granulated_kendall(np.arange(4.0), np.arange(4.0), {"overall": np.arange(4)})


# ---------------------------------------------------------------------- formats

def zoo_json(sizes=(2, 3), names=("lr", "depth"), bare_ids=True, accuracy=None) -> dict:
    values = {"lr": [0.1, 0.01, 0.001], "depth": [2, 4, 6], "width": ["narrow", "wide", "huge"]}
    content = {}
    for number, combo in enumerate(itertools.product(*(range(s) for s in sizes))):
        model = str(number + 1) if bare_ids else f"model_{number + 1}"
        content[model] = {
            "hparams": {name: {"possible_values": values[name][:size],
                               "current_value": values[name][index]}
                        for name, size, index in zip(names, sizes, combo)},
            "metrics": {"train_acc": 1.0, "test_acc": 0.5 + 0.01 * number, "train_loss": 0.1}}
    return content


def write(tmp_path, content, name="model_configs.json"):
    path = tmp_path / name
    path.write_text(json.dumps(content), encoding="utf-8")
    return path


def test_read_model_configs(tmp_path):
    zoo = read_model_configs(write(tmp_path, zoo_json()))
    assert isinstance(zoo, ModelZoo)
    assert zoo.ids == ("model_1", "model_2", "model_3", "model_4", "model_5", "model_6")
    assert zoo.possible_values == {"lr": (0.1, 0.01), "depth": (2, 4, 6)}
    assert zoo.hparams["depth"].tolist() == [2, 4, 6, 2, 4, 6]
    assert zoo.hparams["lr"].dtype == np.float64 and zoo.hparams["depth"].dtype == np.int64
    np.testing.assert_allclose(zoo.gaps, 1.0 - (0.5 + 0.01 * np.arange(6)))
    # The zoo feeds the metrics directly.
    score, _ = conditional_mutual_information(zoo.gaps, zoo.gaps, zoo.hparams,
                                              value_order=zoo.possible_values)
    assert score == 0.0                       # two hyperparameters: one pair per cell


def test_model_ids_sort_as_folder_names(tmp_path):
    content = zoo_json(sizes=(2, 3, 2), names=("lr", "depth", "width"), bare_ids=False)
    zoo = read_model_configs(write(tmp_path, content))
    assert zoo.ids[:4] == ("model_1", "model_10", "model_11", "model_12")
    assert zoo.train_acc.shape == (12,)
    assert zoo.hparams["width"].dtype == object


def test_incomplete_grid_names_a_missing_combination(tmp_path):
    content = zoo_json()
    del content["5"]                           # lr=0.01, depth=4
    with pytest.raises(FormatError, match=r"model_configs.json: the hyperparameter grid is "
                       r"incomplete: expected 6 models \(2 x 3 values\), found 5; "
                       r"no model has lr=0.01, depth=4"):
        read_model_configs(write(tmp_path, content))


def test_duplicate_combination_names_both_models(tmp_path):
    content = zoo_json()
    content["6"]["hparams"]["depth"]["current_value"] = 4
    with pytest.raises(FormatError, match=r"models model_5 and model_6 have the same "
                       r"hyperparameters \(lr=0.01, depth=4\)"):
        read_model_configs(write(tmp_path, content))


@pytest.mark.parametrize("bad", [1.5, -0.1, "0.9", None, True])
def test_bad_accuracy_is_refused(tmp_path, bad):
    content = zoo_json()
    content["3"]["metrics"]["test_acc"] = bad
    with pytest.raises(FormatError, match=r"model model_3: metrics.test_acc must be a number "
                                          r"in \[0, 1\]"):
        read_model_configs(write(tmp_path, content))


def test_model_configs_other_errors(tmp_path):
    content = zoo_json()
    content["2"]["hparams"]["depth"]["current_value"] = 8
    with pytest.raises(FormatError, match="current_value 8 is not among the possible values"):
        read_model_configs(write(tmp_path, content))
    content = zoo_json()
    content["2"]["hparams"]["depth"]["possible_values"] = [2, 4, 6, 8]
    with pytest.raises(FormatError, match="model model_2 lists the possible values"):
        read_model_configs(write(tmp_path, content))
    content = zoo_json()
    del content["4"]["hparams"]["lr"]
    with pytest.raises(FormatError, match=r"model model_4 has hyperparameters .*missing \['lr'\]"):
        read_model_configs(write(tmp_path, content))
    content = zoo_json()
    content["model_1"] = content["1"]
    with pytest.raises(FormatError, match="both name the folder model_1"):
        read_model_configs(write(tmp_path, content))
    del content["4"]["metrics"]["train_acc"]
    del content["model_1"]
    with pytest.raises(FormatError, match="model model_4: metrics has no 'train_acc'"):
        read_model_configs(write(tmp_path, content))
    with pytest.raises(FormatError, match="missing"):
        read_model_configs(tmp_path / "absent.json")


IDS = ("model_1", "model_2", "model_3")


def test_predict_round_trip_and_bare_keys(tmp_path):
    path = tmp_path / "task1.predict"
    write_predict(path, IDS, [0.5, 2, -1e3])
    assert json.loads(path.read_text()) == {"model_1": 0.5, "model_2": 2.0, "model_3": -1000.0}
    assert read_predict(path, IDS).tolist() == [0.5, 2.0, -1000.0]
    path.write_text(json.dumps({"3": 3, "1": 1.0, "2": 2}))
    assert read_predict(path, IDS).tolist() == [1.0, 2.0, 3.0]
    assert read_predict(path, ("1", "2", "3")).tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("content, message", [
    ({"model_1": 1, "model_2": 2}, r"no value for 1 model\(s\): model_3"),
    ({"model_1": 1, "model_2": 2, "model_3": 3, "model_9": 9},
     r"1 key\(s\) for no model of the task: model_9"),
    ({"model_1": 1, "model_2": "2", "model_3": 3}, r"model model_2: expected a number, found str"),
    ({"model_1": 1, "model_2": True, "model_3": 3}, r"model model_2: expected a number"),
    ({"model_1": 1, "model_2": None, "model_3": 3}, r"model model_2: expected a number"),
    ({"model_1": 1, "2": 2, "model_2": 2, "model_3": 3}, r"keys '2' and 'model_2' are the same"),
    ([1, 2, 3], r"expected a JSON object"),
])
def test_predict_errors_name_the_model(tmp_path, content, message):
    path = tmp_path / "task1.predict"
    path.write_text(json.dumps(content))
    with pytest.raises(FormatError, match=str(path).replace(".", r"\.") + ": .*" + message):
        read_predict(path, IDS)


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity"])
def test_predict_refuses_non_finite(tmp_path, text):
    path = tmp_path / "task1.predict"
    path.write_text('{"model_1": 1, "model_2": %s, "model_3": 3}' % text)
    with pytest.raises(FormatError, match=f"model model_2: expected a finite number, found {text}"):
        read_predict(path, IDS)


def test_predict_exceeded_reads_as_nan(tmp_path):
    path = tmp_path / "task1.predict"
    write_predict(path, IDS, [1.0, EXCEEDED, EXCEEDED])
    assert json.loads(path.read_text())["model_2"] == "EXCEEDED"
    values = read_predict(path, IDS)
    assert values[0] == 1.0 and np.isnan(values[1:]).all()


def test_write_predict_refuses_bad_values(tmp_path):
    with pytest.raises(ValueError, match="model_2: expected a finite number"):
        write_predict(tmp_path / "x.predict", IDS, [1.0, float("nan"), 2.0])
    with pytest.raises(ValueError, match="3 ids but 2 values"):
        write_predict(tmp_path / "x.predict", IDS, [1.0, 2.0])


def test_the_evaluation_page_states_what_a_reversed_measure_scores():
    """The page's claim about a measure that orders the networks backwards, checked on the
    embedded zoos: the gaps themselves score 1, and reversed the figures the page gives."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[3] / "kinds" / "pgdl2020"
    reversed_scores = []
    for configs in sorted((root / "reference" / "embedded").glob("*/model_configs.json")):
        zoo = read_model_configs(configs)
        assert conditional_mutual_information(zoo.gaps, zoo.gaps, zoo.hparams)[0] == \
            pytest.approx(1.0)
        reversed_scores.append(conditional_mutual_information(zoo.gaps, -zoo.gaps,
                                                              zoo.hparams)[0])
    page = (root / "templates" / "kind_evaluation.html.j2").read_text()
    assert (f"reversed, they score {min(reversed_scores):.2f} to {max(reversed_scores):.2f} "
            "on the embedded zoos") in page
    assert 0 < min(reversed_scores) < max(reversed_scores) < 1


def test_the_evaluation_page_says_what_pgdl_did_with_each_failure():
    """PGDL's scorer (competitions.md §2.4) zeroed the whole submission only for a network
    marked EXCEEDED; a task it could not score got -0.999999 and left the average."""
    from pathlib import Path
    page = (Path(__file__).resolve().parents[3] / "kinds" / "pgdl2020" / "templates"
            / "kind_evaluation.html.j2").read_text()
    assert "PGDL scored the whole submission 0 in that case" not in page
    assert ("(marked <code>EXCEEDED</code>) scored the whole submission 0, and a task whose file "
            "could not be scored got -0.999999 and was left out of the average") in page


# ---------------------------------------------------------------------- standard errors

def test_reweighing_moves_granulated_tau_on_a_grid_of_two_values():
    """Each group of a 2 x 2 x 2 x 2 grid is one pair, whose weight cancels from its own tau:
    counting the groups equally left psi unmoved by any weights (a Bayesian bootstrap's
    standard error of exactly 0). Each group counts by its pairs' weight instead."""
    hparams = grid(2, 2, 2, 2)
    rng = np.random.default_rng(8)
    gaps, measure = rng.normal(size=16), rng.normal(size=16)
    plain = granulated_kendall(measure, gaps, hparams)["overall"]
    weights = rng.exponential(size=16)
    assert granulated_kendall(measure, gaps, hparams, np.ones(16))["overall"] == \
        pytest.approx(plain, abs=1e-12)
    assert abs(granulated_kendall(measure, gaps, hparams, weights)["overall"] - plain) > 0.01


def test_the_scores_of_many_zoos_at_once_are_each_zoos_own():
    from kinds.pgdl2020.runtime.metrics import (cmi_of_draws, granulated_kendall_of_draws,
                                                kendall_tau_of_draws)
    hparams = grid(2, 3, 2, 2)
    rng = np.random.default_rng(9)
    gaps, measure = rng.random((5, 24)), np.round(rng.random((5, 24)), 1)
    np.testing.assert_allclose(
        cmi_of_draws(gaps, measure, hparams),
        [conditional_mutual_information(g, m, hparams)[0] for g, m in zip(gaps, measure)],
        rtol=0, atol=1e-15)
    np.testing.assert_allclose(kendall_tau_of_draws(measure, gaps),
                               [kendall_tau(m, g) for g, m in zip(gaps, measure)], atol=1e-15)
    np.testing.assert_allclose(
        granulated_kendall_of_draws(measure, gaps, hparams),
        [granulated_kendall(m, g, hparams)["overall"] for g, m in zip(gaps, measure)],
        atol=1e-12)


def test_retrained_zoos_keep_the_zoos_values_and_their_ties():
    from kinds.pgdl2020.runtime.retraining import normal_scores, retrained_zoos
    hparams = grid(2, 2, 2, 2)
    gaps = np.round(np.linspace(0.01, 0.09, 16), 2)
    gaps[3] = gaps[4]                                     # a tie
    measure = np.arange(16.0) ** 3
    drawn_gaps, drawn_measure = retrained_zoos(gaps, measure, hparams, draws=50, seed=1)
    assert drawn_gaps.shape == (50, 16)
    assert all(np.array_equal(np.sort(row), np.sort(gaps)) for row in drawn_gaps)
    assert all(np.array_equal(np.sort(row), measure) for row in drawn_measure)
    assert not np.all(drawn_gaps == gaps)
    scores = normal_scores(np.array([3.0, 1.0, 3.0, 2.0]))
    assert scores[0] == scores[2] and scores[1] < scores[3] < scores[0]
    assert retrained_zoos(gaps[:4], measure[:4], grid(2, 2), draws=5, seed=1) is None


def test_every_embedded_zoo_gives_each_score_a_standard_error_and_none_at_an_end():
    """Issue 50: every granulated tau of the embedded zoos had a standard error of 0 or 6e-17.
    A noisy measure now has one for every score; a perfect one has none (n/a) at CMI 1."""
    from pathlib import Path
    from kinds.pgdl2020.runtime import scoring
    types = scoring.TASK_TYPES[scoring.ZOO].score_types
    rng = np.random.default_rng(10)
    embedded = Path(__file__).resolve().parents[3] / "kinds/pgdl2020/reference/embedded"
    for path in sorted(embedded.glob("*/model_configs.json")):
        zoo = read_model_configs(path)
        for measure, perfect in ((zoo.gaps + rng.normal(0, 0.01, zoo.gaps.size), False),
                                 (zoo.gaps, True)):
            arrays = {"measure": measure, "gaps": zoo.gaps, "hparams": zoo.hparams,
                      "value_order": zoo.possible_values}
            values = {t.name: t.clip(t.evaluate(arrays)) for t in types}
            errors = scoring.retraining_errors(types, values, measure, zoo.gaps, zoo.hparams,
                                               zoo.possible_values)
            if perfect:
                assert values["cmi"] == 1.0 and errors["cmi"] is None, path
            else:
                assert all(0.005 < errors[t.name] < 0.5 for t in types), (path, errors)

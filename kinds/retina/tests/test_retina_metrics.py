"""Retina (diabetic-retinopathy uncertainty benchmark) metrics, kinds/retina/runtime/metrics.py:
against scikit-learn where the benchmark called it, and hand-computed cases for the rest
(ECE bin edges and ties, referral-curve conventions, balanced joint sets, OOD detection)."""

from __future__ import annotations

import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import (auc, average_precision_score, log_loss, precision_recall_curve,
                             roc_auc_score, roc_curve)

from kinds.retina.runtime import metrics as M

REPO = Path(__file__).resolve().parents[3]


def random_case(n: int, seed: int, levels: int | None = None):
    """Labels, probabilities correlated with them, and an uncertainty; with ``levels`` the
    probabilities and uncertainties take few values (many ties)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    p = np.clip(0.5 + (y - 0.5) * rng.uniform(-0.4, 1.0, n), 0, 1)
    u = rng.uniform(0, 1, n)
    if levels:
        p = np.round(p * levels) / levels
        u = np.round(u * levels) / levels
    return y, p, u


# ---------------------------------------------------------------------- validation

@pytest.mark.parametrize("kwargs, message", [
    (dict(y=[0, 1, 1], p=[0.1, 0.2]), "lengths differ"),
    (dict(y=[0, 1, 2, 1], p=[0.1, 0.2, 0.3, 0.4]), "y: example 2 has the label 2"),
    (dict(y=[0, 1], p=[0.1, 1.5]), "p: example 1 has the probability 1.5"),
    (dict(y=[0, 1], p=[0.1, -0.0001]), "p: example 1"),
    (dict(y=[0, 1, 1], p=[0.1, np.nan, 0.3]), "p: example 1 (0-based) has the non-finite"),
    (dict(y=[0, 1], p=[0.1, 0.3], u=[0.0, np.inf]), "u: example 1 (0-based) has the non-finite"),
    (dict(y=[[0, 1]], p=[[0.1, 0.3]]), "y: expected one value per example"),
    (dict(y=[], p=[]), "no examples"),
    (dict(y=["a", "b"]), "y: expected numbers"),
])
def test_check_inputs_names_the_argument_and_the_first_bad_index(kwargs, message):
    with pytest.raises(ValueError) as error:
        M.check_inputs(**kwargs)
    assert message in str(error.value)


def test_check_inputs_accepts_bools_and_float_labels():
    y, p, u = M.check_inputs([True, False], [0, 1], [3, -2])
    assert y.dtype == np.int64 and y.tolist() == [1, 0]
    assert p.dtype == np.float64 and u.tolist() == [3.0, -2.0]
    assert M.check_inputs(y=[0.0, 1.0])[0].tolist() == [0, 1]


def test_every_public_metric_validates():
    with pytest.raises(ValueError, match="p: example 0"):
        M.accuracy([1], [2.0])
    with pytest.raises(ValueError, match="u: example 1"):
        M.accuracy_retention_curve([1, 0], [0.5, 0.5], [0.0, np.nan])
    with pytest.raises(ValueError, match="is_ood: example 1 has the label 3"):
        M.ood_detection_auroc([0, 3], [0.1, 0.2])
    with pytest.raises(ValueError, match="score: example 0"):
        M.auroc([0, 1], [np.nan, 1.0])


def test_the_module_imports_neither_sklearn_nor_scipy():
    code = ("import sys, kinds.retina.runtime.metrics; "
            "bad = [m for m in ('sklearn', 'scipy') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


# ---------------------------------------------------------------------- entropy

def test_predictive_entropy_values():
    p = np.array([0.0, 1.0, 0.5, 0.2, 0.8, 0.9])
    h = M.predictive_entropy(p)
    assert h[0] == 0.0 and h[1] == 0.0
    assert h[2] == pytest.approx(math.log(2), abs=1e-15)
    expected = -(0.2 * math.log(0.2) + 0.8 * math.log(0.8))
    assert h[3] == pytest.approx(expected, rel=1e-14)
    assert h[4] == pytest.approx(expected, rel=1e-14)
    assert h[5] == pytest.approx(-(0.9 * math.log(0.9) + 0.1 * math.log(0.1)), rel=1e-14)


def test_predictive_entropy_clipping_is_opt_in():
    eps = 1e-6
    h = M.predictive_entropy([0.0, 1.0], eps=eps)
    expected = -(eps * math.log(eps) + (1 - eps) * math.log1p(-eps))
    assert h == pytest.approx([expected, expected], rel=1e-9)
    assert h[0] > 0


# ---------------------------------------------------------------------- AUROC / AUPRC

@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("levels", [None, 3, 10])
def test_auroc_matches_sklearn_with_ties(seed, levels):
    y, p, _ = random_case(257, seed, levels)
    expected = roc_auc_score(y, p)
    fpr, tpr, _ = roc_curve(y, p)
    assert M.auroc(y, p) == pytest.approx(expected, abs=1e-12)
    assert M.auroc(y, p) == pytest.approx(auc(fpr, tpr), abs=1e-12)


def test_auroc_counts_a_tie_as_one_half():
    assert M.auroc([0, 1], [0.3, 0.3]) == 0.5
    assert M.auroc([0, 1, 1], [0.3, 0.3, 0.9]) == 0.75
    assert M.auroc([1, 0], [0.9, 0.1]) == 1.0
    assert M.auroc([1, 0], [0.1, 0.9]) == 0.0


def test_auroc_with_one_class_raises():
    with pytest.raises(ValueError, match="both classes"):
        M.auroc([1, 1, 1], [0.1, 0.5, 0.9])


def sklearn_auprc(y, score):
    precision, recall, _ = precision_recall_curve(y, score)
    return auc(recall, precision)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("levels", [None, 3, 10])
def test_auprc_matches_sklearn_trapezoid(seed, levels):
    y, p, _ = random_case(311, seed, levels)
    assert M.auprc(y, p) == pytest.approx(sklearn_auprc(y, p), abs=1e-12)


def test_auprc_is_the_trapezoid_not_average_precision():
    y = np.array([1, 0, 1, 0, 0, 1])
    s = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    # points (r, p): (0, 1) (1/3, 1) (1/3, 1/2) (2/3, 2/3) (2/3, 1/2) (2/3, 2/5) (1, 1/2)
    expected = 1 / 3 * 1 + 0 + 1 / 3 * (1 / 2 + 2 / 3) / 2 + 0 + 0 + 1 / 3 * (2 / 5 + 1 / 2) / 2
    assert M.auprc(y, s) == pytest.approx(expected, abs=1e-15)
    assert abs(M.auprc(y, s) - average_precision_score(y, s)) > 0.01


def test_auprc_of_all_positive_is_one_and_without_positive_raises():
    assert M.auprc([1, 1, 1], [0.2, 0.9, 0.2]) == 1.0
    with pytest.raises(ValueError, match="without a positive"):
        M.auprc([0, 0], [0.2, 0.9])


# ---------------------------------------------------------------------- accuracy, NLL

def test_accuracy_threshold_is_strict():
    assert M.accuracy([0, 1, 1, 0], [0.5, 0.5000001, 0.49, 0.51]) == 0.5
    assert M.accuracy([0], [0.5]) == 1.0


@pytest.mark.parametrize("seed", range(4))
def test_nll_matches_sklearn_log_loss(seed):
    y, p, _ = random_case(200, seed)
    p = np.clip(p, 0.01, 0.99)
    assert M.nll(y, p) == pytest.approx(log_loss(y, p, labels=[0, 1]), rel=1e-12)


def test_nll_clips_at_1e_minus_15():
    losses = M.log_losses([1, 0, 0, 1], [0.0, 1.0, 0.0, 1.0])
    assert losses[0] == pytest.approx(-math.log(1e-15), rel=1e-12)
    # 1 - (1 - 1e-15) rounds to 9.992e-16 in float64, as in scikit-learn's own arithmetic
    assert losses[1] == pytest.approx(-math.log(1 - (1 - 1e-15)), rel=1e-12)
    assert losses[1] == pytest.approx(34.53957599234088, rel=1e-12)
    assert losses[2] == pytest.approx(1e-15, rel=1e-3)
    assert losses[3] == pytest.approx(1.1102230246251565e-15, rel=1e-3)   # -log(1 - 1e-15)
    assert M.nll([1], [0.0]) == pytest.approx(34.538776394910684, rel=1e-12)


# ---------------------------------------------------------------------- ECE

def test_ece_bin_index_on_edges():
    values = np.array([0.0, 1 / 15, 0.5, 0.6, 14 / 15, 0.95, 1.0])
    assert M.ece_bin_index(values, 15).tolist() == [0, 1, 7, 9, 14, 14, 14]
    assert M.ece_bin_index(np.array([0.1, 0.2, 1.0]), 10).tolist() == [1, 2, 9]


def test_ece_hand_computed_with_edges_and_a_tie():
    # p=0.5: tie -> class 0, confidence 0.5, bin 7; p=0.6 and p=0.4: confidence 0.6, bin 9;
    # p=1.0 and p=0.0: confidence 1.0, last bin 14. Bins 0-6, 8, 10-13 stay empty.
    y = [0, 1, 1, 1, 1]
    p = [0.5, 0.6, 0.4, 1.0, 0.0]
    expected = 1 / 5 * abs(1 - 0.5) + 2 / 5 * abs(0.5 - 0.6) + 2 / 5 * abs(0.5 - 1.0)
    assert M.ece(y, p) == pytest.approx(expected, abs=1e-15)
    assert expected == pytest.approx(0.34)


def test_ece_tie_predicts_class_zero():
    # p = 0.5 (label 0) and p = 0.52 (label 1) share bin 7; both correct only if 0.5 -> class 0
    assert M.ece([0, 1], [0.5, 0.52]) == pytest.approx(abs(1 - 0.51), abs=1e-15)
    # the tie is wrong for label 1: accuracy 1/2 in the bin
    assert M.ece([1, 1], [0.5, 0.52]) == pytest.approx(abs(0.5 - 0.51), abs=1e-15)


def test_ece_inner_edge_goes_to_the_bin_above_and_one_to_the_last_bin():
    # confidence 0.6 shares bin 9 with 0.62 (not bin 8): accuracy 1/2, confidence 0.61
    assert M.ece([1, 0], [0.6, 0.62]) == pytest.approx(abs(0.5 - 0.61), abs=1e-15)
    # confidence 1.0 shares bin 14 with 0.95
    assert M.ece([1, 0], [1.0, 0.95]) == pytest.approx(abs(0.5 - 0.975), abs=1e-15)


def reference_ece(y, p, bins):
    """ECE with explicit half-open bins [k/bins, (k+1)/bins), the last one closed."""
    confidence = np.maximum(p, 1 - p)
    label = (p > 0.5).astype(int)
    total = 0.0
    for k in range(bins):
        lo, hi = k / bins, (k + 1) / bins
        inside = (confidence >= lo) & ((confidence < hi) | ((k == bins - 1) & (confidence <= hi)))
        if inside.any():
            total += inside.mean() * abs((label[inside] == y[inside]).mean()
                                         - confidence[inside].mean())
    return total


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("bins", [15, 10, 7])
def test_ece_matches_an_explicit_binning(seed, bins):
    y, p, _ = random_case(500, seed)
    assert M.ece(y, p, bins=bins) == pytest.approx(reference_ece(y, p, bins), abs=1e-12)


def test_ece_of_a_calibrated_single_bin_is_zero():
    # confidence 0.8 everywhere, 4 of 5 correct
    assert M.ece([1, 1, 1, 1, 0], [0.8] * 5) == pytest.approx(0.0, abs=1e-15)
    assert M.ece([0, 0, 0, 0, 1], [0.2] * 5) == pytest.approx(0.0, abs=1e-15)


# ---------------------------------------------------------------------- referral curves

def benchmark_accuracy_curve(correct, u):
    """The benchmark's construction, transcribed loosely: built from 'all referred' upwards,
    then reversed and divided by [N, N-1, ..., 1, 1]."""
    n = correct.size
    ordered = correct[np.argsort(u, kind="stable")]
    built = np.zeros(n + 1)
    for i in range(1, n):
        built[i] = ordered[:i].sum()
    built[0] = 1
    built[-1] = ordered.sum()
    normaliser = np.arange(n + 1)
    normaliser[0] = 1
    return built[::-1] / normaliser[::-1]


@pytest.mark.parametrize("seed", range(4))
def test_accuracy_curve_matches_the_benchmark_construction(seed):
    y, p, u = random_case(123, seed)
    correct = (y == (p > 0.5)).astype(float)
    curve = M.accuracy_retention_curve(y, p, u)
    assert curve.shape == (124,)
    np.testing.assert_allclose(curve, benchmark_accuracy_curve(correct, u), rtol=0, atol=1e-15)


def test_accuracy_curve_endpoints_and_orientation():
    y = [1, 1, 0, 0, 1]
    p = [0.9, 0.2, 0.1, 0.7, 0.6]      # correct: 1 0 1 0 1
    u = [0.0, 0.9, 0.1, 0.5, 0.3]      # order: 0, 2, 4, 3, 1
    curve = M.accuracy_retention_curve(y, p, u)
    assert curve.tolist() == pytest.approx([3 / 5, 3 / 4, 1.0, 1.0, 1.0, 1.0])
    assert curve[0] == M.accuracy(y, p)


def test_accuracy_curve_with_tied_uncertainties_keeps_the_input_order():
    y = [1, 1, 1, 1]
    p = [0.9, 0.1, 0.9, 0.1]           # correct: 1 0 1 0
    u = [0.1, 0.1, 0.2, 0.2]
    curve = M.accuracy_retention_curve(y, p, u)
    # retained: index 0 alone, then {0, 1}, then {0, 1, 2}, then all
    assert curve.tolist() == pytest.approx([0.5, 2 / 3, 0.5, 1.0, 1.0])
    big_y, big_p, big_u = random_case(400, 3, levels=4)
    first = M.accuracy_retention_curve(big_y, big_p, big_u)
    order = sorted(range(400), key=lambda i: (big_u[i], i))
    correct = (big_y == (big_p > 0.5)).astype(float)[order]
    kept = np.arange(400, 0, -1)
    expected = np.r_[np.cumsum(correct)[kept - 1] / kept, 1.0]
    np.testing.assert_allclose(first, expected, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(first, M.accuracy_retention_curve(big_y, big_p, big_u))


def test_nll_curve_endpoints():
    y, p, u = random_case(50, 1)
    p = np.clip(p, 0.05, 0.95)
    curve = M.nll_retention_curve(y, p, u)
    assert curve.shape == (51,)
    assert curve[0] == pytest.approx(M.nll(y, p), rel=1e-13)
    assert curve[-1] == 0.0
    most_certain = int(np.argmin(u))
    assert curve[-2] == pytest.approx(M.log_losses(y, p)[most_certain], rel=1e-13)


def test_perfect_uncertainty_gives_the_oracle_curve():
    y, p, _ = random_case(60, 2)
    correct = (y == (p > 0.5))
    u = (~correct).astype(float)       # uncertain exactly where wrong
    curve = M.accuracy_retention_curve(y, p, u)
    n, right = y.size, int(correct.sum())
    assert 0 < right < n
    oracle = [min(1.0, right / (n - k)) for k in range(n)] + [1.0]
    np.testing.assert_allclose(curve, oracle, rtol=0, atol=1e-15)
    rng = np.random.default_rng(5)
    for _ in range(20):
        other = M.accuracy_retention_curve(y, p, rng.uniform(size=n))
        assert np.all(curve >= other - 1e-15)
        assert M.area_under_referral_curve(curve) > M.area_under_referral_curve(other)
    # the reverse (confident exactly where wrong) is the worst
    worst = M.accuracy_retention_curve(y, p, correct.astype(float))
    assert worst[n - 1] == 0.0 and M.area_under_referral_curve(worst) < \
        M.area_under_referral_curve(curve)


def test_constant_uncertainty_keeps_the_input_order():
    y, p, _ = random_case(40, 4)
    flat = M.accuracy_retention_curve(y, p, np.zeros(40))
    by_index = M.accuracy_retention_curve(y, p, np.arange(40.0))
    np.testing.assert_array_equal(flat, by_index)


def test_random_uncertainty_averages_to_the_random_referral_curve():
    y, p, _ = random_case(30, 6)
    rng = np.random.default_rng(7)
    mean = np.mean([M.accuracy_retention_curve(y, p, rng.permutation(30).astype(float))
                    for _ in range(4000)], axis=0)
    # a random subset of any size has the overall accuracy in expectation
    np.testing.assert_allclose(mean[:-1], M.accuracy(y, p), atol=0.03)
    assert mean[-1] == 1.0


def test_area_under_referral_curve_is_the_plain_mean():
    assert M.area_under_referral_curve([0.5, 1.0, 1.0, 0.0]) == 0.625
    y, p, u = random_case(80, 8)
    scores = M.retention_scores(y, p, u)
    assert scores["retention_accuracy_auc"] == pytest.approx(
        np.mean(M.accuracy_retention_curve(y, p, u)), abs=1e-15)
    assert scores["retention_auroc_auc"] == pytest.approx(
        np.mean(M.auroc_retention_curve(y, p, u)), abs=1e-15)
    assert set(scores) == {"retention_accuracy_auc", "retention_nll_auc",
                           "retention_auroc_auc", "retention_auprc_auc"}


# ---------------------------------------------------------------------- AUROC / AUPRC curves

def test_bucket_sizes_reproduce_the_float_floor():
    sizes = M.bucket_sizes(100)
    assert sizes.shape == (100,) and sizes[0] == 0 and sizes[99] == 99
    assert sizes[29] == 28 and sizes[58] == 57 and sizes[50] == 50   # (b/100)*100 rounding
    assert M.bucket_sizes(1000)[29] == 290
    assert M.bucket_sizes(50)[1] == 0 and M.bucket_sizes(50)[2] == 1


def reference_auc_curve(y, p, u, metric):
    """The benchmark's loop (eval_utils.compute_auc_retention_curve) with scikit-learn as it
    calls it: an AUPRC without a positive is scikit-learn's own value (0.5 from 1.1 on), only
    a ValueError (an empty set, an AUROC of one class) becomes 0."""
    def area(t, s):
        return roc_auc_score(t, s) if metric == "auroc" else sklearn_auprc(t, s)

    n = y.size
    sizes = ((np.arange(100) / 100) * n).astype(int)
    order = np.argsort(u, kind="stable")
    y, p = y[order], p[order]
    built = np.zeros(101)
    built[0] = 1
    checking = True
    for b in range(1, 100):
        t, s = y[:sizes[b]], p[:sizes[b]]
        if checking and len(np.unique(t)) == 1 and np.array_equal(s > 0.5, t):
            built[b] = 1
        else:
            try:
                built[b] = area(t, s)
            except ValueError:
                built[b] = 0
            checking = False
    built[100] = area(y, p)
    return built[::-1]


@pytest.mark.parametrize("metric", ["auroc", "auprc"])
@pytest.mark.parametrize("n, seed, levels", [(357, 0, None), (1000, 1, 10), (150, 2, 5)])
@pytest.mark.parametrize("head_mistake", [False, True])
def test_auc_curves_match_a_sklearn_reference(metric, n, seed, levels, head_mistake):
    y, p, u = random_case(n, seed, levels)
    # make the most certain examples one class and correct, so the first rule is exercised;
    # with a mistake among them, retained sets of negatives only are scored as they come
    easy = np.argsort(u, kind="stable")[: n // 5]
    y[easy], p[easy] = 0, 0.05
    if head_mistake:
        p[easy[n // 50]] = 0.9
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = reference_auc_curve(y, p, u, metric)
    curve = M.auc_retention_curve(y, p, u, metric)
    assert curve.shape == (101,)
    np.testing.assert_allclose(curve, expected, rtol=0, atol=1e-12)


def test_auroc_curve_ends_all_data_first_everything_referred_last():
    y, p, u = random_case(500, 3)
    curve = M.auroc_retention_curve(y, p, u)
    assert curve[0] == pytest.approx(M.auroc(y, p), abs=1e-15)
    assert curve[-1] == 1.0
    auprc_curve = M.auprc_retention_curve(y, p, u)
    assert auprc_curve[0] == pytest.approx(M.auprc(y, p), abs=1e-15)
    assert auprc_curve[-1] == 1.0


def one_class_head(n=200, head=100, wrong_at=None, label=0):
    """n examples, u = index; the ``head`` most certain have one label, predicted correctly
    except at position ``wrong_at``; the rest alternate labels."""
    y = np.r_[np.full(head, label), np.arange(n - head) % 2]
    p = np.where(y == 1, 0.8, 0.2).astype(float)
    p[head:][::4] = 0.55                            # some mistakes in the mixed tail
    p[head + 1] = 0.3                               # a positive ranked below one negative
    if wrong_at is not None:
        p[wrong_at] = 1 - p[wrong_at]
    return y, p, np.arange(n, dtype=float)


def test_one_class_all_correct_retained_sets_score_one():
    y, p, u = one_class_head()
    curve = M.auroc_retention_curve(y, p, u)
    # bucket b keeps 2b examples: b <= 50 keeps only the one-class head -> entries j >= 50
    assert np.all(curve[50:] == 1.0)
    assert curve[49] == pytest.approx(M.auroc(y[:102], p[:102]), abs=1e-15)
    assert curve[49] == pytest.approx(100 / 101, abs=1e-15)


def test_one_class_with_a_wrong_prediction_scores_zero():
    y, p, u = one_class_head(wrong_at=4)
    curve = M.auroc_retention_curve(y, p, u)
    # buckets 1 and 2 keep 2 and 4 examples (before the mistake): 1; buckets 3..50: 0
    assert curve[99] == 1.0 and curve[98] == 1.0
    assert np.all(curve[50:98] == 0.0)
    assert curve[49] > 0.0 and curve[100] == 1.0


def test_auprc_curve_one_class_conventions():
    # all-negative head with a mistake: scikit-learn's AUPRC without a positive, 0.5
    y, p, u = one_class_head(wrong_at=4)
    curve = M.auprc_retention_curve(y, p, u)
    assert curve[98] == 1.0 and np.all(curve[50:98] == 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert sklearn_auprc(y[:10], p[:10]) == 0.5
    # all-positive head with a mistake: AUPRC is defined and equals 1
    y, p, u = one_class_head(wrong_at=4, label=1)
    curve = M.auprc_retention_curve(y, p, u)
    assert np.all(curve[50:] == 1.0)
    assert np.all(M.auroc_retention_curve(y, p, u)[50:98] == 0.0)


def test_small_sets_lose_the_one_class_rule_after_an_empty_bucket():
    # N = 50 < 100 buckets: bucket 1 keeps int(0.01 * 50) = 0 examples -> 0, and the
    # one-class test is never made again, so bucket 2 (one correct negative) scores 0 too
    y, p, u = one_class_head(n=50, head=25)
    curve = M.auroc_retention_curve(y, p, u)
    assert curve[99] == 0.0 and curve[98] == 0.0
    assert curve[100] == 1.0
    big_y, big_p, big_u = one_class_head(n=200, head=100)
    assert M.auroc_retention_curve(big_y, big_p, big_u)[98] == 1.0


def test_auc_curve_rejects_an_unknown_metric():
    with pytest.raises(ValueError, match="metric must be"):
        M.auc_retention_curve([0, 1], [0.2, 0.8], [0, 1], "brier")


# ---------------------------------------------------------------------- joint sets

@pytest.mark.parametrize("n_id, n_ood, repeats, remainder", [
    (10, 3, 3, 1), (12, 4, 3, 0), (2, 5, 0, 2), (7, 7, 1, 0), (100, 1, 100, 0),
    (99, 100, 0, 99), (150, 40, 3, 30)])
def test_balanced_indices_sizes(n_id, n_ood, repeats, remainder):
    is_ood = np.r_[np.zeros(n_id, int), np.ones(n_ood, int)]
    np.random.default_rng(n_id).shuffle(is_ood)
    chosen = M.balanced_indices(is_ood, seed=3)
    assert chosen.size == 2 * n_id
    assert np.sum(is_ood[chosen] == 0) == n_id == np.sum(is_ood[chosen] == 1)
    id_part, ood_part = chosen[:n_id], chosen[n_id:]
    np.testing.assert_array_equal(id_part, np.flatnonzero(is_ood == 0))
    shifted = np.flatnonzero(is_ood == 1)
    np.testing.assert_array_equal(ood_part[:repeats * n_ood], np.tile(shifted, repeats))
    extra = ood_part[repeats * n_ood:]
    assert extra.size == remainder and len(set(extra.tolist())) == remainder
    assert set(extra.tolist()) <= set(shifted.tolist())
    counts = np.bincount(ood_part, minlength=is_ood.size)[shifted]
    assert set(counts.tolist()) <= {repeats, repeats + 1}


def test_balanced_indices_are_seeded_and_need_both_parts():
    is_ood = np.r_[np.zeros(50, int), np.ones(7, int)]
    np.testing.assert_array_equal(M.balanced_indices(is_ood, 1), M.balanced_indices(is_ood, 1))
    draws = {tuple(M.balanced_indices(is_ood, s)[-1:].tolist()) for s in range(20)}
    assert len(draws) > 1
    with pytest.raises(ValueError, match="both in-domain and shifted"):
        M.balanced_indices([0, 0, 0])
    with pytest.raises(ValueError, match="both in-domain and shifted"):
        M.balanced_indices([1, 1])


def test_balanced_curves():
    y, p, u = random_case(100, 9)
    is_ood = np.r_[np.zeros(80, int), np.ones(20, int)]   # 4 copies of each OOD example
    u[80:] += 0.5                                  # shifted examples more uncertain
    curves = M.balanced_retention_curves(y, p, u, is_ood, seed=2)
    chosen = M.balanced_indices(is_ood, seed=2)
    assert curves["accuracy"].shape == (161,)
    np.testing.assert_array_equal(
        curves["accuracy"], M.accuracy_retention_curve(y[chosen], p[chosen], u[chosen]))
    np.testing.assert_array_equal(
        curves["nll"], M.nll_retention_curve(y[chosen], p[chosen], u[chosen]))
    np.testing.assert_array_equal(curves["auroc"], M.auroc_retention_curve(y, p, u))
    np.testing.assert_array_equal(curves["auprc"], M.auprc_retention_curve(y, p, u))
    # reweighting the shifted part changes the all-data accuracy to the ID/OOD average
    id_acc = M.accuracy(y[:80], p[:80])
    ood_acc = M.accuracy(y[80:], p[80:])
    assert curves["accuracy"][0] == pytest.approx((id_acc + ood_acc) / 2, abs=1e-15)
    scores = M.balanced_retention_scores(y, p, u, is_ood, seed=2)
    assert scores["balanced_retention_nll_auc"] == pytest.approx(np.mean(curves["nll"]))
    assert set(scores) == {"balanced_retention_accuracy_auc", "balanced_retention_nll_auc",
                           "balanced_retention_auroc_auc", "balanced_retention_auprc_auc"}


# ---------------------------------------------------------------------- OOD detection

def test_ood_detection():
    is_ood = np.r_[np.zeros(30, int), np.ones(10, int)]
    rng = np.random.default_rng(11)
    u = np.r_[rng.uniform(0, 0.4, 30), rng.uniform(0.5, 0.7, 10)]
    assert M.ood_detection_auroc(is_ood, u) == 1.0
    assert M.ood_detection_auprc(is_ood, u) == pytest.approx(1.0, abs=1e-15)
    assert M.ood_detection_auroc(is_ood, -u) == 0.0
    assert M.ood_detection_auroc(is_ood, np.zeros(40)) == 0.5
    assert M.ood_detection_auprc(is_ood, np.zeros(40)) == pytest.approx(0.25 * 1 + 0.5 * 0.75)
    noisy = rng.uniform(size=40)
    assert M.ood_detection_auroc(is_ood, noisy) == pytest.approx(roc_auc_score(is_ood, noisy))
    assert M.ood_detection_auprc(is_ood, noisy) == pytest.approx(sklearn_auprc(is_ood, noisy))


def test_scalar_metrics_keys_and_values():
    y, p, _ = random_case(100, 12)
    values = M.scalar_metrics(y, p)
    assert set(values) == {"negative_log_likelihood", "accuracy", "auroc", "auprc", "ece"}
    assert values["auroc"] == pytest.approx(roc_auc_score(y, p), abs=1e-12)


# ---------------------------------------------------------------------- ROC points, screening point, reliability bins

@pytest.mark.parametrize("seed, levels", [(0, None), (1, 5), (2, 2)])
def test_roc_points_match_sklearns_full_roc_curve(seed, levels):
    y, p, _ = random_case(300, seed, levels)
    fpr, tpr, _ = roc_curve(y, p, drop_intermediate=False)
    ours = M.roc_points(y, p)
    np.testing.assert_allclose(ours[0], fpr)
    np.testing.assert_allclose(ours[1], tpr)
    assert auc(ours[0], ours[1]) == pytest.approx(M.auroc(y, p))


def test_sensitivity_at_specificity_by_hand():
    # scores 0.9 0.8 0.7 0.6 0.5 for labels 1 0 1 1 0: at threshold 0.6 the FPR is 1/2, at 0.9
    # it is 0 with TPR 1/3; with 80% specificity at most 0.2 false positive rate is allowed
    y, p = [1, 0, 1, 1, 0], [0.9, 0.8, 0.7, 0.6, 0.5]
    assert M.sensitivity_at_specificity(y, p, 0.8) == pytest.approx(1 / 3)
    assert M.sensitivity_at_specificity(y, p, 0.5) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="undefined"):
        M.sensitivity_at_specificity([1, 1], [0.2, 0.3], 0.8)


def test_calibration_bins_are_the_eces_bins():
    y = np.array([1, 0, 1, 1, 0, 0])
    p = np.array([0.95, 0.9, 0.6, 0.55, 0.3, 0.5])
    bins = M.calibration_bins(y, p)
    # confidences 0.95 0.9 0.6 0.55 0.7 0.5 -> bins 14 13 9 8 10 7 (15 equal-width bins)
    assert bins["index"].tolist() == [7, 8, 9, 10, 13, 14]
    assert bins["count"].tolist() == [1, 1, 1, 1, 1, 1]
    assert bins["accuracy"].tolist() == [1.0, 1.0, 1.0, 1.0, 0.0, 1.0]
    weights = bins["count"] / bins["count"].sum()
    assert M.expected_calibration_error(y, p) == pytest.approx(
        np.sum(weights * np.abs(bins["accuracy"] - bins["confidence"])))

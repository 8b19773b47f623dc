"""Each metric against an independent computation (scipy, brute force, loops)."""
import itertools

import numpy as np
import pytest
from scipy import optimize, stats

from kinds.bdl2021.runtime import metrics
from kinds.bdl2021.runtime.score_types import AGREEMENT, SCORE_TYPES, TOTAL_VARIATION, WASSERSTEIN2

rng = np.random.default_rng(0)


def random_probs(n, c):
    return rng.dirichlet(np.ones(c), size=n)


def test_agreement_counts_matching_top_classes():
    p, q = random_probs(200, 5), random_probs(200, 5)
    expected = sum(int(np.argmax(p[i]) == np.argmax(q[i])) for i in range(200)) / 200
    assert metrics.top1_agreement(p, q) == expected
    assert metrics.top1_agreement(p, p) == 1.0


def test_agreement_ties_go_to_the_lowest_class_index():
    tied = np.array([[0.4, 0.4, 0.2]])
    assert metrics.top1_agreement(tied, np.array([[0.5, 0.3, 0.2]])) == 1.0
    assert metrics.top1_agreement(tied, np.array([[0.3, 0.5, 0.2]])) == 0.0


def test_total_variation_matches_a_loop():
    p, q = random_probs(50, 4), random_probs(50, 4)
    expected = np.mean([0.5 * sum(abs(p[i, c] - q[i, c]) for c in range(4)) for i in range(50)])
    assert metrics.total_variation(p, q) == pytest.approx(expected, abs=1e-15)
    assert metrics.total_variation(np.eye(3), np.roll(np.eye(3), 1, axis=1)) == 1.0


@pytest.mark.parametrize("s, r", [(1000, 1000), (7, 13), (1000, 3000), (5, 1)])
def test_w1_equals_scipy_row_by_row(s, r):
    a, b = rng.normal(size=(30, s)), rng.normal(0.5, 2.0, size=(30, r))
    expected = np.mean([stats.wasserstein_distance(a[i], b[i]) for i in range(30)])
    assert metrics.wasserstein1(a, b) == pytest.approx(expected, rel=1e-12)


def brute_force_w2_equal(x, y):
    """min over all couplings (permutations, for equal counts) of sqrt(mean |x - y_sigma|^2)."""
    return min(np.sqrt(np.mean((x - y[list(perm)]) ** 2))
               for perm in itertools.permutations(range(len(y))))


def linear_program_w2(x, y):
    """Optimal transport between two empirical measures as an LP (any sample counts)."""
    n, m = len(x), len(y)
    cost = (x[:, None] - y[None, :]) ** 2
    rows = np.kron(np.eye(n), np.ones(m))
    cols = np.kron(np.ones(n), np.eye(m))
    result = optimize.linprog(cost.ravel(), A_eq=np.vstack([rows, cols]),
                              b_eq=np.concatenate([np.full(n, 1 / n), np.full(m, 1 / m)]),
                              bounds=(0, None), method="highs")
    return np.sqrt(result.fun)


def test_w2_equals_brute_force_coupling_for_equal_counts():
    x, y = rng.normal(size=(4, 6)), rng.normal(1.0, 0.5, size=(4, 6))
    expected = np.mean([brute_force_w2_equal(x[i], y[i]) for i in range(4)])
    assert metrics.wasserstein2(x, y) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("n, m", [(3, 4), (5, 2), (4, 6)])
def test_w2_quantile_matching_equals_optimal_transport_for_unequal_counts(n, m):
    x, y = rng.normal(size=(3, n)), rng.exponential(size=(3, m))
    expected = np.mean([linear_program_w2(x[i], y[i]) for i in range(3)])
    assert metrics.wasserstein2(x, y) == pytest.approx(expected, rel=1e-7)


def test_w2_is_at_least_w1_and_both_vanish_on_identical_samples():
    a, b = rng.normal(size=(20, 100)), rng.normal(size=(20, 100))
    assert metrics.wasserstein2(a, b) >= metrics.wasserstein1(a, b)
    assert metrics.wasserstein2(a, a[:, ::-1]) == 0.0


def test_w2_of_a_shift_is_the_shift():
    a = rng.normal(size=(5, 1000))
    assert metrics.wasserstein2(a, a + 0.7) == pytest.approx(0.7)


def test_predictive_entropy():
    assert metrics.predictive_entropy(np.array([[1.0, 0.0]]))[0] == 0.0
    assert metrics.predictive_entropy(np.full((1, 4), 0.25))[0] == pytest.approx(np.log(4))


def test_reliability_curve_and_ece_match_a_loop():
    p = random_probs(500, 3)
    labels = rng.integers(0, 3, 500)
    confidence, accuracy, counts = metrics.reliability_curve(p, labels, bins=5)
    ece = 0.0
    for b in range(5):
        members = [i for i in range(500) if min(int(p[i].max() * 5), 4) == b]
        assert counts[b] == len(members)
        if members:
            acc = np.mean([p[i].argmax() == labels[i] for i in members])
            conf = np.mean([p[i].max() for i in members])
            assert accuracy[b] == pytest.approx(acc) and confidence[b] == pytest.approx(conf)
            ece += len(members) / 500 * abs(acc - conf)
        else:
            assert np.isnan(accuracy[b])
    assert metrics.expected_calibration_error(p, labels, bins=5) == pytest.approx(ece)


def test_interval_coverage_of_the_true_distribution_is_nominal():
    samples = rng.normal(size=(4000, 400))
    y = rng.normal(size=4000)
    coverage = metrics.interval_coverage(samples, y, np.array([0.5, 0.9]))
    np.testing.assert_allclose(coverage, [0.5, 0.9], atol=0.03)


def test_score_types_declare_direction_bounds_and_penalty():
    assert AGREEMENT.sort == "desc" and AGREEMENT.worst() == 0.0 and AGREEMENT.as_loss(0.9) == pytest.approx(0.1)
    assert TOTAL_VARIATION.sort == "asc" and TOTAL_VARIATION.worst() == 1.0
    assert WASSERSTEIN2.worst(cap=3.0) == 3.0 and WASSERSTEIN2.clip(7.0, cap=3.0) == 3.0
    names = [t.name for types in SCORE_TYPES.values() for t in types]
    assert len(names) == len(set(names))


def test_an_agreement_of_one_keeps_a_standard_error_and_the_chains_part_is_t_widened():
    """breast_cancer's HMC baseline agreed with the reference on all 190 rows and on every
    chain: its standard error read 0. The rows' part is now Wilson's at a share of 1; the
    chains' part is sd / sqrt(K) times t_(K-1) / 1.96."""
    import math
    from kinds.bdl2021.runtime import evaluate
    from kinds.bdl2021.runtime.references import References
    from kinds.bdl2021.runtime.score_types import TASK_TYPES
    from kinds.bdl2021.runtime.settings import Block, TaskSettings
    from runtime import uncertainty
    from runtime.scoring import TaskConfig
    settings = TaskSettings("classification", 190, 2, None, (Block("all", 0, 190),), "s", "r",
                            "c", None, None)
    task = TaskConfig("breast_cancer", TASK_TYPES["classification"], {"agreement": 1.0}, None,
                      settings)
    reference = np.tile([0.9, 0.1], (190, 1))
    chains = reference + np.array([0.01, -0.02, 0.0, 0.03])[:, None, None] * [1, -1]
    result = evaluate._metrics(task, reference + [0.05, -0.05], References(
        chains.mean(axis=0), chains, None, {}), None)
    z = uncertainty.Z95
    assert result["agreement"].value == 1.0
    assert result["agreement"].se == pytest.approx(z / (190 + z * z))
    per_chain = [metrics.total_variation(reference + [0.05, -0.05], c) for c in chains]
    rows = np.std(0.5 * np.abs(reference + [0.05, -0.05] - chains.mean(axis=0)).sum(1), ddof=1)
    chain_part = np.std(per_chain, ddof=1) / 2 * 3.1824 / z
    assert result["total_variation"].se == pytest.approx(
        math.hypot(rows / math.sqrt(190), chain_part), rel=1e-4)


def test_every_score_type_with_per_row_terms_averages_them_to_its_value():
    """BDL's score types that declare per-row terms (their means are the values; the standard
    errors are computed from them), on arrays of their own shapes: four, each checked by
    tests/test_standard_errors.py's helper as label_accuracy's accuracy is there."""
    from kinds.bdl2021.runtime.score_types import TASK_TYPES as BDL
    from test_standard_errors import per_row_terms_checked
    rng = np.random.default_rng(5)
    cases = [(BDL["classification"], {"prediction": rng.dirichlet(np.ones(4), 50),
                                      "reference": rng.dirichlet(np.ones(4), 50)}),
             (BDL["regression"], {"prediction": np.sort(rng.normal(size=(50, 20)), 1),
                                  "reference": np.sort(rng.normal(size=(50, 30)), 1)})]
    assert per_row_terms_checked(cases) == 4

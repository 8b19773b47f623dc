"""Split R-hat and ESS against cases with known answers."""
import numpy as np

from kinds.bdl2021.reference.convergence import effective_sample_size, split_rhat


def test_rhat_is_one_for_independent_draws_of_one_distribution():
    draws = np.random.default_rng(0).standard_normal((4, 1000, 50))
    rhat = split_rhat(draws)
    assert rhat.shape == (50,)
    assert np.all(np.abs(rhat - 1) < 0.01)


def test_rhat_flags_chains_stuck_in_different_places():
    draws = np.random.default_rng(1).standard_normal((4, 500))
    draws[0] += 2.0
    assert split_rhat(draws) > 1.1


def test_split_rhat_flags_a_trend_inside_every_chain():
    """Chains that agree with each other but drift: only the split catches it."""
    draws = np.random.default_rng(2).standard_normal((4, 1000)) + np.linspace(0, 2, 1000)
    assert split_rhat(draws) > 1.1


def test_constant_quantity_has_converged():
    draws = np.ones((4, 100, 3))
    np.testing.assert_array_equal(split_rhat(draws), 1.0)
    np.testing.assert_array_equal(effective_sample_size(draws), 400)


def test_ess_of_independent_draws_is_close_to_their_number():
    ess = effective_sample_size(np.random.default_rng(3).standard_normal((4, 1000)))
    assert 3500 < ess < 4500


def test_ess_of_ar1_matches_theory():
    """AR(1) with coefficient phi: integrated autocorrelation time (1 + phi) / (1 - phi)."""
    phi, n = 0.9, 5000
    rng = np.random.default_rng(4)
    noise = rng.standard_normal((4, n))
    x = np.zeros((4, n))
    for t in range(1, n):
        x[:, t] = phi * x[:, t - 1] + noise[:, t]
    expected = 4 * n * (1 - phi) / (1 + phi)
    assert abs(effective_sample_size(x) / expected - 1) < 0.15


def test_a_stuck_chains_nearly_constant_draws_get_a_finite_cautious_mcse():
    """Draws a few units in the last place apart (a stuck chain of a generated CNN task): ArviZ
    gives NaN for their MCSE, which made a reference file the build refused. They get their
    standard deviation instead (an effective sample size of 1); constant draws keep 0 and
    ordinary ones ArviZ's figure."""
    from kinds.bdl2021.reference.convergence import rank_normalised
    rng = np.random.default_rng(0)
    stuck = -8.3 + 1e-9 * rng.standard_normal((2, 500))
    draws = np.stack([stuck, np.full((2, 500), 0.25), rng.standard_normal((2, 500))], axis=2)
    figures = rank_normalised(draws)
    assert np.isfinite(figures["mcse_mean"]).all(), figures["mcse_mean"]
    assert figures["mcse_mean"][0] == figures["sd"][0] > 0
    assert figures["mcse_mean"][1] == 0.0
    assert 0 < figures["mcse_mean"][2] < figures["sd"][2]

"""The HMC sampler is exact: on a conjugate model its samples match the closed-form posterior."""
import math

import numpy as np
import pytest

from kinds.bdl2021.reference.convergence import effective_sample_size
from kinds.bdl2021.reference.hmc import (ChainConfig, dual_averaging_init, dual_averaging_update,
                                hmc_step, init_state, leapfrog, run_chain)

NOISE_STD = 0.5
PRIOR_VARIANCE = 1.0
# A z-score bound: with a few dozen checked statistics, a correct sampler exceeds it with
# probability ~1e-4, while the wrong posteriors below exceed it by far.
Z_BOUND = 4.0


def linear_regression_problem(seed=0, n=40, d=3):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    y = x @ np.array([1.0, -0.5, 0.25])[:d] + NOISE_STD * rng.standard_normal(n)
    precision = x.T @ x / NOISE_STD ** 2 + np.eye(d) / PRIOR_VARIANCE
    covariance = np.linalg.inv(precision)
    mean = covariance @ x.T @ y / NOISE_STD ** 2

    def potential(w):
        residual = y - x @ w
        value = 0.5 * residual @ residual / NOISE_STD ** 2 + 0.5 * w @ w / PRIOR_VARIANCE
        return float(value), -x.T @ residual / NOISE_STD ** 2 + w / PRIOR_VARIANCE

    return potential, mean, covariance


def posterior_mismatches(draws, mean, covariance):
    """Statistics off by more than Z_BOUND Monte Carlo standard errors.

    draws: (chains, n, d). Standard error of a mean: sqrt(Sigma_jj / ESS_j). Of a Gaussian
    covariance entry: sqrt((Sigma_jk^2 + Sigma_jj Sigma_kk) / ESS_jk), with ESS_jk that of the
    centred products.
    """
    flat = draws.reshape(-1, draws.shape[-1])
    problems = []
    ess = effective_sample_size(draws)
    for j, (estimate, truth) in enumerate(zip(flat.mean(axis=0), mean)):
        z = abs(estimate - truth) / math.sqrt(covariance[j, j] / ess[j])
        if z > Z_BOUND:
            problems.append(f"mean[{j}] z={z:.1f}")
    centred = draws - mean
    for j in range(len(mean)):
        for k in range(j, len(mean)):
            products = centred[..., j] * centred[..., k]
            ess_jk = float(effective_sample_size(products))
            se = math.sqrt((covariance[j, k] ** 2 + covariance[j, j] * covariance[k, k]) / ess_jk)
            z = abs(products.mean() - covariance[j, k]) / se
            if z > Z_BOUND:
                problems.append(f"cov[{j},{k}] z={z:.1f}")
    return problems


@pytest.fixture(scope="module")
def conjugate_run():
    potential, mean, covariance = linear_regression_problem()
    config = ChainConfig(num_warmup=300, num_samples=1500, trajectory_length=0.25,
                         initial_step_size=0.01)
    chains = [run_chain(np.random.default_rng([7, c]).normal(0, 1, size=3), potential, config,
                        np.random.default_rng([8, c])) for c in range(4)]
    return chains, mean, covariance


def test_hmc_matches_closed_form_posterior(conjugate_run):
    chains, mean, covariance = conjugate_run
    draws = np.stack([chain.samples for chain in chains])
    assert posterior_mismatches(draws, mean, covariance) == []
    # The bound must be tight enough to matter: enough effective samples per coordinate.
    assert effective_sample_size(draws).min() > 1000


def test_adapted_step_size_reaches_target_acceptance(conjugate_run):
    chains, _, _ = conjugate_run
    for chain in chains:
        assert 0.7 < chain.acceptance_rate < 0.98
        assert chain.divergences == 0


@pytest.mark.parametrize("wrong", ["inflated covariance", "shifted mean"])
def test_posterior_check_rejects_a_wrong_posterior(wrong):
    """The tolerance is not vacuous: exact draws from a slightly wrong Gaussian fail it."""
    _, mean, covariance = linear_regression_problem()
    rng = np.random.default_rng(3)
    if wrong == "inflated covariance":
        draws = rng.multivariate_normal(mean, 1.3 * covariance, size=(4, 1500))
    else:
        draws = rng.multivariate_normal(mean + 0.1 * np.sqrt(np.diag(covariance)), covariance,
                                        size=(4, 1500))
    assert posterior_mismatches(draws, mean, covariance)


def test_exact_draws_pass_the_posterior_check():
    _, mean, covariance = linear_regression_problem()
    draws = np.random.default_rng(4).multivariate_normal(mean, covariance, size=(4, 1500))
    assert posterior_mismatches(draws, mean, covariance) == []


def test_step_is_pure_given_the_random_stream():
    potential, mean, _ = linear_regression_problem()
    state = init_state(mean + 0.1, potential)
    before = state.position.copy()
    first = hmc_step(state, potential, 0.05, 10, np.random.default_rng(1))
    second = hmc_step(state, potential, 0.05, 10, np.random.default_rng(1))
    np.testing.assert_array_equal(state.position, before)
    np.testing.assert_array_equal(first[0].position, second[0].position)
    assert first[1] == second[1]


def test_leapfrog_energy_error_shrinks_quadratically():
    potential, mean, _ = linear_regression_problem()
    state = init_state(mean + 0.2, potential)
    momentum = np.random.default_rng(2).standard_normal(3)
    errors = []
    for step_size in (0.02, 0.01):
        end, end_momentum = leapfrog(state, momentum, potential, step_size,
                                     int(round(0.2 / step_size)))
        errors.append(abs(end.potential + 0.5 * end_momentum @ end_momentum
                          - state.potential - 0.5 * momentum @ momentum))
    assert 3.0 < errors[0] / errors[1] < 5.0


def test_leapfrog_is_reversible():
    potential, mean, _ = linear_regression_problem()
    state = init_state(mean + 0.2, potential)
    momentum = np.random.default_rng(5).standard_normal(3)
    end, end_momentum = leapfrog(state, momentum, potential, 0.01, 30)
    back, back_momentum = leapfrog(end, -end_momentum, potential, 0.01, 30)
    np.testing.assert_allclose(back.position, state.position, atol=1e-10)
    np.testing.assert_allclose(-back_momentum, momentum, atol=1e-10)


def test_dual_averaging_moves_step_size_towards_target():
    state = dual_averaging_init(0.1)
    for _ in range(20):
        state = dual_averaging_update(state, acceptance_probability=0.2, target=0.8)
    assert math.exp(state.log_step_size) < 0.1
    state = dual_averaging_init(0.1)
    for _ in range(20):
        state = dual_averaging_update(state, acceptance_probability=1.0, target=0.8)
    assert math.exp(state.log_step_size) > 0.1


def test_non_finite_potential_is_rejected_not_propagated():
    def cliff(w):
        return (math.inf, np.zeros_like(w)) if w[0] > 1.0 else (0.5 * float(w @ w), w.copy())
    state = init_state(np.array([0.9]), cliff)
    for seed in range(20):
        new, info = hmc_step(state, cliff, 0.5, 5, np.random.default_rng(seed))
        assert math.isfinite(new.potential)
        if not math.isfinite(info.energy_error):
            assert not info.is_accepted and info.is_divergent

"""Simulated coverage of every kind of rank interval scoring_program/ranks.py shows.

Each test draws many leaderboards at its method's least favourable configuration, every entry
equal: every claim "k is better than j" is then false, so the simultaneous coverage (every
entry's true rank, here all of 1..n, inside its interval at once) is the chance of making
none. It asserts coverage of at least the nominal 0.95 minus three binomial standard errors
of the simulation, and that the method it replaced, or a naive one, falls below that bar on
the same leaderboards: the test can fail. The default sizes run in the default suite; the
full ones (docs/intervals.md's figures) under the slow marker, the sign-flip one (10 CPU s)
``extended`` (.ci/extended).
"""
import math

import numpy as np
import pytest

from runtime.scoring import ScoreType
from scoring_program import ranks

ALPHA = 0.05
NOMINAL = 1 - ALPHA
# Replicates inside each simulated analysis (the tool's default is 2000): a critical value
# read as an order statistic holds its level at any B (parametric, equal entries: 0.948 with
# 200, 0.951 with 2000, docs/intervals.md), so fewer only make each analysis cheaper.
REPLICATES = 200
UNADJUSTED_Z = 1.959964                   # each pair on its own at 0.05, two-sided


def coverage_bar(replications: int) -> float:
    """The nominal rate less three binomial standard errors of a simulated proportion."""
    return NOMINAL - 3 * math.sqrt(NOMINAL * ALPHA / replications)


def _rule(statistic: str, columns: int) -> ranks.RankingRule:
    """``columns`` accuracy columns, one task each, equal weights."""
    accuracy = ScoreType("acc", "accuracy", "", True, 0.0, 1.0, 4, lambda p, r: 0.0)
    criteria = tuple(ranks.Criterion(f"t{c}_acc", f"t{c} accuracy", f"t{c}", accuracy, 1.0)
                     for c in range(columns))
    return ranks.RankingRule(statistic, statistic, statistic, criteria)


def _table(values: np.ndarray, se: np.ndarray | None) -> ranks.Table:
    return ranks.Table([f"entry{j:02d}" for j in range(len(values))], values, se, "simulated")


def previous_max_t_better(draws: np.ndarray, losses: np.ndarray) -> np.ndarray:
    """better[k, j] as ranks.py drew it before: s_jk and the critical value from the same
    draws, the critical value their interpolated (1 - alpha) quantile."""
    sd = ranks.pairwise_sd(draws)
    largest = ranks.largest_standardised_deviation(draws - losses, sd,
                                                   ranks.exact_pairs(sd, losses))
    return ranks.significantly_better(losses, sd, float(np.quantile(largest, NOMINAL)))


def covers_equal_entries(better: np.ndarray) -> bool:
    """Equal true values: each true rank is all of 1..n, covered only where no claim is made
    (rank interval [1, n] for everyone)."""
    lower, upper = ranks.rank_intervals(better)
    return bool(np.all(lower == 1) and np.all(upper == len(better)))


# ---------------------------------------------------- standard errors, a column or weighted loss

def parametric_coverage(entries: int, columns: int, replications: int,
                        seed: int) -> tuple[float, float]:
    """(ranks.py's parametric max-|t|, each pair at 1.96 unadjusted) on equal entries scored
    v_jc = 0.5 + se_jc z_jc, standard errors unequal across entries (0.01 to 0.03)."""
    rule = _rule("column" if columns == 1 else "weighted_loss", columns)
    rng = np.random.default_rng(seed)
    se = np.repeat(np.linspace(0.01, 0.03, entries)[:, None], columns, axis=1)
    # the statistic's own standard error: a mean of the columns' losses
    statistic_se = np.sqrt((se ** 2).sum(axis=1)) / columns
    pair_se = np.sqrt(statistic_se[:, None] ** 2 + statistic_se[None, :] ** 2)
    covered = naive_covered = 0
    for replication in range(replications):
        values = 0.5 + se * rng.standard_normal(se.shape)
        analysis = ranks.analyse(rule, _table(values, se), REPLICATES, ALPHA, replication)
        covered += covers_equal_entries(analysis.inference.better)
        losses = ranks.ranking_statistic(_rule("weighted_loss", columns), values)
        naive = losses[:, None] - losses[None, :] + UNADJUSTED_Z * pair_se < 0
        naive_covered += covers_equal_entries(naive)
    return covered / replications, naive_covered / replications



def assert_covers_where_the_other_fails(new, other, replications):
    """The product's method reaches the bar (it gave an interval: None is a refusal) and the
    old or naive one, on the same leaderboards, does not: the test can fail."""
    assert new is not None and new >= coverage_bar(replications), new
    assert other < coverage_bar(replications), other


def test_parametric_rank_intervals_cover_equal_entries():
    replications = 1000
    new, naive = parametric_coverage(entries=6, columns=1, replications=replications, seed=11)
    assert_covers_where_the_other_fails(new, naive, replications)


# ---------------------------------------------------------- standard errors, the average rank

def average_rank_coverage(entries: int, tasks: int, replications: int,
                          seed: int) -> tuple[float, float]:
    """(ranks.py's bounds from the columns, the parametric bootstrap of the average rank it
    replaced) on entries exactly tied on every column, where a rank is a step function."""
    rule = _rule("average_rank", tasks)
    rng = np.random.default_rng(seed)
    se = np.full((entries, tasks), 0.02)
    covered = old_covered = 0
    for replication in range(replications):
        table = _table(0.5 + se * rng.standard_normal(se.shape), se)
        analysis = ranks.analyse(rule, table, REPLICATES, ALPHA, replication)
        covered += covers_equal_entries(analysis.inference.better)
        draws = ranks.parametric_replicates(rule, table.values, se, REPLICATES,
                                            np.random.default_rng(replication))
        old_covered += covers_equal_entries(
            previous_max_t_better(draws, ranks.ranking_statistic(rule, table.values)))
    return covered / replications, old_covered / replications


@pytest.mark.parametrize("entries, tasks, floor", [
    (6, 1, 0.0),     # least favourable: one column, where the bounds are its own max-|t|
    (8, 4, 0.93),    # the BDL evaluation phase's four tasks, with the acceptance's floor
])
def test_average_rank_intervals_cover_exact_ties(entries, tasks, floor):
    replications = 400
    new, old = average_rank_coverage(entries, tasks, replications, seed=12)
    assert new >= max(coverage_bar(replications), floor), new
    assert old < coverage_bar(replications), old


# --------------------------------------------------------------- no standard errors: the tasks

def task_bootstrap_better(rule: ranks.RankingRule, values: np.ndarray,
                          rng: np.random.Generator) -> np.ndarray:
    """The method ranks.py used before: T recomputed on task sets drawn with replacement (one
    set for every entry), max-|t| over pairs of the draws."""
    tasks = values.shape[1]
    drawn = rng.integers(0, tasks, size=(REPLICATES, tasks))
    return previous_max_t_better(statistics_on_drawn_tasks(rule, values, drawn),
                                 ranks.ranking_statistic(rule, values))


def statistics_on_drawn_tasks(rule: ranks.RankingRule, values: np.ndarray,
                              drawn: np.ndarray) -> np.ndarray:
    """T on each drawn task set (a row of ``drawn``), as ``ranks.ranking_statistic`` gives it
    on ``values[:, drawn[r]]``. A column's terms (mid-ranks, or weighted losses) depend on
    that column alone, and every column of ``_rule`` has one score type and weight, so a
    drawn set's terms are the observed columns' terms indexed: the same numbers at a
    REPLICATES-th of the cost. Made contiguous, as recomputed terms are, because the
    rounding of their sum follows the layout."""
    terms = np.ascontiguousarray(ranks.column_terms(rule, values)[:, drawn].transpose(1, 0, 2))
    return terms.sum(-1) / ranks.normaliser(rule)


@pytest.mark.parametrize("statistic", ["average_rank", "weighted_loss"])
def test_indexed_terms_are_the_statistics_recomputed_on_the_drawn_tasks(statistic):
    rng = np.random.default_rng(len(statistic))
    for entries, tasks, decimals in [(2, 1, 2), (5, 4, 1), (12, 20, 12), (7, 13, 2)]:
        rule = _rule(statistic, tasks)
        values = np.round(rng.random((entries, tasks)), decimals)      # ties at 1 and 2
        drawn = rng.integers(0, tasks, size=(REPLICATES, tasks))
        recomputed = ranks.ranking_statistic(rule, values[:, drawn].transpose(1, 0, 2))
        assert np.array_equal(statistics_on_drawn_tasks(rule, values, drawn), recomputed)


def task_coverage(statistic: str, entries: int, tasks: int, replications: int,
                  seed: int) -> tuple[float | None, float]:
    """(ranks.py's sign-flip tests, None where it refuses; the bootstrap over tasks) on
    equal entries: each task's values v_jt = a_t + e_jt, a task effect shared by all entries
    and independent N(0, 1) noise, so the entries are interchangeable on every task."""
    rule = _rule(statistic, tasks)
    rng = np.random.default_rng(seed)
    covered = old_covered = 0
    refused = False
    for replication in range(replications):
        values = 0.5 + 0.05 * (rng.standard_normal(tasks) + rng.standard_normal((entries, tasks)))
        try:
            analysis = ranks.analyse(rule, _table(values, None), REPLICATES, ALPHA, replication)
            covered += covers_equal_entries(analysis.inference.better)
        except ranks.InputError:
            refused = True
        old_covered += covers_equal_entries(
            task_bootstrap_better(rule, values, np.random.default_rng(replication)))
    return (None if refused else covered / replications), old_covered / replications


@pytest.mark.parametrize("statistic", ["average_rank", "weighted_loss"])
def test_sign_flip_rank_intervals_cover_equal_entries(statistic):
    """Ten tasks, five entries (nine tasks are the fewest the tool accepts for five)."""
    replications = 300
    new, old = task_coverage(statistic, entries=5, tasks=10, replications=replications, seed=13)
    assert_covers_where_the_other_fails(new, old, replications)


def test_four_tasks_without_standard_errors_are_refused_where_the_bootstrap_failed():
    """The BDL evaluation phase's 4 tasks: the tool refuses every leaderboard, where the
    bootstrap over tasks claimed differences between equal entries in most of them."""
    replications = 100
    new, old = task_coverage("average_rank", entries=5, tasks=4, replications=replications,
                             seed=14)
    assert new is None
    assert old < coverage_bar(replications), old


# ------------------------------------------------------------------------- the full sizes

@pytest.mark.slow
@pytest.mark.parametrize("columns", [1, 4])
def test_parametric_rank_intervals_at_full_size(columns):
    replications = 2000
    new, naive = parametric_coverage(entries=12, columns=columns, replications=replications,
                                     seed=21)
    assert_covers_where_the_other_fails(new, naive, replications)


@pytest.mark.slow
@pytest.mark.parametrize("tasks", [1, 4])
def test_average_rank_intervals_at_full_size(tasks):
    replications = 1000
    new, old = average_rank_coverage(entries=12, tasks=tasks, replications=replications,
                                     seed=22)
    assert_covers_where_the_other_fails(new, old, replications)


@pytest.mark.slow
@pytest.mark.extended         # 10 CPU s; its default-size twins above check the same claim
def test_sign_flip_rank_intervals_at_full_size():
    """12 entries need 12 tasks; with 20 the bootstrap over tasks still covered only 0.75."""
    replications = 1000
    new, old = task_coverage("average_rank", 12, 20, replications, seed=23)
    assert_covers_where_the_other_fails(new, old, replications)

"""Rank intervals and tie groups of a leaderboard: is rank 3 really better than rank 4?

For organizers, after the final phase. From the repository root::

    python -m scoring_program.ranks LEADERBOARD.csv --config PATH/scoring_config.json
    python -m scoring_program.ranks LEADERBOARD.csv --bundle dist/X.zip [--phase KEY]
    python -m scoring_program.ranks --runs OUT_A OUT_B ... --config PATH/scoring_config.json

or, from an unzipped scoring program (its own ``scoring_config.json`` is the default),
``python3 ranks.py LEADERBOARD.csv``. Standard library and numpy only: it ships in the
scoring program and runs in the competition's image.

Inputs. A leaderboard CSV (a header row, one row per entry: the entry's name in the column
``Username``/``username``/``name``/``entry``, else the first column of non-numbers; a ``#``
column ignored; value columns by key or by label, as Codabench's "Download as CSV" titles
them; a standard error in ``<key>_se`` or ``<label> SE``), or scoring output folders
(``--runs``: each folder's ``detailed_results.json``, ``tasks.<task>.metrics.<metric>.value``
and ``.se``; the entry is the folder's name). The config's ``ranking`` entry says how the
leaderboard ranks (``bundle/leaderboard.py`` ``ranking_entry``): one column, the average over
columns of each column's rank, or the weighted loss sum_c w_c loss_c / sum_c w_c.

What an interval claims. Entry j's rank interval [a, b] contains its true rank, and every
entry's does at once, with probability at least 1 - alpha (simultaneous coverage); tied true
values count as covered where the interval holds all their tied places. "True" depends on
what the leaderboard carries:

- with standard errors, the ranks the scores of these tasks would give without measurement
  noise (another draw of the test rows): these tasks, not other tasks;
- without them, the ranks of each entry's expected per-task contribution (its rank among these
  entries, or its weighted loss) on tasks like these: the m tasks are taken as a random sample
  of a population of such tasks, and the claim is about that population, not these m tasks.

Method. From simultaneous claims "k is better than j", all correct at once with probability
at least 1 - alpha, entry j's rank interval is [1 + #{k better than j}, n - #{k worse than j}]
(Mogstad, Romano, Shaikh and Wilhelm, 2024, "Inference for ranks with applications to mobility
across neighbourhoods and academic achievement across countries", Review of Economic Studies).
A critical value read from B draws is their ceil((1 - alpha)(B + 1))-th smallest. The claims:

- standard errors, a column or the weighted loss (linear in the scores): B seeded parametric
  draws v*_jc ~ N(v_jc, se_jc^2), independent across entries and columns, and T* recomputed.
  s_jk, the standard deviation of T*_j - T*_k, comes from a first set of draws; c, from a
  second, is the critical value of max over pairs of |(T*_j - T*_k) - (T_j - T_k)| / s_jk; k
  is better than j where (T_k - T_j) + c s_jk < 0 (max-|t| over all pairs, stronger than
  Holm's correction). Submissions scored on the same test rows are positively correlated, so
  independent draws overstate var(T_j - T_k): conservative.
- standard errors and the average rank: a bootstrap of the average rank fails at exact ties
  (a rank is a step function of the scores: 12 tied entries on 4 tasks were covered 0.77 of
  the time), so the claims come from the columns. Simultaneous intervals for every pair of
  entries on every column, (v_jc - v_kc) +- c sqrt(se_jc^2 + se_kc^2), c from B draws of the
  Gaussian pivot (its law does not depend on the true values), settle the pairs whose
  interval excludes 0; each column's r_kc - r_jc is then bounded over every order agreeing
  with them, and k is better than j where the mean of those bounds is below 0. Valid at
  ties, conservative with several columns.
- no standard errors, several tasks: an exact sign-flip test of every pair over the m tasks
  (d_t its per-task differences; p = #{signs s: |sum_t s_t d_t| >= |sum_t d_t|} / 2^m, every
  pattern counted up to EXACT_SIGN_FLIP_TASKS tasks, seeded random patterns above), with Holm's
  step-down over the n(n - 1)/2 pairs. It assumes tasks drawn independently and, for two
  entries of equal quality, a per-task difference as likely to favour either (symmetric about
  0, as where the two are interchangeable on a task). m tasks give p >= 2 / 2^m: where that
  exceeds Holm's first threshold alpha / #pairs no pair could be told apart, and the tool
  refuses, naming the tasks needed. (The bootstrap over tasks this replaced has m - 1 degrees
  of freedom, 35 distinct resamples of 4 tasks, and covered 12 equal entries on 4 tasks 0.015
  of the time.)
- one task and no standard errors: nothing to compare; the tool refuses.

Tie groups, in the order of the observed statistic (ties by name): an entry joins the current
group while it is not significantly different from the group's first entry under the same
claims. tests/test_rank_coverage.py checks each method's coverage by simulation and
docs/intervals.md tabulates it.

Exit status: 0 done; 2 bad input (one line on stderr naming the file, row or column).
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import math
import re
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Started as a script from an unzipped program, its folder holds scorer/, runtime/, kinds/.
if __package__:
    from .scorer.config import CONFIG_NAME, ConfigError, ScoringConfig, load_config, parse_config
else:
    sys.dont_write_bytecode = True        # the program's folder may be read-only
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from scorer.config import (CONFIG_NAME, ConfigError, ScoringConfig,  # noqa: E402
                               load_config, parse_config)

DEFAULT_REPLICATES = 2000
DEFAULT_ALPHA = 0.05
DEFAULT_SEED = 0
BAD_INPUT = 2
NAME_HEADERS = ("username", "name", "entry")
MISSING_CELLS = ("", "-")
DETAILS_NAME = "detailed_results.json"
REFERENCE = ("Mogstad, Romano, Shaikh & Wilhelm (2024), Inference for ranks, "
             "Review of Economic Studies")
TEST_TEXT = ("simultaneous max-|t| over all pairs of entries (controls the familywise error "
             "over every pair; stronger than Holm's correction)")
COLUMN_BOUNDS_TEXT = ("simultaneous max-|t| intervals for every pair of entries on every column "
                      "settle the pairs they can; k is better than j where, over every order "
                      "agreeing with them, k's average rank stays below j's (valid at exact "
                      "ties, conservative)")
CONSERVATIVE_TEXT = ("each score ~ N(true value, se^2), independent across entries; submissions "
                     "scored on the same test rows are positively correlated, so the intervals "
                     "are conservative")
THESE_TASKS = ("these tasks: the ranks their scores would give without measurement noise "
               "(another draw of the test rows), not other tasks")
SIGN_FLIP_ASSUMES = ("tasks drawn independently; two entries of equal quality as likely to win "
                     "a task by a margin as to lose it by that margin (a symmetric difference)")
# A pairwise spread this small relative to the statistic is rounding, not randomness.
EXACT_TOLERANCE = 1e-12
# Elements per block of the pairwise rank comparisons (bounds their memory).
BLOCK_ELEMENTS = 4_000_000
# Relative size of a sum's rounding: sign patterns whose sums tie the observed one in exact
# arithmetic must count as reaching it.
ROUNDING = 1e-9
# Up to this many tasks every sign pattern is counted (two halves of 2^12 sums per pair).
EXACT_SIGN_FLIP_TASKS = 24
# Above it, random patterns: so many that 1 / (1 + draws) is this many times below the
# smallest level Holm's procedure tests at, alpha / #pairs.
SAMPLED_P_RESOLUTION = 20
# Pairs whose sorted sums are searched at once, each row shifted by 4: shifts up to 4e4 round
# sums by about 1e-11, well inside ROUNDING.
SHIFTED_ROWS = 10_000


class InputError(ValueError):
    """Bad input: the message names the file, row or column and what was expected."""


# ----------------------------------------------------------------------------- the ranking

@dataclass(frozen=True)
class Criterion:
    """One value column the ranking statistic reads."""
    key: str
    label: str
    task: str
    score_type: object            # runtime.scoring.ScoreType: direction and as_loss
    weight: float                 # its weight in the weighted loss (unused otherwise)

    @property
    def metric(self) -> str:
        return self.score_type.name

    @property
    def names(self) -> tuple[str, str]:
        return self.key, self.label

    @property
    def se_names(self) -> tuple[str, str]:
        return f"{self.key}_se", f"{self.label} SE"


@dataclass(frozen=True)
class RankingRule:
    """How the leaderboard ranks: ``statistic`` over ``criteria`` (config ``ranking``)."""
    statistic: str                # column, average_rank or weighted_loss
    key: str
    label: str
    criteria: tuple[Criterion, ...]

    @property
    def higher_is_better(self) -> bool:
        return self.statistic == "column" and self.criteria[0].score_type.higher_is_better

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.task for c in self.criteria))

    def describe(self) -> str:
        keys = ", ".join(c.key for c in self.criteria)
        return {"column": f"the column {keys}",
                "average_rank": f"the mean over {keys} of each column's rank (ties: mid-ranks)",
                "weighted_loss": f"the weighted loss over {keys}"}[self.statistic]


def ranking_rule(config: ScoringConfig, source: str) -> RankingRule:
    """The config's ranking entry with each key's task, score type, label and weight."""
    if config.ranking is None:
        raise InputError(f"{source}: no 'ranking' entry (written before this tool existed); "
                         "rebuild the bundle")
    columns = {column.key: column for column in config.columns}
    criteria = []
    for key in config.ranking.keys:
        column = columns[key]
        task = config.task(column.task)
        criteria.append(Criterion(key, column.label or key, task.name,
                                  task.task_type.score_type(column.metric),
                                  float(task.weights.get(column.metric, 0.0))))
    return RankingRule(config.ranking.statistic, config.ranking.key, config.ranking.label,
                       tuple(criteria))


def oriented(rule: RankingRule, values: np.ndarray) -> np.ndarray:
    """Each column as a loss for ranking: -v where higher is better, else v."""
    signs = np.array([-1.0 if c.score_type.higher_is_better else 1.0 for c in rule.criteria])
    return values * signs


def midranks(losses: np.ndarray) -> np.ndarray:
    """Rank of each entry within each column, over axis -2 (entries) of (..., n, m):
    r_jc = 1 + #{k: l_kc < l_jc} + #{k != j: l_kc = l_jc} / 2 (tied entries share the mean
    of their positions)."""
    n, m = losses.shape[-2:]
    flat = losses.reshape(-1, n, m)
    ranks = np.empty(flat.shape)
    step = max(1, BLOCK_ELEMENTS // (n * n * m))
    for start in range(0, len(flat), step):
        block = flat[start:start + step]
        mine, other = block[:, :, None, :], block[:, None, :, :]
        below = (other < mine).sum(axis=2)
        level = (other == mine).sum(axis=2) - 1
        ranks[start:start + step] = 1 + below + level / 2
    return ranks.reshape(losses.shape)


def column_terms(rule: RankingRule, values: np.ndarray) -> np.ndarray:
    """Each column's part of T (..., n, m): the mid-rank r_jc for the average rank, w_c
    loss_c(v_jc) for the weighted loss (loss_c the score type's ``as_loss``: maximum - v where
    higher is better, else v); T_j is their sum over columns divided by ``normaliser``."""
    if rule.statistic == "average_rank":
        return midranks(oriented(rule, values))
    weights = np.array([c.weight for c in rule.criteria])
    return np.stack([c.score_type.as_loss(values[..., i]) * weights[i]
                     for i, c in enumerate(rule.criteria)], axis=-1)


def normaliser(rule: RankingRule) -> float:
    """The average rank is a mean over the m columns, the weighted loss over their weights."""
    if rule.statistic == "average_rank":
        return float(len(rule.criteria))
    return float(sum(c.weight for c in rule.criteria))


def ranking_statistic(rule: RankingRule, values: np.ndarray) -> np.ndarray:
    """T_j for every entry, from values of shape (..., n, m) to (..., n). column: T_j = v_j;
    average_rank: T_j = sum_c r_jc / m with r the mid-ranks; weighted_loss: T_j = sum_c w_c
    loss_c(v_jc) / sum_c w_c."""
    if rule.statistic == "column":
        return values[..., 0] * 1.0
    return column_terms(rule, values).sum(-1) / normaliser(rule)


def task_contributions(rule: RankingRule, values: np.ndarray) -> np.ndarray:
    """(n, tasks): each task's part of T, its columns' terms summed, so that T_j is the sum
    over tasks divided by ``normaliser``: the unit a task population is sampled in."""
    terms = column_terms(rule, values)
    return np.stack([terms[..., [c.task == task for c in rule.criteria]].sum(-1)
                     for task in rule.tasks], axis=-1)


# ------------------------------------------------------ with standard errors: the parametric

def parametric_replicates(rule: RankingRule, values: np.ndarray, se: np.ndarray,
                          replicates: int, rng: np.random.Generator) -> np.ndarray:
    """(B, n): T recomputed from v*_bjc = v_jc + se_jc z_bjc, z independent N(0, 1)."""
    draws = values + se * rng.standard_normal((replicates, *values.shape))
    return ranking_statistic(rule, draws)


def pair_indices(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The n(n - 1)/2 pairs j < k, as two index arrays."""
    return np.triu_indices(n, 1)


def pair_blocks(pairs: int, rows: int) -> list[slice]:
    """Blocks of pairs whose (rows, block) arrays stay within BLOCK_ELEMENTS."""
    step = max(1, BLOCK_ELEMENTS // max(1, rows))
    return [slice(start, start + step) for start in range(0, pairs, step)]


def pairwise_sd(replicates: np.ndarray) -> np.ndarray:
    """s_jk = standard deviation over b of T*_bj - T*_bk (n, n); computed from the
    differences themselves, so identical entries get exactly 0."""
    n = replicates.shape[1]
    j, k = pair_indices(n)
    sd = np.zeros((n, n))
    for block in pair_blocks(len(j), len(replicates)):
        spread = (replicates[:, j[block]] - replicates[:, k[block]]).std(axis=0, ddof=1)
        sd[j[block], k[block]] = sd[k[block], j[block]] = spread
    return sd


def exact_pairs(sd: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Pairs whose difference does not vary (s_jk ~ 0): known exactly."""
    return sd <= EXACT_TOLERANCE * max(1.0, float(np.abs(observed).max()))


def largest_standardised_deviation(deviation: np.ndarray, sd: np.ndarray,
                                   exact: np.ndarray) -> np.ndarray:
    """(B,): M_b = max over pairs j < k not known exactly of |e_bj - e_bk| / s_jk, for
    deviations e (B, n) of the draws from what they are centred on (0 when no pair varies)."""
    j, k = pair_indices(deviation.shape[1])
    varying = ~exact[j, k]
    j, k = j[varying], k[varying]
    largest = np.zeros(len(deviation))
    for block in pair_blocks(len(j), len(deviation)):
        t = np.abs(deviation[:, j[block]] - deviation[:, k[block]]) / sd[j[block], k[block]]
        largest = np.maximum(largest, t.max(axis=1))
    return largest


def monte_carlo_quantile(draws: np.ndarray, level: float) -> float:
    """The ceil(level (B + 1))-th smallest of B draws: a new draw of the same law falls at or
    below it with probability at least ``level`` (numpy's interpolated 0.95 quantile of
    B = 200 draws is on average the law's 0.9455); infinite where B is too small for it."""
    rank = math.ceil(level * (len(draws) + 1) - ROUNDING)
    return float(np.sort(draws)[rank - 1]) if rank <= len(draws) else math.inf


def max_t_critical_value(replicates: np.ndarray, observed: np.ndarray, sd: np.ndarray,
                         alpha: float) -> float:
    """c = the (1 - alpha) Monte Carlo quantile over b of max_{j<k, s_jk>0}
    |(T*_bj - T*_bk) - (T_j - T_k)| / s_jk (0 when no pair varies)."""
    largest = largest_standardised_deviation(replicates - observed, sd,
                                             exact_pairs(sd, observed))
    return monte_carlo_quantile(largest, 1 - alpha)


def significantly_better(losses: np.ndarray, sd: np.ndarray, critical: float) -> np.ndarray:
    """better[k, j]: the interval (l_k - l_j) +- c s_kj lies below 0 (k better than j; l the
    statistic as a loss). A pair known exactly differs or not by its observed difference."""
    difference = losses[:, None] - losses[None, :]
    exact = exact_pairs(sd, losses)
    return np.where(exact, difference < 0, difference + critical * sd < 0)


# --------------------------------------- with standard errors: the average rank from its columns

def column_pair_sd(se: np.ndarray) -> np.ndarray:
    """(m, n, n): sqrt(se_jc^2 + se_kc^2), the standard deviation of v_jc - v_kc."""
    variance = (se ** 2).T
    return np.sqrt(variance[:, :, None] + variance[:, None, :])


def column_pair_critical_value(se: np.ndarray, replicates: int, alpha: float,
                               rng: np.random.Generator) -> float:
    """c = (1 - alpha) quantile of the Gaussian pivot max over columns c and pairs j < k of
    |se_jc z_jc - se_kc z_kc| / sqrt(se_jc^2 + se_kc^2), z independent N(0, 1), from B draws:
    the pivot's law is known, so c holds whatever the true values (ties included)."""
    sd = column_pair_sd(se)
    noise = se * rng.standard_normal((replicates, *se.shape))
    largest = np.zeros(replicates)
    for c in range(se.shape[1]):
        largest = np.maximum(largest, largest_standardised_deviation(
            noise[:, :, c], sd[c], sd[c] <= EXACT_TOLERANCE))
    return monte_carlo_quantile(largest, 1 - alpha)


def column_orders(losses: np.ndarray, se: np.ndarray,
                  critical: float) -> tuple[np.ndarray, np.ndarray]:
    """(m, n, n) for every column c: surely[c, j, k], j surely better than k (the interval
    (l_jc - l_kc) +- c sqrt(se_jc^2 + se_kc^2) lies below 0), and tied[c, j, k], both scores
    exact and equal. A pair known exactly is ordered by its observed difference."""
    sd = column_pair_sd(se)
    difference = (losses.T[:, :, None] - losses.T[:, None, :])        # l_jc - l_kc
    exact = sd <= EXACT_TOLERANCE * max(1.0, float(np.abs(losses).max()))
    surely = np.where(exact, difference < 0, difference + critical * sd < 0)
    return surely, exact & (difference == 0)


def rank_difference_bounds(surely: np.ndarray, tied: np.ndarray) -> np.ndarray:
    """(n, n): upper[j, k] >= r_j - r_k for one column's mid-ranks, whatever true order agrees
    with its settled pairs. r_j - r_k = (2 h_jk - 1) + sum over the others i of
    (h_ji - h_ki), h_ab the share of a's rank b adds (1 b better, 1/2 tied, 0 worse): each
    share lies between what the settled pairs allow, and where j is surely better than k,
    any i better than j is better than k too (transitivity): no other i adds more to j's rank
    than to k's."""
    n = len(surely)
    own = np.eye(n, dtype=bool)
    lowest_share = np.where(own, 0.0, np.where(surely.T, 1.0, np.where(tied, 0.5, 0.0)))
    highest_share = np.where(own, 0.0, np.where(surely, 0.0, np.where(tied, 0.5, 1.0)))
    gap = highest_share[:, None, :] - lowest_share[None, :, :]         # [j, k, i]
    others = ~(own[:, None, :] | own[None, :, :])                     # i neither j nor k
    most = np.where(others, np.maximum(gap, 0.0), 0.0).sum(axis=2)
    least = np.where(others, np.minimum(gap, 0.0), 0.0).sum(axis=2)
    return np.where(surely, least - 1, np.where(tied, 0.0, most + 1))


def average_rank_better(rule: RankingRule, values: np.ndarray, se: np.ndarray,
                        critical: float) -> np.ndarray:
    """better[k, j]: the upper bound of T_k - T_j, the mean over columns of each column's
    bound on r_kc - r_jc, lies below 0. Wherever every column interval covers (probability
    >= 1 - alpha, whatever the true values, ties included), every such claim is true."""
    losses = oriented(rule, values)
    surely, tied = column_orders(losses, se, critical)
    upper = sum(rank_difference_bounds(surely[c], tied[c]) for c in range(losses.shape[1]))
    return upper < -EXACT_TOLERANCE


# ---------------------------------------------------- without standard errors: over the tasks

def sign_patterns(count: int) -> np.ndarray:
    """(2^count, count): every pattern of +-1 signs."""
    bits = (np.arange(2 ** count)[:, None] >> np.arange(count)) & 1
    return 1.0 - 2.0 * bits


def exact_sign_flip_p_values(differences: np.ndarray) -> np.ndarray:
    """Two-sided p of each row d (pairs, m): #{s in {-1, 1}^m: |sum_t s_t d_t| >=
    |sum_t d_t|} / 2^m. Every pattern is counted, by halves: the 2^(m/2) signed sums of the
    first half of the tasks against the sorted ones of the second, so 2^m patterns cost
    2^(m/2) searches per pair."""
    pairs, m = differences.shape
    half = m // 2
    scale = np.abs(differences).sum(axis=1)
    p = np.ones(pairs)
    varying = np.flatnonzero(scale > 0)
    step = max(1, min(SHIFTED_ROWS, BLOCK_ELEMENTS // 2 ** (m - half)))
    for start in range(0, len(varying), step):
        rows = varying[start:start + step]
        p[rows] = _counted_halves(differences[rows] / scale[rows, None], half) / 2.0 ** m
    return p


def _counted_halves(unit: np.ndarray, half: int) -> np.ndarray:
    """#{patterns: |first + second| >= |observed|} for rows scaled to sum_t |d_t| = 1, so
    every signed sum lies in [-1, 1]. The patterns come in pairs s, -s, so the count is twice
    #{first + second >= |observed|}. One search over all rows at once: row i's sorted sums
    are shifted by 4 i, apart from every other row's, and so are its queries."""
    rows, m = unit.shape
    first = unit[:, :half] @ sign_patterns(half).T
    second = np.sort(unit[:, half:] @ sign_patterns(m - half).T, axis=1)
    width = second.shape[1]
    shift = 4.0 * np.arange(rows)[:, None]
    observed = np.abs(unit.sum(axis=1))
    # a pattern's sum equal to the observed one in exact arithmetic may round either way
    queries = (observed[:, None] - ROUNDING - first + shift).ravel()
    reached = (np.arange(1, rows + 1)[:, None] * width
               - np.searchsorted((second + shift).ravel(), queries).reshape(first.shape))
    # observed 0 (up to rounding): every pattern reaches it
    return np.where(observed > ROUNDING, 2 * reached.sum(axis=1), 2 ** m)


def sampled_sign_flip_p_values(differences: np.ndarray, draws: int,
                               rng: np.random.Generator) -> np.ndarray:
    """Two-sided p of each row d from ``draws`` random sign patterns (too many tasks to count
    them all): (1 + #{|sum_t s_t d_t| >= |sum_t d_t|}) / (1 + draws), a valid p-value."""
    observed = np.abs(differences.sum(axis=1))
    slack = ROUNDING * np.abs(differences).sum(axis=1)
    exceed = np.zeros(len(differences))
    step = max(1, BLOCK_ELEMENTS // max(1, differences.size))
    for start in range(0, draws, step):
        signs = rng.choice((-1.0, 1.0), size=(min(step, draws - start), differences.shape[1]))
        exceed += (np.abs(signs @ differences.T) >= observed - slack).sum(axis=0)
    return (1 + exceed) / (1 + draws)


def holm_rejections(p: np.ndarray, alpha: float) -> np.ndarray:
    """Holm's step-down: the i-th smallest p is rejected while every p up to it is at most
    alpha / (K - i + 1); familywise error <= alpha whatever the tests' dependence."""
    order = np.argsort(p, kind="stable")
    passes = p[order] <= alpha / (len(p) - np.arange(len(p)))
    stop = len(p) if passes.all() else int(np.argmin(passes))
    rejected = np.zeros(len(p), dtype=bool)
    rejected[order[:stop]] = True
    return rejected


def tasks_needed(entries: int, alpha: float) -> int:
    """The fewest tasks whose smallest sign-flip p, 2 / 2^m, reaches Holm's first threshold
    alpha / #pairs: with fewer, no pair can ever be told apart."""
    pairs = entries * (entries - 1) // 2
    return max(1, math.ceil(math.log2(2 * pairs / alpha) - ROUNDING))


def sign_flip_better(contributions: np.ndarray, alpha: float, draws: int,
                     rng: np.random.Generator) -> np.ndarray:
    """better[k, j] from each pair's sign-flip test over the tasks (per-task differences of
    the contributions, a loss), Holm over all pairs; the direction is the observed one."""
    n, tasks = contributions.shape
    j, k = pair_indices(n)
    differences = contributions[j] - contributions[k]
    p = (exact_sign_flip_p_values(differences) if tasks <= EXACT_SIGN_FLIP_TASKS
         else sampled_sign_flip_p_values(differences, draws, rng))
    rejected = holm_rejections(p, alpha)
    total = differences.sum(axis=1)
    better = np.zeros((n, n), dtype=bool)
    better[k[rejected & (total > 0)], j[rejected & (total > 0)]] = True
    better[j[rejected & (total < 0)], k[rejected & (total < 0)]] = True
    return better


def sign_flip_draws(entries: int, replicates: int, alpha: float) -> int:
    """Random patterns where too many tasks to count them: enough that the smallest
    attainable p, 1 / (1 + draws), lies well below Holm's first threshold alpha / #pairs."""
    pairs = entries * (entries - 1) // 2
    return max(replicates, math.ceil(SAMPLED_P_RESOLUTION * pairs / alpha))


# ------------------------------------------------------------------------------ rank intervals

def rank_intervals(better: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[1 + #{k better than j}, n - #{k worse than j}] for every entry j."""
    n = len(better)
    return 1 + better.sum(axis=0), n - better.sum(axis=1)


def observed_order(losses: np.ndarray, names: list[str]) -> list[int]:
    """Entries best first; equal statistics in the order of their names."""
    return sorted(range(len(names)), key=lambda j: (losses[j], names[j]))


def tie_groups(order: list[int], better: np.ndarray) -> np.ndarray:
    """Group number of each entry: walking ``order``, an entry joins the current group while
    it is not significantly different from that group's first entry, else it starts one."""
    groups = np.zeros(len(order), dtype=int)
    first, group = order[0], 1
    for j in order:
        if better[first, j] or better[j, first]:
            first, group = j, group + 1
        groups[j] = group
    return groups


# ------------------------------------------------------------------------------ the inputs

@dataclass(frozen=True)
class Table:
    """Entries' values (n, m) of the rule's columns and their standard errors, if given."""
    names: list[str]
    values: np.ndarray
    se: np.ndarray | None
    source: str
    warnings: tuple[str, ...] = ()


def _number(cell: str, where: str, what: str = "a number") -> float:
    """A cell as a finite float; a CodaLab leaderboard cell 'value (rank)' gives its value."""
    text = cell.strip()
    shown = re.fullmatch(r"(\S+)\s*\(\d+\)", text)
    try:
        value = float(shown.group(1) if shown else text)
    except ValueError:
        raise InputError(f"{where}: {cell!r} is not a number; expected {what}") from None
    if not math.isfinite(value):
        raise InputError(f"{where}: {cell!r} is not finite; expected {what}")
    return value


def _is_number(cell: str) -> bool:
    try:
        _number(cell, "")
        return True
    except InputError:
        return False


def _header(cell: str) -> str:
    """A header cell as written, without CodaLab's b'...' (codalab_v1.md G17)."""
    text = cell.strip()
    wrapped = re.fullmatch(r"b'(.*)'", text)
    return wrapped.group(1) if wrapped else text


def _csv_rows(path: Path) -> list[list[str]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: cannot read the leaderboard CSV ({error})") from None
    try:
        rows = [row for row in csv.reader(io.StringIO(text)) if any(c.strip() for c in row)]
    except csv.Error as error:
        raise InputError(f"{path}: not a CSV file ({error})") from None
    if len(rows) < 2:
        raise InputError(f"{path}: expected a header row and one row per entry, found "
                         f"{len(rows)} row(s)")
    return rows


def _known_headers(config: ScoringConfig, rule: RankingRule) -> set[str]:
    """Every leaderboard column's key and label, and their SE forms."""
    known = {rule.key, rule.label}
    for column in config.columns:
        for name in filter(None, (column.key, column.label)):
            known |= {name, f"{name}_se" if name == column.key else f"{name} SE"}
    return known


def _name_column(header: list[str], rows: list[list[str]], known: set[str], path: Path) -> int:
    for i, cell in enumerate(header):
        if cell.lower() in NAME_HEADERS:
            return i
    for i, cell in enumerate(header):
        if cell != "#" and cell not in known and not all(
                _is_number(row[i]) or row[i].strip() in MISSING_CELLS for row in rows):
            return i
    raise InputError(f"{path}: no column of entry names: expected one titled "
                     f"{'/'.join(NAME_HEADERS)} or a column whose values are not all numbers")


def _find(header: list[str], names: tuple[str, str]) -> int | None:
    found = [i for i, cell in enumerate(header) if cell in names]
    return found[0] if found else None


def read_leaderboard(path: Path, config: ScoringConfig, rule: RankingRule) -> Table:
    """The rule's columns from a leaderboard CSV (header by key or label, SE columns
    ``<key>_se`` / ``<label> SE``); entries with a missing cell are left out, with a warning."""
    path = Path(path)
    rows = _csv_rows(path)
    header, body = [_header(cell) for cell in rows[0]], rows[1:]
    for number, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise InputError(f"{path}: row {number} has {len(row)} cells; the header has "
                             f"{len(header)}")
    repeated = sorted({cell for cell in header if header.count(cell) > 1})
    if repeated:
        raise InputError(f"{path}: header names {repeated} more than once")
    known = _known_headers(config, rule)
    name_at = _name_column(header, body, known, path)
    for i, cell in enumerate(header):
        if i != name_at and cell != "#" and cell not in known:
            raise InputError(
                f"{path}: column {i + 1} {cell!r} is not a leaderboard column of phase "
                f"{config.phase}; expected a key or label of {CONFIG_NAME}'s columns (e.g. "
                f"{rule.criteria[0].key!r} or {rule.criteria[0].label!r}), its SE "
                f"('<key>_se' or '<label> SE'), '#' or the entry's name")
    value_at = []
    for criterion in rule.criteria:
        at = _find(header, criterion.names)
        if at is None:
            raise InputError(f"{path}: no column {criterion.key!r} (or {criterion.label!r}), "
                             f"which the ranking ({rule.describe()}) needs")
        value_at.append(at)
    se_at = [_find(header, criterion.se_names) for criterion in rule.criteria]
    if any(at is not None for at in se_at) and None in se_at:
        lacking = [c.se_names[0] for c, at in zip(rule.criteria, se_at) if at is None]
        raise InputError(f"{path}: standard errors for some ranking columns only; expected "
                         f"also {', '.join(lacking)} (or '<label> SE')")
    places = lambda columns: [[f"{path}: row {r}, column {header[at]!r}" for at in columns]
                              for r in range(2, len(body) + 2)]
    with_se = se_at[0] is not None
    return _table(str(path), [row[name_at].strip() for row in body],
                  [f"{path}: row {r}" for r in range(2, len(body) + 2)],
                  [[row[at] for at in value_at] for row in body], places(value_at),
                  [[row[at] for at in se_at] for row in body] if with_se else None,
                  places(se_at) if with_se else None, [header[at] for at in value_at])


def _missing(cell) -> bool:
    return cell is None or isinstance(cell, str) and cell.strip() in MISSING_CELLS


def _table(source: str, names: list[str], rows: list[str], values: list[list],
           value_places: list[list[str]], ses: list[list] | None,
           se_places: list[list[str]] | None, columns: list[str]) -> Table:
    """Numbers from cells (strings or JSON values; None, '' or '-' missing). An entry with a
    missing value or SE is left out with a warning; a ranking column missing for every entry
    fails. ``rows``: each entry's place, ``*_places``: each cell's, for messages."""
    for row, name in zip(rows, names):
        if not name:
            raise InputError(f"{row}: empty entry name")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise InputError(f"{source}: entries {repeated} appear more than once")
    for c, column in enumerate(columns):
        if all(_missing(row[c]) for row in values):
            raise InputError(f"{source}: the ranking column {column!r} is missing for every "
                             "entry; expected a number for each")
    warnings = []
    if ses is not None and all(_missing(cell) for row in ses for cell in row):
        warnings.append(f"{source}: every standard error is missing; none used")
        ses = se_places = None
    keep = []
    for i, name in enumerate(names):
        lacking = [column for c, column in enumerate(columns) if _missing(values[i][c])]
        lacking += [f"{column} SE" for c, column in enumerate(columns)
                    if ses is not None and _missing(ses[i][c])]
        if lacking:
            warnings.append(f"{rows[i]}: entry {name!r} left out: no {', '.join(lacking)}")
        else:
            keep.append(i)
    numbers = np.array([[_cell(values[i][c], value_places[i][c], "a number")
                         for c in range(len(columns))] for i in keep]).reshape(len(keep), -1)
    errors = None
    if ses is not None:
        errors = np.array([[_cell(ses[i][c], se_places[i][c], "a standard error >= 0")
                            for c in range(len(columns))] for i in keep]).reshape(len(keep), -1)
        negative = np.argwhere(errors < 0)
        if len(negative):
            i, c = negative[0]
            raise InputError(f"{se_places[keep[i]][c]}: standard error {errors[i, c]:g} is "
                             "negative; expected a standard error >= 0")
    return Table([names[i] for i in keep], numbers, errors, source, tuple(warnings))


def _cell(cell, where: str, expected: str) -> float:
    if isinstance(cell, (int, float)) and not isinstance(cell, bool):
        if not math.isfinite(cell):
            raise InputError(f"{where}: {cell!r} is not finite; expected {expected}")
        return float(cell)
    if not isinstance(cell, str):
        raise InputError(f"{where}: {cell!r} is not a number; expected {expected}")
    return _number(cell, where, expected)


def read_runs(folders: list[Path], rule: RankingRule) -> Table:
    """The rule's columns from scoring output folders: ``tasks.<task>.metrics.<metric>.value``
    and ``.se`` of each one's detailed_results.json; the entry is the folder's name. SEs are
    used when some entry has them; an entry without them is then left out, with a warning."""
    names, rows, values, ses, value_places, se_places = [], [], [], [], [], []
    for folder in map(Path, folders):
        details = folder / DETAILS_NAME
        try:
            raw = json.loads(details.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise InputError(f"{details}: cannot read the scoring output's details "
                             f"({type(error).__name__}: {error}); expected the "
                             f"{DETAILS_NAME} the scoring program writes") from None
        tasks = raw.get("tasks") if isinstance(raw, dict) else None
        if not isinstance(tasks, dict):
            raise InputError(f"{details}: no 'tasks' mapping; expected the {DETAILS_NAME} "
                             "the scoring program writes")
        names.append(folder.resolve().name)
        rows.append(str(details))
        metrics = [_metric_entry(tasks, c) for c in rule.criteria]
        values.append([m.get("value") for m in metrics])
        ses.append([m.get("se") for m in metrics])
        places = [f"{details}: tasks.{c.task}.metrics.{c.metric}" for c in rule.criteria]
        value_places.append([f"{place}.value" for place in places])
        se_places.append([f"{place}.se" for place in places])
    with_se = any(cell is not None for row in ses for cell in row)
    return _table(f"--runs ({len(names)} folders)", names, rows, values, value_places,
                  ses if with_se else None, se_places if with_se else None,
                  [c.key for c in rule.criteria])


def _metric_entry(tasks: dict, criterion: Criterion) -> dict:
    task = tasks.get(criterion.task)
    metrics = task.get("metrics") if isinstance(task, dict) else None
    entry = metrics.get(criterion.metric) if isinstance(metrics, dict) else None
    return entry if isinstance(entry, dict) else {}


def config_from_bundle(path: Path, phase: str | None) -> tuple[dict, str]:
    """The raw scoring config of a built bundle's scoring program (a nested zip, or a folder,
    with scoring_config.json at its root) and where it was found; ``phase`` picks one when
    the bundle holds several phases."""
    try:
        outer = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as error:
        raise InputError(f"{path}: cannot open the bundle ({error})") from None
    found: dict[str, tuple[dict, str]] = {}
    with outer:
        members = outer.namelist()
        nested = [m for m in members if m.lower().endswith(".zip")]
        # scoring programs first: opening a data zip in the bundle costs its whole size
        nested.sort(key=lambda m: "scoring" not in m.lower())
        for member in members:
            if member.count("/") == 1 and member.endswith("/" + CONFIG_NAME):
                _add_config(found, outer.read(member), f"{path}::{member}")
        for member in nested:
            if found and "scoring" not in member.lower():
                break
            try:
                with zipfile.ZipFile(io.BytesIO(outer.read(member))) as inner:
                    if CONFIG_NAME in inner.namelist():
                        _add_config(found, inner.read(CONFIG_NAME),
                                    f"{path}::{member}::{CONFIG_NAME}")
            except zipfile.BadZipFile:
                continue
    if not found:
        raise InputError(f"{path}: no scoring program with a {CONFIG_NAME} in the bundle")
    if phase is None and len(found) > 1:
        raise InputError(f"{path}: the bundle holds phases {sorted(found)}; name one with --phase")
    key = phase if phase is not None else next(iter(found))
    if key not in found:
        raise InputError(f"{path}: no phase {key!r}; the bundle holds {sorted(found)}")
    return found[key]


def _add_config(found: dict, data: bytes, where: str) -> None:
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise InputError(f"{where}: not readable JSON ({error})") from None
    if isinstance(raw, dict):
        found.setdefault(str(raw.get("phase")), (raw, where))


# ------------------------------------------------------------------------------ the analysis

@dataclass(frozen=True)
class Inference:
    """The simultaneous claims better[k, j] ("k is better than j") and how they were made."""
    method: str                   # parametric, column_rank_bounds or sign_flip
    better: np.ndarray
    critical_value: float | None  # None: sign flips have p-values, not a critical value
    draws: str                    # what was drawn or counted, for the report
    seeded: bool                  # whether the draws depend on the seed
    test: str
    population: str
    assumes: str


@dataclass(frozen=True)
class Analysis:
    names: list[str]
    statistic: np.ndarray         # T_j as the leaderboard shows it
    observed_rank: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    group: np.ndarray
    order: list[int]
    inference: Inference
    replicates: int
    alpha: float
    seed: int

    @property
    def method(self) -> str:
        return self.inference.method

    @property
    def critical_value(self) -> float | None:
        return self.inference.critical_value


def parametric_inference(rule: RankingRule, table: Table, losses: np.ndarray, sign: float,
                         replicates: int, alpha: float, rng: np.random.Generator) -> Inference:
    """Standard errors and a linear statistic: max-|t| over the parametric draws' pairs. The
    s_jk come from draws of their own: the draws the critical value is read from are then
    independent of them, as the leaderboard is, so the max-|t| of both has one law (from
    the same draws, the coverage at equal entries was 0.94 with B = 200)."""
    sd = pairwise_sd(sign * parametric_replicates(rule, table.values, table.se, replicates, rng))
    draws = sign * parametric_replicates(rule, table.values, table.se, replicates, rng)
    critical = max_t_critical_value(draws, losses, sd, alpha)
    return Inference("parametric", significantly_better(losses, sd, critical), critical,
                     f"B = {replicates} parametric draws value ~ N(value, se^2) per entry and "
                     f"column", True, TEST_TEXT, THESE_TASKS, CONSERVATIVE_TEXT)


def column_bounds_inference(rule: RankingRule, table: Table, replicates: int, alpha: float,
                            rng: np.random.Generator) -> Inference:
    """Standard errors and the average rank: bounds from every column's pairs (exact ties
    break a bootstrap of the average rank, not these bounds)."""
    critical = column_pair_critical_value(table.se, replicates, alpha, rng)
    return Inference("column_rank_bounds",
                     average_rank_better(rule, table.values, table.se, critical), critical,
                     f"B = {replicates} Gaussian draws of the column pivot", True,
                     COLUMN_BOUNDS_TEXT, THESE_TASKS, CONSERVATIVE_TEXT)


def sign_flip_refusal(rule: RankingRule, table: Table, alpha: float) -> str | None:
    """Why no sign-flip test over the tasks can tell any pair apart, or None."""
    n, tasks = len(table.names), len(rule.tasks)
    se_names = f"{rule.criteria[0].se_names[0]!r} or {rule.criteria[0].se_names[1]!r}"
    if tasks < 2:
        return (f"{table.source}: no standard errors and a single task ({rule.tasks[0]}): "
                f"nothing to compare across tasks. Give SE columns ({se_names}) or scoring "
                "outputs with metrics.<metric>.se")
    needed = tasks_needed(n, alpha)
    if tasks >= needed:
        return None
    pairs = n * (n - 1) // 2
    return (f"{table.source}: no standard errors, so entries are compared across the "
            f"{tasks} tasks, where the smallest p-value a sign-flip test can reach is "
            f"2/2^{tasks} = {2 / 2 ** tasks:.3g}, above alpha/pairs = {alpha:g}/{pairs} = "
            f"{alpha / pairs:.3g}: no two of the {n} entries could be told apart, and a "
            f"bootstrap over so few tasks would claim differences that are not there. Give "
            f"standard errors (SE columns {se_names}) or at least {needed} tasks")


def sign_flip_inference(rule: RankingRule, table: Table, replicates: int, alpha: float,
                        rng: np.random.Generator) -> Inference:
    """No standard errors, enough tasks: exact sign-flip tests over the tasks, Holm."""
    n, tasks = len(table.names), len(rule.tasks)
    exact = tasks <= EXACT_SIGN_FLIP_TASKS
    draws = replicates if exact else sign_flip_draws(n, replicates, alpha)
    better = sign_flip_better(task_contributions(rule, table.values), alpha, draws, rng)
    counted = (f"every one of the 2^{tasks} sign patterns (exact)" if exact else
               f"{draws} random sign patterns of the {tasks} tasks")
    unit = "rank among these entries" if rule.statistic == "average_rank" else "weighted loss"
    return Inference("sign_flip", better, None, counted, not exact,
                     f"each pair's sign-flip test over the {tasks} tasks, Holm's step-down over "
                     f"the {n * (n - 1) // 2} pairs (familywise error <= alpha)",
                     f"tasks like these: each entry's expected {unit} on a task drawn from the "
                     f"population these {tasks} are a sample of; not these {tasks} tasks' "
                     "scores", SIGN_FLIP_ASSUMES)


def infer(rule: RankingRule, table: Table, losses: np.ndarray, sign: float, replicates: int,
          alpha: float, rng: np.random.Generator) -> Inference:
    """The claims by the method the table allows (see the module docstring)."""
    if table.se is not None and rule.statistic == "average_rank":
        return column_bounds_inference(rule, table, replicates, alpha, rng)
    if table.se is not None:
        return parametric_inference(rule, table, losses, sign, replicates, alpha, rng)
    refusal = sign_flip_refusal(rule, table, alpha)
    if refusal:
        raise InputError(refusal)
    return sign_flip_inference(rule, table, replicates, alpha, rng)


def analyse(rule: RankingRule, table: Table, replicates: int = DEFAULT_REPLICATES,
            alpha: float = DEFAULT_ALPHA, seed: int = DEFAULT_SEED) -> Analysis:
    """Rank intervals and tie groups of the table's entries (see the module docstring)."""
    n = len(table.names)
    if n < 2:
        raise InputError(f"{table.source}: {n} entr{'y' if n == 1 else 'ies'} with every "
                         "ranking column; expected at least 2 to rank")
    observed = ranking_statistic(rule, table.values)
    sign = -1.0 if rule.higher_is_better else 1.0
    losses = sign * observed
    inference = infer(rule, table, losses, sign, replicates, alpha, np.random.default_rng(seed))
    lower, upper = rank_intervals(inference.better)
    order = observed_order(losses, table.names)
    observed_rank = np.empty(n, dtype=int)
    observed_rank[order] = np.arange(1, n + 1)
    return Analysis(table.names, observed, observed_rank, lower, upper,
                    tie_groups(order, inference.better), order, inference, replicates, alpha,
                    seed)


def method_text(analysis: Analysis, rule: RankingRule) -> list[str]:
    inference = analysis.inference
    critical = ("" if inference.critical_value is None
                else f"; critical value c = {inference.critical_value:.3f}")
    return [f"ranking statistic: {rule.label} = {rule.describe()}",
            f"about: {inference.population}",
            f"draws: {inference.draws}" + (f", seed {analysis.seed}" if inference.seeded else ""),
            f"assumes: {inference.assumes}",
            f"rank intervals: simultaneous coverage {1 - analysis.alpha:g} ({REFERENCE}); "
            f"{inference.test}{critical}",
            "tie group: not significantly different from the group's first entry"]


def report_lines(analysis: Analysis, rule: RankingRule) -> list[str]:
    rows = [(analysis.names[j], f"{analysis.statistic[j]:.6g}", str(analysis.observed_rank[j]),
             f"[{analysis.lower[j]}, {analysis.upper[j]}]", str(analysis.group[j]))
            for j in analysis.order]
    header = ("entry", rule.label, "rank", "rank interval", "group")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
    return [*method_text(analysis, rule), "", line(header), *map(line, rows)]


def as_json(analysis: Analysis, rule: RankingRule, table: Table) -> dict:
    inference = analysis.inference
    return {"statistic": {"key": rule.key, "label": rule.label, "kind": rule.statistic,
                          "columns": [c.key for c in rule.criteria],
                          "higher_is_better": rule.higher_is_better},
            "method": {"draws": inference.method, "reference": REFERENCE,
                       "test": inference.test, "population": inference.population,
                       "assumes": inference.assumes, "text": method_text(analysis, rule)},
            "seed": analysis.seed, "B": analysis.replicates, "alpha": analysis.alpha,
            "critical_value": inference.critical_value, "warnings": list(table.warnings),
            "entries": [{"name": analysis.names[j], "statistic": float(analysis.statistic[j]),
                         "observed_rank": int(analysis.observed_rank[j]),
                         "rank_interval": [int(analysis.lower[j]), int(analysis.upper[j])],
                         "group": int(analysis.group[j])} for j in analysis.order]}


# ---------------------------------------------------------------------------- command line

def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ranks", description=(
        "Rank intervals (simultaneous coverage 1-alpha) and tie groups of a leaderboard."))
    parser.add_argument("leaderboard", nargs="?", type=Path, help="the leaderboard CSV")
    parser.add_argument("--runs", nargs="+", type=Path, metavar="DIR",
                        help="scoring output folders instead of a CSV (entry = folder name)")
    parser.add_argument("--config", type=Path, help=f"the phase's {CONFIG_NAME} (default: the "
                        "one next to this file, in an unzipped scoring program)")
    parser.add_argument("--bundle", type=Path, help="read the config from a built bundle zip")
    parser.add_argument("--phase", help="the bundle's phase, where it holds several")
    parser.add_argument("--replicates", "-B", type=int, default=DEFAULT_REPLICATES)
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the results here")
    arguments = parser.parse_args(argv)
    if (arguments.leaderboard is None) == (arguments.runs is None):
        parser.error("give a leaderboard CSV or --runs, one of the two")
    if arguments.config is not None and arguments.bundle is not None:
        parser.error("give --config or --bundle, not both")
    if arguments.replicates < 100:
        parser.error("--replicates: expected at least 100")
    if not 0 < arguments.alpha < 1:
        parser.error("--alpha: expected a number between 0 and 1")
    return arguments


def _config(arguments: argparse.Namespace) -> tuple[ScoringConfig, str]:
    if arguments.bundle is not None:
        raw, where = config_from_bundle(arguments.bundle, arguments.phase)
        return parse_config(raw, where), where
    path = arguments.config or Path(__file__).resolve().parent / CONFIG_NAME
    if arguments.config is None and not path.is_file():
        raise InputError(f"{path}: missing; give --config PATH/{CONFIG_NAME} or --bundle ZIP "
                         "(only an unzipped scoring program holds its own config)")
    return load_config(path), str(path)


def main(argv: list[str]) -> int:
    arguments = _arguments(argv)
    try:
        config, where = _config(arguments)
        rule = ranking_rule(config, where)
        table = (read_runs(arguments.runs, rule) if arguments.runs is not None
                 else read_leaderboard(arguments.leaderboard, config, rule))
        for warning in table.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        analysis = analyse(rule, table, arguments.replicates, arguments.alpha, arguments.seed)
    except (InputError, ConfigError) as error:
        print(f"ranks: {error}", file=sys.stderr)
        return BAD_INPUT
    print(f"phase {config.phase}: {len(table.names)} entries from {table.source}")
    print("\n".join(report_lines(analysis, rule)))
    if arguments.json is not None:
        try:
            arguments.json.write_text(json.dumps(as_json(analysis, rule, table), indent=1) + "\n",
                                      encoding="utf-8")
        except OSError as error:
            print(f"ranks: {arguments.json}: cannot write ({error})", file=sys.stderr)
            return BAD_INPUT
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

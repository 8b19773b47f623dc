"""Does the exact-posterior interval hold an exact submission's score as often as it says?

A simulation in a world whose exact posterior is known and whose Monte Carlo error is the
committed reference's own: each replicate makes a new reference from blocks of draws alike to
the committed ones, scores the exact posterior against it, and computes the expectation from
those blocks as the builder would. The share of replicates whose score falls inside the
interval is the interval's coverage, to be compared with ``COVERAGE``.

- classification: the exact posterior is the committed model average p; a replicate's n
  blocks are p + G D / sqrt(n - 1), with D the committed blocks' deviations from their mean
  and G an n x n standard normal matrix: independent Gaussian blocks with the committed
  blocks' covariance (across test points and classes alike).
- regression: the exact predictive is the pool of every committed draw of y (each draw a
  vector over the test points, so their dependence through the shared parameters stays);
  a replicate's blocks are draws of that pool with replacement, in the committed blocks'
  sizes, its reference ``reference_draws`` of them spread evenly over the blocks, and the
  exact submission ``submission_draws`` fresh draws of the pool.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..runtime.exact_posterior import (COVERAGE, exact_posterior_expectation,
                                       expectation_blocks)
from ..runtime.score_types import CLASSIFICATION, SCORE_TYPES


@dataclass(frozen=True)
class Coverage:
    metric: str
    inside: int             # replicates whose exact score fell inside the interval
    replicates: int
    mean_score: float       # the exact submission's mean score over replicates
    mean_value: float       # the expectation's mean over replicates

    @property
    def rate(self) -> float:
        return self.inside / self.replicates

    def tolerance(self, coverage: float = COVERAGE, sigmas: float = 3.0) -> float:
        """``sigmas`` binomial standard errors of a rate measured on this many replicates."""
        return sigmas * float(np.sqrt(coverage * (1 - coverage) / self.replicates))


def _classification_replicate(blocks: np.ndarray, rng):
    count = len(blocks)
    exact = blocks.mean(axis=0)
    deviations = (blocks - exact).reshape(count, -1)
    mixed = rng.standard_normal((count, count)) @ deviations / np.sqrt(count - 1)
    new_blocks = exact + mixed.reshape(blocks.shape)
    return exact, new_blocks.mean(axis=0), new_blocks, None


def _regression_replicate(blocks: list[np.ndarray], reference_draws: int,
                          submission_draws: int, rng):
    pool = np.concatenate(blocks, axis=1)                                  # (N, all draws)
    new_blocks = [pool[:, rng.integers(0, pool.shape[1], block.shape[1])] for block in blocks]
    drawn = np.concatenate(new_blocks, axis=1)
    reference = drawn[:, np.arange(reference_draws) * drawn.shape[1] // reference_draws]
    exact = pool[:, rng.integers(0, pool.shape[1], submission_draws)]
    return exact, reference, new_blocks, reference_draws


def expectation_coverage(task_type: str, chains: np.ndarray, batch_means=None,
                         reference_draws: int | None = None, submission_draws: int | None = None,
                         replicates: int = 100, splits: int = 100, seed: int = 0
                         ) -> dict[str, Coverage]:
    """Each metric's coverage over ``replicates`` simulated references (module docstring);
    the arguments are those the builder takes (``expectation_blocks``)."""
    rng = np.random.default_rng(seed)
    blocks, draws = expectation_blocks(task_type, chains, reference_draws, batch_means)
    found = {score.name: ([], [], []) for score in SCORE_TYPES[task_type]}
    for replicate in range(replicates):
        if task_type == CLASSIFICATION:
            exact, reference, new_blocks, draws = _classification_replicate(
                np.asarray(blocks, float), rng)
        else:
            exact, reference, new_blocks, draws = _regression_replicate(
                blocks, reference_draws, submission_draws, rng)
        expected = exact_posterior_expectation(task_type, new_blocks, draws, submission_draws,
                                               splits=splits, seed=seed + replicate + 1)
        for score in SCORE_TYPES[task_type]:
            realised = float(score.function(exact, reference))
            line = expected[score.name]
            inside, scores, values = found[score.name]
            inside.append(line.low <= realised <= line.high)
            scores.append(realised)
            values.append(line.value)
    return {name: Coverage(name, int(sum(inside)), replicates, float(np.mean(scores)),
                           float(np.mean(values)))
            for name, (inside, scores, values) in found.items()}

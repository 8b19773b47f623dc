"""Simulation-based calibration of BDL's standard error of a metric against its HMC reference:
the test rows' part and the reference chains' part together cover the truth, the rows' part
alone does not (tests/test_interval_coverage.py says how each such test works, and holds the
helpers; the figures measured at full size are in docs/intervals.md)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kinds.bdl2021.runtime import evaluate
from kinds.bdl2021.runtime.references import References
from kinds.bdl2021.runtime.score_types import TASK_TYPES as BDL_TYPES
from kinds.bdl2021.runtime.settings import Block, TaskSettings
from runtime import uncertainty
from runtime.scoring import TaskConfig
from test_interval_coverage import SKEWNESS, assert_calibrated, coverage

CHAINS = 4
CLASSES = 3
# (test rows, submission's error in logits, chains' error in logits, share of the chains'
# error common to all rows): a chain exploring its own region of the posterior moves every
# test point's predictive together. From row-dominated (a far submission) to chain-dominated
# (an exact submission, where the reference's own error is all there is).
BDL_CONFIGS = {"50 rows, far submission": (50, 1.0, 0.05, 0.5),
               "50 rows, close submission": (50, 0.05, 0.1, 0.9),
               "200 rows, exact submission": (200, 0.0, 0.1, 0.9)}


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def bdl_draws(replicates, rows, submission_error, chain_error, common, rng):
    """Submissions and the K chains' predictives of ``replicates`` test sets: each row's
    exact predictive is random (new test rows), each chain's is it with Monte Carlo error."""
    logits = rng.normal(0, 2, (replicates, rows, CLASSES))
    submission = _softmax(logits + submission_error * rng.standard_normal(logits.shape))
    noise = (common * rng.standard_normal((replicates, CHAINS, 1, CLASSES))
             + math.sqrt(1 - common ** 2)
             * rng.standard_normal((replicates, CHAINS, rows, CLASSES)))
    return submission, _softmax(logits[:, None] + chain_error * noise)


def bdl_mean_score(rows, submission_error, chain_error, common, rng) -> float:
    """The mean total variation over 1,000 test sets and HMC runs (a tenth of the truth)."""
    submission, chains = bdl_draws(1000, rows, submission_error, chain_error, common, rng)
    return float(np.mean(0.5 * np.abs(submission - chains.mean(axis=1)).sum(-1)))


def _classification_task(rows: int) -> TaskConfig:
    settings = TaskSettings("classification", rows, CLASSES, None, (Block("all", 0, rows),),
                            "sub", "ref", "chains", None, None)
    return TaskConfig("simulated", BDL_TYPES["classification"], {"total_variation": 1.0},
                      None, settings)


def bdl_coverages(replicates: int, seed: int = 31) -> tuple[dict, dict]:
    """The scorer's total variation and its standard error (evaluate._metrics) against the
    truth, its expectation over test rows and HMC runs. Naive: the rows' part alone. (Where
    the rows dominate, their part is the closed form of a mean of skewed terms over 50 rows,
    with the shortfall ``SKEWNESS`` allows: 0.936 measured.)"""
    rng = np.random.default_rng(seed)
    product, naive = {}, {}
    for name, (rows, submission_error, chain_error, common) in BDL_CONFIGS.items():
        truth = float(np.mean([bdl_mean_score(rows, submission_error, chain_error, common, rng)
                               for _ in range(10)]))
        task = _classification_task(rows)
        submissions, chains = bdl_draws(replicates, rows, submission_error, chain_error,
                                        common, rng)
        values, errors, row_errors = [], [], []
        for submission, chain in zip(submissions, chains):
            references = References(chain.mean(axis=0), chain, None, {})
            result = evaluate._metrics(task, submission, references, None)["total_variation"]
            values.append(result.value)
            errors.append(result.se)
            terms = 0.5 * np.abs(submission - references.model_average).sum(axis=1)
            row_errors.append(uncertainty.stratified_mean_se(terms))
        product[name] = coverage(values, errors, truth)
        naive[name] = coverage(values, row_errors, truth)
    return product, naive


def test_bdls_rows_and_chains_standard_error_covers_and_the_rows_alone_do_not():
    product, naive = bdl_coverages(400)
    assert_calibrated(product, naive, 400, SKEWNESS)


@pytest.mark.slow
@pytest.mark.extended         # 10 CPU s; the default-size twin above checks the same claim
def test_bdls_rows_and_chains_standard_error_covers_at_full_size():
    product, naive = bdl_coverages(4000, seed=32)
    assert_calibrated(product, naive, 4000, SKEWNESS)

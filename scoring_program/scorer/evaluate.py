"""Score one task: metrics against the model average, error bars, exact-posterior
expectation, blocks, curves.

Error bars: the submission is also scored against each HMC chain's own predictive; the
standard deviation (ddof=1) over chains says how much the score depends on which HMC
run is the target. Exact-posterior expectation: what an exact sampler's submission of
the participant's size is expected to score against this finite reference
(``exact_posterior.py``); the builder ships it, and it is computed here only if absent.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np

from competition_formats import TaskRun

from . import metrics
from .config import TaskConfig
from .exact_posterior import exact_posterior_expectation
from .predictions import Submission, SubmissionError
from .references import References
from .results import BlockResult, Curves, MetricResult, TaskResult
from .score_types import CLASSIFICATION, SCORE_TYPES, WASSERSTEIN_CAP_IN_REFERENCE_STD

COVERAGE_LEVELS = np.round(np.linspace(0.1, 0.9, 9), 2)
RELIABILITY_BINS = 10


def _std(values) -> float | None:
    return float(np.std(values, ddof=1)) if len(values) > 1 else None


def _metrics(task: TaskConfig, predictions: np.ndarray, references: References,
             cap: float | None) -> dict[str, MetricResult]:
    """Every metric against the model average and against each chain, with the expectation."""
    types = SCORE_TYPES[task.kind]
    raw = {t.name: t.function(predictions, references.model_average) for t in types}
    values = {t.name: t.clip(raw[t.name], cap) for t in types}
    chains = references.chains
    if chains is None:
        return {name: MetricResult(name, values[name], capped=values[name] != raw[name])
                for name in values}
    per_chain = {t.name: tuple(t.clip(t.function(predictions, chain), cap) for chain in chains)
                 for t in types}
    expectation = references.expectation or {}
    return {name: MetricResult(name, values[name], _std(per_chain[name]), per_chain[name],
                               getattr(expectation.get(name), "value", None),
                               getattr(expectation.get(name), "spread", None),
                               capped=values[name] != raw[name])
            for name in values}


def _blocks(task: TaskConfig, predictions: np.ndarray, references: References):
    if len(task.blocks) < 2:
        return ()
    return tuple(
        BlockResult(block.name, block.stop - block.start, {
            t.name: t.function(predictions[block.start:block.stop],
                               references.model_average[block.start:block.stop])
            for t in SCORE_TYPES[task.kind]})
        for block in task.blocks)


def _curves_and_extras(task: TaskConfig, predictions: np.ndarray, references: References):
    reference, labels = references.model_average, references.labels
    extras: dict[str, float] = {}
    if task.kind == CLASSIFICATION:
        curves = Curves(metrics.predictive_entropy(predictions),
                        metrics.predictive_entropy(reference), "predictive entropy (nats)")
        if labels is not None:
            labels = labels.astype(int)
            curves = Curves(curves.submission_spread, curves.reference_spread, curves.spread_label,
                            metrics.reliability_curve(predictions, labels, RELIABILITY_BINS),
                            metrics.reliability_curve(reference, labels, RELIABILITY_BINS))
            for who, probs, curve in (("submission", predictions, curves.submission_reliability),
                                      ("HMC", reference, curves.reference_reliability)):
                extras[f"accuracy ({who})"] = float(np.mean(probs.argmax(axis=1) == labels))
                extras[f"ECE ({who})"] = metrics.calibration_error_of_curve(*curve)
        return curves, extras
    curves = Curves(metrics.predictive_std(predictions), metrics.predictive_std(reference),
                    "predictive standard deviation")
    if labels is not None:
        coverage = [metrics.interval_coverage(samples, labels, COVERAGE_LEVELS)
                    for samples in (predictions, reference)]
        curves = Curves(curves.submission_spread, curves.reference_spread, curves.spread_label,
                        coverage_levels=COVERAGE_LEVELS, submission_coverage=coverage[0],
                        reference_coverage=coverage[1])
        extras["90% interval coverage (submission)"] = float(coverage[0][-1])
        extras["90% interval coverage (HMC)"] = float(coverage[1][-1])
    return curves, extras


def wasserstein_cap(task: TaskConfig, references: References) -> float | None:
    if task.kind == CLASSIFICATION:
        return None
    return WASSERSTEIN_CAP_IN_REFERENCE_STD * float(references.model_average.std())


def penalised(task: TaskConfig, reason: str, cap: float | None,
              run: TaskRun | None) -> TaskResult:
    """Worst value of every metric and of its sd (the metric's whole range): a failed task
    must not rank well on any column. train_seconds gets the budget in scores_file."""
    worst = {t.name: MetricResult(t.name, t.worst(cap), chain_std=t.worst_spread(cap))
             for t in SCORE_TYPES[task.kind]}
    return TaskResult(task, worst, penalty=reason,
                      train_seconds=run.wall_seconds if run else None)


def _run_notes(run: TaskRun | None) -> tuple[str, ...]:
    if run is not None and run.prediction == "anytime":
        return (f"training {run.status.replace('_', ' ')} after {run.wall_seconds:.1f}s; "
                "the last intermediate prediction it wrote was scored",)
    return ()


def _sorted_samples(references: References) -> References:
    """Regression metrics and curves ignore sample order: sort every row once, up front."""
    chains = None if references.chains is None else np.sort(references.chains, axis=2)
    return replace(references, model_average=np.sort(references.model_average, axis=1),
                   chains=chains)


def _with_expectation(task: TaskConfig, references: References) -> References:
    """The shipped expectation, or computed now from the unsorted chains (the regression
    halves take each chain's first draws, as the reference did)."""
    if references.chains is None or references.expectation is not None:
        return references
    draws = None if task.kind == CLASSIFICATION else references.model_average.shape[1]
    return replace(references, expectation=exact_posterior_expectation(
        task.kind, references.chains, draws, task.num_samples))


def score_task(task: TaskConfig, load_submission: Callable[[], Submission],
               references: References, run: TaskRun | None) -> TaskResult:
    """``load_submission`` returns the validated predictions or raises SubmissionError."""
    cap = wasserstein_cap(task, references)
    if run is not None and not run.has_prediction:
        detail = f": {run.message}" if run.message else ""
        return penalised(task, f"training run {run.status.replace('_', ' ')}{detail}", cap, run)
    try:
        submission = load_submission()
    except SubmissionError as error:
        return penalised(task, str(error), cap, run)
    predictions = submission.predictions
    references = _with_expectation(task, references)
    if task.kind != CLASSIFICATION:
        predictions, references = np.sort(predictions, axis=1), _sorted_samples(references)
    results = _metrics(task, predictions, references, cap)
    curves, extras = _curves_and_extras(task, predictions, references)
    notes = submission.notes + _run_notes(run) + tuple(
        f"{name}: the distance exceeded the cap of {cap:.4g} "
        f"({WASSERSTEIN_CAP_IN_REFERENCE_STD:g} reference standard deviations) and was clipped"
        for name, result in results.items() if result.capped)
    return TaskResult(task, results, _blocks(task, predictions, references), None, notes,
                      run.wall_seconds if run else None, curves, extras)

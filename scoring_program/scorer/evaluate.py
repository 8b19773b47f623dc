"""Score one task: metrics against the model average, error bars, noise ceiling, blocks, curves.

Error bars: the submission is also scored against each HMC chain's own predictive; the
standard deviation (ddof=1) over chains says how much the score depends on which HMC
run is the target. Noise ceiling: each chain scored against the average of the other
chains, i.e. the score "another HMC run" would get.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from competition_formats import TaskRun

from . import metrics
from .config import TaskConfig
from .predictions import Submission, SubmissionError
from .references import References
from .results import BlockResult, Curves, MetricResult, TaskResult
from .score_types import CLASSIFICATION, SCORE_TYPES, WASSERSTEIN_CAP_IN_REFERENCE_STD

COVERAGE_LEVELS = np.round(np.linspace(0.1, 0.9, 9), 2)
RELIABILITY_BINS = 10


def _others_average(chains: np.ndarray, k: int, kind: str) -> np.ndarray:
    """The reference made of every chain but k: mean probabilities, or pooled samples.

    Pooled regression samples are re-sorted with timsort, which merges the already sorted
    chains in linear time, so the metrics need not sort again.
    """
    others = np.delete(chains, k, axis=0)
    if kind == CLASSIFICATION:
        return others.mean(axis=0)
    return np.sort(np.concatenate(others, axis=1), axis=1, kind="stable")


def _std(values) -> float | None:
    return float(np.std(values, ddof=1)) if len(values) > 1 else None


def noise_ceiling(kind: str, chains: np.ndarray) -> dict[str, list[float]]:
    """Each metric of each chain against the average of the other chains.

    Depends on the references only, so the builder computes it once and ships it.
    """
    types = SCORE_TYPES[kind]
    values: dict[str, list[float]] = {t.name: [] for t in types}
    if kind != CLASSIFICATION:
        chains = np.sort(chains, axis=2)
    for k, chain in enumerate(chains):
        others = _others_average(chains, k, kind)   # one at a time: bounded memory
        for t in types:
            values[t.name].append(float(t.function(chain, others)))
    return values


def _metrics(task: TaskConfig, predictions: np.ndarray, references: References,
             cap: float | None) -> dict[str, MetricResult]:
    """Every metric against the model average and against each chain, with the ceiling."""
    types = SCORE_TYPES[task.kind]
    raw = {t.name: t.function(predictions, references.model_average) for t in types}
    values = {t.name: t.clip(raw[t.name], cap) for t in types}
    chains = references.chains
    if chains is None:
        return {name: MetricResult(name, values[name], capped=values[name] != raw[name])
                for name in values}
    per_chain = {t.name: tuple(t.clip(t.function(predictions, chain), cap) for chain in chains)
                 for t in types}
    ceiling = references.noise_ceiling or noise_ceiling(task.kind, chains)
    return {name: MetricResult(name, values[name], _std(per_chain[name]), per_chain[name],
                               float(np.mean(ceiling[name])), _std(ceiling[name]),
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
    worst = {t.name: MetricResult(t.name, t.worst(cap), chain_std=0.0)
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
    return References(np.sort(references.model_average, axis=1), chains, references.labels,
                      references.noise_ceiling)


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

"""Score one task: metrics against the model average, error bars, noise ceiling, blocks, curves.

Error bars: the submission is also scored against each HMC chain's own predictive; the
standard deviation (ddof=1) over chains says how much the score depends on which HMC
run is the target. Noise ceiling: each chain scored against the average of the other
chains, i.e. the score "another HMC run" would get.
"""
from __future__ import annotations

import numpy as np

from competition_formats import TaskRun

from . import metrics
from .config import TaskConfig
from .predictions import SubmissionError, load_submission
from .references import References
from .results import BlockResult, Curves, MetricResult, TaskResult
from .score_types import CLASSIFICATION, SCORE_TYPES, WASSERSTEIN_CAP_IN_REFERENCE_STD, ScoreType

COVERAGE_LEVELS = np.round(np.linspace(0.1, 0.9, 9), 2)
RELIABILITY_BINS = 10


def _others_average(chains: np.ndarray, k: int, kind: str) -> np.ndarray:
    """The reference made of every chain but k: mean probabilities, or pooled samples."""
    others = np.delete(chains, k, axis=0)
    return others.mean(axis=0) if kind == CLASSIFICATION else np.concatenate(others, axis=1)


def _std(values) -> float | None:
    return float(np.std(values, ddof=1)) if len(values) > 1 else None


def _metric(score_type: ScoreType, task: TaskConfig, predictions: np.ndarray,
            references: References, cap: float | None) -> MetricResult:
    raw = score_type.function(predictions, references.model_average)
    value = score_type.clip(raw, cap)
    if references.chains is None:
        return MetricResult(score_type.name, value, capped=value != raw)
    chains = references.chains
    per_chain = tuple(score_type.clip(score_type.function(predictions, chain), cap)
                      for chain in chains)
    ceiling = [score_type.function(chains[k], _others_average(chains, k, task.kind))
               for k in range(len(chains))]
    return MetricResult(score_type.name, value, _std(per_chain), per_chain,
                        float(np.mean(ceiling)), _std(ceiling), capped=value != raw)


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
            for who, probs in (("submission", predictions), ("HMC", reference)):
                extras[f"accuracy ({who})"] = float(np.mean(probs.argmax(axis=1) == labels))
                extras[f"ECE ({who})"] = metrics.expected_calibration_error(
                    probs, labels, RELIABILITY_BINS)
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


def score_task(task: TaskConfig, res, references: References,
               run: TaskRun | None) -> TaskResult:
    cap = wasserstein_cap(task, references)
    if run is not None and not run.has_prediction:
        detail = f": {run.message}" if run.message else ""
        return penalised(task, f"training run {run.status.replace('_', ' ')}{detail}", cap, run)
    try:
        submission = load_submission(task, res)
    except SubmissionError as error:
        return penalised(task, str(error), cap, run)
    predictions = submission.predictions
    results = {t.name: _metric(t, task, predictions, references, cap)
               for t in SCORE_TYPES[task.kind]}
    curves, extras = _curves_and_extras(task, predictions, references)
    notes = submission.notes + _run_notes(run) + tuple(
        f"{name}: the distance exceeded the cap of {cap:.4g} "
        f"({WASSERSTEIN_CAP_IN_REFERENCE_STD:g} reference standard deviations) and was clipped"
        for name, result in results.items() if result.capped)
    return TaskResult(task, results, _blocks(task, predictions, references), None, notes,
                      run.wall_seconds if run else None, curves, extras)

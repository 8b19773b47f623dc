"""Score one task: metrics against the model average, error bars, standard errors,
exact-posterior expectation, blocks, curves.

Error bars: the submission is also scored against each HMC chain's own predictive; the
standard deviation (ddof=1) over chains says how much the score depends on which HMC
run is the target. Standard errors (``STANDARD_ERROR``): of the score against the model
average, from two independent sources, sqrt(se_rows^2 + se_chains^2): a seeded bootstrap over
test rows (stratified by block) and the chains' spread over their number, sd / sqrt(K) (a
plug-in: exact for a metric linear in the reference), widened to Student's t on K - 1 degrees
of freedom. Exact-posterior expectation: what an
exact sampler's submission of the participant's size is expected to score against this finite
reference (``exact_posterior.py``); the builder ships it, and it is computed here only if
absent.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from runtime import disclosure, uncertainty
from runtime.formats import TaskRun
from runtime.scoring import BlockResult, MetricResult, TaskConfig, TaskResult

from . import metrics
from .exact_posterior import exact_posterior_expectation, expectation_blocks
from .predictions import Submission
from .references import References
from .score_types import CLASSIFICATION, WASSERSTEIN_CAP_IN_REFERENCE_STD

STANDARD_ERROR = ("the standard error of a mean over the test rows (each block's rows weighted "
                  "by its share; for agreement, a share of rows, at least the Wilson score "
                  "interval's half-width, so an agreement of 1 still has one), combined with "
                  "the spread of the score over the HMC chains divided by the square root of "
                  "their number and widened by t_(K-1) / 1.96 (Student's t: K chains give a "
                  "spread of K - 1 degrees of freedom): sqrt(se_rows^2 + (t_(K-1) / 1.96)^2 "
                  "sd_chains^2 / K)")
COVERAGE_LEVELS = np.round(np.linspace(0.1, 0.9, 9), 2)
RELIABILITY_BINS = 10


@dataclass(frozen=True)
class Curves:
    """Arrays the report draws; classification and regression fill different fields."""
    submission_spread: np.ndarray     # predictive entropy (classification) or std (regression)
    reference_spread: np.ndarray
    spread_label: str
    # classification: reliability (mean confidence, accuracy, count per bin) vs true labels
    submission_reliability: tuple | None = None
    reference_reliability: tuple | None = None
    # regression: coverage of central intervals at nominal levels vs true targets
    coverage_levels: np.ndarray | None = None
    submission_coverage: np.ndarray | None = None
    reference_coverage: np.ndarray | None = None


def _details(chain_values=(), expectation=None) -> dict:
    """The numbers this kind adds to a metric: its value against each chain alone, and the
    exact-posterior expectation with its spread and 95% interval (detailed_results.json keeps
    these names)."""
    interval = None
    if expectation is not None and expectation.low is not None:
        interval = [expectation.low, expectation.high]
    return {"chain_values": list(chain_values),
            "exact_posterior_expectation": getattr(expectation, "value", None),
            "exact_posterior_expectation_spread": getattr(expectation, "spread", None),
            "exact_posterior_expectation_interval": interval}


def _arrays(predictions: np.ndarray, reference: np.ndarray) -> dict[str, np.ndarray]:
    """What every BDL score type takes: the submission and a reference of the same layout."""
    return {"prediction": predictions, "reference": reference}


def _std(values) -> float | None:
    return float(np.std(values, ddof=1)) if len(values) > 1 else None


def _row_errors(task: TaskConfig, predictions: np.ndarray, references: References,
                cap: float | None) -> dict[str, float | None]:
    """Each metric's bootstrap standard error over test rows, blocks kept whole."""
    blocks = task.settings.blocks
    strata = None
    if len(blocks) >= 2:
        strata = np.zeros(len(predictions), dtype=np.int64)
        for number, block in enumerate(blocks):
            strata[block.start:block.stop] = number
    return uncertainty.row_errors(
        task.score_types, _arrays(predictions, references.model_average),
        uncertainty.take_rows(("prediction", "reference")), len(predictions), strata,
        clip=lambda score_type, value: score_type.clip(value, cap))


def _metrics(task: TaskConfig, predictions: np.ndarray, references: References,
             cap: float | None) -> dict[str, MetricResult]:
    """Every metric against the model average and against each chain, with the expectation
    and the standard error."""
    types = task.score_types
    raw = {t.name: t.evaluate(_arrays(predictions, references.model_average)) for t in types}
    values = {t.name: t.clip(raw[t.name], cap) for t in types}
    row_errors = _row_errors(task, predictions, references, cap)
    chains = references.chains
    if chains is None:
        return {name: MetricResult(name, values[name], capped=values[name] != raw[name],
                                   details=_details(), se=row_errors[name])
                for name in values}
    per_chain = {t.name: tuple(t.clip(t.evaluate(_arrays(predictions, chain)), cap)
                               for chain in chains)
                 for t in types}
    expectation = references.expectation or {}
    return {t.name: MetricResult(t.name, values[t.name], _std(per_chain[t.name]),
                                 capped=values[t.name] != raw[t.name], details=_details(
                                     per_chain[t.name], expectation.get(t.name)),
                                 se=_combined_se(t, values[t.name], row_errors[t.name],
                                                 per_chain[t.name], cap))
            for t in types}


def _combined_se(score_type, value: float, row_error: float | None, chain_values,
                 cap: float | None) -> float | None:
    """sqrt(se_rows^2 + se_chains^2), se_chains = sd_chains / sqrt(K) widened to Student's
    t on K - 1 degrees of freedom (``uncertainty.replicates_se``); None for a 0 at an end of
    the metric's range (the chains and the rows all agreeing there says nothing of how far
    it would move)."""
    upper = score_type.maximum if score_type.maximum is not None else cap
    return uncertainty.unless_collapsed(
        uncertainty.combined_se(row_error, uncertainty.replicates_se(chain_values)), value,
        score_type.minimum, upper)


def _blocks(task: TaskConfig, predictions: np.ndarray, references: References):
    if len(task.settings.blocks) < 2:
        return ()
    return tuple(
        BlockResult(block.name, block.stop - block.start, {
            t.name: t.evaluate(_arrays(predictions[block.start:block.stop],
                                       references.model_average[block.start:block.stop]))
            for t in task.score_types})
        for block in task.settings.blocks)


def _reliability_groups(probabilities: np.ndarray, labels: np.ndarray):
    """The reliability diagram's points as the page may show them: the rows grouped by
    confidence on ``disclosure``'s grid (at least MIN_ROWS rows each, ties kept together), per
    group the mean confidence, the accuracy (rounded) and the number of rows. A group tells
    how many of its rows were right, never which."""
    confidence = probabilities.max(axis=1)
    correct = probabilities.argmax(axis=1) == labels
    groups = [group.rows for group in disclosure.grouped_rows(confidence)]
    return (np.array([confidence[rows].mean() for rows in groups]),
            disclosure.rounded(np.array([correct[rows].mean() for rows in groups])),
            np.array([len(rows) for rows in groups]))


def _curves_and_extras(task: TaskConfig, predictions: np.ndarray, references: References):
    """The report's curves and the figures shown beside the metrics. The curves go to the
    public page only, so they hold what ``disclosure`` allows; the extras (ECE on fixed bins,
    accuracy, 90% coverage) are single numbers over every row, as detailed_results.json has
    always had them."""
    reference, labels = references.model_average, references.labels
    extras: dict[str, float] = {}
    if task.settings.task_type == CLASSIFICATION:
        curves = Curves(metrics.predictive_entropy(predictions),
                        metrics.predictive_entropy(reference), "predictive entropy (nats)")
        if labels is not None:
            labels = labels.astype(int)
            curves = replace(curves,
                             submission_reliability=_reliability_groups(predictions, labels),
                             reference_reliability=_reliability_groups(reference, labels))
            for who, probs in (("submission", predictions), ("HMC", reference)):
                curve = metrics.reliability_curve(probs, labels, RELIABILITY_BINS)
                extras[f"accuracy ({who})"] = float(np.mean(probs.argmax(axis=1) == labels))
                extras[f"ECE ({who})"] = metrics.calibration_error_of_curve(*curve)
        return curves, extras
    curves = Curves(metrics.predictive_std(predictions), metrics.predictive_std(reference),
                    "predictive standard deviation")
    if labels is not None:
        coverage = [metrics.interval_coverage(samples, labels, COVERAGE_LEVELS)
                    for samples in (predictions, reference)]
        # The submission's curve is left out: its rows' intervals are the participant's, so
        # every row but one can be made certain to miss or to cover, and each level would
        # then tell where that one row's hidden target lies. HMC's curve is the same for
        # every submission.
        if len(labels) >= disclosure.MIN_ROWS:
            curves = replace(curves, coverage_levels=COVERAGE_LEVELS,
                             reference_coverage=disclosure.rounded(coverage[1]))
        extras["90% interval coverage (submission)"] = float(coverage[0][-1])
        extras["90% interval coverage (HMC)"] = float(coverage[1][-1])
    return curves, extras


def wasserstein_cap(task: TaskConfig, references: References) -> float | None:
    if task.settings.task_type == CLASSIFICATION:
        return None
    return WASSERSTEIN_CAP_IN_REFERENCE_STD * float(references.model_average.std())


def penalty_details() -> dict:
    """What a penalised result's metrics hold of this kind's own numbers: none, under the
    names detailed_results.json keeps for them."""
    return _details()


def first_submission_rows(submission: Submission, rows: int) -> Submission:
    """The submission, validated whole, cut to its first rows."""
    return replace(submission, predictions=submission.predictions[:rows])


def _run_notes(run: TaskRun | None) -> tuple[str, ...]:
    if run is not None and run.prediction == "anytime":
        return (f"training {run.status.replace('_', ' ')} after {run.train_seconds:.1f} s of training; "
                "the last intermediate prediction it wrote was scored",)
    return ()


def _sorted_samples(references: References) -> References:
    """Regression metrics and curves ignore sample order: sort every row once, up front."""
    chains = None if references.chains is None else np.sort(references.chains, axis=2)
    return replace(references, model_average=np.sort(references.model_average, axis=1),
                   chains=chains)


def _with_expectation(task: TaskConfig, references: References) -> References:
    """The shipped expectation, or computed now from the unsorted chains (classification:
    the chains are the blocks; regression: each chain's draws in batches)."""
    if references.chains is None or references.expectation is not None:
        return references
    task_type = task.settings.task_type
    return replace(references, expectation=exact_posterior_expectation(
        task_type, *expectation_blocks(task_type, references.chains,
                                       references.model_average.shape[1]),
        task.settings.num_samples))


def first_rows(task: TaskConfig, references: References, rows: int
               ) -> tuple[TaskConfig, References]:
    """The task and references cut to their first ``rows`` test rows (a public part): blocks
    end there, and the exact-posterior expectation is recomputed for those rows."""
    settings = task.settings
    blocks = tuple(replace(block, stop=min(block.stop, rows)) for block in settings.blocks
                   if block.start < rows)
    chains = None if references.chains is None else references.chains[:, :rows]
    labels = None if references.labels is None else references.labels[:rows]
    return (replace(task, settings=replace(settings, n_test=rows, blocks=blocks)),
            References(references.model_average[:rows], chains, labels, None))


def evaluate(task: TaskConfig, references: References, submission: Submission,
             run: TaskRun | None) -> TaskResult:
    """The result of a valid submission (``runtime.scoring.score_task`` has read it, and cut
    it, the task and the references to a public part where a rule asks)."""
    cap = wasserstein_cap(task, references)
    predictions = submission.predictions
    references = _with_expectation(task, references)
    if task.settings.task_type != CLASSIFICATION:
        predictions, references = np.sort(predictions, axis=1), _sorted_samples(references)
    results = _metrics(task, predictions, references, cap)
    curves, extras = _curves_and_extras(task, predictions, references)
    notes = submission.notes + _run_notes(run) + tuple(
        f"{name}: the distance exceeded the cap of {cap:.4g} "
        f"({WASSERSTEIN_CAP_IN_REFERENCE_STD:g} reference standard deviations) and was clipped"
        for name, result in results.items() if result.capped)
    return TaskResult(task, results, _blocks(task, predictions, references), None, notes,
                      run.train_seconds if run else None, curves, extras)

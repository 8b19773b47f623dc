"""The BDL 2021 task types and their metrics against the HMC reference."""
from __future__ import annotations

from runtime.scoring import ScoreType, TaskType

from . import metrics

CLASSIFICATION = "classification"
REGRESSION = "regression"

# Wasserstein distances are unbounded; a failed task (and any submission farther away)
# gets this many standard deviations of the reference's samples, so missing a task is
# never better than submitting something, and one wild file cannot swamp the aggregate.
WASSERSTEIN_CAP_IN_REFERENCE_STD = 10.0

AGREEMENT = ScoreType(
    "agreement", "agreement", "Top-1 agreement with the HMC model average",
    True, 0.0, 1.0, 4, metrics.top1_agreement, per_row=metrics.top1_agreement_terms)
TOTAL_VARIATION = ScoreType(
    "total_variation", "TV", "Total variation distance to the HMC model average",
    False, 0.0, 1.0, 4, metrics.total_variation, per_row=metrics.total_variation_terms)
WASSERSTEIN2 = ScoreType(
    "w2", "W2", "Wasserstein-2 distance to the HMC predictive samples (sorted coupling)",
    False, 0.0, None, 4, metrics.wasserstein2, per_row=metrics.wasserstein2_terms)
WASSERSTEIN1 = ScoreType(
    "w1", "W1 (2021 code)", "Wasserstein-1 distance: what the 2021 code computed as 'W2'",
    False, 0.0, None, 4, metrics.wasserstein1, per_row=metrics.wasserstein1_terms)

# The primary metrics are the 2021 competition's: each task's contribution to the ranking.
TASK_TYPES = {
    CLASSIFICATION: TaskType(CLASSIFICATION, (AGREEMENT, TOTAL_VARIATION), AGREEMENT),
    REGRESSION: TaskType(REGRESSION, (WASSERSTEIN2, WASSERSTEIN1), WASSERSTEIN2),
}
SCORE_TYPES = {name: task_type.score_types for name, task_type in TASK_TYPES.items()}

"""Metrics of the RETINA diabetic-retinopathy benchmark (Band et al. 2021), binary task.

Written from what ``google/uncertainty-baselines`` computes in
``baselines/diabetic_retinopathy_detection/utils/eval_utils.py`` (scikit-learn's ``log_loss``,
``roc_curve``/``auc``, ``precision_recall_curve``/``auc``, the referral curves after Malinin's
Shifts code) and robustness_metrics' ``ExpectedCalibrationError``. numpy and the standard
library only: this module ships in the scoring program.

Inputs, one value per test image, validated in one place (``check_inputs``):

* ``y``: the label, 0 or 1 (1 = referable retinopathy, Kaggle grade > 1);
* ``p``: the predicted probability of class 1, in [0, 1];
* ``u``: an uncertainty, any finite real, higher = less certain. The benchmark uses the
  predictive entropy of ``p`` (``predictive_entropy``) for every referral curve and for OOD
  detection.

Conventions shared by the functions:

* The predicted class is 1 exactly when p > 0.5 (p = 0.5 predicts 0), in the accuracy, in the
  referral curves and in the ECE (whose argmax over [1 - p, p] breaks the tie towards 0).
* AUROC and AUPRC are *undefined* (``ValueError``) on an empty set, AUROC when one class is
  missing, AUPRC when there is no positive; the scalar functions raise. The referral curves
  follow the benchmark, which calls scikit-learn and turns only its ``ValueError`` into 0: an
  empty set and a one-class AUROC score 0, while a retained set without a positive gets
  scikit-learn's AUPRC, 0.5 (from 1.1 on: recall is set to 1, and the trapezoid from
  (0, 1) to (1, 0) is 1/2; the 2021 versions gave nan, which no average survives).
* Referral sorts by ascending uncertainty with a *stable* sort: equal uncertainties keep
  their input order (the earlier index is kept longer, referred later). The benchmark used
  numpy's default ``argsort`` (introsort, not stable), so with tied uncertainties its order
  was an accident of the algorithm; without ties the two agree exactly.
* Referral curves are indexed by the referral fraction: entry k of a curve of length K + 1 is
  the metric when the fraction k/K of the data, the most uncertain, has been referred. Entry 0
  is the metric on all the data; the last entry is the "everything referred" convention
  (1 for accuracy, AUROC, AUPRC; 0 for NLL). This is the orientation the benchmark's
  functions return (they build the array the other way round and reverse it).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from runtime import confidence_bins

LOG_LOSS_EPS = 1e-15   # scikit-learn's log_loss clipping when the benchmark was written
ECE_BINS = 15
AUC_BUCKETS = 100
# scikit-learn's precision_recall_curve + auc on a non-empty set without a positive (>= 1.1).
AUPRC_WITHOUT_POSITIVE = 0.5


# ---------------------------------------------------------------------- validation

def _vector(values, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name}: expected one value per example (a 1-D array), "
                         f"found shape {array.shape}")
    if array.dtype == bool:
        array = array.astype(np.int64)
    # np.issubdtype(integer or floating), cheaper; numpy counts timedelta64 ("m") an integer
    if array.dtype.kind not in "iufm":
        raise ValueError(f"{name}: expected numbers, found dtype {array.dtype}")
    array = array.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size:
        raise ValueError(f"{name}: example {int(bad[0])} (0-based) has the non-finite value "
                         f"{array[bad[0]]}; {bad.size} non-finite in all")
    return array


def check_inputs(y=None, p=None, u=None, *, y_name: str = "y", p_name: str = "p",
                 u_name: str = "u") -> tuple[np.ndarray | None, ...]:
    """Validated copies of the arrays given (None stays None): (y, p, u).

    y: labels in {0, 1} (bool, integer or float 0.0/1.0), returned as int64.
    p: probabilities in [0, 1], returned as float64.
    u: any finite reals (an uncertainty or a score), returned as float64.
    All must be 1-D, finite, of one common non-zero length. ``ValueError`` names the argument
    and the first bad index otherwise.
    """
    given = [(name, values) for name, values in ((y_name, y), (p_name, p), (u_name, u))
             if values is not None]
    arrays = {name: _vector(values, name) for name, values in given}
    lengths = {name: array.size for name, array in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError("lengths differ: " + ", ".join(f"{n} has {k}" for n, k in lengths.items()))
    if any(k == 0 for k in lengths.values()):
        raise ValueError("no examples: the arrays are empty")
    out_y = out_p = out_u = None
    if y is not None:
        labels = arrays[y_name]
        bad = np.flatnonzero((labels != 0) & (labels != 1))
        if bad.size:
            raise ValueError(f"{y_name}: example {int(bad[0])} has the label {labels[bad[0]]}; "
                             f"labels must be 0 or 1 ({bad.size} bad in all)")
        out_y = labels.astype(np.int64)
    if p is not None:
        out_p = arrays[p_name]
        bad = np.flatnonzero((out_p < 0) | (out_p > 1))
        if bad.size:
            raise ValueError(f"{p_name}: example {int(bad[0])} has the probability "
                             f"{out_p[bad[0]]}, outside [0, 1] ({bad.size} bad in all)")
    if u is not None:
        out_u = arrays[u_name]
    return out_y, out_p, out_u


# ---------------------------------------------------------------------- per-example quantities

def predictive_entropy(p, eps: float = 0.0) -> np.ndarray:
    """H(p) = -p log p - (1 - p) log(1 - p), natural log, with 0 log 0 = 0.

    p is first clipped to [eps, 1 - eps]; the default eps = 0 clips nothing and is the
    benchmark's ``binary_entropy_np`` (H(0) = H(1) = 0, log(1 - p) as log1p(-p)). A positive
    eps makes a certain prediction slightly uncertain instead.
    """
    _, p, _ = check_inputs(p=p)
    q = np.clip(p, eps, 1 - eps)
    with np.errstate(divide="ignore", invalid="ignore"):
        one = np.where(q == 0, 0.0, q * np.log(q))
        zero = np.where(q == 1, 0.0, (1 - q) * np.log1p(-q))
    return -(one + zero)


def predicted_class(p: np.ndarray) -> np.ndarray:
    """1 where p > 0.5, else 0 (p = 0.5 predicts class 0)."""
    return (p > 0.5).astype(np.int64)


def correct_predictions(y, p) -> np.ndarray:
    """1.0 where the predicted class (p > 0.5) equals the label, else 0.0."""
    y, p, _ = check_inputs(y, p)
    return (predicted_class(p) == y).astype(np.float64)


def log_losses(y, p, eps: float = LOG_LOSS_EPS) -> np.ndarray:
    """Per-example -[y log q + (1 - y) log(1 - q)], q = clip(p, eps, 1 - eps).

    As scikit-learn's ``log_loss`` of 2021 (eps = 1e-15, clipping p before the [1 - q, q]
    expansion; the row renormalisation it then does divides by (1 - q) + q, which is 1 up to
    one rounding and is reproduced here). Current scikit-learn clips at the machine epsilon
    instead, so the two differ only for p within 1e-15 of 0 or 1.
    """
    y, p, _ = check_inputs(y, p)
    q = np.clip(p, eps, 1 - eps)
    total = (1 - q) + q
    chosen = np.where(y == 1, q, 1 - q) / total
    return -np.log(chosen)


# ---------------------------------------------------------------------- scalar metrics

def accuracy(y, p) -> float:
    """(1/N) sum_i 1[y_i = 1[p_i > 0.5]]."""
    return float(correct_predictions(y, p).mean())


def nll(y, p, eps: float = LOG_LOSS_EPS) -> float:
    """Mean of ``log_losses``: scikit-learn's ``log_loss`` with eps = 1e-15."""
    return float(log_losses(y, p, eps).mean())


def ece_bin_index(values: np.ndarray, bins: int = ECE_BINS) -> np.ndarray:
    """Bin of each value in [0, 1] among ``bins`` equal-width bins: tf.histogram_fixed_width_bins.

    index = floor(value * bins), clipped to [0, bins - 1] (``runtime.confidence_bins.bin_index``).
    A value on an inner edge goes to the bin above it (0.6 with 15 bins: floor(9.0) = 9, the
    bin [0.6, 2/3)); 1.0 goes to the last bin. The product is rounded in float64 before the
    floor (TF computes in the metric's float32; the two agree except for values within
    float32 rounding of an edge).
    """
    return confidence_bins.bin_index(values, bins)


def calibration_bins(y, p, bins: int = ECE_BINS) -> dict[str, np.ndarray]:
    """The ECE's bins: for each non-empty bin b, its ``index``, ``count`` n_b, mean
    ``confidence`` conf_b and ``accuracy`` acc_b (what a reliability diagram plots).

    robustness_metrics' convention on 1-D p: each p becomes the distribution [1 - p, p]; the
    predicted label is its argmax (a tie, p = 0.5, gives class 0); the confidence is its max,
    max(p, 1 - p) >= 0.5; examples are binned by confidence with ``ece_bin_index``.
    """
    y, p, _ = check_inputs(y, p)
    if bins < 1:
        raise ValueError(f"bins must be at least 1, found {bins}")
    probabilities = np.stack([1 - p, p], axis=1)
    label = probabilities.argmax(axis=1)          # first maximum: ties go to class 0
    correct = (label == y).astype(np.float64)
    confidence, accuracy, counts = confidence_bins.binned(probabilities.max(axis=1), correct, bins)
    filled = counts > 0
    return {"index": np.flatnonzero(filled), "count": counts[filled].astype(np.float64),
            "confidence": confidence[filled], "accuracy": accuracy[filled]}


def expected_calibration_error(y, p, bins: int = ECE_BINS) -> float:
    """ECE = sum_b (n_b / N) |acc_b - conf_b| over the non-empty bins b (``calibration_bins``).

    robustness_metrics' ``ExpectedCalibrationError(num_bins=15)`` on 1-D p, computed in
    float64 (the original in float32).
    """
    table = calibration_bins(y, p, bins)
    return confidence_bins.ece(table["confidence"], table["accuracy"], table["count"])


ece = expected_calibration_error


def _average_ranks(score: np.ndarray) -> np.ndarray:
    """1-based ranks of score, tied values sharing the mean of their ranks."""
    n = score.size
    order = np.argsort(score, kind="stable")
    ordered = score[order]
    # np.concatenate, not np.r_: the bootstrap ranks every resample, and np.r_ costs more
    # than the ranking on a few hundred rows
    starts_group = np.concatenate(([True], ordered[1:] != ordered[:-1]))
    group = np.cumsum(starts_group) - 1
    starts = np.flatnonzero(starts_group)
    ends = np.concatenate((starts[1:], [n]))          # exclusive
    ranks = np.empty(n)
    ranks[order] = ((starts + 1 + ends) / 2)[group]
    return ranks


def _auroc(y: np.ndarray, score: np.ndarray) -> float:
    positives = int(y.sum())
    negatives = y.size - positives
    if positives == 0 or negatives == 0:
        raise ValueError(f"AUROC is undefined with {positives} positive and {negatives} "
                         "negative examples: both classes are needed")
    rank_sum = _average_ranks(score)[y == 1].sum()
    return float((rank_sum - positives * (positives + 1) / 2) / (positives * negatives))


def auroc(y, score) -> float:
    """Area under the ROC curve: P(score+ > score-) + 1/2 P(score+ = score-).

    The Mann-Whitney statistic with average ranks, (R+ - n+(n+ + 1)/2) / (n+ n-), where R+ is
    the rank sum of the positives; equal to the trapezoid area under scikit-learn's
    ``roc_curve`` (``auc(fpr, tpr)``, ``roc_auc_score``), tied scores included.
    Raises ``ValueError`` when only one class is present (scikit-learn's roc_auc_score raises
    too; roc_curve + auc would return nan with a warning).
    """
    y, _, score = check_inputs(y, u=score, u_name="score")
    return _auroc(y, score)


def resampled_auroc(y, score, counted=None) -> Callable[[np.ndarray], np.ndarray] | None:
    """``auroc`` on many resamples of the examples in one pass, for a bootstrap.

    Returns a function from a block of draws (row indices, one draw a row) to the AUROC of
    ``y[rows][counted[rows]]`` and ``score[rows][counted[rows]]`` for each draw (every row
    when ``counted`` is None), nan where one class is missing. The floats are those ``auroc``
    gives on each resample: its positives' rank sum is a sum of half-integers, exact in
    float64 whatever the order of the additions, so counting it here in integers and halving
    gives the same number, and the rest is the same arithmetic on the same operands.
    None where ``auroc`` would reject some resamples and not others (a bad value among the
    counted examples), or where the arrays are not 1-D of one length: then only the
    per-resample evaluation reproduces what the bootstrap sees.
    """
    y, score = np.asarray(y), np.asarray(score)
    counted = np.ones(y.shape, dtype=bool) if counted is None else np.asarray(counted)
    if y.ndim != 1 or score.shape != y.shape or counted.shape != y.shape \
            or counted.dtype != bool:
        return None
    members = np.flatnonzero(counted)
    try:
        labels, _, values = check_inputs(y[members], u=score[members], u_name="score")
    except ValueError:
        return None
    # Each counted example's value as its position among the distinct values: the ranks in
    # a resample depend only on how many of its rows hold each value. -1: not counted.
    distinct, value_index = np.unique(values, return_inverse=True)
    width = distinct.size
    code = np.full(y.size, -1, dtype=np.int64)
    code[members] = value_index.reshape(-1)
    positive = np.zeros(y.size, dtype=bool)
    positive[members] = labels == 1

    def on_draws(rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows)
        draws = rows.shape[0]
        taken = code[rows]
        kept = taken >= 0
        cell = taken + width * np.arange(draws)[:, None]        # (draw, value) flattened
        size = draws * width
        counts = np.bincount(cell[kept], minlength=size).reshape(draws, width)
        hits = np.bincount(cell[kept & positive[rows]], minlength=size).reshape(draws, width)
        below = np.cumsum(counts, axis=1) - counts
        # a positive at a value ranks #below + (#equal + 1) / 2; twice that is an integer
        twice_rank_sum = (hits * (2 * below + counts + 1)).sum(axis=1)
        positives = hits.sum(axis=1)
        negatives = counts.sum(axis=1) - positives
        with np.errstate(divide="ignore", invalid="ignore"):
            area = ((twice_rank_sum / 2 - positives * (positives + 1) / 2)
                    / (positives * negatives))
        area[(positives == 0) | (negatives == 0)] = np.nan
        return area
    return on_draws


def roc_points(y, score) -> tuple[np.ndarray, np.ndarray]:
    """(false positive rates, true positive rates) of the rule "positive when score >= t",
    for every distinct t from the highest score down, starting at (0, 0): scikit-learn's
    ``roc_curve`` with ``drop_intermediate=False``. Raises like ``auroc`` with one class."""
    y, _, score = check_inputs(y, u=score, u_name="score")
    positives = int(y.sum())
    negatives = y.size - positives
    if positives == 0 or negatives == 0:
        raise ValueError(f"the ROC curve is undefined with {positives} positive and "
                         f"{negatives} negative examples")
    order = np.argsort(-score, kind="stable")
    ordered, hits = score[order], y[order]
    last_of_threshold = np.r_[ordered[1:] != ordered[:-1], True]
    true_positives = np.cumsum(hits)[last_of_threshold]
    false_positives = np.cumsum(1 - hits)[last_of_threshold]
    return (np.r_[0.0, false_positives / negatives], np.r_[0.0, true_positives / positives])


def sensitivity_at_specificity(y, score, specificity: float) -> float:
    """The highest true positive rate of a threshold whose false positive rate is at most
    1 - specificity (RETINA marks the NHS screening standard, 85% sensitivity at 80%
    specificity, on its ROC curves)."""
    fpr, tpr = roc_points(y, score)
    return float(tpr[fpr <= 1 - specificity + 1e-12].max())


def _auprc(y: np.ndarray, score: np.ndarray) -> float:
    positives = int(y.sum())
    if positives == 0:
        raise ValueError(f"AUPRC is undefined without a positive example ({y.size} examples)")
    order = np.argsort(-score, kind="stable")          # descending score
    ordered = score[order]
    last_of_threshold = np.r_[ordered[1:] != ordered[:-1], True]
    true_pos = np.cumsum(y[order])[last_of_threshold]
    predicted_pos = (np.arange(1, y.size + 1))[last_of_threshold]
    recall = np.r_[0.0, true_pos / positives]
    precision = np.r_[1.0, true_pos / predicted_pos]
    return float(np.sum(np.diff(recall) * (precision[1:] + precision[:-1]) / 2))


def auprc(y, score) -> float:
    """Trapezoid area under the precision-recall points, ``auc(recall, precision)``.

    The points are scikit-learn's ``precision_recall_curve``: one per distinct score t (from
    the highest), recall = TP(t)/P and precision = TP(t)/(TP(t) + FP(t)) counting the examples
    with score >= t, plus the point (recall 0, precision 1). Area = sum over consecutive points
    of (r_k - r_{k-1}) (p_k + p_{k-1}) / 2. This is what the benchmark reports, not average
    precision (which uses steps, not trapezoids).
    Raises ``ValueError`` without a positive example (scikit-learn >= 1.1 then sets recall to 1
    and the trapezoid gives 0.5; the 2021 versions gave nan).
    """
    y, _, score = check_inputs(y, u=score, u_name="score")
    return _auprc(y, score)


# ---------------------------------------------------------------------- referral curves

def referral_order(u) -> np.ndarray:
    """Indices by ascending uncertainty, most certain first; ties keep the input order."""
    return np.argsort(np.asarray(u, dtype=np.float64), kind="stable")


def retention_curve(values, u, fully_referred: float) -> np.ndarray:
    """Mean of a per-example quantity over the retained examples, for every referral count.

    Length N + 1: entry k (k = 0..N-1) is the mean of ``values`` over the N - k most certain
    examples (ascending u, ``referral_order``); entry N (everything referred) is
    ``fully_referred``. Malinin's Shifts retention curve without the oracle.
    """
    _, _, values = check_inputs(u=values, u_name="values")
    _, _, u = check_inputs(u=u)
    if values.size != u.size:
        raise ValueError(f"lengths differ: values has {values.size}, u has {u.size}")
    n = values.size
    sums = np.cumsum(values[referral_order(u)])        # sums[m - 1]: the m most certain
    kept = np.arange(n, 0, -1)                         # N, N-1, ..., 1
    return np.r_[sums[kept - 1] / kept, float(fully_referred)]


def accuracy_retention_curve(y, p, u) -> np.ndarray:
    """Accuracy (p > 0.5) of the N - k most certain examples at entry k; 1 at entry N."""
    y, p, u = check_inputs(y, p, u)
    return retention_curve(correct_predictions(y, p), u, fully_referred=1.0)


def nll_retention_curve(y, p, u, eps: float = LOG_LOSS_EPS) -> np.ndarray:
    """Mean log loss (``log_losses``) of the N - k most certain examples; 0 at entry N."""
    y, p, u = check_inputs(y, p, u)
    return retention_curve(log_losses(y, p, eps), u, fully_referred=0.0)


def bucket_sizes(n: int, buckets: int = AUC_BUCKETS) -> np.ndarray:
    """Examples retained at bucket b = 0..buckets-1: int((b / buckets) * n) in float64.

    This is floor(b n / buckets) computed as the benchmark does, with the float rounding of
    b / buckets: it is one less than the exact floor for some (b, n), e.g. b = 29, n = 100
    gives int(28.999999999999996) = 28.
    """
    return ((np.arange(buckets) / buckets) * n).astype(np.int64)


def auc_retention_curve(y, p, u, metric: str = "auroc", buckets: int = AUC_BUCKETS) -> np.ndarray:
    """AUROC or AUPRC of p on the retained examples, at ``buckets`` referral levels.

    Length buckets + 1, entry j = referral fraction j / buckets (entry 0: all the data). The
    benchmark builds it the other way round, r[0..buckets], then returns r reversed:
      r[0] = 1 (everything referred);
      r[b], b = 1..buckets-1, on the m = bucket_sizes(N)[b] most certain examples (stable
        ascending-u order): 1 while the retained set has a single label and every prediction
        (p > 0.5) in it is correct -- checked only until the first bucket where this fails,
        after which that test is never made again; otherwise the AUC, or 0 when the AUC is
        undefined (one class for AUROC, no example at all -- an empty bucket, N < buckets,
        also switches the test off), and AUPRC_WITHOUT_POSITIVE for an AUPRC of negatives;
      r[buckets] = AUC on all the data (the same conventions).
    So with N < buckets the first non-empty one-class buckets score 0, not 1, as in the
    benchmark. An all-positive set has AUPRC 1 (precision is 1 at every threshold).
    """
    y, p, u = check_inputs(y, p, u)
    functions = {"auroc": _auroc, "auprc": _auprc}
    if metric not in functions:
        raise ValueError(f"metric must be 'auroc' or 'auprc', found {metric!r}")
    area = functions[metric]

    def defined_or_zero(labels, scores):
        if metric == "auprc" and labels.size and not labels.any():
            return AUPRC_WITHOUT_POSITIVE
        try:
            return area(labels, scores)
        except ValueError:
            return 0.0

    order = referral_order(u)
    y, p = y[order], p[order]
    sizes = bucket_sizes(y.size, buckets)
    built = np.zeros(buckets + 1)
    built[0] = 1.0
    still_checking = True
    for b in range(1, buckets):
        labels, scores = y[:sizes[b]], p[:sizes[b]]
        if (still_checking and np.unique(labels).size == 1
                and np.array_equal(predicted_class(scores), labels)):
            built[b] = 1.0
        else:
            built[b] = defined_or_zero(labels, scores)
            still_checking = False
    built[buckets] = defined_or_zero(y, p)
    return built[::-1].copy()


def auroc_retention_curve(y, p, u, buckets: int = AUC_BUCKETS) -> np.ndarray:
    """``auc_retention_curve`` with AUROC."""
    return auc_retention_curve(y, p, u, "auroc", buckets)


def auprc_retention_curve(y, p, u, buckets: int = AUC_BUCKETS) -> np.ndarray:
    """``auc_retention_curve`` with AUPRC."""
    return auc_retention_curve(y, p, u, "auprc", buckets)


def area_under_referral_curve(curve) -> float:
    """The benchmark's "retention AUC": the plain mean of the curve's entries.

    A uniform grid over the referral fraction, both ends included (the "everything referred"
    entry too), no trapezoid weights.
    """
    curve = np.asarray(curve, dtype=np.float64)
    if curve.ndim != 1 or curve.size == 0:
        raise ValueError(f"expected a non-empty 1-D curve, found shape {curve.shape}")
    return float(curve.mean())


def retention_scores(y, p, u) -> dict[str, float]:
    """The four areas under the referral curves, under the benchmark's key names."""
    y, p, u = check_inputs(y, p, u)
    return {
        "retention_accuracy_auc": area_under_referral_curve(accuracy_retention_curve(y, p, u)),
        "retention_nll_auc": area_under_referral_curve(nll_retention_curve(y, p, u)),
        "retention_auroc_auc": area_under_referral_curve(auroc_retention_curve(y, p, u)),
        "retention_auprc_auc": area_under_referral_curve(auprc_retention_curve(y, p, u)),
    }


# ---------------------------------------------------------------------- joint (ID + OOD) sets

def balanced_indices(is_ood, seed: int = 0) -> np.ndarray:
    """Indices that weigh the shifted (OOD) examples as much as the in-domain (ID) ones.

    With n_id ID and n_ood OOD examples: all ID indices (ascending), then the OOD indices
    (ascending) repeated r = floor(n_id / n_ood) times, then n_id - r n_ood OOD indices drawn
    without replacement by ``numpy.random.default_rng(seed).choice`` -- #OOD = #ID in the
    result, 2 n_id indices in all (with n_ood > n_id, r = 0 and the OOD set is subsampled).
    The benchmark drew the remainder from numpy's global, unseeded generator.
    """
    flags = check_inputs(y=is_ood, y_name="is_ood")[0]
    in_domain = np.flatnonzero(flags == 0)
    shifted = np.flatnonzero(flags == 1)
    if in_domain.size == 0 or shifted.size == 0:
        raise ValueError(f"is_ood: a joint set needs both in-domain and shifted examples, "
                         f"found {in_domain.size} and {shifted.size}")
    repeats = in_domain.size // shifted.size
    remainder = in_domain.size - repeats * shifted.size
    extra = np.random.default_rng(seed).choice(shifted, size=remainder, replace=False)
    return np.concatenate([in_domain, np.tile(shifted, repeats), extra]).astype(np.int64)


def balanced_retention_curves(y, p, u, is_ood, seed: int = 0) -> dict[str, np.ndarray]:
    """Referral curves on a joint set with the OOD part reweighted (``balanced_indices``).

    Accuracy and NLL curves are computed on the rebalanced examples (length 2 n_id + 1); the
    AUROC and AUPRC curves, as in the benchmark, on the joint set as given (not rebalanced).
    """
    y, p, u = check_inputs(y, p, u)
    flags = check_inputs(y=is_ood, y_name="is_ood")[0]
    if flags.size != y.size:
        raise ValueError(f"lengths differ: is_ood has {flags.size}, y has {y.size}")
    chosen = balanced_indices(flags, seed)
    return {
        "accuracy": accuracy_retention_curve(y[chosen], p[chosen], u[chosen]),
        "nll": nll_retention_curve(y[chosen], p[chosen], u[chosen]),
        "auroc": auroc_retention_curve(y, p, u),
        "auprc": auprc_retention_curve(y, p, u),
    }


def balanced_retention_scores(y, p, u, is_ood, seed: int = 0) -> dict[str, float]:
    """Means of ``balanced_retention_curves`` under the benchmark's key names."""
    curves = balanced_retention_curves(y, p, u, is_ood, seed)
    return {f"balanced_retention_{name}_auc": area_under_referral_curve(curve)
            for name, curve in curves.items()}


def ood_detection_auroc(is_ood, u) -> float:
    """AUROC of the uncertainty as a score for "shifted" (is_ood = 1)."""
    flags, _, u = check_inputs(y=is_ood, u=u, y_name="is_ood")
    return _auroc(flags, u)


def ood_detection_auprc(is_ood, u) -> float:
    """AUPRC (``auprc``) of the uncertainty as a score for "shifted" (is_ood = 1)."""
    flags, _, u = check_inputs(y=is_ood, u=u, y_name="is_ood")
    return _auprc(flags, u)


def scalar_metrics(y, p) -> dict[str, float]:
    """The per-split scalars under the benchmark's key names (AUROC/AUPRC may raise)."""
    y, p, _ = check_inputs(y, p)
    return {
        "negative_log_likelihood": nll(y, p),
        "accuracy": accuracy(y, p),
        "auroc": _auroc(y, p),
        "auprc": _auprc(y, p),
        "ece": expected_calibration_error(y, p),
    }

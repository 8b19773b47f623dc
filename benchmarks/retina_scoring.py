"""Retina scoring at RETINA's sizes, against the benchmark's scikit-learn way, same process.

RETINA's severity-shift test sets hold 40,727 in-domain and 3,524 shifted images (Band et al.
2021, §2.2). On a synthetic task of that size (labels, probabilities that track them, an
uncertainty that tracks the errors), this times:

  (a) our metrics (kinds/retina/runtime/metrics.py, numpy only) on the figures (b) computes;
      and, for scale, the scorer's whole work on a task (every leaderboard figure and the
      per-set table of the detailed results), and the standard errors of the leaderboard
      figures (``runtime/uncertainty.py``: 200 stratified resamples of the patients, the
      figures without per-row terms recomputed on each), as a multiple of those figures' time;
  (b) those figures computed as uncertainty-baselines computes them: scikit-learn's
      roc_curve + auc and precision_recall_curve + auc on every set and on each of the 100
      buckets of the AUROC and AUPRC referral curves, log_loss for the NLL.

and checks that both give the same figures (to 1e-9). Prints the medians and (a) / (b).
Target: (a) / (b) <= 1. Usage: .venv/bin/python benchmarks/retina_scoring.py [--repeat N]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kinds.retina.runtime import metrics, scoring, sets  # noqa: E402
from runtime import uncertainty  # noqa: E402

IN_DOMAIN, SHIFTED = 40_727, 3_524
BUCKETS = metrics.AUC_BUCKETS


def synthetic_task(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    n = IN_DOMAIN + SHIFTED
    shifted = rng.permutation(np.r_[np.zeros(IN_DOMAIN, bool), np.ones(SHIFTED, bool)])
    y = (rng.random(n) < np.where(shifted, 1.0, 0.3)).astype(np.int64)
    p = np.clip(0.5 + (y - 0.5) * rng.uniform(-0.3, 1.0, n), 0, 1).round(3)   # ties, as real
    u = (metrics.predictive_entropy(p) + 0.2 * rng.random(n)).round(3)
    return {"y": y, "p": p, "u": u, "shifted": shifted, "grade": y * 2}


def ours(task: dict) -> dict:
    values = {t.name: t.evaluate(task) for t in scoring.TASK_TYPES[scoring.DIAGNOSIS].score_types}
    table = scoring.evaluation_set_table(task)
    return {"leaderboard": values, "table": table}


def ours_standard_errors(task: dict) -> dict:
    return uncertainty.row_errors(
        scoring.TASK_TYPES[scoring.DIAGNOSIS].score_types, task, uncertainty.take_rows(task),
        task["y"].size, task["shifted"])


def leaderboard_figures(task: dict) -> dict:
    return {t.name: t.evaluate(task) for t in scoring.TASK_TYPES[scoring.DIAGNOSIS].score_types}


def ours_subset(task: dict) -> dict:
    """The figures (b) computes, with our functions: the like-for-like comparison."""
    out = {}
    for name in sets.SETS:
        keep = sets.set_mask(task, name)
        y, p, u = task["y"][keep], task["p"][keep], task["u"][keep]
        out[name] = {
            "AUROC": metrics.auroc(y, p) if np.unique(y).size == 2 else None,
            "AUPRC": metrics.auprc(y, p), "NLL": metrics.nll(y, p),
            "referral AUROC area": metrics.area_under_referral_curve(
                metrics.auroc_retention_curve(y, p, u)),
            "referral AUPRC area": metrics.area_under_referral_curve(
                metrics.auprc_retention_curve(y, p, u))}
    out["joint"]["OOD detection AUROC"] = metrics.ood_detection_auroc(
        task["shifted"].astype(int), task["u"])
    return out


def _sklearn_auc_curve(y, p, u, area) -> np.ndarray:
    """uncertainty-baselines' AUC referral curve, with a scikit-learn area per bucket."""
    order = np.argsort(u, kind="stable")
    y, p = y[order], p[order]
    sizes = metrics.bucket_sizes(y.size, BUCKETS)
    built, checking = np.zeros(BUCKETS + 1), True
    built[0] = 1.0
    for b in range(1, BUCKETS):
        labels, scores = y[:sizes[b]], p[:sizes[b]]
        if checking and np.unique(labels).size == 1 and np.array_equal(
                (scores > 0.5).astype(int), labels):
            built[b] = 1.0
            continue
        checking = False
        built[b] = area(labels, scores)
    built[BUCKETS] = area(y, p)
    return built[::-1]


def sklearn_way(task: dict) -> dict:
    from sklearn.metrics import auc, log_loss, precision_recall_curve, roc_curve

    def auroc(y, p):
        if np.unique(y).size < 2:
            return 0.0
        fpr, tpr, _ = roc_curve(y, p)
        return auc(fpr, tpr)

    def auprc(y, p):
        if y.sum() == 0:
            return 0.0
        precision, recall, _ = precision_recall_curve(y, p)
        return auc(recall, precision)

    out = {}
    for name in sets.SETS:
        keep = sets.set_mask(task, name)
        y, p, u = task["y"][keep], task["p"][keep], task["u"][keep]
        out[name] = {
            "AUROC": auroc(y, p) if np.unique(y).size == 2 else None,
            "AUPRC": auprc(y, p),
            "NLL": log_loss(y, np.c_[1 - p, p], labels=[0, 1]),
            "referral AUROC area": float(_sklearn_auc_curve(y, p, u, auroc).mean()),
            "referral AUPRC area": float(_sklearn_auc_curve(y, p, u, auprc).mean()),
        }
        fpr, tpr, _ = roc_curve(y, p) if np.unique(y).size == 2 else ([0], [0], None)
        out[name]["roc points"] = len(fpr)
    flags = task["shifted"].astype(int)
    fpr, tpr, _ = roc_curve(flags, task["u"])
    out["joint"]["OOD detection AUROC"] = auc(fpr, tpr)
    return out


def agree(ours_: dict, theirs: dict) -> list[str]:
    problems = []
    for name, row in theirs.items():
        for figure, value in row.items():
            if figure == "roc points" or value is None:
                continue
            mine = ours_["table"][name][figure]
            if mine is None or abs(mine - value) > 1e-9:
                problems.append(f"{name} {figure}: ours {mine}, scikit-learn's {value}")
    return problems


def timed(function, task, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function(task)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    task = synthetic_task()
    problems = agree(ours(task), sklearn_way(task))
    for problem in problems:
        print("DISAGREE", problem)
    problems += agree({"table": ours_subset(task)}, sklearn_way(task))
    whole, a = timed(ours, task, args.repeat), timed(ours_subset, task, args.repeat)
    b = timed(sklearn_way, task, args.repeat)
    print(f"task: {IN_DOMAIN:,} in-domain + {SHIFTED:,} shifted rows")
    print(f"ours, every leaderboard figure and the per-set table: {whole:.3f} s")
    print(f"(a) ours, the figures (b) computes: {a:.3f} s")
    print(f"(b) the benchmark's scikit-learn way: {b:.3f} s")
    print(f"(a) / (b) = {a / b:.2f} (target <= 1); figures agree: {not problems}")
    figures = timed(leaderboard_figures, task, args.repeat)
    errors = timed(ours_standard_errors, task, 1)
    print(f"standard errors of the leaderboard figures: {errors:.3f} s = "
          f"{errors / figures:.0f} x the figures themselves ({figures:.3f} s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

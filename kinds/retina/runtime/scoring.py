"""The Retina kind's side of the scoring seam: a task is a test set pooling in-domain and
shifted patients; the submission gives each a probability of referable disease and an
uncertainty, scored on the in-domain rows, the shifted rows and both (RETINA's evaluation
sets), above all on whether referring the most uncertain cases helps."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from runtime import uncertainty
from runtime.formats import MATRIX_EXTENSIONS, FormatError, read_matrix
from runtime.formats.json_files import config_field
from runtime.formats.matrix_files import max_matrix_bytes
from runtime.scoring import (MetricResult, ReferenceDataError, ScoreType, SubmissionError,
                           TaskConfig, TaskResult, TaskType, submission_file)

from . import metrics, predictions, tables
from .report import report_section  # noqa: F401  (the report half of this seam)
from .sets import BALANCE_SEED, NHS_SPECIFICITY, SETS, set_mask

REPORT_INTRO = ("Each patient's predicted probability of referable disease and its uncertainty "
                "compared with the hidden labels, on the in-domain patients, the shifted "
                "patients and both together; one section per task.")
STANDARD_ERROR = ("a bootstrap over the patients, stratified by evaluation set (in-domain and "
                  "shifted patients each resampled to their own number; "
                  f"{uncertainty.DRAWN}); {uncertainty.NONE_AT_BOUND}")
DIAGNOSIS = "diagnosis"


def _in_part(shifted: np.ndarray, which: bool) -> np.ndarray:
    return shifted == which


def _part(values: np.ndarray, shifted: np.ndarray, which: bool) -> np.ndarray:
    return values[_in_part(shifted, which)]


def in_domain_auroc(y, p, shifted) -> float:
    """AUROC of p on the in-domain rows: P(p+ > p-) + 1/2 P(p+ = p-), exact (no binning)."""
    return metrics.auroc(_part(y, shifted, False), _part(p, shifted, False))


def in_domain_auroc_on_resamples(y, p, shifted):
    """``in_domain_auroc`` on blocks of resampled rows in one pass (``metrics.resampled_auroc``:
    the same floats), for the bootstrap of its standard error."""
    return metrics.resampled_auroc(y, p, counted=_in_part(shifted, False))


def balanced_referral_accuracy(y, p, u, shifted) -> float:
    """Area under the accuracy referral curve of the balanced joint set: every in-domain row,
    and the shifted rows repeated (the remainder a seeded draw) to as many; entry k of the
    curve is the accuracy (p > 0.5) of the N - k rows of lowest u (ties: row order), 1 when
    all are referred; the area is the mean of the N + 1 entries."""
    chosen = metrics.balanced_indices(shifted.astype(np.int64), BALANCE_SEED)
    return metrics.area_under_referral_curve(
        metrics.accuracy_retention_curve(y[chosen], p[chosen], u[chosen]))


def _referral_accuracy(y, p, u, shifted, which: bool) -> float:
    return metrics.area_under_referral_curve(metrics.accuracy_retention_curve(
        _part(y, shifted, which), _part(p, shifted, which), _part(u, shifted, which)))


def in_domain_referral_accuracy(y, p, u, shifted) -> float:
    """Area under the accuracy referral curve of the in-domain rows (mean of its N + 1
    entries: accuracy of the N - k most certain rows, 1 when all are referred)."""
    return _referral_accuracy(y, p, u, shifted, False)


def shifted_referral_accuracy(y, p, u, shifted) -> float:
    """Area under the accuracy referral curve of the shifted rows, as for in-domain rows."""
    return _referral_accuracy(y, p, u, shifted, True)


def shifted_accuracy(y, p, shifted) -> float:
    """(1/N) sum_i 1[y_i = 1[p_i > 0.5]] over the shifted rows."""
    return metrics.accuracy(_part(y, shifted, True), _part(p, shifted, True))


def in_domain_ece(y, p, shifted) -> float:
    """sum_b (n_b / N) |acc_b - conf_b| on the in-domain rows, 15 equal-width bins of the
    confidence max(p, 1 - p)."""
    return metrics.expected_calibration_error(_part(y, shifted, False), _part(p, shifted, False))


def shifted_ece(y, p, shifted) -> float:
    """The ECE (15 bins) on the shifted rows."""
    return metrics.expected_calibration_error(_part(y, shifted, True), _part(p, shifted, True))


def ood_auroc(u, shifted) -> float:
    """AUROC of u as a score for "shifted": P(u_shifted > u_in-domain) + 1/2 P(equal)."""
    return metrics.ood_detection_auroc(shifted.astype(np.int64), u)


def ood_auroc_on_resamples(u, shifted):
    """``ood_auroc`` on blocks of resampled rows in one pass (``metrics.resampled_auroc``)."""
    return metrics.resampled_auroc(shifted.astype(np.int64), u)


def _score(name, label, description, higher, function, inputs,
           on_resamples=None) -> ScoreType:
    return ScoreType(name, label, description, higher, 0.0, 1.0, 4, function, inputs,
                     on_resamples=on_resamples)


Y_P_S, Y_P_U_S = ("y", "p", "shifted"), ("y", "p", "u", "shifted")
AUROC_IN = _score("auroc_in", "AUROC in", "AUROC of the probability on the in-domain "
                  "patients (RETINA's first selection criterion)", True, in_domain_auroc, Y_P_S,
                  in_domain_auroc_on_resamples)
REFERRAL_JOINT = _score("referral_joint", "referral joint", "Area under the accuracy "
                        "referral curve of the balanced joint set (RETINA's second selection "
                        "criterion)", True, balanced_referral_accuracy, Y_P_U_S)
REFERRAL_IN = _score("referral_in", "referral in", "Area under the accuracy "
                     "referral curve of the in-domain patients", True,
                     in_domain_referral_accuracy, Y_P_U_S)
REFERRAL_SHIFTED = _score("referral_shifted", "referral shifted", "Area under the accuracy "
                          "referral curve of the shifted patients", True,
                          shifted_referral_accuracy, Y_P_U_S)
ACCURACY_SHIFTED = _score("accuracy_shifted", "accuracy shifted", "Accuracy (p > 0.5) on the "
                          "shifted patients", True, shifted_accuracy, Y_P_S)
ECE_IN = _score("ece_in", "ECE in", "Expected calibration error, 15 bins, in-domain",
                False, in_domain_ece, Y_P_S)
ECE_SHIFTED = _score("ece_shifted", "ECE shifted", "Expected calibration error, 15 bins, on the "
                     "shifted patients", False, shifted_ece, Y_P_S)
OOD_AUROC = _score("ood_auroc", "OOD AUROC", "AUROC of the uncertainty at telling shifted from "
                   "in-domain patients", True, ood_auroc, ("u", "shifted"),
                   ood_auroc_on_resamples)
TASK_TYPES = {DIAGNOSIS: TaskType(DIAGNOSIS, (AUROC_IN, REFERRAL_JOINT, REFERRAL_IN,
                                              REFERRAL_SHIFTED, ACCURACY_SHIFTED, ECE_IN,
                                              ECE_SHIFTED, OOD_AUROC), AUROC_IN)}


@dataclass(frozen=True)
class Settings:
    n_test: int
    submission_stem: str           # res/<stem>.{csv,txt,npy}
    reference: str                 # in ref/: the task's test_reference.csv
    has_std: bool = False


def parse_settings(task_type: str, raw: dict, where: str) -> Settings:
    return Settings(*(config_field(raw, key, kind, where, ValueError) for key, kind in (
        ("n_test", int), ("submission_stem", str), ("reference", str))))


def submission_files(task: TaskConfig) -> list[str]:
    return [task.settings.submission_stem + extension for extension in MATRIX_EXTENSIONS]


def read_reference(task: TaskConfig, ref: Path) -> dict[str, np.ndarray]:
    try:
        table = tables.reference(ref / task.settings.reference)
    except FormatError as error:
        raise ReferenceDataError(f"reference data of task {task.name}: {error}") from None
    if table["label"].size != task.settings.n_test:
        raise ReferenceDataError(f"reference data of task {task.name}: {table['label'].size} "
                                 f"rows, the config says {task.settings.n_test}")
    return table


def read_submission(task: TaskConfig, res: Path, reference: dict) -> np.ndarray:
    path, n_test = submission_file(task, res, submission_files(task)), task.settings.n_test
    try:
        if path.stat().st_size > max_matrix_bytes(n_test, 2, path.suffix.lower()):
            raise FormatError(f"{path.name}: {path.stat().st_size} bytes, far more than "
                              f"{n_test} rows of two numbers")
        return predictions.check(read_matrix(path, n_rows=n_test), n_test, path.name)
    except FormatError as error:
        raise SubmissionError(str(error).replace(str(res) + "/", "")) from None


def evaluate(task: TaskConfig, reference: dict, submitted: np.ndarray, run) -> TaskResult:
    seconds = run.train_seconds if run else None
    p = submitted[:, 0]
    notes = ()
    if submitted.shape[1] == 2:
        u = submitted[:, 1]
    else:
        u = metrics.predictive_entropy(p)
        notes = ("No uncertainty column: the predictive entropy of the probability is used, as "
                 "the benchmark does.",)
    arrays = {"y": reference["label"], "p": p, "u": u, "shifted": reference["shifted"]}
    try:
        errors = _standard_errors(task, arrays)
        values = {t.name: MetricResult(t.name, t.clip(t.evaluate(arrays)), se=errors[t.name])
                  for t in task.score_types}
    except ValueError as error:         # a set without both classes: the organizer's data
        raise ReferenceDataError(f"reference data of task {task.name}: {error}") from None
    figures = {**arrays, "grade": reference["grade"]}
    figures["table"] = evaluation_set_table(figures)
    return TaskResult(task, values, notes=notes, train_seconds=seconds, figures=figures,
                      extras=defined_figures(figures["table"]))


def _standard_errors(task: TaskConfig, arrays: dict) -> dict[str, float | None]:
    return uncertainty.row_errors(
        task.score_types, arrays, uncertainty.take_rows(arrays), arrays["y"].size,
        arrays["shifted"], clip=lambda score_type, value: score_type.clip(value))


# ---- the per-set table: every figure the benchmark reports -------------------------------

SET_METRICS = {
    "AUROC": lambda y, p, u: metrics.auroc(y, p),
    "AUPRC": lambda y, p, u: metrics.auprc(y, p),
    "accuracy": lambda y, p, u: metrics.accuracy(y, p),
    "NLL": lambda y, p, u: metrics.nll(y, p),
    "ECE": lambda y, p, u: metrics.expected_calibration_error(y, p),
    f"sensitivity at {NHS_SPECIFICITY:.0%} specificity": lambda y, p, u:
        metrics.sensitivity_at_specificity(y, p, NHS_SPECIFICITY),
    "referral accuracy area": lambda y, p, u: metrics.area_under_referral_curve(
        metrics.accuracy_retention_curve(y, p, u)),
    "referral NLL area": lambda y, p, u: metrics.area_under_referral_curve(
        metrics.nll_retention_curve(y, p, u)),
    "referral AUROC area": lambda y, p, u: metrics.area_under_referral_curve(
        metrics.auroc_retention_curve(y, p, u)),
    "referral AUPRC area": lambda y, p, u: metrics.area_under_referral_curve(
        metrics.auprc_retention_curve(y, p, u)),
}


def evaluation_set_table(figures: dict) -> dict[str, dict[str, float | None]]:
    """{set: {metric: value, or None where undefined (e.g. AUROC with one class)}}."""
    table = {}
    for name in SETS:
        keep = set_mask(figures, name)
        y, p, u = figures["y"][keep], figures["p"][keep], figures["u"][keep]
        table[name] = {}
        for metric, function in SET_METRICS.items():
            try:
                table[name][metric] = float(function(y, p, u))
            except ValueError:
                table[name][metric] = None
    flags = figures["shifted"].astype(np.int64)
    balanced = metrics.balanced_retention_scores(figures["y"], figures["p"], figures["u"], flags,
                                                 BALANCE_SEED)
    table["joint"].update({
        "balanced referral accuracy area": balanced["balanced_retention_accuracy_auc"],
        "balanced referral NLL area": balanced["balanced_retention_nll_auc"],
        "OOD detection AUROC": metrics.ood_detection_auroc(flags, figures["u"]),
        "OOD detection AUPRC": metrics.ood_detection_auprc(flags, figures["u"])})
    return table


def defined_figures(table: dict) -> dict[str, float]:
    """The defined figures of an ``evaluation_set_table``, flat, for detailed_results.json."""
    return {f"{name} {metric}": value for name, row in table.items()
            for metric, value in row.items() if value is not None}


def task_summary(result: TaskResult) -> str:
    figures = result.figures
    if figures is None:
        return f"{result.task.settings.n_test} patients"
    shifted = int(figures["shifted"].sum())
    return (f"{figures['shifted'].size - shifted} in-domain and {shifted} shifted patients, "
            f"{int(figures['y'].sum())} referable")

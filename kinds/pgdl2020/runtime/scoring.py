"""The PGDL kind's side of the scoring seam: a task is a zoo of trained networks; the
submission gives each network one number (its complexity), and the ordering of those numbers
is scored against the ordering of the networks' generalisation gaps."""
from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape
from pathlib import Path

import numpy as np

from runtime.formats import FormatError, TaskRun
from runtime.formats.json_files import config_field
from runtime.formats.matrix_files import max_matrix_bytes
from runtime import failures, svg_charts, uncertainty
from runtime.report import DASH, cell, grid, metrics_table, number
from runtime.scoring import (MetricResult, ReferenceDataError, ScoreType, SubmissionError,
                           TaskConfig, TaskResult, TaskType, penalised, submission_file)

from .formats import check_measures, read_model_configs, read_predict
from .metrics import (cmi_of_draws, conditional_mutual_information, granulated_kendall,
                      granulated_kendall_of_draws, kendall_tau, kendall_tau_of_draws)
from .retraining import retrained_zoos

REPORT_INTRO = ("The ordering of the submitted complexities compared with the ordering of "
                "the networks' generalisation gaps (train accuracy minus test accuracy), one "
                "section per model zoo.")
STANDARD_ERROR = ("the zoo trained again: each network's gap and measure (as normal scores "
                  "of their ranks) split into the hyperparameters' main effects and a "
                  "residual, the residual pairs resampled over the networks, the scores "
                  "recomputed on each such zoo; the root mean square of their distance from "
                  "the zoo's own score, so a bias of the score (CMI is a minimum) counts too "
                  f"({uncertainty.DRAWN})")
ZOO = "zoo"
GRANULATED_PREFIX = "granulated tau: "
PREDICT_SUFFIX = ".predict"
ARRAY_SUFFIX = ".npy"


def _cmi(measure, gaps, hparams, value_order) -> float:
    """PGDL's task score, its cells summed in PGDL's order of the possible values."""
    return conditional_mutual_information(gaps, measure, hparams, value_order=value_order)[0]


def _granulated(measure, gaps, hparams) -> float:
    return float(granulated_kendall(measure, gaps, hparams)["overall"])


CMI = ScoreType("cmi", "CMI", "Conditional mutual information between the ordering of the "
                "measure and of the generalisation gaps, minimum over pairs of hyperparameters "
                "(PGDL's task score)", True, 0.0, 1.0, 4, _cmi,
                ("measure", "gaps", "hparams", "value_order"))
KENDALL = ScoreType("kendall_tau", "Kendall tau", "Kendall's rank correlation between the "
                    "measure and the generalisation gaps", True, -1.0, 1.0, 4, kendall_tau,
                    ("measure", "gaps"))
GRANULATED = ScoreType("granulated_kendall", "granulated tau", "Mean over hyperparameters of "
                       "Kendall's tau among networks that differ in that hyperparameter only "
                       "(Jiang et al. 2019)", True, -1.0, 1.0, 4, _granulated,
                       ("measure", "gaps", "hparams"))
TASK_TYPES = {ZOO: TaskType(ZOO, (CMI, KENDALL, GRANULATED), CMI)}


@dataclass(frozen=True)
class Settings:
    num_models: int
    model_configs: str             # in ref/: PGDL's model_configs.json of this zoo
    submission_stem: str           # res/<stem>.npy (ingestion) or res/<stem>.predict (uploads)
    has_std: bool = False


def parse_settings(task_type: str, raw: dict, where: str) -> Settings:
    return Settings(*(config_field(raw, key, kind, where, ValueError) for key, kind in (
        ("num_models", int), ("model_configs", str), ("submission_stem", str))))


def submission_files(task: TaskConfig) -> list[str]:
    return [task.settings.submission_stem + suffix for suffix in (ARRAY_SUFFIX, PREDICT_SUFFIX)]


def read_reference(task: TaskConfig, ref: Path):
    try:
        zoo = read_model_configs(ref / task.settings.model_configs)
    except FormatError as error:
        raise ReferenceDataError(f"reference data of task {task.name}: {error}") from None
    if len(zoo.ids) != task.settings.num_models:
        raise ReferenceDataError(f"reference data of task {task.name}: {len(zoo.ids)} models in "
                                 f"{task.settings.model_configs}, the config says "
                                 f"{task.settings.num_models}")
    return zoo


def read_submission(task: TaskConfig, res: Path, zoo) -> np.ndarray:
    """One measure per network of the zoo, in the zoo's order (NaN: not measured)."""
    ids = zoo.ids
    path = submission_file(task, res, submission_files(task))
    try:
        if path.suffix == PREDICT_SUFFIX:
            return read_predict(path, ids)
        _check_array_size(path, len(ids))
        return check_measures(np.load(path, allow_pickle=False), ids, path.name)[0]
    except FormatError as error:          # it names the file already, by its path under res/
        raise SubmissionError(str(error).replace(str(res) + "/", "")) from None
    except (ValueError, OSError) as error:
        raise SubmissionError(f"{path.name}: {error}") from None


def _check_array_size(path: Path, models: int) -> None:
    """An .npy far larger than one number per model is refused before np.load reads it."""
    size, bound = path.stat().st_size, max_matrix_bytes(models, 1, ARRAY_SUFFIX)
    if size > bound:
        raise FormatError(f"{path}: {size:,} bytes, far more than {models} numbers "
                          f"can take (at most {bound:,} bytes); refused without reading it")


UNIT_STATES = {"timed_out": "killed at the {seconds:g} s limit", "failed": "process died",
               "not_reached": "not reached"}


def _shown(names) -> str:
    return ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")


def _unscored(values: np.ndarray, ids, run: TaskRun | None) -> str | None:
    """PGDL scored a task 0 when any model was not measured; we penalise that task alone.
    The ingestion's record says why networks went unmeasured, where it knows."""
    missing = [model for model, value in zip(ids, values) if not np.isfinite(value)]
    if not missing:
        return None
    units = (run.units if run else None) or {}
    why = [f"{UNIT_STATES[state].format(seconds=units.get('seconds', 0))}: "
           f"{_shown(units[state])}" for state in UNIT_STATES if units.get(state)]
    return (f"{len(missing)} of {len(ids)} networks have no finite measure ({_shown(missing)})"
            + (f" ({'; '.join(why)})" if why else "")
            + ": a task is scored only when every network of its zoo is")


def _unscored_failure(run: TaskRun | None) -> str:
    """Why networks went without a value, by the record's units: the zoo's time ran out
    before some, or some process died, or else every call returned no usable number."""
    units = (run.units if run else None) or {}
    if units.get("timed_out") or units.get("not_reached"):
        return failures.TIMED_OUT
    return failures.RAISED if units.get("failed") else failures.INVALID_OUTPUT


def evaluate(task: TaskConfig, zoo, measure: np.ndarray, run: TaskRun | None) -> TaskResult:
    seconds = run.train_seconds if run else None
    problem = _unscored(measure, zoo.ids, run)
    if problem:
        return penalised(task, problem, seconds, failure=_unscored_failure(run))
    arrays = {"measure": measure, "gaps": zoo.gaps, "hparams": zoo.hparams,
              "value_order": zoo.possible_values}
    worst_pair = conditional_mutual_information(zoo.gaps, measure, zoo.hparams,
                                                value_order=zoo.possible_values)[1]
    per_hparam = granulated_kendall(measure, zoo.gaps, zoo.hparams)
    # clipped: PGDL adds 1e-12 inside the entropy only, so a perfect measure gets 1 + 3e-12
    values = {t.name: t.clip(t.evaluate(arrays)) for t in task.score_types}
    errors = retraining_errors(task.score_types, values, measure, zoo.gaps, zoo.hparams,
                               zoo.possible_values)
    metrics = {t.name: MetricResult(t.name, values[t.name], se=errors[t.name])
               for t in task.score_types}
    metrics[CMI.name].details["worst_pair"] = list(worst_pair) if worst_pair else None
    extras = {f"{GRANULATED_PREFIX}{name}": float(value) for name, value in per_hparam.items()
              if name != "overall"}
    # only the submission's own numbers reach the report: no gap, no hyperparameter
    return TaskResult(task, metrics, train_seconds=seconds, extras=extras,
                      figures={"measure": measure, "worst_pair": worst_pair})


# Each score type on many zoos at once (rows of gaps and measure): the retrained zoos.
OF_DRAWS = {
    CMI.name: lambda gaps, measure, hparams, order: cmi_of_draws(gaps, measure, hparams,
                                                                 value_order=order),
    KENDALL.name: lambda gaps, measure, hparams, order: kendall_tau_of_draws(measure, gaps),
    GRANULATED.name: lambda gaps, measure, hparams, order: granulated_kendall_of_draws(
        measure, gaps, hparams),
}


def retraining_errors(score_types, values: dict, measure, gaps, hparams, value_order,
                      draws: int = uncertainty.DRAWS, seed: int = uncertainty.SEED
                      ) -> dict[str, float | None]:
    """Each score type's standard error over retrainings of the zoo (``retraining.py``): the
    root mean square distance of its clipped value on each retrained zoo from ``values``
    (the zoo's own); None where the grid leaves no noise to resample, or where the error is
    0 at an end of the metric's range (``uncertainty.unless_collapsed``)."""
    zoos = retrained_zoos(gaps, measure, hparams, draws, seed)
    if zoos is None:
        return {t.name: None for t in score_types}
    errors = {}
    for t in score_types:
        drawn = np.clip(OF_DRAWS[t.name](*zoos, hparams, value_order), t.minimum, t.maximum)
        error = uncertainty.root_mean_square_deviation(drawn, values[t.name])
        errors[t.name] = uncertainty.unless_collapsed(error, values[t.name], t.minimum,
                                                      t.maximum)
    return errors


def task_summary(result: TaskResult) -> str:
    return f"a zoo of {result.task.settings.num_models} trained networks"


# What the report draws, and why nothing more (docs/sandbox.md): every figure below is either
# the submission's own numbers or one number over the whole zoo. A point per network against
# its gap would give each hidden gap away (and their order alone scores CMI 1.0); a summary of
# the measure per hyperparameter value would too, differently: the hyperparameters of each
# network are hidden in a code phase, and a mean of chosen values (2^i for network i) over a
# group tells exactly which networks are in it.
MEASURE_BINS = 20
NOT_SHOWN = ("Not shown, so that the page gives away nothing of the hidden zoo network by "
             "network: the generalisation gap or the hyperparameters of any one network, or "
             "any summary of them over a group of networks your measure could choose. The "
             "figures above are your measure itself, or one number over the whole zoo at the "
             "leaderboard's 4 decimals.")


def _distinct(measure: np.ndarray) -> str:
    count = len(np.unique(measure))
    return (f"{count} distinct values among {measure.size} networks"
            + ("" if count == measure.size else
               "; networks with equal measures count as neither concordant nor discordant"))


def _charts(result: TaskResult) -> list[str]:
    """The submission's own measure over the zoo, and the granulated tau per hyperparameter
    (the table's single numbers, drawn)."""
    measure = result.figures["measure"]
    charts = [svg_charts.overlaid_histograms([("submission", measure)], MEASURE_BINS,
                                             "measure", "Your measure over the zoo")]
    names = [name.removeprefix(GRANULATED_PREFIX) for name in result.extras
             if name.startswith(GRANULATED_PREFIX)]
    if names:
        values = np.array([result.extras[GRANULATED_PREFIX + name] for name in names])
        charts.append(svg_charts.bar_chart(names, [("submission", values)], "granulated tau",
                                           "Granulated tau per hyperparameter",
                                           y_range=(-1.0, 1.0)))
    return charts


def report_section(result: TaskResult) -> str:
    extras = [f'<tr class="extra">{cell(escape(name))}{cell(number(value, 4), True)}'
              f'{cell(DASH, True)}</tr>' for name, value in result.extras.items()]
    parts = [metrics_table(result, extras)]
    figures = result.figures
    if figures and figures.get("worst_pair"):
        first, second = figures["worst_pair"]
        parts.append(f'<p class="muted">The minimum of the conditional mutual information is '
                     f"reached conditioning on {escape(first)} and {escape(second)}.</p>")
    if figures and not result.penalised:
        parts.append(f'<p class="muted">Your measure: {_distinct(figures["measure"])}.</p>')
        parts.append(grid(_charts(result)))
        parts.append(f'<p class="muted">{escape(NOT_SHOWN)}</p>')
    return "\n".join(parts)


def predict_json(ids, values) -> str:
    """A PGDL .predict file's text (sorted keys), for samples and tests."""
    return json.dumps({model: float(value) for model, value in zip(ids, values)},
                      indent=4, sort_keys=True)

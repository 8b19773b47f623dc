"""A task's reference in the formats of the reference-posterior community.

No public suite holds reference posteriors of Bayesian neural networks' predictives, so ours
are written in two formats others read:

- ``<task>.nc``: an ArviZ InferenceData (netCDF). ``posterior_predictive`` holds the chain-level
  draws we keep: regression, each chain's draws of y in chain order (``y``: chain, draw,
  test_point); classification, each chain's batch means of the class probabilities
  (``probability_batch_mean``: chain, draw = batch, test_point, class; the per-draw
  probabilities are not kept). ``predictions`` holds the reference itself and the Monte Carlo
  standard error of every quantity. The attributes hold the reference-posterior standard's
  figures (rank-normalised R-hat, bulk and tail ESS, divergences) and the declaration.
  Those figures cannot be recomputed from the export: the generator computed them on every
  draw's predictive (each class probability, or each point's predictive mean) and on the
  potential energy, none of which the references keep (the draws of y are not the draws of
  the predictive mean). Keeping them thinned would take a new reference file and a
  regeneration of every task; until then the figures are checkable only by rerunning
  ``generate``, whose chains are seeded (``chains.py``), not from the exported files.
- ``<task>_posteriordb.json``: posteriordb's reference-posterior information (its ``info``
  layout: name, inference method and arguments, diagnostics, the checks made), with the
  reference's mean and Monte Carlo standard error per quantity, as Inference Gym stores its
  ground truths.

``python -m reference_data export [--tasks ...] [--root DIR] [--out DIR]``.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..runtime.formats import (SAMPLES_BY_POINTS, read_batch_means, read_chain_samples,
                               read_classification_probs, read_reference_mcse,
                               read_regression_samples)
from ..runtime.score_types import CLASSIFICATION
from .convergence import ESS_MINIMUM, RANK_RHAT_THRESHOLD
from .task_files import TaskFiles


class ExportError(Exception):
    """A task that cannot be exported, with the file and the reason."""


def _arrays(paths: TaskFiles) -> tuple[dict, dict]:
    """(posterior_predictive, predictions) variables as (dims, array) pairs."""
    if paths.kind == CLASSIFICATION:
        if not paths.batch_means.is_file():
            raise ExportError(f"{paths.batch_means}: missing (references made by an older "
                              "generator; regenerate them with `python -m reference_data "
                              "generate`)")
        chains = {"probability_batch_mean": (("chain", "draw", "test_point", "class"),
                                             read_batch_means(paths.batch_means))}
        reference = read_classification_probs(paths.reference)
        predictions = {"probability": (("test_point", "class"), reference),
                       "probability_mcse": (("test_point", "class"),
                                            read_reference_mcse(paths.reference_mcse))}
        return chains, predictions
    chains = {"y": (("chain", "draw", "test_point"),
                    read_chain_samples(paths.chain_reference).transpose(0, 2, 1))}
    reference = read_regression_samples(paths.reference, layout=SAMPLES_BY_POINTS)   # (N, S)
    mcse = read_reference_mcse(paths.reference_mcse, n_columns=2)
    predictions = {"y_reference": (("test_point", "reference_draw"), reference),
                   "y_mean": (("test_point",), reference.mean(axis=1)),
                   "y_mean_mcse": (("test_point",), mcse[:, 0]),
                   "y_sd": (("test_point",), reference.std(axis=1, ddof=1)),
                   "y_sd_mcse": (("test_point",), mcse[:, 1])}
    return chains, predictions


def _dataset(variables: dict, attrs: dict):
    import xarray
    return xarray.Dataset({name: (dims, np.asarray(array)) for name, (dims, array)
                           in variables.items()}, attrs=attrs)


def write_arviz(paths: TaskFiles, declaration: dict, standard: dict, out: Path) -> Path:
    import arviz
    chains, predictions = _arrays(paths)
    attrs = {"task": paths.task, "reference_standard": json.dumps(standard),
             "declaration": json.dumps(declaration), "created_by": "python -m reference_data "
             "export"}
    data = arviz.InferenceData(posterior_predictive=_dataset(chains, attrs),
                               predictions=_dataset(predictions, attrs))
    path = out / f"{paths.task}.nc"
    data.to_netcdf(str(path), engine="h5netcdf")
    return path


def posteriordb_info(paths: TaskFiles, declaration: dict, standard: dict) -> dict:
    """posteriordb's reference-posterior ``info`` with the reference's mean and MCSE."""
    _, predictions = _arrays(paths)
    hmc = declaration["hmc"]
    chains, draws = hmc["num_chains"], hmc["num_samples"]
    if paths.kind == CLASSIFICATION:
        mean, mcse = predictions["probability"][1], predictions["probability_mcse"][1]
        names = [f"p[{i + 1},{c + 1}]" for i in range(mean.shape[0]) for c in range(mean.shape[1])]
    else:
        mean, mcse = predictions["y_mean"][1], predictions["y_mean_mcse"][1]
        names = [f"y_mean[{i + 1}]" for i in range(len(mean))]
    return {
        "name": f"bdl2021-{paths.task}",
        "inference": {"method": "nuts", "method_arguments": {
            "engine": hmc.get("engine"), "chains": chains, "iter_warmup": hmc["num_warmup"],
            "iter_sampling": draws, "adapt_delta": hmc.get("target_acceptance"),
            "max_treedepth": hmc.get("max_tree_depth")}},
        "diagnostics": {"diagnostic_information": {"names": names},
                        "ndraws": chains * draws, "nchains": chains,
                        "effective_sample_size_bulk_min": standard["ess_bulk_min"],
                        "effective_sample_size_tail_min": standard["ess_tail_min"],
                        "r_hat_max": standard["rhat_max"],
                        "divergent_transitions": standard["divergences"]},
        "checks_made": {"nchains_is_gte_4": chains >= 4,
                        "ess_above_400": min(standard["ess_bulk_min"],
                                             standard["ess_tail_min"]) >= ESS_MINIMUM,
                        "r_hat_below_1_01": standard["rhat_max"] <= RANK_RHAT_THRESHOLD,
                        "no_divergent_transitions": standard["divergences"] == 0},
        "quantity": ("posterior predictive class probability p[test point, class]"
                     if paths.kind == CLASSIFICATION else
                     "posterior predictive mean of y at each test point"),
        "mean": [float(v) for v in np.ravel(mean)],
        "mcse": [float(v) for v in np.ravel(mcse)],
        "comments": "Exported by `python -m reference_data export`; the model, prior, "
                    "likelihood and data split are in the declaration "
                    f"({paths.declaration.name}).",
    }


def export_task(paths: TaskFiles, out: Path) -> list[Path]:
    """Both files of one task into ``out``; ExportError names a missing or unreadable file."""
    try:
        declaration = json.loads(paths.declaration.read_text(encoding="utf-8"))
        standard = json.loads(paths.diagnostics.read_text(encoding="utf-8"))["reference_standard"]
    except (OSError, ValueError) as error:
        raise ExportError(f"{paths.folder}: {error}") from None
    except KeyError:
        raise ExportError(f"{paths.diagnostics}: no reference_standard figures (references made "
                          "by an older generator; regenerate them)") from None
    out.mkdir(parents=True, exist_ok=True)
    info = out / f"{paths.task}_posteriordb.json"
    info.write_text(json.dumps(posteriordb_info(paths, declaration, standard), indent=1) + "\n")
    return [write_arviz(paths, declaration, standard, out), info]

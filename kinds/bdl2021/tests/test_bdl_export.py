"""`python -m reference_data export`: ArviZ reads the references back; posteriordb's layout;
bad input named."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from kinds.bdl2021.reference.task_files import DEFAULT_ROOT, task_files
from kinds.bdl2021.runtime.formats import (SAMPLES_BY_POINTS, read_classification_probs,
                                           read_reference_mcse, read_regression_samples)

REPO = Path(__file__).resolve().parents[3]


def export(*args):
    return subprocess.run([sys.executable, "-m", "reference_data", "export", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=600)


def test_arviz_reads_back_what_export_writes(tmp_path):
    import arviz
    result = export("--tasks", "iris,diabetes_gap", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    iris = arviz.from_netcdf(str(tmp_path / "iris.nc"))
    batches = iris.posterior_predictive["probability_batch_mean"]
    assert batches.dims == ("chain", "draw", "test_point", "class") and batches.shape == (4, 10, 50, 3)
    files = task_files(DEFAULT_ROOT, "iris", "classification")
    np.testing.assert_allclose(iris.predictions["probability"].values,
                               read_classification_probs(files.reference))
    np.testing.assert_allclose(iris.predictions["probability_mcse"].values,
                               read_reference_mcse(files.reference_mcse))
    assert json.loads(iris.posterior_predictive.attrs["reference_standard"])["rhat_max"] <= 1.01
    diabetes = arviz.from_netcdf(str(tmp_path / "diabetes_gap.nc"))
    assert diabetes.posterior_predictive["y"].shape == (4, 1000, 148)
    reference = read_regression_samples(task_files(DEFAULT_ROOT, "diabetes_gap", "regression")
                                        .reference, layout=SAMPLES_BY_POINTS)
    np.testing.assert_allclose(diabetes.predictions["y_mean"].values, reference.mean(axis=1))
    # ArviZ's own diagnostics run on what it read: the draws of y mix.
    assert float(arviz.rhat(diabetes.posterior_predictive)["y"].max()) < 1.01

    info = json.loads((tmp_path / "iris_posteriordb.json").read_text())
    assert info["inference"]["method"] == "nuts" and info["diagnostics"]["nchains"] == 4
    assert all(info["checks_made"].values())
    assert len(info["mean"]) == len(info["mcse"]) == 150
    assert info["diagnostics"]["diagnostic_information"]["names"][:2] == ["p[1,1]", "p[1,2]"]


def test_missing_batch_means_and_unknown_tasks_are_named(tmp_path):
    root = tmp_path / "refs"
    shutil.copytree(DEFAULT_ROOT / "wine", root / "wine")
    (root / "wine" / "wine_batch_means.npy").unlink()
    result = export("--root", str(root), "--out", str(tmp_path / "out"))
    assert result.returncode == 1
    assert "wine_batch_means.npy: missing" in result.stderr and "Traceback" not in result.stderr
    result = export("--root", str(root), "--tasks", "cifar10", "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and "no task cifar10" in result.stderr and "found: wine" \
        in result.stderr

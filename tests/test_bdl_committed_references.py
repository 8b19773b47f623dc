"""The committed references: they match their manifest, load, and meet the convergence bar."""
import json

import numpy as np
import pytest

from kinds.bdl2021.runtime.formats import (read_chain_probs, read_chain_samples,
                                           read_classification_probs)
from kinds.bdl2021.reference.chains import task_model
from kinds.bdl2021.reference.datasets import prepare
from kinds.bdl2021.reference.manifest import verify_manifest
from kinds.bdl2021.reference.task_files import (DEFAULT_ROOT, MANIFEST_NAME, UNLISTED_IN_MANIFEST,
                                       task_files)
from kinds.bdl2021.reference.tasks import REGRESSION_SAMPLES, TASKS
from kinds.bdl2021.reference.verify import verify


def test_manifest_matches_committed_files():
    assert verify_manifest(DEFAULT_ROOT, MANIFEST_NAME, UNLISTED_IN_MANIFEST) == []


def test_every_task_verifies():
    tasks, problems = verify(DEFAULT_ROOT)
    assert problems == []
    assert sorted(t.declaration["name"] for t in tasks) == sorted(t.name for t in TASKS)


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_rhat_bar_and_diagnostics_recorded(task):
    files = task_files(DEFAULT_ROOT, task.name, task.kind)
    diagnostics = json.loads(files.diagnostics.read_text())
    assert diagnostics["rhat"]["p99"] <= 1.05
    assert len(diagnostics["chains"]) == task.hmc.num_chains >= 4
    for chain in diagnostics["chains"]:
        assert 0.5 < chain["acceptance_rate"] <= 1.0
        assert chain["divergences"] == 0
    assert diagnostics["ess"]["min"] > 50


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_declaration_file_matches_code_and_data(task):
    """The JSON that the builder and participants read says what the sampler really used."""
    files = task_files(DEFAULT_ROOT, task.name, task.kind)
    declaration = json.loads(files.declaration.read_text())
    prepared = prepare(task)
    model = task_model(task, prepared)
    if task.network is None:
        assert declaration["model"]["layer_sizes"] == list(model.layer_sizes)
    else:         # the declared network and its layout, name by name
        assert {k: declaration["model"][k] for k in task.network} == task.network
        assert declaration["model"]["parameter_order"] == [[p.name, list(p.shape)]
                                                           for p in model.parameters]
    assert declaration["model"]["num_parameters"] == model.num_parameters
    assert declaration["prior"]["variance"] == task.prior_variance
    assert declaration["n_test"] == len(prepared.x_test)
    assert declaration["hmc"]["num_samples"] == task.hmc.num_samples
    labels = np.loadtxt(files.test_labels)
    np.testing.assert_array_equal(labels, prepared.y_test)


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_bma_is_the_average_of_the_chains(task):
    files = task_files(DEFAULT_ROOT, task.name, task.kind)
    if task.kind == "classification":
        bma = read_classification_probs(files.reference)
        chains = read_chain_probs(files.chain_reference)
        np.testing.assert_allclose(chains.mean(axis=0), bma, atol=1e-12)
    else:
        chains = read_chain_samples(files.chain_reference)
        assert chains.shape[2] == REGRESSION_SAMPLES

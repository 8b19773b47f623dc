"""The committed references: they match their manifest, load, and meet the convergence bar."""
import json

import numpy as np
import pytest

from kinds.bdl2021.runtime.exact_posterior import COVERAGE, parse_expectation_document
from kinds.bdl2021.runtime.formats import (SAMPLES_BY_POINTS, read_batch_means,
                                           read_chain_probs, read_chain_samples,
                                           read_classification_probs, read_reference_mcse,
                                           read_regression_samples)
from kinds.bdl2021.reference.expectation_check import expectation_coverage
from kinds.bdl2021.reference.expectation_file import compute_expectation
from kinds.bdl2021.reference.chains import task_model
from kinds.bdl2021.reference.datasets import prepare
from kinds.bdl2021.reference.manifest import verify_manifest
from kinds.bdl2021.reference.task_files import (DEFAULT_ROOT, MANIFEST_NAME, UNLISTED_IN_MANIFEST,
                                       task_files)
from kinds.bdl2021.reference.tasks import REGRESSION_SAMPLES, TASKS
from kinds.bdl2021.reference.verify import verify
from bdl_expectation_rounding import assert_same_document


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
def test_references_meet_the_reference_posterior_standard(task):
    """posteriordb's bar, as the gate reads it: rank-normalised R-hat <= 1.01, bulk and tail
    ESS >= 400 for every predictive quantity and the energy, no divergence after warm-up."""
    standard = json.loads(task_files(DEFAULT_ROOT, task.name, task.kind).diagnostics
                          .read_text())["reference_standard"]
    assert standard["rhat_max"] <= 1.01 and standard["energy_rhat"] <= 1.01
    assert min(standard["ess_bulk_min"], standard["ess_tail_min"], standard["energy_ess_bulk"],
               standard["energy_ess_tail"]) >= 400
    assert standard["divergences"] == 0


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_every_reference_quantity_has_its_monte_carlo_standard_error(task):
    """Classification: per probability, and the batch means' spread over their number agrees
    with it (two estimates of one error); regression: per point, of the mean and sd of y."""
    files = task_files(DEFAULT_ROOT, task.name, task.kind)
    declaration = json.loads(files.declaration.read_text())
    if task.kind == "classification":
        mcse = read_reference_mcse(files.reference_mcse, n_points=declaration["n_test"],
                                   n_columns=declaration["num_classes"])
        batches = read_batch_means(files.batch_means)
        blocks = batches.reshape(-1, *batches.shape[2:]).astype(float)
        np.testing.assert_allclose(blocks.mean(axis=0), read_classification_probs(
            files.reference), atol=1e-6)
        from_batches = blocks.std(axis=0, ddof=1) / np.sqrt(len(blocks))
        ratio = np.sqrt(np.mean(from_batches ** 2) / np.mean(mcse ** 2))
        assert 0.8 < ratio < 1.25, ratio
    else:
        mcse = read_reference_mcse(files.reference_mcse, n_points=declaration["n_test"],
                                   n_columns=2)
        draws = read_regression_samples(files.reference, layout=SAMPLES_BY_POINTS)
        iid = draws.std(axis=1, ddof=1) / np.sqrt(draws.shape[1])
        assert 0.8 < np.sqrt(np.mean(mcse[:, 0] ** 2) / np.mean(iid ** 2)) < 1.25
    assert np.all(np.isfinite(mcse)) and np.all(mcse >= 0) and mcse.max() > 0


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_the_committed_expectation_is_current(task):
    """The file the builder ships is what the references give now, on this machine: to the
    rounding of another CPU (bdl_expectation_rounding: 1e-12 relative)."""
    files = task_files(DEFAULT_ROOT, task.name, task.kind)
    committed = json.loads(files.expectation.read_text())
    parse_expectation_document(committed, task.name, task.kind, files.expectation.name)
    width = None if task.kind == "classification" else REGRESSION_SAMPLES
    assert_same_document(compute_expectation(files, width), committed)


def test_a_document_that_differs_beyond_rounding_is_not_the_same():
    """The comparison above passes rounding and nothing more: a figure moved by 1e-9 of
    itself, a changed string or a missing key fails it."""
    committed = {"format": "f/2", "splits": 400, "metrics": {"tv": {"value": 0.0016,
                                                                    "spread": 0.0}}}
    rounded = json.loads(json.dumps(committed))
    rounded["metrics"]["tv"]["value"] = float(np.nextafter(0.0016, 1.0))
    assert_same_document(rounded, committed)
    for change in (lambda d: d["metrics"]["tv"].update(value=0.0016 * (1 + 1e-9)),
                   lambda d: d["metrics"]["tv"].update(spread=1e-14),
                   lambda d: d.update(format="f/1"), lambda d: d.update(splits=400.0),
                   lambda d: d["metrics"]["tv"].pop("spread")):
        changed = json.loads(json.dumps(committed))
        change(changed)
        with pytest.raises(AssertionError):
            assert_same_document(changed, committed)


# The coverage simulation of the two tasks of 2,995 test rows, 10 classes (30 CPU s each): the
# README's test command checks the others (both task types, digits' 10 classes among them),
# .ci/extended all seven.
LARGE_COVERAGE_SIMULATIONS = ("digits_shift", "digits_cnn")


@pytest.mark.slow
@pytest.mark.parametrize("task", [
    pytest.param(task, marks=[pytest.mark.extended] if task.name in LARGE_COVERAGE_SIMULATIONS
                 else []) for task in TASKS], ids=lambda t: t.name)
def test_the_exact_posterior_interval_covers_an_exact_submission_at_its_rate(task):
    """In simulated worlds with the committed reference's own Monte Carlo error
    (``expectation_check``), the interval holds the exact submission's score in about
    COVERAGE of the replicates: within 3 binomial standard errors, never far above."""
    files = task_files(DEFAULT_ROOT, task.name, task.kind)
    if task.kind == "classification":
        chains, batches = read_chain_probs(files.chain_reference), read_batch_means(
            files.batch_means)
        found = expectation_coverage(task.kind, chains, batches, replicates=100, splits=400)
    else:
        found = expectation_coverage(task.kind, read_chain_samples(files.chain_reference),
                                     reference_draws=REGRESSION_SAMPLES,
                                     submission_draws=REGRESSION_SAMPLES, replicates=40,
                                     splits=100)
    for name, coverage in found.items():
        assert coverage.rate >= COVERAGE - coverage.tolerance(), (name, coverage)
        assert coverage.mean_value == pytest.approx(coverage.mean_score, rel=0.05, abs=1e-4), \
            (name, coverage)


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

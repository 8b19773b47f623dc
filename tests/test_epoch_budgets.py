"""Budgets in epochs (the 2021 rules bounded training by SGD epochs): the worker's rule converts
the epochs to seconds from the median timed epoch and caps them at the spec's ceiling, and the
spec takes them only from a kind that times an epoch. The whole path on BDL, the kind that does
(its reference SGD, the record, the log, the pages and the detailed results), is
kinds/bdl2021/tests/test_bdl_epoch_budgets.py's."""
import shutil
import types
from pathlib import Path

import pytest
import yaml

from bundle.spec import SpecError, load_spec
from ingestion_program.ingest.config import TaskSpec
from kinds.kind import KINDS
from runtime.rules.epoch_budgets import RULE as WORKER_RULE


def _task(epochs, ceiling):
    return TaskSpec("t", "classification", "t", "t", ceiling, {}, rules={"budget_epochs": epochs})


def test_the_median_epoch_converts_the_budget_and_the_ceiling_caps_it():
    contract = types.SimpleNamespace(epoch_seconds=lambda task, data: [0.03, 0.01, 0.02])
    task = WORKER_RULE.task_budget(_task(100, 30.0), Path("data"), contract)
    assert task.budget_seconds == pytest.approx(2.0)
    assert task.rules["calibration"] == {"epochs": 100, "seconds_per_epoch": 0.02,
                                "samples": [0.03, 0.01, 0.02], "budget_seconds": 2.0,
                                "ceiling_seconds": 30.0, "capped": False}
    capped = WORKER_RULE.task_budget(_task(100, 1.5), Path("data"), contract)
    assert capped.budget_seconds == 1.5 and capped.rules["calibration"]["capped"] is True
    assert WORKER_RULE.task_budget(_task(None, 7.0), Path("data"), contract).budget_seconds == 7.0


def test_only_a_kind_that_times_an_epoch_accepts_budgets_in_epochs(tmp_path):
    """label_accuracy has no reference training to time (no EPOCH_UNIT)."""
    default = KINDS["label_accuracy"].DEFAULT_SPEC
    raw = yaml.safe_load(default.read_text())
    shutil.copyfile(default.parent / raw["logo"], tmp_path / raw["logo"])
    raw["tasks"]["iris"] = {"budget_seconds": 30, "budget_epochs": 3000}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    with pytest.raises(SpecError) as error:
        load_spec(tmp_path / "spec.yaml")
    assert "tasks.iris.budget_epochs: kind label_accuracy has no reference training" \
        in str(error.value)

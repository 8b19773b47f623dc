"""Start-up (Python, the runtime, importing the participant's module, loading the task's data)
has its own allowance; the budget's clock starts when the participant's function is called.

The sleeps are far from the limits they are set against (seconds against a budget of one
second, or against an allowance of a minute), so a loaded machine cannot change an outcome.
"""
import pytest

from competition_formats import read_run_record
from ingestion_harness import assert_nothing_left_behind, new_run, prepare, run_ingestion

pytestmark = pytest.mark.slow

BUDGET = 1.0
SLOW_IMPORT = """
import time
import numpy as np
time.sleep({sleep})          # a heavy library being imported

def predict(task, x_train, y_train, x_test, checkpoint):
    return np.full((task.n_test, task.num_classes), 1.0 / task.num_classes)
"""


def _ingest(root, tmp_path, allowance, sleep):
    prepare(root, budget=BUDGET, limits={"startup_seconds": allowance})
    run = new_run(root, tmp_path / "run", SLOW_IMPORT.format(sleep=sleep))
    result = run_ingestion(run)
    assert result.returncode == 0, result.stderr
    assert_nothing_left_behind(run)
    return result, read_run_record(run / "run" / "output" / "ingestion_record.json")


def test_an_import_longer_than_the_budget_but_within_the_allowance_passes(tmp_path):
    result, record = _ingest(tmp_path / "prepared", tmp_path, allowance=120, sleep=3)
    for name, task in record.tasks.items():
        assert task.status == "ok" and task.prediction == "final", (name, task.message)
        assert task.startup_seconds >= 3 and task.startup_allowance_seconds == 120
        assert task.training_seconds < task.budget_seconds == BUDGET
        assert task.train_seconds == task.training_seconds
    assert "[iris] ok: training" in result.stdout
    assert "of its 1 s budget; start-up" in result.stdout
    assert "of its 120 s allowance" in result.stdout


def test_an_import_past_the_allowance_fails_with_the_start_up_message(tmp_path):
    result, record = _ingest(tmp_path / "prepared", tmp_path, allowance=1, sleep=600)
    for name, task in record.tasks.items():
        assert task.status == "failed" and task.prediction is None, name
        assert "did not start within its start-up allowance of 1 s" in task.message, task.message
        assert "budget" in task.message and "timed_out" not in task.message
        assert task.training_seconds is None and task.startup_seconds >= 1
    assert "start-up allowance" in result.stdout

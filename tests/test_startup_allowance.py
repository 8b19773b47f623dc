"""Start-up (Python, the runtime, importing the participant's module, loading the task's data)
has its own allowance; the budget's clock starts when the participant's function is called.

The sleeps are far from the limits they are set against (seconds against a budget of one
second, or against an allowance of a minute), so a loaded machine cannot change an outcome.
"""
import json

import pytest

from bundle.programs import ingestion_config
from bundle.spec import SpecError, load_spec
from bundle.competition_rules.epoch_budgets import short_budgets
from runtime import failures
from runtime.formats import FormatError, read_run_record
from ingestion_harness import assert_nothing_left_behind, new_run, prepare, run_ingestion
from ingestion_program.ingest.config import ConfigError, DEFAULT_STARTUP_SECONDS, parse_config
from plans import embedded_phase
from test_spec import default_spec, set_path, write

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


@pytest.mark.slow
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


@pytest.mark.slow
def test_an_import_past_the_allowance_fails_with_the_start_up_message(tmp_path):
    result, record = _ingest(tmp_path / "prepared", tmp_path, allowance=1, sleep=600)
    for name, task in record.tasks.items():
        assert task.status == "failed" and task.prediction is None, name
        assert "did not start within its start-up allowance of 1 s" in task.message, task.message
        assert "budget" in task.message and "timed_out" not in task.message
        assert task.training_seconds is None and task.startup_seconds >= 1
        assert task.failure == failures.DID_NOT_START
        assert f"[{name}]   Did not start: did not start within its start-up" in result.stdout
    assert "start-up allowance" in result.stdout


def test_the_allowance_is_a_limit_of_the_config_with_a_default_and_a_clear_error():
    config = ingestion_config(embedded_phase("evaluation", code_submission=True))
    assert parse_config(config).limits.startup_seconds == DEFAULT_STARTUP_SECONDS
    del config["limits"]["startup_seconds"]          # a config written before the allowance
    assert parse_config(config).limits.startup_seconds == DEFAULT_STARTUP_SECONDS
    config["limits"]["startup_seconds"] = 0
    with pytest.raises(ConfigError, match=r"limits\.startup_seconds: expected a positive "
                                          r"number of seconds, found 0"):
        parse_config(config)


def test_the_spec_key_sets_the_allowance_and_the_time_limit_counts_it(tmp_path):
    spec = set_path(default_spec(), "sandbox.startup_seconds", 0)
    spec.pop("logo")
    with pytest.raises(SpecError, match=r"sandbox\.startup_seconds: found 0, expected a number > 0"):
        load_spec(write(tmp_path, spec))
    spec = set_path(spec, "sandbox.startup_seconds", 600)     # four tasks: 4 x 600 s more
    with pytest.raises(SpecError, match=r"execution_time_limit: found \d+, expected at least "
                                        r"\d+ s \(task budgets \+ 600 s start-up allowance"):
        load_spec(write(tmp_path, spec))


def test_the_dry_run_names_a_conversion_too_short_to_time(tmp_path):
    tasks = {"wine": {"calibration": {"epochs": 3000, "budget_seconds": 0.22}},
             "digits": {"calibration": {"epochs": 3000, "budget_seconds": 7.2}},
             "iris": {"penalty": None}}
    (tmp_path / "detailed_results.json").write_text(json.dumps({"tasks": tasks}))
    assert short_budgets(tmp_path, 0.5) == ["wine: 3000 epochs came to 0.22 s here"]


def test_the_record_refuses_a_negative_start_up(tmp_path):
    record = tmp_path / "ingestion_record.json"
    record.write_text(json.dumps({"format": "ingestion-record/1", "tasks": {"iris": {
        "status": "ok", "wall_seconds": 1.0, "startup_seconds": -1}}}))
    with pytest.raises(FormatError, match=r"tasks\.iris\.startup_seconds: expected a "
                                          r"non-negative number or null, found -1"):
        read_run_record(record)

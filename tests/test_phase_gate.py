"""A phase's gate (PGDL's final phase rule): a submission first runs on an earlier code phase's
tasks, and on the phase's own only if it completed every one; otherwise the submission fails on
both platforms (CodaLab at the ingestion's exit, Codabench at the scorer's), so it does not
count toward the limits. The spec refuses gates that cannot mean that."""
import json
import shutil
import zipfile

import pytest
import yaml

from bundle.phase_plan import phase_plan, with_budget
from bundle.programs import ingestion_config
from bundle.spec import SpecError, load_spec
from ingestion_program.ingest.config import ConfigError, parse_config, worst_case_seconds
from runtime.formats import RECORD_NAME, FormatError, RunRecord, read_run_record, write_run_record
from local_runs import REPO, run_local
from test_pgdl_kind import build

SPEC = REPO / "kinds" / "pgdl2020" / "default_spec.yaml"
GATE_TASK = "breast_cancer_mlp"       # phase1's zoo, the default spec's gate of phase2

# Hangs on one network of the gate's zoo only (its inputs have 30 features).
HANGS_ON_THE_GATE = '''
import time
def complexity(model, dataset):
    if model.id == "model_2" and dataset.inputs.shape[1] == 30:
        time.sleep(10_000)
    return float(sum((w ** 2).sum() for w in model.weights))
'''
SUM_OF_SQUARES = REPO / "kinds" / "pgdl2020" / "kit" / "baselines" / "sum_of_squares.py"


def spec_with(tmp_path, **phase2):
    raw = yaml.safe_load(SPEC.read_text())
    shutil.copyfile(SPEC.parent / raw["logo"], tmp_path / raw["logo"])
    raw["phases"]["phase2"].update(phase2)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.mark.parametrize("gate, message", [
    ("phase3", "phases.phase2.gate: found 'phase3', expected an earlier phase (public, phase1, convolutional)"),
    ("phase2", "phases.phase2.gate: found 'phase2', expected an earlier phase"),
    ("public", "phases.phase2.gate: phase 'public' scores uploaded files"),
])
def test_a_gate_is_an_earlier_code_phase(tmp_path, gate, message):
    with pytest.raises(SpecError) as error:
        load_spec(spec_with(tmp_path, gate=gate))
    assert message in str(error.value)


def test_a_gate_shares_no_task_and_its_budgets_count_in_the_time_limit(tmp_path):
    with pytest.raises(SpecError) as error:
        load_spec(spec_with(tmp_path, tasks=["wine_mlp", GATE_TASK]))
    assert f"phases.phase2.gate: tasks ['{GATE_TASK}'] are in both phases" in str(error.value)
    with pytest.raises(SpecError) as error:      # 64 + 64 + 32 s of budgets, + 3 x (30 + 7) s, + 60 s
        load_spec(spec_with(tmp_path, execution_time_limit=200))
    assert "phases.phase2.execution_time_limit: found 200, expected at least 331 s (task " \
           "budgets with the gate" in str(error.value)


def test_the_gate_runs_first_in_the_ingestion_config_and_is_not_scored():
    plan = phase_plan(load_spec(SPEC), "phase2")
    gate = plan.rules["gate"]
    assert [t.name for t in gate.tasks] == [GATE_TASK] and gate.label == "Phase 1"
    assert GATE_TASK not in [t.name for t in plan.tasks]
    config = ingestion_config(plan)
    assert [t["name"] for t in config["gate"]["tasks"]] == [GATE_TASK]
    assert sorted(t["name"] for t in config["tasks"]) == ["digits_deep", "wine_mlp"]
    assert phase_plan(load_spec(SPEC), "phase1").rules["gate"] is None


def test_a_budget_in_seconds_reaches_the_gates_tasks_and_the_runs_worst_case():
    plan = with_budget(phase_plan(load_spec(SPEC), "phase2"), 5)
    assert [task.budget_seconds for task in plan.rules["gate"].tasks] == [5]
    config = parse_config(ingestion_config(plan))
    assert [task.name for task in config.rules["gate"].tasks] == [GATE_TASK]
    # the gate's task counts in the worst case with the phase's two
    assert config.total_seconds() == worst_case_seconds(
        [5, 5, 5], config.limits.grace_seconds, config.limits.startup_seconds)


@pytest.mark.parametrize("gate, message", [
    ("phase1", "gate must be an object with a string 'label' and a list 'tasks'"),
    ({"label": "Phase 1", "tasks": [{"name": GATE_TASK}]}, "gate.tasks[0]: missing key"),
])
def test_a_malformed_gate_in_the_ingestion_config_is_refused_by_name(gate, message):
    raw = {**ingestion_config(phase_plan(load_spec(SPEC), "phase2")), "gate": gate}
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        parse_config(raw)


def test_a_run_record_keeps_the_gate_and_refuses_a_malformed_one(tmp_path):
    path = tmp_path / RECORD_NAME
    gate = {"label": "Phase 1", "passed": False, "reason": "r", "tasks": {}}
    write_run_record(path, RunRecord({}, rules={"gate": gate}))
    assert read_run_record(path).rules == {"gate": gate}
    path.write_text(json.dumps({**json.loads(path.read_text()), "gate": {"passed": "no"}}))
    with pytest.raises(FormatError, match="'gate' must be an object with a boolean 'passed'"):
        read_run_record(path)


def _local(tmp_path, code):
    (tmp_path / "complexity.py").write_text(code)
    return run_local("--config", str(SPEC), "--phase", "phase2", "--budget", "32",
                     "--code", str(tmp_path / "complexity.py"), "--out", str(tmp_path / "run"))


def _record(tmp_path):
    output = tmp_path / "run" / "ingestion" / "run" / "output"
    return json.loads((output / "ingestion_record.json").read_text()), output


def test_code_that_completes_the_gate_runs_on_the_phase(tmp_path):
    result = _local(tmp_path, SUM_OF_SQUARES.read_text())
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    record, output = _record(tmp_path)
    assert record["gate"]["passed"] is True and record["gate"]["label"] == "Phase 1"
    assert record["gate"]["tasks"][GATE_TASK]["status"] == "ok"
    assert set(record["tasks"]) == {"wine_mlp", "digits_deep"}
    assert not (output / f"{GATE_TASK}.npy").exists()       # the gate's output is not scored
    assert "gate: passed" in result.stdout and "wine_mlp_cmi:" in result.stdout


def test_code_that_hangs_on_the_gate_never_runs_on_the_phase(tmp_path):
    result = _local(tmp_path, HANGS_ON_THE_GATE)
    log = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in log
    record, output = _record(tmp_path)
    assert record["gate"]["passed"] is False and record["tasks"] == {}
    assert record["gate"]["reason"] == f"{GATE_TASK}: timed out: model_2"
    assert "gate: NOT passed" in log and "failed submissions do not count" in log
    assert "the ingestion program failed (exit 3)" in log
    assert not list(output.glob("*.npy"))


@pytest.fixture(scope="module")
def phase2_bundle(built_bundles):
    """Phase 2's bundle per platform: the test run's shared build (conftest.py)."""
    def bundle(platform):
        found = list(built_bundles(SPEC, platform, "phase2").glob("*.zip"))
        assert len(found) == 1, found
        return found[0]
    return bundle


def _failed_steps(result) -> list[str]:
    rows = [line.split() for line in result.stdout.splitlines()
            if line.startswith("Phase 2 (private)") and line.split()[-1] == "failed"]
    return [row[-3] for row in rows]


@pytest.mark.slow
@pytest.mark.parametrize("platform, failing_steps", [
    ("codalab", ["ingestion"]),                  # the worker fails it at the ingestion's exit
    ("codabench", ["ingestion", "scoring"]),     # exit not checked there: the scorer fails it
])
def test_both_platforms_fail_a_submission_that_misses_the_gate(tmp_path, phase2_bundle,
                                                                platform, failing_steps):
    submission = tmp_path / "submission.zip"
    with zipfile.ZipFile(submission, "w") as archive:
        archive.writestr("complexity.py", HANGS_ON_THE_GATE)
        archive.writestr("metadata", "description: misses the gate\n")
    bundle = phase2_bundle(platform)
    result = build("--check", str(bundle), "--submission", str(submission))
    assert result.returncode == 1
    assert _failed_steps(result) == failing_steps, result.stdout[-3000:]
    assert "did not complete the tasks of Phase 1" in result.stdout + result.stderr
    with zipfile.ZipFile(bundle) as archive:      # the page says so, in the phase's facts
        pages = " ".join(archive.read(name).decode() for name in archive.namelist()
                         if name.endswith(".html"))
    assert "your code first runs on the tasks of Phase 1: breast_cancer_mlp (64 s)" in pages


@pytest.mark.slow
def test_a_zip_without_code_fails_in_a_gated_phase_on_codalab(tmp_path, phase2_bundle):
    """The CodaLab v1.5 worker takes a zip without a root ``metadata`` for prediction files:
    the predict step copies it to the output and runs no ingestion (worker.py:433-472 in
    codalab_v1.md), so the scorer sees no record. A submission that finished there, even at
    the worst values, would use up the phase's single submission; failed ones do not count
    toward ``max_submissions`` (competition models l.1571-1583). So the scorer fails it."""
    submission = tmp_path / "forgot_metadata.zip"
    with zipfile.ZipFile(submission, "w") as archive:
        archive.writestr("complexity.py", SUM_OF_SQUARES.read_text())
    result = build("--check", str(phase2_bundle("codalab")), "--submission", str(submission))
    log = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in log
    # our check of the zip flags it; the worker itself finishes the predict step and scores it
    assert _failed_steps(result) == ["submission", "scoring"], result.stdout[-3000:]
    # the scorer's own failure (the worker marks the submission Failed), not a penalised score
    assert "Phase 2 (private) / scoring: failed\nexit 3:" in log
    assert "does not use up the phase's submissions" in log
    assert "CodaLab takes a zip without a root 'metadata' file for prediction files" in log

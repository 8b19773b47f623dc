"""codabench_tasks: per_task: each competition task is a Codabench task of its own (one child
submission each, codabench_v2.md §3.1), so the phase's time limit, and the default queue's
600 s cap, apply to one task's run instead of the sum of all budgets."""
import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from bundle.rules import check_bundle
from bundle.spec import SpecError, load_spec

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "kinds" / "label_accuracy" / "default_spec.yaml"
PGDL_SPEC = REPO / "kinds" / "pgdl2020" / "default_spec.yaml"


def long_spec(tmp_path: Path, per_task: bool, limit: int = 500) -> Path:
    """Two 400 s tasks: 874 s with the start-up allowances in one run, 437 s each on their own."""
    raw = yaml.safe_load(SPEC.read_text())
    raw["tasks"] = {name: {"budget_seconds": 400} for name in raw["tasks"]}
    raw["phases"]["evaluation"]["execution_time_limit"] = limit
    if per_task:
        raw["codabench_tasks"] = "per_task"
    shutil.copyfile(SPEC.parent / raw["logo"], tmp_path / raw["logo"])
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return tmp_path / "spec.yaml"


def build(spec: Path, out: Path, platform: str, check: bool = True):
    return subprocess.run([sys.executable, str(REPO / "build_bundle.py"), "--config", str(spec),
                           "--phase", "all", "--platform", platform, "--out", str(out)]
                          + (["--check"] if check else []),
                          cwd=REPO, capture_output=True, text=True, timeout=900)


def nested_json(archive: zipfile.ZipFile, member: str, name: str) -> dict:
    with zipfile.ZipFile(io.BytesIO(archive.read(member))) as inner:
        return json.loads(inner.read(name))


@pytest.fixture(scope="module")
def per_task_build(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("per-task")
    result = build(long_spec(tmp, per_task=True), tmp / "out", "codabench")
    return result, next((tmp / "out").glob("*.zip"), None)


def test_each_task_is_its_own_codabench_task_and_the_dry_run_passes(per_task_build):
    result, bundle = per_task_build
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "dry run passed" in result.stdout
    # one ingestion step per task of the code phase, each labelled with its task
    for task in ("iris", "wine"):
        assert f"Evaluation / {task}" in result.stdout
    with zipfile.ZipFile(bundle) as archive:
        comp = yaml.safe_load(archive.read("competition.yaml"))
        assert [len(phase["tasks"]) for phase in comp["phases"]] == [2, 2]
        assert comp["phases"][1]["execution_time_limit"] == 500
        code_tasks = [comp["tasks"][i] for i in comp["phases"][1]["tasks"]]
        for task, name in zip(code_tasks, ("iris", "wine")):
            assert task["name"] == f"{name} (Evaluation)"
            config = nested_json(archive, task["ingestion_program"], "ingestion_config.json")
            assert [t["name"] for t in config["tasks"]] == [name]
            scoring = nested_json(archive, task["scoring_program"], "scoring_config.json")
            assert {t["name"] for t in scoring["tasks"]} == {name}
        references = {task["reference_data"] for task in comp["tasks"]}
        assert len(references) == 4           # each task of each phase has its own


def test_columns_are_shared_by_the_tasks_and_the_ranking_one_is_written_by_each(per_task_build):
    _, bundle = per_task_build
    with zipfile.ZipFile(bundle) as archive:
        comp = yaml.safe_load(archive.read("competition.yaml"))
        columns = comp["leaderboards"][0]["columns"]
        keys = [c["key"] for c in columns]
        assert keys[0] == "accuracy" and not any(k.startswith(("iris", "wine")) for k in keys)
        for task in comp["tasks"]:
            scoring = nested_json(archive, task["scoring_program"], "scoring_config.json")
            assert "accuracy" in [c["key"] for c in scoring["columns"]]
        page = archive.read("pages/evaluation.html").decode()
    assert "Codabench has no rank combined over tasks" in page
    assert "each task is run and scored on its own" in page


def test_the_time_rule_holds_each_task_to_the_limit_on_its_own(per_task_build, tmp_path):
    """Lower the limit under one task's needs in the emitted yaml: the v2 rule names each
    task's ingestion zip (437 s with the start-up allowance + 60 s of scoring margin > 400 s)."""
    _, bundle = per_task_build
    edited = tmp_path / "edited.zip"
    with zipfile.ZipFile(bundle) as source, zipfile.ZipFile(edited, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "competition.yaml":
                data = data.replace(b"execution_time_limit: 500", b"execution_time_limit: 400")
            target.writestr(item, data)
    failures = [f.message for f in check_bundle(edited, "codabench", scoring_margin_seconds=60)]
    assert len(failures) == 2, failures
    for failure, task in zip(sorted(failures), ("iris", "wine")):
        assert "execution_time_limit is 400 s but the run needs 497 s" in failure
        assert f"(evaluation_{task}_ingestion_program.zip)" in failure and "1 tasks" in failure


def test_in_one_codabench_task_the_same_budgets_are_refused(tmp_path):
    with pytest.raises(SpecError) as error:
        load_spec(long_spec(tmp_path, per_task=False))
    assert "execution_time_limit: found 500, expected at least 934 s" in str(error.value)


def test_codalab_runs_a_phase_in_one_run_and_says_per_task_is_codabench_only(tmp_path):
    result = build(long_spec(tmp_path, per_task=True), tmp_path / "out", "codalab", check=False)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    output = result.stdout + result.stderr
    assert "needs 934 s" in output and "codabench_tasks: per_task splits them on Codabench" in output


def test_a_phase_with_a_gate_cannot_be_split_into_tasks(tmp_path):
    raw = yaml.safe_load(PGDL_SPEC.read_text())
    raw["codabench_tasks"] = "per_task"
    raw["data_root"] = None
    if raw.get("logo"):
        shutil.copyfile(PGDL_SPEC.parent / raw["logo"], tmp_path / raw["logo"])
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    with pytest.raises(SpecError) as error:
        load_spec(tmp_path / "spec.yaml")
    assert "gate: codabench_tasks: per_task runs each task on its own" in str(error.value)

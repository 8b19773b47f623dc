"""A Codabench queue of the organizer's own (spec key codabench_queue): the yaml names it, and
the checks and the dry run hold a phase to its own time limit instead of the default queue's
600 s cap; CodaLab, which takes no queue in its yaml, gets the editor step in the summary."""
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "kinds" / "label_accuracy" / "default_spec.yaml"
QUEUE = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


def long_spec(tmp_path: Path, queue: str | None) -> Path:
    """The label-accuracy competition with two 400 s tasks: 800 s of budgets, past the cap."""
    raw = yaml.safe_load(SPEC.read_text())
    raw["tasks"] = {name: {"budget_seconds": 400} for name in raw["tasks"]}
    raw["phases"]["evaluation"]["execution_time_limit"] = 1200
    if queue is not None:
        raw["codabench_queue"] = queue
    shutil.copyfile(SPEC.parent / raw["logo"], tmp_path / raw["logo"])
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return tmp_path / "spec.yaml"


def build(spec: Path, out: Path, platform: str):
    return subprocess.run([sys.executable, str(REPO / "build_bundle.py"), "--config", str(spec),
                           "--phase", "evaluation", "--platform", platform, "--check", "--out",
                           str(out)], cwd=REPO, capture_output=True, text=True, timeout=900)


def test_a_custom_queue_lifts_the_default_cap_in_the_checks_and_the_dry_run(tmp_path):
    result = build(long_spec(tmp_path, QUEUE), tmp_path / "out", "codabench")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "dry run passed" in result.stdout and "caps it at 600 s" not in result.stdout
    with zipfile.ZipFile(next((tmp_path / "out").glob("*.zip"))) as archive:
        comp = yaml.safe_load(archive.read("competition.yaml"))
    assert comp["queue"] == QUEUE and comp["phases"][0]["execution_time_limit"] == 1200


def test_without_it_the_default_queue_cap_refuses_the_budgets(tmp_path):
    result = build(long_spec(tmp_path, None), tmp_path / "out", "codabench")
    assert result.returncode != 0
    assert "the default queue's cap is 600 s but the run needs" in result.stdout + result.stderr


def test_codalab_is_told_where_to_choose_the_queue(tmp_path):
    result = build(long_spec(tmp_path, QUEUE), tmp_path / "out", "codalab")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "choose yours in the competition's editor (Edit > Queue)" in result.stdout
    with zipfile.ZipFile(next((tmp_path / "out").glob("*.zip"))) as archive:
        assert "queue" not in yaml.safe_load(archive.read("competition.yaml"))


@pytest.mark.parametrize("queue", ["my-queue", "0f1e2d3c4b5a69788796a5b4c3d2e1f0"])
def test_a_queue_that_is_not_a_vhost_uuid_is_refused_with_the_key_named(queue, tmp_path):
    result = build(long_spec(tmp_path, queue), tmp_path / "out", "codabench")
    assert result.returncode != 0 and "codabench_queue" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr

"""How a phase's tasks become Codabench tasks. One Codabench task per phase runs and scores all
its tasks; one per task (codabench_tasks: per_task) is refused, because the site's leaderboard
rule cannot rank all the child submissions of one submission (codabench_v2.md §3.10): the
rule is modelled in bundle/platforms/codabench_site.py, and the Codabench dry run holds each phase to it."""
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from bundle.platforms.codabench_site import leaderboard_problem
from bundle.platforms import platform
from bundle.spec import SpecError, load_spec

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "kinds" / "label_accuracy" / "default_spec.yaml"
IMAGE_PYTHON = str(REPO / ".venv-image" / "bin" / "python")


def long_spec(tmp_path: Path, per_task: bool, limit: int = 500) -> Path:
    """Two 400 s tasks: more than 500 s in one run, start-up allowances and scoring included."""
    raw = yaml.safe_load(SPEC.read_text())
    raw["tasks"] = {name: {"budget_seconds": 400} for name in raw["tasks"]}
    raw["phases"]["evaluation"]["execution_time_limit"] = limit
    if per_task:
        raw["codabench_tasks"] = "per_task"
    shutil.copyfile(SPEC.parent / raw["logo"], tmp_path / raw["logo"])
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return tmp_path / "spec.yaml"


def test_per_task_is_refused_with_the_site_rule_that_forbids_it(tmp_path):
    with pytest.raises(SpecError) as error:
        load_spec(long_spec(tmp_path, per_task=True, limit=900))
    message = str(error.value)
    assert "codabench_tasks: per_task is refused" in message
    assert "src/apps/leaderboards/strategies.py" in message and "#2211" in message
    built = subprocess.run([sys.executable, str(REPO / "build_bundle.py"), "--config",
                            str(tmp_path / "spec.yaml"), "--platform", "codabench",
                            "--out", str(tmp_path / "out")], cwd=REPO, capture_output=True,
                           text=True, timeout=600)
    assert built.returncode != 0 and "Traceback" not in built.stderr
    assert "per_task is refused" in built.stdout + built.stderr
    assert not list((tmp_path / "out").glob("*.zip"))


def test_in_one_codabench_task_the_budgets_add_up(tmp_path):
    with pytest.raises(SpecError) as error:
        load_spec(long_spec(tmp_path, per_task=False))
    assert "execution_time_limit: found 500, expected at least 934 s" in str(error.value)


SCORES = {"iris": {"weighted_loss": 0.58}, "wine": {"weighted_loss": 0.85}}


@pytest.mark.parametrize("rule, tasks, problem", [
    # LastestModeStrategy.do_execute takes every submission of the owner in the phase off,
    # the just-scored child's siblings included, before it puts that child on
    ("Force_Last", ["iris", "wine"], "leaves only task(s) wine of the submission's 2"),
    ("Force_Last", ["iris"], None),
    # AllModeStrategy takes nothing off: the earlier submission keeps its row
    ("Force_Latest_Multiple", ["iris", "wine"], "leaves 2 rows"),
    ("Add", ["iris"], "leaves 0 rows"),               # ManualModeStrategy: nothing goes on
])
def test_the_leaderboard_model_follows_the_sites_strategies(rule, tasks, problem):
    """codalab/codabench c7dbc756, src/apps/leaderboards/strategies.py (the rules), called by
    api/views/submissions.py upload_submission_scores once per child submission; rows as
    api/views/competitions.py get_leaderboard groups them (owner and parent)."""
    found = leaderboard_problem(rule, ("weighted_loss", "asc"), tasks, SCORES)
    if problem is None:
        assert found is None
    else:
        assert problem in found


def _split_into_two_tasks(bundle: Path, out: Path) -> Path:
    """The development phase as two Codabench tasks, as codabench_tasks: per_task built it."""
    with zipfile.ZipFile(bundle) as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "competition.yaml":
                comp = yaml.safe_load(data)
                comp["tasks"].append({**comp["tasks"][0], "index": 1, "name": "second"})
                comp["tasks"][0]["name"] = "first"
                comp["phases"][0]["tasks"] = [0, 1]
                data = yaml.safe_dump(comp, sort_keys=False).encode()
            target.writestr(item, data)
    return out


def test_the_dry_run_fails_a_phase_whose_leaderboard_keeps_one_task_of_a_submission(tmp_path):
    built = subprocess.run([sys.executable, str(REPO / "build_bundle.py"), "--config",
                            str(SPEC), "--phase", "development", "--platform", "codabench",
                            "--out", str(tmp_path / "out")], cwd=REPO, capture_output=True,
                           text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    bundle = next((tmp_path / "out").glob("*.zip"))
    one = {s.step: s for s in platform("codabench").dry_run(bundle, IMAGE_PYTHON)}
    assert one["leaderboard"].status == "ok", one["leaderboard"].detail
    split = platform("codabench").dry_run(_split_into_two_tasks(bundle, tmp_path / "split.zip"),
                                          IMAGE_PYTHON)
    assert [s.status for s in split if s.step == "scoring"] == ["ok", "ok"]
    board = next(s for s in split if s.step == "leaderboard")
    assert board.status == "failed"
    assert "leaves only task(s) second of the submission's 2" in board.detail
    assert "strategies.py" in board.detail and "#2211" in board.detail

"""A smoke test made of named public tasks (kinds/bdl2021: its kit publishes the references of
its development tasks; label_accuracy publishes none, Retina's smoke test is a stand-in):
staged apart from the phase's hidden tasks, in a track. The smoke test's run itself is
tests/test_smoke_test.py's."""
import shutil

import yaml

from bundle.phase_data import stage_reference_data
from bundle.phase_plan import phase_plan
from bundle.programs import scoring_config
from bundle.spec import load_spec
from kinds.kind import KINDS
from runtime.rules import smoke_test


def test_named_public_tasks_make_a_smoke_test_in_a_track_staged_apart(tmp_path):
    """BDL's evaluation phase has tracks; iris, a development task whose references its kit
    publishes, is its smoke test, under the task's budget by default (at most 30 s)."""
    bdl = KINDS["bdl2021"].DEFAULT_SPEC
    raw = yaml.safe_load(bdl.read_text())
    shutil.copyfile(bdl.parent / raw["logo"], tmp_path / raw["logo"])
    raw["phases"]["evaluation"]["smoke_test"] = {"tasks": ["iris"]}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    plan = phase_plan(load_spec(tmp_path / "spec.yaml"), "evaluation", "light")
    [task] = plan.rules["smoke_test"].tasks
    assert (task.name, task.budget_seconds) == ("iris", min(raw["tasks"]["iris"]
                                                            ["budget_seconds"], 30))
    assert "iris" not in [t.name for t in plan.tasks]
    staged = stage_reference_data(plan, tmp_path / "ref")
    assert list((staged / smoke_test.FOLDER).glob("iris*")) and not list(staged.glob("iris*"))
    assert [t["name"] for t in scoring_config(plan)["smoke_test"]["tasks"]] == ["iris"]

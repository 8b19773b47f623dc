"""References whose diagnostics fail the convergence gate: the build refuses them, naming the
task and the failed check, unless the spec accepts them explicitly; the pages then say so."""
import json
import shutil
from pathlib import Path

import pytest
import yaml

from bundle.leaderboard import phase_columns
from bundle.phase_plan import phase_plan
from bundle.render import page_contexts, render_pages
from bundle.spec import SpecError, load_spec
from kinds.bdl2021.kind import TEMPLATES
from kinds.bdl2021.reference.task_files import DEFAULT_ROOT

REPO = Path(__file__).resolve().parents[3]
OVERRIDE = "accept_unconverged_references"


def data_root_with_short_iris_chains(tmp_path: Path) -> Path:
    """The embedded iris task as an organizer's data root, its diagnostics as a run with too
    few kept draws writes them (the energy's ESS under the gate's minimum)."""
    data = tmp_path / "data"
    shutil.copytree(DEFAULT_ROOT / "iris", data / "iris")
    path = data / "iris" / "iris_hmc_diagnostics.json"
    diagnostics = json.loads(path.read_text())
    diagnostics["energy"].update(ess=44.0, passed=False)
    diagnostics["ess"]["potential_energy"] = 44.0
    diagnostics["reference_standard"]["energy_ess_bulk"] = 44.0
    path.write_text(json.dumps(diagnostics, indent=1))
    return data


def spec_file(tmp_path: Path, data: Path, **iris) -> Path:
    spec = yaml.safe_load((REPO / "kinds" / "bdl2021" / "default_spec.yaml").read_text())
    spec.pop("logo")
    spec.update(data_root=str(data), tasks={"iris": {"budget_seconds": 30, **iris}},
                phases={"development": {**spec["phases"]["development"], "tasks": ["iris"]}},
                tracks={})
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def overview_page(spec) -> str:
    plan = phase_plan(spec, "development")
    contexts = page_contexts(spec, [spec.phase("development")], [plan], phase_columns(plan),
                             spec.title, None)
    return render_pages(contexts, TEMPLATES)["overview.html"]


def test_the_build_refuses_references_that_failed_the_gate_naming_task_and_check(tmp_path):
    data = data_root_with_short_iris_chains(tmp_path)
    with pytest.raises(SpecError) as refused:
        load_spec(spec_file(tmp_path, data))
    message = str(refused.value)
    assert "tasks.iris:" in message and "ESS of the potential energy is 44 < 400" in message
    assert str(data / "iris" / "iris_hmc_diagnostics.json") in message
    assert f"tasks.iris.{OVERRIDE}: true" in message


def test_the_spec_may_accept_them_and_the_pages_then_say_so(tmp_path):
    data = data_root_with_short_iris_chains(tmp_path)
    spec = load_spec(spec_file(tmp_path, data, **{OVERRIDE: True}))
    page = " ".join(overview_page(spec).split())
    assert "did not pass the convergence gate" in page
    assert "iris" in page and "ESS of the potential energy is 44 &lt; 400" in page


def test_references_that_passed_get_no_notice_and_a_needless_override_a_warning(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(DEFAULT_ROOT / "iris", data / "iris")
    spec = load_spec(spec_file(tmp_path, data, **{OVERRIDE: True}))
    assert "did not pass the convergence gate" not in overview_page(spec)
    assert any(f"tasks.iris.{OVERRIDE}" in warning and "passed" in warning
               for warning in spec.warnings), spec.warnings


def test_a_diagnostics_file_without_the_gate_figures_is_refused_naming_it(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(DEFAULT_ROOT / "iris", data / "iris")
    path = data / "iris" / "iris_hmc_diagnostics.json"
    path.write_text(json.dumps({"task": "iris"}))
    with pytest.raises(SpecError) as refused:
        load_spec(spec_file(tmp_path, data, **{OVERRIDE: True}))
    assert f"tasks.iris: {path}:" in str(refused.value) and "'reference_standard'" in str(refused.value)

"""BDL's default spec, and what of the spec's validation only it exercises: its tracks, and its
tasks whose references a results phase publishes (so that a code phase may not hide them
again unless the spec says so). The validation itself is tests/test_spec.py's, on
label_accuracy's spec."""
import pytest
import yaml

from bundle.spec import SpecError, load_spec
from kinds.kind import KINDS
from test_spec import set_path, write

BDL_SPEC = KINDS["bdl2021"].DEFAULT_SPEC


def bdl_spec() -> dict:
    return yaml.safe_load(BDL_SPEC.read_text())


def test_default_spec_is_valid():
    spec = load_spec(BDL_SPEC)
    assert [p.key for p in spec.phases] == ["development", "evaluation"]
    assert spec.phase("evaluation").code_submission and spec.budgets["wine"] == 30
    assert [t.key for t in spec.tracks] == ["light", "extended"]


def test_a_track_of_a_development_task_is_refused(tmp_path):
    spec = set_path(bdl_spec(), "tracks.light.tasks", ["iris"])
    with pytest.raises(SpecError) as caught:
        load_spec(write(tmp_path, spec))
    assert "tracks.light.tasks: 'iris' is not a task of a code phase" in str(caught.value)


def test_a_task_public_in_a_results_phase_is_refused_in_a_code_phase(tmp_path):
    spec_file = write(tmp_path, set_path(bdl_spec(), "phases.development.tasks", ["iris", "wine"]))
    with pytest.raises(SpecError) as caught:
        load_spec(spec_file)
    assert ("phases.evaluation.tasks: 'wine' is also scored in the results phase "
            "phases.development") in str(caught.value)
    assert str(spec_file) in str(caught.value)


def test_override_allows_a_task_in_a_results_and_a_code_phase(tmp_path):
    spec = set_path(bdl_spec(), "phases.development.tasks", ["iris", "wine"])
    spec["public_reference_tasks_allowed_in_code_phases"] = ["wine"]
    spec.pop("logo")
    assert load_spec(write(tmp_path, spec)).phase("development").tasks == ("iris", "wine")

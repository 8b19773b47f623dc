"""Organizer spec validation: every bad spec is refused with the key path and what was expected.
On label_accuracy's default spec (the core tests' kind); what only BDL's spec has (tracks, a
task whose references a results phase publishes) is kinds/bdl2021/tests/test_bdl_spec.py's."""
import pytest
import yaml

from bundle.spec import DEFAULT_SPEC, SpecError, load_spec
from kinds.kind import KINDS

CORE_SPEC = KINDS["label_accuracy"].DEFAULT_SPEC


def default_spec() -> dict:
    """The command line's default spec (bundle.spec.DEFAULT_SPEC), which other test files
    change (test_startup_allowance.py)."""
    return yaml.safe_load(DEFAULT_SPEC.read_text())


def core_spec() -> dict:
    """label_accuracy's default spec: two phases, iris and wine in each, no tracks."""
    return yaml.safe_load(CORE_SPEC.read_text())


def write(tmp_path, spec: dict | str):
    path = tmp_path / "spec.yaml"
    path.write_text(spec if isinstance(spec, str) else yaml.safe_dump(spec, sort_keys=False))
    return path


def test_default_spec_is_valid():
    spec = load_spec(CORE_SPEC)
    assert [p.key for p in spec.phases] == ["development", "evaluation"]
    assert spec.phase("evaluation").code_submission and spec.budgets["wine"] == 10
    assert not spec.phase("development").code_submission and list(spec.tracks) == []


def set_path(spec: dict, path: str, value):
    keys = path.split(".")
    target = spec
    for key in keys[:-1]:
        target = target[key]
    if value is DELETE:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value
    return spec


DELETE = object()
BAD_SPECS = [
    ("titel", "Typo", "(top level): unknown key 'titel' (did you mean 'title'?)"),
    ("title", DELETE, "'title' is a required property"),
    ("title", "x" * 101, "title: found \"xxxx"),
    ("slug", "My Competition", "slug: found \"My Competition\", expected text matching"),
    ("docker_image", "codalab/codalab_legacy:py312", "docker_image: found \"codalab/codalab_legacy:py312\""),
    ("tasks.wine.budget_seconds", -5, "tasks.wine.budget_seconds: found -5, expected a number > 0"),
    ("tasks.wine.budget_second", 5, "tasks.wine: unknown key 'budget_second' (did you mean 'budget_seconds'?)"),
    ("phases.evaluation.submission", "upload", "phases.evaluation.submission: found \"upload\", expected one of ['results', 'code']"),
    ("phases.evaluation.start", "next spring", "phases.evaluation.start: found \"next spring\", expected a date, YYYY-MM-DD HH:MM:SS (UTC)"),
    ("phases.evaluation.start", "2027-02-30 00:00:00", "phases.evaluation.start: found '2027-02-30 00:00:00', which is not a real date"),
    ("phases.evaluation.start", "2026-12-01 00:00:00", "phases.evaluation.start: found 2026-12-01 00:00:00, expected a start after phases.development.start"),
    ("phases.evaluation.tasks", ["wine", "mnist"], "phases.evaluation.tasks: 'mnist' is not in tasks"),
    ("phases.evaluation.tasks", [], "phases.evaluation.tasks: found [], expected at least 1 item(s)"),
    ("phases.evaluation.execution_time_limit", 100, "phases.evaluation.execution_time_limit: found 100, expected at least 154 s"),
    ("phases.evaluation.max_submissions_per_day", 0, "phases.evaluation.max_submissions_per_day: found 0, expected a number >= 1"),
    ("phases.evaluation.label", "E" * 51, "phases.evaluation.label: found \"EEEE"),
    ("phases.evaluation.colour", "blue", "phases.evaluation: unknown key 'colour'"),
    ("tracks", {"light": {"label": "Light", "tasks": ["mnist"]}}, "tracks.light.tasks: 'mnist' is not a task of a code phase"),
    ("end_date", "2027-03-01 00:00:00", "end_date: found 2027-03-01 00:00:00, expected a date after the last phase's start"),
    ("metric_weights", {"agreement": 1.0}, "metric_weights.agreement: not a metric of kind label_accuracy; expected one of accuracy, balanced_accuracy"),
    ("sandbox", {"grace_seconds": 600}, "sandbox.grace_seconds: found 600, expected a number <= 60"),
    ("pages.terms", DELETE, "pages: 'terms' is a required property"),
    ("tasks.mystery", {"budget_seconds": 5}, "tasks.mystery: no task declaration at"),
    ("phases.development.max_submissions_per_day", 200, "phases.development.max_submissions_per_day: found 200, expected at most phases.development.max_submissions (100)"),
    ("phases.development.start", "2027-01-10 00:00:00+05:00", "phases.development.start: found \"2027-01-10 00:00:00+05:00\", expected a date, YYYY-MM-DD HH:MM:SS (UTC); dates are UTC without an offset: write 2027-01-09 19:00:00"),
    ("public_reference_tasks_allowed_in_code_phases", ["mnist"], "public_reference_tasks_allowed_in_code_phases: 'mnist' is not in tasks"),
]


@pytest.mark.parametrize("path, value, message", BAD_SPECS, ids=[b[0] + ":" + str(i) for i, b in enumerate(BAD_SPECS)])
def test_bad_spec_is_refused_with_path_and_expectation(tmp_path, path, value, message):
    spec_file = write(tmp_path, set_path(core_spec(), path, value))
    with pytest.raises(SpecError) as caught:
        load_spec(spec_file)
    assert message in str(caught.value), str(caught.value)
    assert str(spec_file) in str(caught.value)


def test_yaml_syntax_error_names_line_and_column(tmp_path):
    with pytest.raises(SpecError, match=r"line 2, column 9: not valid YAML: mapping values"):
        load_spec(write(tmp_path, "slug: a\ntitle: b: c\ntasks: {}\n"))


def test_non_mapping_spec_and_missing_file(tmp_path):
    with pytest.raises(SpecError, match="expected a mapping of keys at the top, found list"):
        load_spec(write(tmp_path, "- a\n- b\n"))
    with pytest.raises(SpecError, match="file not found"):
        load_spec(tmp_path / "nothing.yaml")


def test_a_track_of_a_task_no_code_phase_scores_is_refused(tmp_path):
    spec = set_path(core_spec(), "phases.evaluation.tasks", ["wine"])
    spec["tracks"] = {"light": {"label": "Light", "tasks": ["iris"]}}
    with pytest.raises(SpecError) as caught:
        load_spec(write(tmp_path, spec))
    assert "tracks.light.tasks: 'iris' is not a task of a code phase" in str(caught.value)


def test_all_problems_are_reported_together(tmp_path):
    spec = core_spec()
    spec["slug"] = "Bad Slug"
    spec["phases"]["development"]["submission"] = "upload"
    with pytest.raises(SpecError) as caught:
        load_spec(write(tmp_path, spec))
    assert len(caught.value.problems) == 2


def test_unquoted_impossible_date_and_offset_name_their_key(tmp_path):
    text = CORE_SPEC.read_text()
    bad = text.replace("end_date: 2027-06-30 23:59:59", "end_date: 2026-12-32")
    assert bad != text
    with pytest.raises(SpecError, match=r"end_date: found '2026-12-32', which is not a real date"):
        load_spec(write(tmp_path, bad))
    offset = text.replace("end_date: 2027-06-30 23:59:59", "end_date: 2027-06-30 23:59:59+02:00")
    with pytest.raises(SpecError, match=r"end_date: .*write 2027-06-30 21:59:59"):
        load_spec(write(tmp_path, offset))


def test_logo_must_be_a_png_or_jpeg(tmp_path):
    (tmp_path / "logo.png").write_bytes(b"GIF89a not accepted")
    spec = core_spec()
    spec["data_root"] = str(KINDS["label_accuracy"].EMBEDDED_ROOT)
    with pytest.raises(SpecError, match=r"logo: .*is not an image.*expected a PNG or JPEG file"):
        load_spec(write(tmp_path, spec))


def test_past_dates_are_warnings_and_budgets_too_short_to_time_are_refused(tmp_path):
    spec = set_path(core_spec(), "phases.development.start", "2020-01-10 00:00:00")
    spec["tasks"]["iris"]["budget_seconds"] = 0.5
    spec.pop("logo")
    warnings = load_spec(write(tmp_path, spec)).warnings
    assert any(w.startswith("phases.development.start: 2020-01-10 00:00:00 is in the past")
               for w in warnings), warnings
    assert not any("budget_seconds" in w for w in warnings), warnings
    spec["tasks"]["iris"]["budget_seconds"] = 0.4
    with pytest.raises(SpecError) as error:
        load_spec(write(tmp_path, spec))
    assert ("tasks.iris.budget_seconds: found 0.4, expected at least 0.5 s: the ingestion reads "
            "its clock every 0.05 s") in str(error.value)

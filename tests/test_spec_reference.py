"""docs/spec_reference.md and load_spec's schema and defaults all come from one record per key
(bundle/spec_schema.py), so none of them can drift from the others."""
import pytest
import yaml

from bundle import spec_reference
from bundle.spec import DEFAULT_SPEC, load_spec
from bundle.spec_reference import REFERENCE_FILE, ReferenceDrift, render_reference, schema_keys
from bundle.spec_schema import KEYS, MAPPING, REQUIRED, SCHEMA, Key, filled, json_schema


def test_committed_reference_is_the_generated_one():
    assert REFERENCE_FILE.read_text(encoding="utf-8") == render_reference(), (
        f"run: {spec_reference.COMMAND}")


def test_check_flag_agrees(capsys):
    assert spec_reference.main(["--check"]) == 0


def test_every_schema_path_is_documented():
    text = REFERENCE_FILE.read_text(encoding="utf-8")
    paths = [key.path for key in schema_keys()]
    assert set(SCHEMA["properties"]) <= set(paths)
    for path in paths:
        assert f"| [`{path}`](#" in text, path
        assert f"\n### {path}\n" in text, path


def test_nested_paths_are_walked():
    paths = {key.path for key in schema_keys()}
    assert {"phases.<phase>.execution_time_limit", "tasks.<task>.budget_seconds",
            "tracks.<track>.tasks", "organizers[].name", "sandbox.grace_seconds",
            "pages.overview", "metric_weights.<metric>"} <= paths


def test_defaults_come_from_the_records():
    text = render_reference()
    row = next(line for line in text.splitlines()
               if line.startswith("| [`phases.<phase>.max_submissions_per_day`]"))
    assert "| no | `5` |" in row           # min(5, max_submissions), max_submissions left out
    row = next(line for line in text.splitlines()
               if line.startswith("| [`scoring_margin_seconds`]"))
    assert "| no | `60` | `120` |" in row      # default 60; the default spec says 120


def _without_optional_keys(value, keys):
    """``value`` less every key the records give a default (entries of mappings kept)."""
    if not isinstance(value, dict) or not keys:
        return value
    entry = next((name for name in keys if name.startswith("<")), None)
    if entry:
        return {name: _without_optional_keys(item, keys[entry].keys)
                for name, item in value.items()}
    return {name: _without_optional_keys(item, keys[name].keys) for name, item in value.items()
            if keys[name].default is REQUIRED}


def test_load_spec_applies_the_records_defaults(tmp_path):
    raw = yaml.safe_load(DEFAULT_SPEC.read_text(encoding="utf-8"))
    bare = tmp_path / "spec.yaml"
    bare.write_text(yaml.safe_dump(_without_optional_keys(raw, KEYS)), encoding="utf-8")
    spec = load_spec(bare)
    sandbox = KEYS["sandbox"].keys
    assert spec.sandbox == {name: key.default for name, key in sandbox.items()
                            if name != "memory_limit"} | {"memory_limit": "address_space"}
    assert spec.scoring_margin_seconds == KEYS["scoring_margin_seconds"].default
    assert spec.layout == KEYS["layout"].default
    phase = KEYS["phases"].keys["<phase>"].keys
    assert {p.max_submissions for p in spec.phases} == {phase["max_submissions"].default}
    assert {p.max_submissions_per_day for p in spec.phases} == {5}


def test_a_new_record_reaches_the_schema_the_defaults_and_the_page():
    keys = {**KEYS, "brand_new_key": Key({"type": "integer"}, "A key added by one record.",
                                         default=7, example=3)}
    assert json_schema(Key(MAPPING, "", keys=keys))["properties"]["brand_new_key"] == {
        "type": "integer"}
    given = {"docker_image": "codalab/codalab-legacy:py312"}
    assert filled(given, keys, given)["brand_new_key"] == 7
    row = next(line for line in render_reference(keys).splitlines()
               if line.startswith("| [`brand_new_key`]"))
    assert row.endswith("| integer | no | `7` | `3` |")
    assert "\n### brand_new_key\n\nA key added by one record.\n" in render_reference(keys)


def test_a_key_with_no_example_anywhere_fails():
    keys = {**KEYS, "brand_new_key": Key({"type": "integer"}, "No example.", default=7)}
    with pytest.raises(ReferenceDrift, match="brand_new_key: the default spec has no value"):
        render_reference(keys)


def test_check_flag_fails_on_a_stale_file(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "spec_reference.md"
    stale.write_text(render_reference().replace("| `60` |", "| `61` |"), encoding="utf-8")
    monkeypatch.setattr(spec_reference, "REFERENCE_FILE", stale)
    assert spec_reference.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().err

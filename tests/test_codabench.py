"""Codabench (version: 2) bundles from the same spec: built, checked, dry-run, and refused. On
label_accuracy's default competition (the core tests' kind), a bundle per phase."""
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from bundle.rules import CODABENCH, check_bundle
from plans import per_phase_spec

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def cli(*args):
    return subprocess.run([sys.executable, str(REPO / "build_bundle.py"), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=900)


DEVELOPMENT = "label-accuracy-development-codabench.zip"
EVALUATION = "label-accuracy-evaluation-codabench.zip"


@pytest.fixture(scope="module")
def built(built_bundles, tmp_path_factory):
    """Every phase of label_accuracy's default spec for Codabench, a bundle each: the run's
    shared build (conftest.py; the command line's own output is tested in test_build.py)."""
    folder = built_bundles(per_phase_spec(tmp_path_factory.mktemp("spec")), "codabench")
    assert sorted(p.name for p in folder.glob("*.zip")) == [DEVELOPMENT, EVALUATION]
    return folder


def competition(bundle: Path) -> dict:
    with zipfile.ZipFile(bundle) as archive:
        return yaml.safe_load(archive.read("competition.yaml"))


def test_version_2_yaml_follows_codabench_rules(built):
    comp = competition(built / EVALUATION)
    assert comp["version"] == 2 and comp["image"] == "logo.png" and comp["terms"]
    assert isinstance(comp["pages"], list) and isinstance(comp["phases"], list)
    phase = comp["phases"][0]
    assert isinstance(phase["start"], str) and phase["start"] == "2027-04-01 00:00:00"
    assert phase["tasks"] == [0] and comp["tasks"][0]["ingestion_program"] == "ingestion_program.zip"
    board = comp["leaderboards"][0]
    assert board["submission_rule"] == "Force_Last"
    columns = board["columns"]
    assert all(len(c["key"]) <= 36 and len(c["title"]) <= 36 for c in columns)
    # Ranked as on CodaLab, by the average over the tasks of each one's rank on its primary
    # metric: the site's avg_rank, over columns each of which one task alone writes.
    ranking = columns[0]
    assert ranking["index"] == 0 and ranking["key"] == "average_rank"
    assert ranking["computation"] == "avg_rank" and ranking["sorting"] == "asc"
    averaged = [c["key"] for c in columns if c["index"] in ranking["computation_indexes"]]
    with zipfile.ZipFile(built / EVALUATION) as bundle:
        scorer = zipfile.ZipFile(io.BytesIO(bundle.read(comp["tasks"][0]["scoring_program"])))
        config = json.loads(scorer.read("scoring_config.json"))
    written = {c["key"]: c["task"] for c in config["columns"]}
    assert "average_rank" not in written and all(key in written for key in averaged)
    assert sorted(written[key] for key in averaged) == sorted(t["name"] for t in config["tasks"])
    assert len(averaged) > 1


def rewrite_yaml(bundle: Path, target: Path, change) -> Path:
    with zipfile.ZipFile(bundle) as source, zipfile.ZipFile(target, "w") as copy:
        for name in source.namelist():
            data = source.read(name)
            if name == "competition.yaml":
                comp = yaml.safe_load(data)
                change(comp)
                data = yaml.safe_dump(comp, sort_keys=False).encode()
            copy.writestr(name, data)
    return target


def two_phases(comp):
    second = dict(comp["phases"][0], index=1, name="Final", start="2027-07-01 00:00:00")
    comp["phases"][0].pop("end")
    comp["phases"].append(second)


def long_key(comp):
    comp["leaderboards"][0]["columns"][1]["key"] = "k" * 37


def unknown_key(comp):
    comp["phases"][0]["max_submissions_per_person"] = 5


@pytest.mark.parametrize("change, rule, message", [
    (long_key, "v2-leaderboards", "'kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk' (37 characters), expected 1 to 36 characters"),
    (two_phases, "v2-phases", "phases[0]: no end, but a phase follows"),
    (unknown_key, "v2-phases", "phases[0]: unknown key 'max_submissions_per_person'; Codabench silently drops it"),
    (lambda c: (c["tasks"].append(dict(c["tasks"][0], index=1)),
                c["phases"][0].update(tasks=[0, 1], auto_migrate_to_this_phase=True)),
     "v2-phases", "auto_migrate_to_this_phase into a phase of 2 tasks"),
    (lambda c: c["phases"][0].update(accepts_only_result_submissions=True), "v2-phases",
     "phases[0]: 'accepts_only_result_submissions' is in Codabench's documentation, but Codabench ignores it"),
    (lambda c: c.update(version="2"), "v2-structure", "version: found '2', expected the integer 2"),
    (lambda c: c["phases"][0].update(start=__import__("datetime").datetime(2027, 4, 1, 13)),
     "v2-phases", "an unquoted date loses its time of day"),
    (lambda c: c["leaderboards"][0].pop("submission_rule"), "v2-leaderboards", "set it explicitly"),
    (lambda c: c["leaderboards"][0]["columns"].pop(0), "v2-leaderboards", "no column has index 0"),
    (lambda c: c.pop("pages"), "v2-structure", "pages: missing or not a list"),
])
def test_v2_bundle_problems_are_refused_with_a_clear_message(built, tmp_path, change, rule, message):
    broken = rewrite_yaml(built / EVALUATION, tmp_path / "broken.zip", change)
    failures = check_bundle(broken, CODABENCH)
    assert any(f.rule == rule and message in f.message for f in failures), failures
    if change in (long_key, two_phases):    # the command line says it as the rule does
        result = cli("--check", str(broken))
        assert result.returncode == 1 and message.split("(")[0][:20] in result.stderr


def test_valid_v2_bundle_has_no_rule_failures(built):
    for bundle in built.glob("*.zip"):
        assert check_bundle(bundle, CODABENCH) == [], bundle.name


def test_scorer_output_is_a_flat_scores_json_without_metadata(built, tmp_path):
    from bundle.platforms.worker import CODABENCH, read_scores
    from scoring_harness import new_run, prepare_phase, run_scoring
    import json
    prepared = tmp_path / "prepared"
    plan = prepare_phase(prepared, "development", kind="label_accuracy")
    run = new_run(prepared, tmp_path / "run")
    import numpy as np
    for task in plan.tasks:                    # the hidden labels themselves
        np.savetxt(run / "input" / "res" / f"{task.name}_labels.csv",
                   np.loadtxt(task.folder / f"{task.name}_test_labels.csv"), fmt="%d")
    assert run_scoring(run).returncode == 0
    scores = json.loads((run / "output" / "scores.json").read_text())
    assert all(isinstance(v, float) for v in scores.values())
    assert not (run / "output" / "metadata").exists()
    keys = [line.split(":")[0] for line in (run / "output" / "scores.txt").read_text().splitlines()]
    assert read_scores(run / "output", keys, CODABENCH) == (scores, [])


def test_check_fails_a_results_zip_with_a_command_as_older_codabench_would(built, tmp_path):
    """codabench_v2.md §3.4: a server older than v1.27 starts a results zip's metadata
    command instead of scoring its files (v1.27 on copies the files, metadata or not)."""
    from test_build import kit_member
    bundle = built / DEVELOPMENT
    sample = kit_member(bundle, "sample_result_submission.zip", tmp_path / "sample.zip")
    with zipfile.ZipFile(sample, "a") as archive:
        archive.writestr("metadata", "command: python3 predict.py\n")
    result = cli("--check", str(bundle), "--submission", str(sample))
    assert result.returncode == 1
    assert "a results submission must not hold a command in 'metadata'" in result.stderr


def test_codabench_runs_a_code_zip_without_metadata(built, tmp_path):
    """Codabench starts the ingestion program whatever the zip holds (its files are also
    copied over the prediction output before scoring, which the scorer ignores)."""
    from test_build import kit_member, zip_without
    bundle = built / EVALUATION
    sample = kit_member(bundle, "sample_code_submission.zip", tmp_path / "sample.zip")
    stripped = zip_without(sample, "metadata", tmp_path / "no_metadata.zip")
    result = cli("--check", str(bundle), "--submission", str(stripped))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ingestion" in result.stdout and "dry run passed" in result.stdout

"""One competition holding every phase, or one competition per phase (the spec's layout)."""
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from bundle.build import build_competition, competition_targets
from bundle.leaderboard import competition_columns
from bundle.phase_plan import phase_plan
from bundle.spec import DEFAULT_SPEC, load_spec

REPO = Path(__file__).resolve().parents[1]
LABELS_SPEC = REPO / "kinds" / "label_accuracy" / "default_spec.yaml"


def spec_copy(tmp_path: Path, source: Path = DEFAULT_SPEC, **changes) -> Path:
    raw = yaml.safe_load(source.read_text())
    raw.update(changes)
    shutil.copyfile(source.parent / raw["logo"], tmp_path / raw["logo"])
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_targets_follow_the_layout(tmp_path):
    per_phase = load_spec(DEFAULT_SPEC)
    assert per_phase.layout == "per_phase"
    assert competition_targets(per_phase) == [
        (["development"], None), (["evaluation"], "light"), (["evaluation"], "extended")]
    one = load_spec(spec_copy(tmp_path, layout="one"))
    assert competition_targets(one) == [(["development", "evaluation"], "light"),
                                        (["development", "evaluation"], "extended")]
    assert competition_targets(one, "evaluation", "light") == [(["evaluation"], "light")]
    assert load_spec(LABELS_SPEC).layout == "one"         # the default when the spec is silent


def test_ranking_uses_a_column_every_phase_writes(tmp_path):
    bdl = load_spec(DEFAULT_SPEC)
    different = competition_columns([phase_plan(bdl, "development"),
                                     phase_plan(bdl, "evaluation", "light")])
    ranking = [c for c in different if c.selection_default]
    assert [c.key for c in ranking] == ["weighted_loss"]
    assert not any(c.computed for c in different)       # no Avg over columns a phase leaves empty
    labels = load_spec(LABELS_SPEC)
    same = competition_columns([phase_plan(labels, key) for key in ("development", "evaluation")])
    (ranking,) = [c for c in same if c.selection_default]
    assert ranking.computed_fields == ("iris_accuracy", "wine_accuracy")
    assert {"iris_train_seconds", "wine_train_seconds"} <= {c.key for c in same}


def _bundle(path: Path) -> dict:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


@pytest.mark.slow
def test_one_competition_holds_both_phases_and_says_so(tmp_path):
    """(CodaLab v1.5's yaml: its phases and program members; Codabench's in the next test.)"""
    spec = load_spec(spec_copy(tmp_path, layout="one"))
    built = build_competition(spec, ["development", "evaluation"], "light", tmp_path / "out",
                              platform="codalab")
    assert built.path.name == "bdl-approx-inference-light.zip" and built.phases == (
        "development", "evaluation")
    members = _bundle(built.path)
    competition = yaml.safe_load(members["competition.yaml"])
    assert sorted(competition["phases"]) == [1, 2]
    first, second = competition["phases"][1], competition["phases"][2]
    assert first["scoring_program"] == "development_scoring_program.zip"
    assert second["ingestion_program"] == "evaluation_ingestion_program.zip"
    assert first["is_scoring_only"] and not second["is_scoring_only"]
    overview = members["overview.html"].decode()
    assert "separate competition" not in overview and "(this competition)" not in overview
    assert "Evaluation (Light track)" in overview and "Development" in overview
    # the development phase closes when the evaluation opens, on the page as on the site
    assert "2027-04-01 00:00 UTC (when Evaluation (Light track) opens)" in overview
    assert "All phases share this one leaderboard" in members["evaluation.html"].decode()
    result = subprocess.run([sys.executable, str(REPO / "build_bundle.py"), "--check",
                             str(built.path)], cwd=REPO, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert re.search(r"^Development +scoring .* ok$", result.stdout, re.MULTILINE)
    assert re.search(r"^Evaluation \(Light track\) +scoring .* ok$", result.stdout, re.MULTILINE)


def test_codabench_phases_end_a_second_before_the_next_opens(tmp_path):
    spec = load_spec(LABELS_SPEC)
    built = build_competition(spec, ["development", "evaluation"], None, tmp_path,
                              platform="codabench")
    phases = yaml.safe_load(_bundle(built.path)["competition.yaml"])["phases"]
    assert [p["end"] for p in phases] == ["2027-03-31 23:59:59", "2027-06-30 23:59:59"]
    assert [p["tasks"] for p in phases] == [[0], [1]]


def test_per_phase_pages_name_the_other_phases_as_separate_competitions(tmp_path):
    built = build_competition(load_spec(DEFAULT_SPEC), ["development"], None, tmp_path)
    overview = _bundle(built.path)["pages/overview.html"].decode()
    assert "Development</b> (this competition)" in overview
    assert "Evaluation</b> (a separate competition)" in overview


def test_codabench_pages_describe_codabench_s_leaderboard(tmp_path):
    """Codabench (v1.29 on) computes the average rank itself (avg_rank): its pages promise the
    same ranking as CodaLab's, and say how the site computes it."""
    spec = load_spec(DEFAULT_SPEC)
    built = build_competition(spec, ["evaluation"], "extended", tmp_path, platform="codabench")
    members = _bundle(built.path)
    evaluation = members["pages/evaluation.html"].decode()
    columns = yaml.safe_load(members["competition.yaml"])["leaderboards"][0]["columns"]
    assert columns[0]["key"] == "average_rank" and columns[0]["computation"] == "avg_rank"
    assert "Ranking: mean over tasks of the rank" in evaluation
    assert "Codabench computes the average rank as it shows the leaderboard" in evaluation
    codalab = _bundle(build_competition(spec, ["evaluation"], "extended", tmp_path / "v1",
                                        platform="codalab").path)
    assert "Ranking: mean over tasks of the rank" in codalab["evaluation.html"].decode()

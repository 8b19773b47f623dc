"""A starting-kit guide is rendered per bundle from the facts its pages show: the same ranking,
limits and file names as the pages and competition.yaml, and only kit paths the kit holds.
Every kind's default competition is checked in test_kind_conformance.py, the organizer's own
spec in test_custom_kit.py."""
import shutil
import zipfile

import yaml

from bundle.build import build_competition
from bundle.spec import load_spec
from kinds.kind import KINDS

from kit_guides import agreement_problems


def test_one_competition_kits_guides_agree_with_its_bundle(tmp_path):
    """layout: one, with phases of different tasks: the leaderboard of both phases ranks by the
    weighted loss, not by the average rank each phase alone would have (label_accuracy's
    default scores both tasks in both phases, which test_kind_conformance.py builds); and no
    baseline table lies beside this copy of the spec."""
    source = KINDS["label_accuracy"].DEFAULT_SPEC
    raw = yaml.safe_load(source.read_text())
    shutil.copyfile(source.parent / raw["logo"], tmp_path / raw["logo"])
    raw["phases"]["development"]["tasks"] = ["iris"]
    raw["phases"]["evaluation"]["tasks"] = ["wine"]
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({**raw, "layout": "one"},
                                                       sort_keys=False))
    spec = load_spec(tmp_path / "spec.yaml")
    bundle = build_competition(spec, ["development", "evaluation"], None, tmp_path).path
    with zipfile.ZipFile(bundle) as archive:           # Codabench's, the default platform
        competition = yaml.safe_load(archive.read("competition.yaml"))
    ranking = next(c for c in competition["leaderboards"][0]["columns"] if c["index"] == 0)
    assert ranking["key"] == "weighted_loss", ranking
    problems = agreement_problems(bundle)
    assert not problems, "\n".join(problems)

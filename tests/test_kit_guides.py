"""A starting-kit guide is rendered per bundle from the facts its pages show: the same ranking,
limits and file names as the pages and competition.yaml, and only kit paths the kit holds.
Every kind's default competition is checked in test_kind_conformance.py, the organizer's own
spec in test_custom_kit.py."""
import shutil

import yaml

from bundle.build import build_competition
from bundle.spec import load_spec
from kinds.kind import KINDS

from kit_guides import agreement_problems


def test_one_competition_kits_guides_agree_with_its_bundle(tmp_path):
    """layout: one: the leaderboard of both phases ranks by the weighted loss, and the
    default spec's baseline table is not this copy's."""
    source = KINDS["bdl2021"].DEFAULT_SPEC
    raw = yaml.safe_load(source.read_text())
    shutil.copyfile(source.parent / raw["logo"], tmp_path / raw["logo"])
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({**raw, "layout": "one"},
                                                       sort_keys=False))
    spec = load_spec(tmp_path / "spec.yaml")
    bundle = build_competition(spec, ["development", "evaluation"], "light", tmp_path).path
    problems = agreement_problems(bundle)
    assert not problems, "\n".join(problems)

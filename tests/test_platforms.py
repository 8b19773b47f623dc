"""The platform seam (bundle/platforms/): one object per site, and no platform branch elsewhere."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from bundle.platforms import PLATFORMS, Platform, UnknownPlatform, platform, platform_of
from bundle.rules import BOTH

REPO = Path(__file__).resolve().parents[1]
# A name may come through its module: the kit's tools once held ``platform == worker.CODALAB``.
BRANCH = re.compile(r"""(==|!=)\s*(\w+\.)?(CODALAB|CODABENCH|["'](codalab|codabench)["'])"""
                    r"""|(\w+\.)?(CODALAB|CODABENCH|["'](codalab|codabench)["'])\s*(==|!=)""")
PER_PLATFORM_DICT = re.compile(r"""^\s*(CODALAB|CODABENCH|["'](codalab|codabench)["'])\s*:""",
                               re.MULTILINE)


def _core_sources() -> list[Path]:
    """The builder and the kit's tools, which ask the worker model (bundle/platforms/worker.py,
    the kit's worker.py) instead of naming a platform."""
    platforms = REPO / "bundle" / "platforms"
    return [path for path in [*sorted((REPO / "bundle").rglob("*.py")), REPO / "build_bundle.py",
                              *sorted((REPO / "starting_kit").glob("*.py"))]
            if platforms not in path.parents]


def test_each_registered_name_gives_its_platform_object():
    for name in PLATFORMS:
        site = platform(name)
        assert isinstance(site, Platform) and site.name == name
    assert set(BOTH) == set(PLATFORMS)          # the rules filter by the same names


def test_an_unknown_platform_is_refused_naming_the_known_ones():
    with pytest.raises(UnknownPlatform, match=r"unknown platform 'codalab-v2'.*codabench"):
        platform("codalab-v2")


def test_a_built_yaml_tells_its_platform():
    assert platform_of({"version": 2, "title": "x"}).name == "codabench"
    assert platform_of({"version": "2"}).name == "codabench"     # its checks report the typo
    assert platform_of({"title": "x", "phases": {}}).name == "codalab"


def test_the_rules_allow_exactly_the_variables_the_dry_run_replaces():
    codalab, codabench = platform("codalab"), platform("codabench")
    assert codalab.command_variables("scoring_program") == {
        "program", "input", "output", "tmp", "shared", "predictions"}
    assert codalab.command_variables("ingestion_program") == (
        codalab.command_variables("scoring_program")
        | {"ingestion_program", "submission_program", "hidden"})
    # Codabench replaces the same names in every container (codabench_v2.md §3.4)
    assert (codabench.command_variables("scoring_program")
            == codabench.command_variables("ingestion_program")
            == codalab.command_variables("ingestion_program"))


def test_the_core_asks_the_platform_object_instead_of_branching_on_its_name():
    found = [f"{path.relative_to(REPO)}:{text.count(chr(10), 0, match.start()) + 1}: "
             f"{match.group(0).strip()}"
             for path in _core_sources() for text in [path.read_text(encoding="utf-8")]
             for pattern in (BRANCH, PER_PLATFORM_DICT) for match in pattern.finditer(text)]
    assert found == [], "platform branches outside bundle/platforms/:\n" + "\n".join(found)

"""A Codabench bundle ranked by the site's average rank (``computation: avg_rank``) needs
Codabench v1.29 or later: an older server refuses it at upload. The build and ``--check`` say
so for every such bundle, with how to tell a server's release and the spec's fallback
(codabench_v2.md §1.5)."""
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bundle.platforms import platform

REPO = Path(__file__).resolve().parents[1]
NEEDS = "which Codabench has from release v1.29"
HOW_TO_TELL = "names its release at the bottom of every page"
FALLBACK = "'tasks: [<task>]'"


def build_bundle(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "build_bundle.py"), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_the_build_and_the_check_say_an_average_rank_needs_v1_29(tmp_path):
    """The default spec's development phase ranks three tasks by their average rank."""
    built = build_bundle("--phase", "development", "--out", str(tmp_path))
    assert built.returncode == 0, built.stdout + built.stderr
    (bundle,) = tmp_path.glob("*-codabench.zip")
    checked = build_bundle("--check", str(bundle))
    for output in (built.stdout, checked.stdout):
        assert NEEDS in output and HOW_TO_TELL in output and FALLBACK in output, output
        assert "avg_rank" in output
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_leaderboard_without_an_average_rank_needs_no_release():
    board = {"leaderboards": [{"columns": [{"title": "Loss", "key": "loss", "index": 0}]}]}
    assert platform("codabench").release_notes(board) == []
    ranked = yaml.safe_load("""
leaderboards:
  - columns:
      - {title: Average rank, key: average_rank, index: 0, computation: avg_rank,
         computation_indexes: [1, 2]}
      - {title: A, key: a, index: 1}
      - {title: B, key: b, index: 2}
""")
    (note,) = platform("codabench").release_notes(ranked)
    assert "'Average rank'" in note and NEEDS in note
    assert platform("codalab").release_notes(ranked) == []

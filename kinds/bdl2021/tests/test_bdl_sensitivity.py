"""The baselines' hyperparameter sensitivity tool: a constant changed in a copy, each variant run
through run_local, one row of scores per value."""
import subprocess
import sys

import pytest

from local_runs import REPO

TOOL = REPO / "kinds" / "bdl2021" / "kit" / "sensitivity.py"
sys.path.insert(0, str(TOOL.parent))
from sensitivity import variant  # noqa: E402


def test_a_variant_changes_that_constant_only():
    source = "STEPS = 12000\nSTEP_FRACTION = 0.1       # eta\nOTHER_STEP_FRACTION = 0.1\n"
    assert variant(source, "STEP_FRACTION", "0.4") == \
        "STEPS = 12000\nSTEP_FRACTION = 0.4       # eta\nOTHER_STEP_FRACTION = 0.1\n"
    with pytest.raises(SystemExit, match="no line 'MISSING = <number>'"):
        variant(source, "MISSING", "1")


@pytest.mark.slow
def test_one_value_gives_a_row_of_scores():
    result = subprocess.run([sys.executable, str(TOOL), "mc_dropout", "DROP", "0.1",
                             "--budget", "1"], cwd=REPO, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "| DROP | breast_cancer agreement | digits_shift agreement |" in result.stdout
    row = next(line for line in result.stdout.splitlines() if line.startswith("| 0.1 |"))
    assert len(row.split("|")) == 8 and "| spread |" in result.stdout

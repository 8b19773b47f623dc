"""The exact-posterior expectation's range lies within its metric's bounds, however far the
reference's chains are from one another.

Its interval widens each split's step for the uncertainty of the error's scale; on a reference
whose chains disagree wildly (the scoring benchmark's synthetic one: 4 independent Dirichlet
draws per point), the widened steps left the simplex and total variation's upper end came out
above 1, which the scorer refuses ("expected a finite number in [0, 1]"), so the organizer's
references could not be scored at all.
"""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kinds.bdl2021.runtime.exact_posterior import (expectation_blocks, expectation_document,
                                                   parse_expectation_document)
from kinds.bdl2021.runtime.score_types import SCORE_TYPES

REPO = Path(__file__).resolve().parents[3]


def far_off_chains(points: int = 2000, classes: int = 10) -> np.ndarray:
    """4 chains that agree on nothing, as the scoring benchmark writes them."""
    rng = np.random.default_rng(2021)
    return np.stack([rng.dirichlet(np.full(classes, 0.3), size=points) for _ in range(4)])


def test_a_range_from_a_far_off_reference_is_within_bounds_and_the_scorer_accepts_it():
    blocks, _ = expectation_blocks("classification", far_off_chains(), None)
    document = expectation_document("far_off", "classification", blocks)
    for score in SCORE_TYPES["classification"]:
        entry = document["metrics"][score.name]
        assert score.minimum <= entry["low"] <= entry["value"] <= entry["high"] \
            <= score.maximum, (score.name, entry)
    # what the scoring program runs on the shipped file before it scores anything
    parsed = parse_expectation_document(document, "far_off", "classification", "far_off.json")
    assert parsed["total_variation"].high <= 1.0


@pytest.mark.slow
def test_the_scoring_benchmark_runs_to_the_end_on_its_synthetic_references():
    """At 5 % of the 2021 rows (--scale): the same far-off chains, files, programs and steps.
    The claim does not depend on the size: without the clipping to the metric's bounds this
    run fails as the full-size one did (total variation's upper end 1.02 on cifar, checked
    when the option was added)."""
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "scoring_speed.py"),
                          "--repeat", "1", "--scale", "0.05"], cwd=REPO, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "ratio (a)/(b), process vs process" in run.stdout

"""Organizers' local runs (python -m bundle.local_run: the phase's kit built, then its own
run_local.py), and the scores they print."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_local(*args, timeout=600):
    """``python -m bundle.local_run`` with these arguments, from the repository's root."""
    return subprocess.run([sys.executable, "-m", "bundle.local_run", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def run_baseline(baseline: str, phase: str, out: Path, budget: float = 4):
    """A BDL baseline of the kit through a local run on a phase of the default spec."""
    return run_local("--baseline", baseline, "--phase", phase, "--budget", str(budget),
                     "--out", str(out))


def scores_of(stdout: str) -> dict:
    block = stdout.split("\nscores:\n")[1].split("\n\n")[0].splitlines()
    return {key: float(value) for key, value in (line.split(":") for line in block)}

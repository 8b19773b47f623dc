"""How stable the epoch calibration is from run to run on this machine.

A budget in epochs becomes seconds on the worker: before the participant's code runs, the
ingestion program times plain SGD on the task's declared model (the median of its timed
samples, kinds/bdl2021/runtime/calibration.py). Each run here is what one ingestion does for one
task, in a fresh Python process; the spread is the ratio of the slowest run's seconds per epoch
to the fastest's, per task (1.00 = identical runs), so a participant's budget varies by at most
that factor between two submissions on the same machine.

With ``--busy K``, K processes spin on the CPU meanwhile (a loaded worker): the epochs then
convert to more seconds, which is what a budget in epochs is for.

Usage: .venv/bin/python benchmarks/epoch_calibration.py [--runs N] [--epochs E] [--busy K]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "kinds" / "bdl2021" / "reference" / "embedded"
ONE_RUN = """
import json, sys, statistics
import numpy as np
from kinds.bdl2021.runtime.calibration import task_epoch_seconds
declaration = json.loads(open(sys.argv[1]).read())
with np.load(sys.argv[2]) as arrays:
    samples = task_epoch_seconds(declaration, arrays["x_train"], arrays["y_train"])
print(json.dumps({"median": statistics.median(samples), "samples": samples}))
"""


def one_run(task: Path) -> dict:
    name = task.name
    result = subprocess.run([sys.executable, "-c", ONE_RUN, str(task / f"{name}_task.json"),
                             str(task / f"{name}.npz")], cwd=REPO, capture_output=True,
                            text=True, check=True)
    return json.loads(result.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--epochs", type=float, default=3000,
                        help="a budget in epochs, to show the seconds it converts to")
    parser.add_argument("--busy", type=int, default=0,
                        help="processes spinning on the CPU during the runs")
    args = parser.parse_args()
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(args.busy)]
    try:
        return _table(args)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def _table(args) -> int:
    print(f"{args.runs} calibrations per task, each in a fresh process, {args.busy} busy "
          f"process(es) beside them; seconds per epoch of plain SGD (median of each run's "
          f"samples); {args.epochs:g} epochs in seconds")
    print(f"{'task':<14} {'fastest':>10} {'median':>10} {'slowest':>10} {'spread':>7} "
          f"{'budget range':>16}  within-run spread")
    for task in sorted(path for path in TASKS.iterdir() if path.is_dir()):
        runs = [one_run(task) for _ in range(args.runs)]
        medians = sorted(run["median"] for run in runs)
        within = max(max(run["samples"]) / min(run["samples"]) for run in runs)
        print(f"{task.name:<14} {medians[0]:>10.6f} {statistics.median(medians):>10.6f} "
              f"{medians[-1]:>10.6f} {medians[-1] / medians[0]:>7.2f} "
              f"{args.epochs * medians[0]:>7.2f}-{args.epochs * medians[-1]:<7.2f} s  "
              f"{within:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Ingestion overhead per task and kill latency, against a baseline measured in the same run.

(a) Overhead: a submission whose predict() returns at once, over K copies of the iris
    task; per task = (whole ingestion process wall time) / K. Baseline, same run: one fresh
    `python -c "import numpy; <same predict>"` process per task, the least any
    process-per-task design pays. Target: under 0.3 s per task.
(b) Kill latency: time from the budget's end to the last descendant gone, for a child
    that exits on SIGTERM and for one that ignores SIGTERM and leaves a setsid
    grandchild. Target: under the grace period + 1 s.

Usage: .venv/bin/python benchmarks/ingestion_overhead.py [--tasks K] [--repeat N]
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from ingestion_harness import new_run, prepare, worker_command  # noqa: E402
from scoring_harness import image_python  # noqa: E402

INSTANT = """
import numpy as np
def predict(task, x_train, y_train, x_test, checkpoint):
    return np.full((task.n_test, task.num_classes), 1.0 / task.num_classes)
"""
POLITE_LOOP = "def predict(task, x_train, y_train, x_test, checkpoint):\n    while True:\n        pass\n"
HOSTILE = """
import os, signal, subprocess, sys
def predict(task, x_train, y_train, x_test, checkpoint):
    subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(600)"])
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        pass
"""


def with_copies_of_iris(run: Path, copies: int) -> None:
    config_path = run / "run" / "ingestion_program" / "ingestion_config.json"
    config = json.loads(config_path.read_text())
    iris = next(task for task in config["tasks"] if task["name"] == "iris")
    config["tasks"] = [{**iris, "name": f"iris_{i}", "prediction_stem": f"iris_{i}_probs"}
                       for i in range(copies)]
    config_path.write_text(json.dumps(config))


def timed(argv, cwd) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=True)
    return time.perf_counter() - started, result.stdout


def overhead(prepared: Path, work: Path, copies: int, repeat: int) -> tuple[float, float]:
    ours, baseline = [], []
    submission_dir = work / "baseline"
    submission_dir.mkdir()
    (submission_dir / "submission.py").write_text(INSTANT)
    data = prepared / "input" / "iris.npz"
    one_task = (f"import sys, numpy as np; sys.path.insert(0, {str(submission_dir)!r}); "
                f"import submission; d = np.load({str(data)!r}); "
                "t = type('T', (), {'n_test': 50, 'num_classes': 3})(); "
                "submission.predict(t, d['x_train'], d['y_train'], d['x_test'], None)")
    for attempt in range(repeat):
        run = new_run(prepared, work / f"overhead{attempt}", INSTANT)
        with_copies_of_iris(run, copies)
        ours.append(timed(worker_command(run), run / "run")[0] / copies)
        baseline.append(sum(timed([image_python(), "-c", one_task], work)[0]
                            for _ in range(copies)) / copies)
    return statistics.median(ours), statistics.median(baseline)


def kill_latency(prepared: Path, work: Path, code: str, name: str) -> float:
    run = new_run(prepared, work / name, code)
    with_copies_of_iris(run, 1)
    _, stdout = timed(worker_command(run), run / "run")
    match = re.search(r"all its processes were gone ([0-9.]+) s after the budget ended", stdout)
    if not match:
        raise RuntimeError(f"no kill report in:\n{stdout}")
    return float(match.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10, help="copies of the iris task")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ingestion-bench-"))
    try:
        prepared = work / "prepared"
        grace = 2.0
        prepare(prepared, budget=2.0, limits={"grace_seconds": grace})
        ours, baseline = overhead(prepared, work, args.tasks, args.repeat)
        polite = kill_latency(prepared, work, POLITE_LOOP, "polite")
        hostile = kill_latency(prepared, work, HOSTILE, "hostile")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"(a) ingestion per task, predict() returning at once:  {ours:.3f} s "
          f"(median of {args.repeat} runs of {args.tasks} tasks)")
    print(f"    baseline, a bare python+numpy process per task:    {baseline:.3f} s")
    print(f"    overhead beyond the baseline:                      {ours - baseline:.3f} s per task "
          f"(ratio {ours / baseline:.2f}); whole per-task cost target < 0.3 s")
    print(f"(b) kill latency, child exits on SIGTERM:              {polite:.2f} s")
    print(f"    kill latency, ignores SIGTERM + setsid grandchild: {hostile:.2f} s "
          f"(target < grace {grace:g} s + 1 s = {grace + 1:g} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

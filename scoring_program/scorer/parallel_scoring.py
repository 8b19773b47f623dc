"""Score the phase's tasks in worker processes, largest submission first.

Text parsing (np.loadtxt) is most of a scoring run and holds the GIL, so threads do not
help; forked workers do, one per core up to the number of tasks, each parsing, loading
references and scoring whole tasks. SCORING_WORKERS=1 turns it off. A worker that dies
(out of memory, say) is not the participant's fault: its task is scored again in-process.
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from pathlib import Path

from competition_formats import RunRecord

from .config import ScoringConfig, TaskConfig
from .evaluate import score_task
from .predictions import find_submission_file, load_submission
from .references import load_references
from .results import TaskResult

WORKERS_ENV = "SCORING_WORKERS"
MAX_WORKERS = 4


def worker_count(tasks: tuple[TaskConfig, ...]) -> int:
    requested = os.environ.get(WORKERS_ENV, "").strip()
    if requested.isdigit():
        return max(1, int(requested))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cores or 1, len(tasks), MAX_WORKERS))


def score_one(task: TaskConfig, ref: Path, res: Path, record: RunRecord | None) -> TaskResult:
    run = record.tasks.get(task.name) if record else None
    return score_task(task, partial(load_submission, task, res), load_references(task, ref), run)


def _file_size(task: TaskConfig, res: Path) -> int:
    try:
        return find_submission_file(task, res).stat().st_size
    except (ValueError, OSError):
        return 0


def score_all(config: ScoringConfig, ref: Path, res: Path,
              record: RunRecord | None) -> list[TaskResult]:
    """Every task's result, in config order."""
    tasks = config.tasks
    workers = worker_count(tasks)
    if workers == 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [score_one(task, ref, res, record) for task in tasks]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        largest_first = sorted(tasks, key=lambda task: _file_size(task, res), reverse=True)
        futures = {task.name: pool.submit(score_one, task, ref, res, record)
                   for task in largest_first}
        results = []
        for task in tasks:
            try:
                results.append(futures[task.name].result())
            except (BrokenProcessPool, MemoryError):
                results.append(score_one(task, ref, res, record))
        return results

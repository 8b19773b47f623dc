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
from pathlib import Path

from runtime import rules
from runtime.formats import RunRecord
from kinds.kind import scoring_runtime
from runtime.scoring import TaskConfig, TaskResult, score_task

from .config import ScoringConfig

WORKERS_ENV = "SCORING_WORKERS"
MAX_WORKERS = 4


def worker_count(tasks: tuple[TaskConfig, ...]) -> int:
    requested = os.environ.get(WORKERS_ENV, "").strip()
    if requested.isdigit():
        return max(1, int(requested))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cores or 1, len(tasks), MAX_WORKERS))


def score_one(kind: str, task: TaskConfig, ref: Path, res: Path,
              record: RunRecord | None, private: bool = False) -> TaskResult:
    """The kind's runtime scores the task (named, not passed: each worker looks its record
    up) as participants see it, with the rules' options (a public part of the rows), or
    without them for the rules' ``private`` columns."""
    run = record.tasks.get(task.name) if record else None
    options = {} if private else rules.score_options(task)
    return score_task(scoring_runtime(kind), task, ref, res, run, **options)


def _file_size(scoring, task: TaskConfig, res: Path) -> int:
    sizes = [(res / name).stat().st_size for name in scoring.submission_files(task)
             if (res / name).is_file()]
    return max(sizes, default=0)


def score_all(config: ScoringConfig, ref: Path, res: Path, record: RunRecord | None,
              private: bool = False) -> list[TaskResult]:
    """Every task's result, in config order: what participants see, or with ``private`` as
    the rules' private columns read it (``score_one``)."""
    tasks, scoring = config.tasks, config.scoring
    workers = worker_count(tasks)
    if workers == 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [score_one(config.kind, task, ref, res, record, private) for task in tasks]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        largest_first = sorted(tasks, key=lambda task: _file_size(scoring, task, res),
                               reverse=True)
        futures = {task.name: pool.submit(score_one, config.kind, task, ref, res, record, private)
                   for task in largest_first}
        results = []
        for task in tasks:
            try:
                results.append(futures[task.name].result())
            except (BrokenProcessPool, MemoryError):
                results.append(score_one(config.kind, task, ref, res, record, private))
        return results

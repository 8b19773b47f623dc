"""The leaderboard values and ``scores.txt``, written exactly as CodaLab v1.5 parses it.

Site rules (codalab_v1.md §4.8, G14): one ``key: value`` line per non-computed column,
exactly one colon, keys ``[A-Za-z0-9_]+``, finite values below 1e10 in magnitude, no
duplicates, nothing else. A line the site cannot parse leaves the submission stuck in
"Running", so every line is checked here before the file is written.
"""
from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

from runtime import rules
from runtime.scoring import TaskResult

from .config import ScoringConfig
from .score_types import TRAIN_SECONDS

KEY_PATTERN = re.compile(r"[A-Za-z0-9_]+")
MAX_MAGNITUDE = 1e10
DECIMALS = 10           # the site stores Decimal(20, 10)


class ScoresFileError(RuntimeError):
    pass


def weighted_loss(results: list[TaskResult]) -> float:
    """sum_t sum_m w_tm loss_tm / sum w_tm, with each metric's ``as_loss`` (penalties included)."""
    total = weight_sum = 0.0
    for result in results:
        for name, weight in result.task.weights.items():
            if weight:
                total += weight * result.task.task_type.score_type(name).as_loss(
                    result.metrics[name].value)
                weight_sum += weight
    return total / weight_sum if weight_sum else 0.0


def column_values(config: ScoringConfig, results: list[TaskResult],
                  private_results: list[TaskResult] | None = None) -> dict[str, float]:
    """Every leaderboard value. A task without a scored prediction gets the worst value of
    every column, derived from the column's declared direction and bounds: its metrics (and a
    rule's figures of them, set by ``evaluate.penalised``) and, here, the whole budget as its
    train_seconds, so a run that crashed after 0.1 s never ranks best on time. A rule's
    private column is the core statistic it stands for, on the private results."""
    private = rules.private_statistics()
    values = {}
    for column in config.columns:
        statistic = private.get(column.statistic, column.statistic)
        scored = (private_results or results) if column.statistic in private else results
        if statistic == "weighted_loss":
            values[column.key] = weighted_loss(scored)
            continue
        result = next(result for result in scored if result.task.name == column.task)
        if statistic == "value":
            values[column.key] = result.metrics[column.metric].value
        elif statistic in rules.column_statistics():
            values[column.key] = rules.column_value(statistic, result, column.metric)
        else:
            values[column.key] = _train_seconds(result)
    return values


def _train_seconds(result: TaskResult) -> float:
    """Measured time; the whole budget if penalised, or if there is no record of the run."""
    budget, seconds = result.task.budget_seconds, result.train_seconds
    if budget is not None and (result.penalised or seconds is None):
        return TRAIN_SECONDS.worst(budget)
    return seconds if seconds is not None else 0.0


def format_scores(values: dict[str, float]) -> str:
    lines = []
    for key, value in values.items():
        if not KEY_PATTERN.fullmatch(key):
            raise ScoresFileError(f"column key {key!r} is not [A-Za-z0-9_]+")
        if value is None or not math.isfinite(value) or abs(value) >= MAX_MAGNITUDE:
            raise ScoresFileError(f"value of {key} is {value!r}; the site needs a finite "
                                  f"number below {MAX_MAGNITUDE:g}")
        rounded = round(float(value), DECIMALS) + 0.0     # + 0.0 turns -0.0 into 0.0
        lines.append(f"{key}: {rounded:.{DECIMALS}f}")
    return "\n".join(lines) + "\n"


def write_scores(output_dir: Path, values: dict[str, float], stem: str = "scores") -> str:
    """Validate, then write atomically (a half-written file must never be picked up).

    scores.txt for CodaLab v1.5, and the same values as a flat scores.json, which Codabench
    reads first; each platform ignores the other's file, so one program serves both.
    """
    text = format_scores(values)
    as_json = json.dumps({line.split(": ")[0]: float(line.split(": ")[1])
                          for line in text.splitlines()}, indent=1) + "\n"
    for name, content in ((f"{stem}.txt", text), (f"{stem}.json", as_json)):
        temporary = Path(output_dir) / f".{name}.tmp"
        temporary.write_text(content, encoding="ascii")
        os.replace(temporary, Path(output_dir) / name)
    return text

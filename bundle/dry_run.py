"""``--check``: run a built bundle the way the CodaLab v1.5 worker would, phase by phase.

For each phase: unzip the nested zips into the worker's folders (codalab_v1.md §4.4); run
the ingestion program on the starting kit's sample submission (code phases) or take its
sample result files (results phases); run the scoring program; each step under the
phase's execution_time_limit, with the command from its ``metadata`` split on single
spaces. Then parse ``scores.txt`` with the site's rules and compare its keys with the
leaderboard's non-computed columns.
"""
from __future__ import annotations

import math
import shutil
import subprocess
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .worker import WorkerCommandError, run_program


@dataclass
class StepResult:
    phase: str
    step: str
    seconds: float
    status: str                    # ok | failed | timeout
    detail: str = ""
    scores: dict[str, float] = field(default_factory=dict)


def _unzip(archive: Path, destination: Path) -> Path:
    with zipfile.ZipFile(archive) as opened:
        opened.extractall(destination)
    return destination


def parse_scores_like_site(text: str, keys: list[str]) -> tuple[dict[str, float], list[str]]:
    """codalab_v1.md §4.8: ``label, value = line.split(":")``, float(value), known keys."""
    scores, problems = {}, []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line:
            continue
        parts = line.split(":")
        if len(parts) != 2:
            problems.append(f"scores.txt line {number}: {line!r} does not have exactly one ':'")
            continue
        key, value = parts[0].strip(), parts[1]
        try:
            number_value = float(value)
        except ValueError:
            problems.append(f"scores.txt line {number}: {value.strip()!r} is not a number")
            continue
        if key in scores:
            problems.append(f"scores.txt line {number}: duplicate key {key}")
        elif not math.isfinite(number_value) or abs(number_value) >= 1e10:
            problems.append(f"scores.txt line {number}: {key} = {number_value} (must be finite, < 1e10)")
        scores[key] = number_value
    written, expected = set(scores), set(keys)
    if written - expected:
        problems.append(f"scores.txt keys not on the leaderboard (the site drops them): "
                        f"{sorted(written - expected)}")
    if expected - written:
        problems.append(f"leaderboard keys the scorer did not write (shown as '-'): "
                        f"{sorted(expected - written)}")
    return scores, problems


def _timed(phase: str, step: str, program: Path, variables: dict, python: str, cwd: Path,
           limit: float) -> StepResult:
    started = time.monotonic()
    try:
        result = run_program(program, variables, python, cwd, timeout=limit)
    except subprocess.TimeoutExpired:
        return StepResult(phase, step, time.monotonic() - started, "timeout",
                          f"exceeded the phase's execution_time_limit of {limit:g} s "
                          "(the worker kills it: 'Execution time limit exceeded!')")
    except WorkerCommandError as error:
        return StepResult(phase, step, time.monotonic() - started, "failed", str(error))
    seconds = time.monotonic() - started
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        return StepResult(phase, step, seconds, "failed", f"exit {result.returncode}:\n{tail}")
    return StepResult(phase, step, seconds, "ok")


def _run_phase(bundle: Path, name: str, phase: dict, keys: list[str], python: str,
               work: Path) -> list[StepResult]:
    limit = float(phase.get("execution_time_limit", 300))
    kit = _unzip(bundle / phase["starting_kit"], work / "starting_kit")
    results = []
    if phase.get("ingestion_program"):
        run = work / "predict" / "run"
        _unzip(bundle / phase["ingestion_program"], run / "ingestion_program")
        _unzip(bundle / phase["input_data"], run / "input")
        _unzip(bundle / phase["reference_data"], work / "hidden_ref")
        shutil.copytree(kit / "sample_code_submission", run / "program")
        for folder in ("output", "temp"):
            (run / folder).mkdir(parents=True)
        step = _timed(name, "ingestion", run / "ingestion_program", {
            "$ingestion_program": run / "ingestion_program", "$submission_program": run / "program",
            "$input": run / "input", "$output": run / "output", "$tmp": run / "temp",
            "$hidden": work / "hidden_ref", "$shared": work / "shared"}, python, run, limit)
        results.append(step)
        if step.status != "ok":
            return results
        predictions = run / "output"
    else:
        predictions = kit / "sample_result_submission"
    run = work / "score" / "run"
    _unzip(bundle / phase["scoring_program"], run / "program")
    _unzip(bundle / phase["reference_data"], run / "input" / "ref")
    shutil.copytree(predictions, run / "input" / "res")
    for folder in ("output", "temp"):
        (run / folder).mkdir(parents=True)
    step = _timed(name, "scoring", run / "program", {
        "$program": run / "program", "$input": run / "input", "$output": run / "output",
        "$tmp": run / "temp", "$shared": work / "shared"}, python, run, limit)
    results.append(step)
    if step.status == "ok":
        scores_file = run / "output" / "scores.txt"
        if not scores_file.is_file():
            step.status, step.detail = "failed", "no scores.txt in the output (the site marks FAILED)"
        else:
            step.scores, problems = parse_scores_like_site(scores_file.read_text(), keys)
            if problems:
                step.status, step.detail = "failed", "\n".join(problems)
    return results


def dry_run(bundle_zip: Path, python: str) -> list[StepResult]:
    with tempfile.TemporaryDirectory(prefix="dry-run-") as work:
        bundle = _unzip(bundle_zip, Path(work) / "bundle")
        competition = yaml.safe_load((bundle / "competition.yaml").read_text(encoding="utf-8"))
        columns = competition["leaderboard"]["columns"]
        keys = [key for key, column in columns.items() if "computed" not in column]
        results = []
        for number, phase in sorted(competition["phases"].items()):
            name = phase.get("label", str(number))
            results += _run_phase(bundle, name, phase, keys, python, Path(work) / f"phase{number}")
        return results


def table(results: list[StepResult]) -> str:
    lines = [f"{'phase':<32} {'step':<10} {'seconds':>8}  status", "-" * 62]
    for r in results:
        lines.append(f"{r.phase[:32]:<32} {r.step:<10} {r.seconds:8.1f}  {r.status}")
        if r.scores:
            shown = ", ".join(f"{k}={v:.4g}" for k, v in list(r.scores.items())[:6])
            lines.append(f"{'':<32} scores: {shown}" + (" ..." if len(r.scores) > 6 else ""))
    return "\n".join(lines)

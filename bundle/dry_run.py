"""``--check``: run a built bundle the way the CodaLab v1.5 worker would, phase by phase.

For each phase: unzip the nested zips into the worker's folders (codalab_v1.md §4.4); run
the ingestion program on the starting kit's sample submission (code phases) or take its
sample result files (results phases); run the scoring program; each step under the
phase's execution_time_limit, with the command from its ``metadata`` split on single
spaces. Then parse ``scores.txt`` with the site's rules and compare its keys with the
leaderboard's non-computed columns.
"""
from __future__ import annotations

import json
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


TIMEOUT_MESSAGES = {
    "codalab": "exceeded the phase's execution_time_limit of {limit:g} s (the worker kills it: "
               "'Execution time limit exceeded!')",
    "codabench": "Execution Time Limit exceeded. Limit was {limit:g} seconds",
}


def _timed(phase: str, step: str, program: Path, variables: dict, python: str, cwd: Path,
           limit: float, platform: str = "codalab") -> StepResult:
    """Run one step as the platform's worker would, under the time limit."""
    started = time.monotonic()
    try:
        result = run_program(program, variables, python, cwd, timeout=limit, platform=platform)
    except subprocess.TimeoutExpired:
        return StepResult(phase, step, time.monotonic() - started, "timeout",
                          TIMEOUT_MESSAGES[platform].format(limit=limit))
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


# ---- Codabench (version 2): codabench_v2.md §3 --------------------------------------------

CODABENCH_DEFAULT_QUEUE_LIMIT = 600


def _codabench_variables(app: Path, ingestion: bool) -> dict[str, Path]:
    """The legacy variables as the Codabench worker replaces them in one container (§3.4)."""
    return {"$input": app / ("input_data" if ingestion else "input"), "$output": app / "output",
            "$program": app / "program", "$ingestion_program": app / "program",
            "$hidden": app / "input" / "ref", "$shared": app / "shared",
            "$submission_program": app / "ingested_program", "$tmp": app / "output",
            "$predictions": app / "output" if ingestion else app / "input" / "res"}


def _codabench_timed(phase: str, step: str, app: Path, ingestion: bool, python: str,
                     limit: float) -> StepResult:
    """Codabench runs every container from its own /app/program."""
    return _timed(phase, step, app / "program", _codabench_variables(app, ingestion), python,
                  app / "program", limit, platform="codabench")


def _read_scores_codabench(output: Path, keys: list[str]) -> tuple[dict[str, float], list[str]]:
    """scores.json first, else scores.txt read as YAML; flat finite numbers (§3.8)."""
    if (output / "metadata").exists():
        return {}, ["the scorer wrote output/metadata: Codabench fails the step"]
    if (output / "scores.json").is_file():
        raw = json.loads((output / "scores.json").read_text())
    elif (output / "scores.txt").is_file():
        raw = yaml.safe_load((output / "scores.txt").read_text())
    else:
        return {}, ["Could not find scores file, did the scoring program output it?"]
    if not isinstance(raw, dict):
        return {}, [f"scores must be a flat mapping, found {type(raw).__name__}"]
    problems = [f"{key}: {value!r} is not a finite number below 1e10" for key, value in raw.items()
                if not isinstance(value, (int, float)) or not math.isfinite(value) or abs(value) >= 1e10]
    written, expected = set(raw), set(keys)
    if written != expected:
        problems.append(f"scores.json keys differ from the leaderboard's: extra "
                        f"{sorted(written - expected)}, missing {sorted(expected - written)}")
    return raw, problems


def _run_phase_codabench(bundle: Path, phase: dict, task: dict, keys: list[str], python: str,
                         work: Path) -> list[StepResult]:
    name = phase.get("name", "phase")
    limit = float(min(phase.get("execution_time_limit", 600), CODABENCH_DEFAULT_QUEUE_LIMIT))
    kit = _unzip(bundle / phase["starting_kit"], work / "starting_kit")
    predict = work / "predict" / "app"
    submission = kit / ("sample_code_submission" if task.get("ingestion_program")
                        else "sample_result_submission")
    # A submission without metadata.yaml is copied into /app/output by the worker.
    shutil.copytree(submission, predict / "output")
    results = []
    if task.get("ingestion_program"):
        _unzip(bundle / task["ingestion_program"], predict / "program")
        _unzip(bundle / task["input_data"], predict / "input_data")
        shutil.copytree(submission, predict / "ingested_program")
        step = _codabench_timed(name, "ingestion", predict, True, python, limit)
        results.append(step)
        if step.status != "ok":
            return results
    (predict / "output" / "metadata").write_text("exitCode: 0\n")     # as push_output does
    score = work / "score" / "app"
    _unzip(bundle / task["scoring_program"], score / "program")
    _unzip(bundle / task["reference_data"], score / "input" / "ref")
    shutil.copytree(predict / "output", score / "input" / "res")
    (score / "output").mkdir(parents=True)
    step = _codabench_timed(name, "scoring", score, False, python, limit)
    results.append(step)
    if step.status == "ok":
        step.scores, problems = _read_scores_codabench(score / "output", keys)
        if problems:
            step.status, step.detail = "failed", "\n".join(problems)
    return results


def dry_run_codabench(bundle_zip: Path, python: str) -> list[StepResult]:
    with tempfile.TemporaryDirectory(prefix="dry-run-v2-") as work:
        bundle = _unzip(bundle_zip, Path(work) / "bundle")
        competition = yaml.safe_load((bundle / "competition.yaml").read_text(encoding="utf-8"))
        columns = competition["leaderboards"][0]["columns"]
        keys = [c["key"] for c in columns if c.get("computation") is None]
        tasks = {str(t["index"]): t for t in competition["tasks"]}
        results = []
        for number, phase in enumerate(competition["phases"]):
            for index in phase["tasks"]:
                results += _run_phase_codabench(bundle, phase, tasks[str(index)], keys, python,
                                                Path(work) / f"phase{number}-task{index}")
        return results

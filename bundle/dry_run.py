"""``--check``: run a built bundle the way each platform's worker would, phase by phase.

The submission is the starting kit's sample zip (or a participant's zip given with
``--submission``), unzipped as the worker does. Whether the ingestion program runs or the
files are taken as predictions is decided by the worker's own rule (``worker.dispatch_submission``).
Each step runs under the phase's time limit, with the command from its metadata, in the
worker's folder layout, with the stray files the worker leaves around (codalab_v1.md §4.3-4.6,
codabench_v2.md §3.3-3.8). Then the scores file is read with the site's rules and its keys
compared with the leaderboard's. What the dry run cannot reproduce is listed by ``not_checked``
and printed with every run.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from scoring_program.scorer.config import FULL_STATISTICS, scores_file_keys

from .codabench import DEFAULT_EXECUTION_TIME_LIMIT_SECONDS, DEFAULT_QUEUE_LIMIT_SECONDS
from .codabench_site import hidden_figure_leaks, leaderboard_problem
from .spec import MIN_BUDGET_SECONDS, POLL_SECONDS, is_gpu_image
from .worker import (CODABENCH, CODALAB, NO_OUTPUT_FAILURE, NO_PREDICTIONS_FAILURE, Dispatch,
                     WorkerCommandError, dispatch_submission, penalised_tasks, program_command,
                     read_scores, run_program, short_budgets, submission_metadata)

SAMPLES = {True: "sample_code_submission.zip", False: "sample_result_submission.zip"}
SETPRIV = "/usr/bin/setpriv"
# How Codabench starts containers: every capability dropped, no-new-privileges (§3.4).
NO_CAPABILITIES = (SETPRIV, "--no-new-privs", "--inh-caps=-all", "--ambient-caps=-all",
                   "--bounding-set=-all", "--")

DATASET_KEYS_NOT_CHECKED = (
    "data named by a dataset key (spec key upload_separately): that the key exists on the site "
    "and holds the zip uploaded under it; the dry run reads the local copies, and the build "
    "compares them with the sha256 the spec records with each key")
NOT_CHECKED = {
    CODALAB: (
        "the container's memory limit (the worker host's memory minus 512 MB) and its CPU speed",
        "network access from the container (the v1 worker sets none; it depends on the host)",
        "the site's upload limits (max_submission_size, submissions per day and in total)",
        "leaderboard placement (force_submission_to_leaderboard) and auto-migration (§4.11)",
        DATASET_KEYS_NOT_CHECKED,
    ),
    CODABENCH: (
        "the time limit as the real worker applies it: this worker revision does not enforce it "
        "(its alarm is swallowed); the dry run enforces min(limit, 600 s) as the default queue "
        "should (on a custom queue, the limit), and the ingestion's per-task budgets are the "
        "real bound; that a custom queue exists and admits you is checked only on upload",
        "network access from the container (on unless the worker host disables it)",
        "the site's upload limits (submissions per day and in total); the leaderboard's rule "
        "is modelled for one participant's two submissions of the same zip, not for many",
        DATASET_KEYS_NOT_CHECKED,
    ),
}


def not_checked(platform: str, image: str) -> list[str]:
    """What the dry run of a bundle on ``platform`` running ``image`` does not reproduce."""
    if is_gpu_image(image):
        first = (f"the image itself: programs run here with the py312 image's packages "
                 f"(.venv-image) on this machine's Python, not inside {image} (its own Python and "
                 "packages; the python-version rule checks the programs' sources against them), "
                 "and whether the container gets a GPU (only on workers with USE_GPU) shows only "
                 "on the platform")
    else:
        first = ("the image itself: programs run with its Python packages at its versions "
                 f"(.venv-image), not inside {image}")
    return [first, *NOT_CHECKED[platform]]


@dataclass
class StepResult:
    phase: str
    step: str
    seconds: float
    status: str                    # ok | failed | timeout
    detail: str = ""
    scores: dict[str, float] = field(default_factory=dict)
    log: str = ""                  # what the program printed: the site shows it as its logs
    notes: list[str] = field(default_factory=list)     # printed, not failures


def _unzip(archive: Path, destination: Path) -> Path:
    with zipfile.ZipFile(archive) as opened:
        opened.extractall(destination)
    return destination


def _unzip_like_codalab(archive: Path, destination: Path) -> Path:
    """get_bundle (§4.3): data zips as they are, and every top-level inner zip extracted
    into a sibling folder named without ``.zip``."""
    _unzip(archive, destination)
    for inner in sorted(destination.glob("*.zip")):
        try:
            _unzip(inner, inner.with_suffix(""))
        except zipfile.BadZipFile:
            pass        # the worker's extractall would fail the run; the scorer never reads it
    return destination


TIMEOUT_MESSAGES = {
    CODALAB: "exceeded the phase's execution_time_limit of {limit:g} s (the worker kills it: "
             "'Execution time limit exceeded!')",
    CODABENCH: "Execution Time Limit exceeded. Limit was {limit:g} seconds",
}


def _timed(phase: str, step: str, program: Path, variables: dict, python: str, cwd: Path,
           limit: float, platform: str = CODALAB, env: dict | None = None,
           prefix: tuple[str, ...] = ()) -> StepResult:
    """Run one step as the platform's worker would, under the time limit."""
    started = time.monotonic()
    try:
        result = run_program(program, variables, python, cwd, timeout=limit, platform=platform,
                             env=env, prefix=prefix)
    except subprocess.TimeoutExpired:
        return StepResult(phase, step, time.monotonic() - started, "timeout",
                          TIMEOUT_MESSAGES[platform].format(limit=limit))
    except WorkerCommandError as error:
        return StepResult(phase, step, time.monotonic() - started, "failed", str(error))
    seconds = time.monotonic() - started
    log = (result.stdout or "") + (result.stderr or "")
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        return StepResult(phase, step, seconds, "failed", f"exit {result.returncode}:\n{tail}",
                          log=log)
    return StepResult(phase, step, seconds, "ok", log=log)


def _start_own_command(submission: Path, variables: dict, cwd: Path, platform: str,
                       python: str) -> tuple[subprocess.Popen, float] | None:
    """A command in the submission's metadata: both workers start it in a container of its
    own at the same time as the ingestion (codalab_v1.md G20, codabench_v2.md §3.4), and so
    does the dry run (without capabilities where it can), for what the ingestion and the
    scorer make of it to show."""
    _, metadata = submission_metadata(submission, platform)
    if not isinstance(metadata, dict) or not metadata.get("command"):
        return None
    try:
        argv = [*without_capabilities(),
                *program_command(submission, variables, python, platform)]
        process = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   env=_worker_env(), start_new_session=True)
    except (WorkerCommandError, OSError):
        return None          # the worker could not start it either; the dispatch says why
    return process, time.monotonic()


def _own_command_step(phase: str, own, limit: float) -> list[StepResult]:
    if own is None:
        return []
    process, started = own
    try:
        output, _ = process.communicate(timeout=max(1.0, started + limit - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
    tail = "\n".join(output.decode("utf-8", "replace").strip().splitlines()[-5:])
    return [StepResult(phase, "command", time.monotonic() - started, "failed", (
        f"the submission's own command ran beside the ingestion, outside its sandbox, and "
        f"ended with exit status {process.returncode}; the ingestion refuses such a submission"
        + (f"; its last output:\n{tail}" if tail else "")))]


def _worker_env(extra: dict | None = None) -> dict:
    return {**os.environ, "PYTHONUNBUFFERED": "1", **(extra or {})}


def _submission_step(name: str, submission: Path, platform: str, code_phase: bool,
                     output: Path) -> tuple[StepResult, Dispatch]:
    """The worker's dispatch: our verdict on it, and what the worker does with the files."""
    dispatch = dispatch_submission(submission, platform, has_ingestion=code_phase)
    if dispatch.copies_to_output:
        shutil.copytree(submission, output, dirs_exist_ok=True)
    status = "ok" if dispatch.ok else "failed"
    return StepResult(name, "submission", 0.0, status, dispatch.problem or ""), dispatch


def _phase_keys(program: Path, leaderboard_keys: list[str]) -> list[str]:
    """The keys this phase's scorer must write. A leaderboard serves every phase of a
    competition (codalab_v1.md G26, codabench_v2.md §1.4) and a phase leaves the columns of
    other phases' tasks empty; our scoring program names its own keys in its config, which
    the scoring-keys rule has checked against the leaderboard."""
    try:
        keys = scores_file_keys(json.loads((program / "scoring_config.json").read_text(
            encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return leaderboard_keys
    return keys if set(keys) <= set(leaderboard_keys) else leaderboard_keys


def _score_step(name: str, step: StepResult, output: Path, keys: list[str], platform: str) -> None:
    if step.status != "ok":
        return
    step.scores, problems = read_scores(output, keys, platform)
    problems += [f"task {line}" for line in penalised_tasks(output)]
    report = output / "detailed_results.html"
    if not report.is_file() or report.stat().st_size == 0:
        problems.append("detailed_results.html is empty: the participants' detailed results "
                        "link would show nothing")
    if problems:
        step.status, step.detail = "failed", "\n".join(problems)
    step.notes += [f"budget too short to time well: {line} (under {MIN_BUDGET_SECONDS:g} s, the "
                   f"ingestion's clock, read every {POLL_SECONDS:g} s, is off by more than a "
                   "tenth; raise budget_epochs)" for line in short_budgets(output, MIN_BUDGET_SECONDS)]


# ---- CodaLab v1.5 (codalab_v1.md §4) ------------------------------------------------------

def _codalab_input_leftovers(input_dir: Path) -> None:
    """§4.2-4.3, G21: what get_bundle leaves next to ref/ and res/ in the scoring input."""
    (input_dir / "metadata").write_text("ref: file:///ref.zip\nres: file:///res.zip\n")
    for folder in ("history", "scores", "coopetition"):
        (input_dir / folder).mkdir(parents=True, exist_ok=True)
        (input_dir / folder / "metadata").write_text("")
    (input_dir / "tmp0000.zip").write_bytes(b"")


def _codalab_predict(bundle: Path, name: str, phase: dict, submission_zip: Path, python: str,
                     work: Path, limit: float) -> tuple[list[StepResult], Path, bool]:
    run = work / "predict" / "run"
    for folder in ("input", "output", "temp"):
        (run / folder).mkdir(parents=True)
    (run / "output" / "detailed_results.html").write_text("")      # §4.6: made before the run
    submission = _unzip_like_codalab(submission_zip, run / "program")
    step, dispatch = _submission_step(name, submission, CODALAB, True, run / "output")
    results = [step]
    if dispatch.runs_ingestion:
        _unzip(bundle / phase["ingestion_program"], run / "ingestion_program")
        _unzip_like_codalab(bundle / phase["input_data"], run / "input")
        _unzip_like_codalab(bundle / phase["reference_data"], work / "hidden_ref")
        variables = {
            "$ingestion_program": run / "ingestion_program", "$submission_program": run / "program",
            "$predictions": run / "input" / "res", "$input": run / "input",
            "$output": run / "output", "$tmp": run / "temp", "$hidden": work / "hidden_ref",
            "$shared": work / "shared"}
        # G20: the submission's own command shares the run folder but not $hidden.
        own = _start_own_command(submission, {**variables, "$program": run / "program",
                                              "$hidden": "$hidden"}, run, CODALAB, python)
        results.append(_timed(name, "ingestion", run / "ingestion_program", variables, python,
                              run, limit, env=_worker_env(
                                  {"PYTHONPATH": f"{os.environ.get('PYTHONPATH', '')}:{run / 'program'}"})))
        results += _own_command_step(name, own, limit)
    exit_code = 0 if results[-1].status == "ok" else 1
    (run / "output" / "metadata").write_text(           # §4.6: appended by the worker
        f"exitCode: {exit_code}\ningestionExitCode: {exit_code}\nelapsedTime: {results[-1].seconds:.1f}\n")
    # The worker fails the predict step only where it cannot start it or a program failed; a
    # zip it takes for prediction files (our submission step says why that is a mistake)
    # finishes there and is scored (§4.1), and the scorer decides what that costs.
    completed = (dispatch.runs_ingestion or dispatch.copies_to_output) and all(
        result.status == "ok" for result in results[1:])
    return results, run / "output", completed


def _run_phase(bundle: Path, name: str, phase: dict, keys: list[str], python: str, work: Path,
               submission_zip: Path | None) -> list[StepResult]:
    limit = float(phase.get("execution_time_limit", 300))
    kit = _unzip(bundle / phase["starting_kit"], work / "starting_kit")
    code_phase = phase.get("is_scoring_only", True) is False
    submission_zip = submission_zip or kit / SAMPLES[code_phase]
    results: list[StepResult] = []
    if code_phase:
        results, predictions, completed = _codalab_predict(bundle, name, phase, submission_zip,
                                                           python, work, limit)
        if not completed:
            return results      # a failed predict step is never scored (§4.7)
    else:
        predictions = _unzip_like_codalab(submission_zip, work / "results")
    run = work / "score" / "run"
    _unzip(bundle / phase["scoring_program"], run / "program")
    _unzip_like_codalab(bundle / phase["reference_data"], run / "input" / "ref")
    shutil.copytree(predictions, run / "input" / "res")
    _codalab_input_leftovers(run / "input")
    for folder in ("output", "temp"):
        (run / folder).mkdir(parents=True)
    (run / "output" / "detailed_results.html").write_text("")
    step = _timed(name, "scoring", run / "program", {
        "$program": run / "program", "$predictions": run / "input" / "res",
        "$input": run / "input", "$output": run / "output", "$tmp": run / "temp",
        "$shared": work / "shared"}, python, run, limit, env=_worker_env())
    _score_step(name, step, run / "output", _phase_keys(run / "program", keys), CODALAB)
    _private_full_scores(step, run / "program", run / "output")
    return results + [step]


def _kept_keys(program: Path) -> list[str]:
    """The figures the scoring program in ``program`` computes for the organizers only."""
    config = json.loads((program / "scoring_config.json").read_text(encoding="utf-8"))
    return [c["key"] for c in config["columns"] if c["statistic"] in FULL_STATISTICS]


def _private_full_scores(step: StepResult, program: Path, output: Path) -> None:
    """The figures on all rows of a task scored on a public part must be in output/private/
    (CodaLab v1.5's private_output.zip, §4.6; Codabench's hidden scoring output, §3.9)."""
    if step.status != "ok":
        return
    hidden = _kept_keys(program)
    if not hidden:
        return
    private = output / "private" / "full_scores.txt"
    found = [line.split(":")[0] for line in private.read_text().splitlines()] \
        if private.is_file() else []
    if found != hidden:
        step.status, step.detail = "failed", (f"private/full_scores.txt holds {found}, expected "
                                              f"the full figures {hidden}")


def _unzip_bundle(bundle_zip: Path, destination: Path, datasets: dict[str, Path] | None) -> Path:
    """The bundle's members, and the local copy of each dataset the yaml names by key, under
    that key: where the site would fetch it from its storage."""
    bundle = _unzip(bundle_zip, destination)
    for key, local in (datasets or {}).items():
        shutil.copyfile(local, bundle / key)
    return bundle


def dry_run(bundle_zip: Path, python: str, submission_zip: Path | None = None,
            datasets: dict[str, Path] | None = None) -> list[StepResult]:
    """``datasets``: key -> local copy of each dataset the yaml names by key."""
    with tempfile.TemporaryDirectory(prefix="dry-run-") as work:
        bundle = _unzip_bundle(bundle_zip, Path(work) / "bundle", datasets)
        competition = yaml.safe_load((bundle / "competition.yaml").read_text(encoding="utf-8"))
        columns = competition["leaderboard"]["columns"]
        keys = [key for key, column in columns.items() if "computed" not in column]
        results = []
        for number, phase in sorted(competition["phases"].items()):
            name = phase.get("label", str(number))
            results += _run_phase(bundle, name, phase, keys, python, Path(work) / f"phase{number}",
                                  submission_zip)
        return results


def table(results: list[StepResult]) -> str:
    lines = [f"{'phase':<32} {'step':<10} {'seconds':>8}  status", "-" * 62]
    for r in results:
        lines.append(f"{r.phase[:32]:<32} {r.step:<10} {r.seconds:8.1f}  {r.status}")
        if r.scores:
            shown = ", ".join(f"{k}={v:.4g}" for k, v in list(r.scores.items())[:6])
            lines.append(f"{'':<32} scores: {shown}" + (" ..." if len(r.scores) > 6 else ""))
        lines += [f"{'':<32} note: {note}" for note in r.notes]
    return "\n".join(lines)


# ---- Codabench (version 2): codabench_v2.md §3 --------------------------------------------

def _codabench_variables(app: Path, ingestion: bool) -> dict[str, Path]:
    """The legacy variables as the Codabench worker replaces them in one container (§3.4)."""
    return {"$input": app / ("input_data" if ingestion else "input"), "$output": app / "output",
            "$program": app / "program", "$ingestion_program": app / "program",
            "$hidden": app / "input" / "ref", "$shared": app / "shared",
            "$submission_program": app / "ingested_program", "$tmp": app / "output",
            "$predictions": app / "output" if ingestion else app / "input" / "res"}


def without_capabilities() -> tuple[str, ...]:
    """The command prefix that drops every capability as Codabench does, where we can."""
    if os.geteuid() == 0 and Path(SETPRIV).is_file():
        return NO_CAPABILITIES
    return ()


def _codabench_timed(phase: str, step: str, app: Path, ingestion: bool, python: str,
                     limit: float) -> StepResult:
    """Codabench runs every container from its own /app/program, without capabilities."""
    return _timed(phase, step, app / "program", _codabench_variables(app, ingestion), python,
                  app / "program", limit, platform=CODABENCH, env=_worker_env(),
                  prefix=without_capabilities())


def _program_container(app: Path, submission: Path, folder: Path) -> Path:
    """The folders Codabench mounts into the submission's own container (§3.4): its files as
    /app/program, the shared output and the input data; not the ingestion program."""
    folder.mkdir(parents=True)
    (folder / "program").symlink_to(submission)
    (folder / "output").symlink_to(app / "output")
    (folder / "input_data").symlink_to(app / "input_data")
    return folder


def _codabench_push_output(name: str, output: Path, step: StepResult | None) -> StepResult | None:
    """§3.7: the worker writes output/metadata, and fails if the program wrote one, or if
    no container or copy made the output folder."""
    if not output.is_dir():
        return StepResult(name, "output", 0.0, "failed", NO_OUTPUT_FAILURE)
    if (output / "metadata").exists():
        return StepResult(name, "output", 0.0, "failed",
                          "Error, the output directory already contains a metadata file")
    code = 0 if step is None or step.status == "ok" else 1
    (output / "metadata").write_text(f"exitCode: 0\nelapsedTime: 0\ningestionExitCode: {code}\n"
                                     "ingestionElapsedTime: 0\n")
    return None


def _codabench_predict(bundle: Path, name: str, task: dict, submission_zip: Path, python: str,
                       work: Path, limit: float) -> tuple[list[StepResult], Path]:
    app = work / "predict" / "app"
    app.mkdir(parents=True)
    code_phase = bool(task.get("ingestion_program"))
    submission = _unzip(submission_zip, work / "submission")
    step, dispatch = _submission_step(name, submission, CODABENCH, code_phase, app / "output")
    if dispatch.makes_output:
        (app / "output").mkdir(exist_ok=True)
    results = [step]
    ingestion = None
    if dispatch.runs_ingestion:
        _unzip(bundle / task["ingestion_program"], app / "program")
        _unzip(bundle / task["input_data"], app / "input_data")
        shutil.copytree(submission, app / "ingested_program")
        own = _start_own_command(submission, _codabench_variables(
            _program_container(app, submission, work / "predict" / "program_app"), False),
            submission, CODABENCH, python)
        ingestion = _codabench_timed(name, "ingestion", app, True, python, limit)
        results.append(ingestion)
        results += _own_command_step(name, own, limit)
    pushed = _codabench_push_output(name, app / "output", ingestion)
    if pushed:
        results.append(pushed)
    return results, app / "output"


def _no_predictions(name: str) -> StepResult:
    """The scoring job was queued when the prediction step set the status to Scoring, and
    cannot download a prediction result that was never uploaded (§3.3)."""
    return StepResult(name, "scoring", 0.0, "failed", (
        f"{NO_PREDICTIONS_FAILURE}: the prediction step uploaded no output, and the worker "
        "tries to download it 10 times, 20 s apart, before failing the submission"))


def _run_phase_codabench(bundle: Path, competition: dict, phase: dict, task: dict,
                         keys: list[str], python: str, work: Path,
                         submission_zip: Path | None) -> list[StepResult]:
    """One Codabench task of a phase: a child submission of its own when the phase has
    several (§3.1), each under the phase's time limit."""
    name = phase.get("name", "phase")
    if len(phase.get("tasks", [])) > 1:
        name = f"{name} / {str(task.get('name', task.get('index'))).removesuffix(f' ({name})')}"
    limit = float(phase.get("execution_time_limit", DEFAULT_EXECUTION_TIME_LIMIT_SECONDS))
    if not competition.get("queue"):     # the default queue caps it (§3.1)
        limit = min(limit, DEFAULT_QUEUE_LIMIT_SECONDS)
    kit = _unzip(bundle / phase["starting_kit"], work / "starting_kit")
    submission_zip = submission_zip or kit / SAMPLES[bool(task.get("ingestion_program"))]
    # Exit codes of the prediction step are not checked: scoring always follows (§3.7).
    results, predictions = _codabench_predict(bundle, name, task, submission_zip, python, work,
                                              limit)
    if not predictions.is_dir():
        return results + [_no_predictions(name)]
    score = work / "score" / "app"
    _unzip(bundle / task["scoring_program"], score / "program")
    _unzip(bundle / task["reference_data"], score / "input" / "ref")
    shutil.copytree(predictions, score / "input" / "res")
    (score / "output").mkdir(parents=True)
    step = _codabench_timed(name, "scoring", score, False, python, limit)
    if step.status == "ok" and (score / "output" / "metadata").exists():
        step.status, step.detail = "failed", "the scorer wrote output/metadata: Codabench fails the step"
    _score_step(name, step, score / "output", _phase_keys(score / "program", keys), CODABENCH)
    _hidden_figures_kept(step, phase, competition, keys, score)
    _private_full_scores(step, score / "program", score / "output")
    return results + [step]


def _hidden_figures_kept(step: StepResult, phase: dict, competition: dict, keys: list[str],
                         app: Path) -> None:
    """§3.9: no figure the scorer keeps for the organizers reaches anyone else through the
    site (its submissions API, logs, scoring output or detailed results)."""
    if step.status != "ok":
        return
    leaks = hidden_figure_leaks(phase, competition, keys, app / "output", step.log,
                                _kept_keys(app / "program"))
    if leaks:
        step.status, step.detail = "failed", "figures kept from participants would be public:\n" \
            + "\n".join(leaks)


def dry_run_codabench(bundle_zip: Path, python: str, submission_zip: Path | None = None,
                      datasets: dict[str, Path] | None = None) -> list[StepResult]:
    with tempfile.TemporaryDirectory(prefix="dry-run-v2-") as work:
        bundle = _unzip_bundle(bundle_zip, Path(work) / "bundle", datasets)
        competition = yaml.safe_load((bundle / "competition.yaml").read_text(encoding="utf-8"))
        columns = competition["leaderboards"][0]["columns"]
        keys = [c["key"] for c in columns if c.get("computation") is None]
        tasks = {str(t["index"]): t for t in competition["tasks"]}
        results = []
        for number, phase in enumerate(competition["phases"]):
            scored = {}
            for index in phase["tasks"]:
                steps = _run_phase_codabench(bundle, competition, phase, tasks[str(index)], keys,
                                             python, Path(work) / f"phase{number}-task{index}",
                                             submission_zip)
                if steps[-1].status == "ok":
                    scored[str(tasks[str(index)].get("name", index))] = steps[-1].scores
                results += steps
            if len(scored) == len(phase["tasks"]):       # a failed submission ranks nowhere
                results.append(_leaderboard_step(competition, phase, scored))
        return results


def _leaderboard_step(competition: dict, phase: dict, scored: dict[str, dict]) -> StepResult:
    """§3.10: what the leaderboard's rule keeps of a participant's two submissions of this
    phase's zip, each scored as above on every task."""
    board = competition["leaderboards"][0]
    ranking = next(c for c in board["columns"] if c["index"] == board.get("primary_index", 0))
    problem = leaderboard_problem(board.get("submission_rule", "Add"),
                                  (ranking["key"], ranking.get("sorting", "desc")),
                                  list(scored), scored)
    return StepResult(phase.get("name", "phase"), "leaderboard", 0.0,
                      "failed" if problem else "ok", problem or "")

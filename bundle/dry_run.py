"""``--check``: the parts of the worker models that both platforms share.

Each platform's ``dry_run`` (``bundle/platforms/``) runs a built bundle the way its worker
would, phase by phase, with the steps below. The submission is the starting kit's sample zip (or a participant's zip given with
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
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ingestion_program.ingest.config import CONFIG_NAME as INGESTION_CONFIG_NAME
from scoring_program.scorer.config import (PRIVATE_FOLDER, parse_config, private_files,
                                           scores_file_keys)

from . import competition_rules
from .render import SAMPLE_FOLDERS
from .spec import is_gpu_image
from .starting_kit import ZIP_TOOL, ingestion_outputs
from .platforms.worker import (WORKERS, Dispatch, WorkerCommandError, command_argv,
                               dispatch_submission, penalised_tasks, read_scores, run_program,
                               submission_metadata)

SAMPLES = {True: "sample_code_submission.zip", False: "sample_result_submission.zip"}

SETPRIV = "/usr/bin/setpriv"
# How Codabench starts containers: every capability dropped, no-new-privileges (§3.4).
NO_CAPABILITIES = (SETPRIV, "--no-new-privs", "--inh-caps=-all", "--ambient-caps=-all",
                   "--bounding-set=-all", "--")


def without_capabilities() -> tuple[str, ...]:
    """The command prefix that drops every capability as Codabench does, where we can."""
    if os.geteuid() == 0 and Path(SETPRIV).is_file():
        return NO_CAPABILITIES
    return ()


DATASET_KEYS_NOT_CHECKED = (
    "data named by a dataset key (spec key upload_separately): that the key exists on the site "
    "and holds the zip uploaded under it; the dry run reads the local copies, and the build "
    "compares them with the sha256 the spec records with each key")


def not_checked(site, image: str) -> list[str]:
    """What the dry run of a bundle on the platform ``site`` running ``image`` does not
    reproduce."""
    if is_gpu_image(image):
        first = (f"the image itself: programs run here with the py312 image's packages "
                 f"(.venv-image) on this machine's Python, not inside {image} (its own Python and "
                 "packages; the python-version rule checks the programs' sources against them), "
                 "and whether the container gets a GPU (only on workers with USE_GPU) shows only "
                 "on the platform")
    else:
        first = ("the image itself: programs run with its Python packages at its versions "
                 f"(.venv-image), not inside {image}")
    return [first, *site.not_reproduced, *competition_rules.not_checked()]


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
    exit_code: int | None = None   # a program's non-zero exit status


def unzip(archive: Path, destination: Path) -> Path:
    with zipfile.ZipFile(archive) as opened:
        opened.extractall(destination)
    return destination


def timed(site, phase: str, step: str, program: Path, variables: dict, python: str, cwd: Path,
          limit: float, env: dict | None = None, prefix: tuple[str, ...] = ()) -> StepResult:
    """Run one step as the platform ``site``'s worker would, under the time limit."""
    started = time.monotonic()
    try:
        result = run_program(program, variables, python, cwd, timeout=limit, platform=site.name,
                             env=env, prefix=prefix)
    except subprocess.TimeoutExpired:
        return StepResult(phase, step, time.monotonic() - started, "timeout",
                          site.timeout_message.format(limit=limit))
    except WorkerCommandError as error:
        return StepResult(phase, step, time.monotonic() - started, "failed", str(error))
    seconds = time.monotonic() - started
    log = (result.stdout or "") + (result.stderr or "")
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        return StepResult(phase, step, seconds, "failed",
                          f"{exit_text(result.returncode)}:\n{tail}", log=log,
                          exit_code=result.returncode)
    return StepResult(phase, step, seconds, "ok", log=log)


def exit_text(returncode: int) -> str:
    """How a program ended: its exit status, or the signal that killed it (a negative
    ``returncode``), which leaves it no exit status of its own."""
    if returncode >= 0:
        return f"exit {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"killed by {name}, no exit status"


def start_own_command(submission: Path, variables: dict, cwd: Path, site,
                      python: str) -> tuple[subprocess.Popen, float] | None:
    """A command in the submission's metadata: CodaLab's worker (and Codabench's before
    v1.27) starts it in a container of its own at the same time as the ingestion
    (codalab_v1.md G20, codabench_v2.md §3.4), and so does the dry run of such a site
    (without capabilities where it can), for what the ingestion and the scorer make of it to
    show. The command is the one the worker's loader finds (``submission_metadata``),
    however the file spells it."""
    if not WORKERS[site.name].starts_own_command:
        return None
    _, metadata = submission_metadata(submission, site.name)
    command = metadata.get("command") if isinstance(metadata, dict) else None
    if not isinstance(command, str) or not command.strip():
        return None
    try:
        argv = [*without_capabilities(), *command_argv(command, variables, python, site.name)]
        process = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   env=worker_env(), start_new_session=True)
    except (WorkerCommandError, OSError):
        return None          # the worker could not start it either; the dispatch says why
    return process, time.monotonic()


def own_command_step(phase: str, own, limit: float) -> list[StepResult]:
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


def worker_env(extra: dict | None = None) -> dict:
    return {**os.environ, "PYTHONUNBUFFERED": "1", **(extra or {})}


def submission_step(name: str, submission: Path, site, code_phase: bool,
                    output: Path, outputs: tuple[str, ...] = ()) -> tuple[StepResult, Dispatch]:
    """The worker's dispatch: our verdict on it, and what the worker does with the files.
    ``outputs``: what the phase's ingestion writes at the root of its output."""
    dispatch = dispatch_submission(submission, site.name, has_ingestion=code_phase,
                                   outputs=outputs)
    if dispatch.copies_to_output:
        shutil.copytree(submission, output, dirs_exist_ok=True)
    status = "ok" if dispatch.ok else "failed"
    return StepResult(name, "submission", 0.0, status, dispatch.problem or ""), dispatch


def ingestion_outputs_of(ingestion_zip: Path) -> tuple[str, ...]:
    """What the ingestion program zipped in ``ingestion_zip`` writes at the root of its
    output (``starting_kit.ingestion_outputs``, as the kit's kit.json lists it)."""
    with zipfile.ZipFile(ingestion_zip) as opened:
        return tuple(ingestion_outputs(json.loads(opened.read(INGESTION_CONFIG_NAME))))


def read_only_copy(source: Path, destination: Path) -> Path:
    """A copy of ``source`` that its programs can read but not change: files 0444, folders
    0555, standing for the worker's read-only mount (codabench_v2.md §3.4). Without
    capabilities (``without_capabilities``) even root cannot write into it; a process that
    owns it could still make it writable again, which a read-only mount refuses."""
    shutil.copytree(source, destination, symlinks=True)
    for folder, subfolders, files in os.walk(destination, topdown=False):
        for name in files:
            path = Path(folder) / name
            if not path.is_symlink():
                path.chmod(0o444)
        Path(folder).chmod(0o555)
    return destination


def phase_keys(program: Path, leaderboard_keys: list[str]) -> list[str]:
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


def score_step(name: str, step: StepResult, output: Path, keys: list[str], site,
               sample: bool = True) -> None:
    """What the site makes of the scoring step. A penalised task fails the dry run of the
    kit's own sample, which must score on every task; a participant's submission with some
    tasks penalised is Finished on the site, each penalty noted."""
    if step.status != "ok":
        _scoring_failed(step, site)
        return
    step.scores, problems = read_scores(output, keys, site.name)
    penalised = [f"task {line}" for line in penalised_tasks(output)]
    if sample:
        problems += penalised
    else:
        step.notes += [f"{line} (the submission is Finished, this task with the worst value of "
                       "every column)" for line in penalised]
    report = output / "detailed_results.html"
    if not report.is_file() or report.stat().st_size == 0:
        problems.append("detailed_results.html is empty: the participants' detailed results "
                        "link would show nothing")
    if problems:
        step.status, step.detail = "failed", "\n".join(problems)
    step.notes += competition_rules.dry_run_notes(output)


def _scoring_failed(step: StepResult, site) -> None:
    """A scoring program's non-zero exit fails the submission on both sites (codabench_v2.md
    §3.7, codalab_v1.md §4.7), and so does one that gives no exit status (killed: Codabench
    v1.27 on fails a missing one, §3.7): say so before the scorer's own reason."""
    if step.exit_code is not None:
        tail = step.detail.split("\n", 1)[-1]
        how = ("exited non-zero" if step.exit_code > 0 else "ended without an exit status")
        step.detail = (f"{exit_text(step.exit_code)}: the submission fails on {site.title}, "
                       f"its scoring program having {how} (failed submissions do not count "
                       f"toward the limits); the scorer's reason, last:\n{tail}")


def _private_keys(program: Path) -> dict[str, list[str]]:
    """The keys the scoring program in ``program`` writes for the organizers only, by the
    rules' private output they go to."""
    config = json.loads((program / "scoring_config.json").read_text(encoding="utf-8"))
    return parse_config(config).private_keys


def kept_keys(program: Path) -> list[str]:
    """The figures the scoring program in ``program`` computes for the organizers only."""
    return [key for keys in _private_keys(program).values() for key in keys]


def private_scores_kept(step: StepResult, program: Path, output: Path) -> None:
    """The figures a rule keeps from participants must be in output/private/ (CodaLab
    v1.5's private_output.zip, §4.6; Codabench's hidden scoring output, §3.9)."""
    if step.status != "ok":
        return
    for private_output, hidden in _private_keys(program).items():
        name = f"{PRIVATE_FOLDER}/{private_files(private_output)[0]}.txt"
        private = output / name
        found = [line.split(":")[0] for line in private.read_text().splitlines()] \
            if private.is_file() else []
        if found != hidden:
            step.status, step.detail = "failed", (f"{name} holds {found}, expected the figures "
                                                  f"kept from participants {hidden}")
            return


def unzip_bundle(bundle_zip: Path, destination: Path, datasets: dict[str, Path] | None) -> Path:
    """The bundle's members, and the local copy of each dataset the yaml names by key, under
    that key: where the site would fetch it from its storage."""
    bundle = unzip(bundle_zip, destination)
    for key, local in (datasets or {}).items():
        try:
            os.link(local, bundle / key)       # read only: data of many GB is not copied
        except OSError:
            shutil.copyfile(local, bundle / key)
    return bundle


def table(results: list[StepResult]) -> str:
    lines = [f"{'phase':<32} {'step':<10} {'seconds':>8}  status", "-" * 62]
    for r in results:
        lines.append(f"{r.phase[:32]:<32} {r.step:<10} {r.seconds:8.1f}  {r.status}")
        if r.scores:
            shown = ", ".join(f"{k}={v:.4g}" for k, v in list(r.scores.items())[:6])
            lines.append(f"{'':<32} scores: {shown}" + (" ..." if len(r.scores) > 6 else ""))
        lines += [f"{'':<32} note: {note}" for note in r.notes]
    return "\n".join(lines)




def rule_submissions(ingestion_zip: Path, kit: Path
                     ) -> list[tuple[str, Path | None, int, str]]:
    """The sample code again, zipped by the kit's own ``submission_zip.py`` with each set of
    options the rules send too (a smoke test), as (label, zip or None, the scorer's expected
    exit status, why no zip was made)."""
    with zipfile.ZipFile(ingestion_zip) as opened:
        config = json.loads(opened.read(INGESTION_CONFIG_NAME))
    made = []
    for label, options, status in competition_rules.dry_run_submissions(config):
        archive = kit / f"{label.replace(' ', '_')}.zip"
        run = subprocess.run([sys.executable, ZIP_TOOL, f"{SAMPLE_FOLDERS[True]}/", str(archive),
                              *options], cwd=kit, capture_output=True, text=True)
        made.append((label, archive if run.returncode == 0 else None, status,
                     f"the kit's {ZIP_TOOL} {' '.join(options)} failed: "
                     f"{(run.stderr or run.stdout).strip()}"))
    return made


def unmade_step(phase: str, label: str, problem: str) -> StepResult:
    return StepResult(phase, label, 0.0, "failed", problem)


def expected_exit_step(step: StepResult, label: str, status: int, output: Path) -> None:
    """A rule's submission (a smoke test) the scorer must fail with the rule's status, after
    writing its report and no scores file, so that the site ranks nothing of it."""
    problems = []
    if step.exit_code != status:
        found = f"exit {step.exit_code}" if step.exit_code is not None else step.status
        problems.append(f"expected the scorer to exit {status}, found {found}: {step.detail}")
    report = output / "detailed_results.html"
    if not report.is_file() or report.stat().st_size == 0:
        problems.append("detailed_results.html is empty: its sender would see no scores")
    written = [name for name in ("scores.txt", "scores.json") if (output / name).exists()]
    if written:
        problems.append(f"the scorer wrote {', '.join(written)}: the site could rank it")
    step.step = label
    step.status, step.detail = ("failed", "\n".join(problems)) if problems else ("ok", "")
    if not problems:
        step.notes.append(f"{label}: scored, then failed by the scorer (exit {status}), so it "
                          "is not ranked and counts toward no limit")

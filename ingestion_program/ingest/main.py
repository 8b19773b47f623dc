"""The ingestion run on the worker:

    python3 -I $ingestion_program/ingestion.py $input $output $ingestion_program $submission_program $hidden

For each task of the phase: stage its inputs (as the competition kind says) and a read-only
copy of the submission, run the participant's function in a sandboxed child under the task's
budget through the kind's contract, validate what comes back (the kind's checks), write
``<output>/<stem>.npy`` and the run record ``ingestion_record.json`` that the scorer reads.
One task's failure never stops the others. The tasks run in runs (``runtime/rules/``,
``rules.runs``): the phase's own, and a competition rule's, before it or instead of it. A
rule's run may write nothing of its tasks but its entries in the record, and fail the
submission (its ``verdict``); then no later run, the phase's included, runs.
Exit status: 0 when the run completed (even if tasks failed: the scorer penalises them),
1 for an unusable config or input, 2 for bad arguments or an internal error, 3 when a
competition rule fails the submission (the platform then marks it failed, and failed
submissions do not count toward the limits), 4 when the submission carries a command of its own
(``submission_metadata.py``) or a rule refuses it (``submission_refusal``), and nothing of it
was run. A rule's run instead of the phase's (the smoke test) reads a folder of the input data
and writes one of the output, exiting 0 as after the phase's: the scorer decides what becomes
of them.
"""
from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path

import numpy as np

from runtime.formats import (RECORD_NAME, FormatError, RunRecord, TaskRun, file_digest,
                             read_record_key, write_run_record)
from runtime.formats.run_record import submission_digest
from kinds import UnknownKind
from runtime import failures, rules
from runtime.beneath import InputChanged, LinkFound, copy_tree_beneath, fd_path, \
    folder_beneath, open_folder
from runtime.worker_data import copy_problem_text, copy_problems
from kinds.kind import IngestionRuntime, KindDefinitionError, ingestion_runtime

from .config import CONFIG_NAME, ConfigError, IngestionConfig, Limits, TaskSpec, load_config
from .hardware import describe_hardware
from .modes import ModeGuard
from .confine import LANDLOCK_FILES
from .sandbox import Protections, describe, lock_down, probe
from .scratch import force_remove, new_staging_folder, remove_abandoned_staging
from .submission_metadata import own_command_problem
from .supervisor import Staging, TaskOutcome, UnitWindow, clean_workdir, run_task

USAGE = ("usage: ingestion.py INPUT_DIR OUTPUT_DIR INGESTION_PROGRAM_DIR SUBMISSION_DIR "
         "[HIDDEN_DIR [WORKER_DATA]]   (WORKER_DATA: the worker's data mount, where a phase "
         "keeps its input data)")
RUNTIME_PACKAGE = "ingest_runtime"
RUNTIME_FILES = ("frames.py", "child_main.py", "confine.py")
# The shared runtime's files the child reports with, staged beside its own.
SHARED_FILES = ("failures.py",)
# The shared runtime package as imported: the program's own copy on the worker, the
# repository's in tests that run the supervisor from the source tree.
SHARED_FOLDER = Path(failures.__file__).resolve().parent
SUBMISSION_REFUSED = 4
STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Interrupted(Exception):
    """This program was asked to stop; the staging folder is removed on the way out."""


def _say(message: str = "") -> None:
    print(message, flush=True)


def _runtime_sources(program_dir: Path, contract: IngestionRuntime) -> dict[str, bytes]:
    """Read once, before any child runs: one that could write the program folder must not
    change what later children run before their confinement."""
    sources = {name: (program_dir / "ingest" / name).read_bytes() for name in RUNTIME_FILES}
    sources |= {name: (SHARED_FOLDER / name).read_bytes() for name in SHARED_FILES}
    staged = contract.participant.staged_files()
    clash = sorted(set(staged) & set(sources))
    if clash:
        raise RuntimeError(f"the kind's participant files {clash} would replace the "
                           "ingestion's own")
    return sources | {name: path.read_bytes() for name, path in staged.items()}


def _stage_runtime(folder: Path, sources: dict[str, bytes]) -> Path:
    """A fresh copy of the child's runtime code per task, for the same reason."""
    package = folder / "runtime" / RUNTIME_PACKAGE
    package.mkdir(parents=True)
    for name, source in {"__init__.py": b"", **sources}.items():
        (package / name).write_bytes(source)
        os.chmod(package / name, 0o644)
    for path in (package, package.parent):
        os.chmod(path, 0o755)
    return package.parent


def _stage_common(base: Path, submission_dir: Path) -> Path:
    """The child's read-only submission copy, readable by its user. Links are dropped, and
    nothing is read through one, even one put in while the copy is made (a command of the
    submission's own may run beside this program): staging runs as root, and a link could
    point at hidden files."""
    submission = base / "submission"
    links: list[str] = []
    others: list[str] = []
    copy_tree_beneath(submission_dir, "", submission,
                      skip=lambda name: name in ("__pycache__", "metadata"),
                      on_refused=lambda path, error: (
                          links if isinstance(error, LinkFound) else others).append(path))
    if links:
        _say(f"symbolic links in the submission are not copied: {', '.join(links)}")
    if others:
        _say("files of the submission that are neither file nor folder, or were removed "
             f"while it was copied, are not copied: {', '.join(others)}")
    return submission


def _stage_task(base: Path, task: TaskSpec, inputs: tuple[Path, str], sources: dict[str, bytes],
                submission: Path, sandbox_uid: int | None, forbidden: tuple[Path, ...],
                contract) -> Staging:
    """This task's inputs as the kind stages them, and an empty working folder the child owns.
    ``inputs``: the input folder held open since the start (``fd_path``) and the folder of it
    the tasks' inputs are in ("" for the phase's tasks). The kind opens every name beneath it
    without following links (``runtime/beneath.py``); ``InputChanged`` where one is a link."""
    folder = base / "tasks" / task.name
    workdir = folder / "work"
    workdir.mkdir(parents=True)
    runtime_folder = _stage_runtime(folder, sources)
    held, subfolder = inputs
    with folder_beneath(held, subfolder) as input_dir:
        data = contract.stage_inputs(task, input_dir, folder, child_uid=sandbox_uid)
    os.chmod(folder, 0o755)
    if sandbox_uid is not None:
        os.chown(workdir, sandbox_uid, -1)
    os.chmod(workdir, 0o700)
    return Staging(runtime_folder, submission, data, workdir, forbidden, base)


def _write_outputs(output_dir: Path, task: TaskSpec, outcome: TaskOutcome) -> set[str]:
    """The validated prediction, and the kept head and tail of the task's stdout and stderr.

    Whatever is in the way goes first: a child that could write here may have left a link.
    """
    files = {}
    if outcome.predictions is not None:
        files[f"{task.prediction_stem}.npy"] = lambda path: np.save(path, outcome.predictions)
    for stream, text in (("stdout", outcome.stdout), ("stderr", outcome.stderr)):
        if text:
            files[f"{task.name}_{stream}.txt"] = \
                lambda path, text=text: path.write_text(text, encoding="utf-8")
    for name, write in files.items():
        force_remove(output_dir / name)
        write(output_dir / name)
    return set(files)


def _settle_output(output_dir: Path, before: set[str],
                   done: dict[str, list[tuple[TaskSpec, TaskOutcome]]]) -> list[str]:
    """Makes the output folder hold only what this program wrote, in case a child could write
    there: every file is written again and anything else new is removed (returned).
    ``done``: each folder's tasks (a run's folder of it holds only its tasks' outputs; "": the
    output folder itself)."""
    written = {folder: set() for folder in done}
    for folder, outcomes in done.items():
        for task, outcome in outcomes:
            written[folder] |= _write_outputs(output_dir / folder, task, outcome)
    ours = {RECORD_NAME, *(folder for folder in done if folder)}
    planted = sorted(set(os.listdir(output_dir)) - before - ours - written.get("", set()))
    for folder in (folder for folder in done if folder):
        planted += sorted(f"{folder}/{name}" for name in
                          set(os.listdir(output_dir / folder)) - written[folder])
    for name in planted:
        force_remove(output_dir / name)
    force_remove(output_dir / RECORD_NAME)
    return planted


def _task_run(task: TaskSpec, outcome: TaskOutcome, limits: Limits) -> TaskRun:
    return TaskRun(status=outcome.status, wall_seconds=outcome.wall_seconds,
                   startup_seconds=outcome.startup_seconds,
                   startup_allowance_seconds=limits.startup_seconds,
                   training_seconds=outcome.training_seconds,
                   budget_seconds=task.budget_seconds,
                   prediction=outcome.prediction,
                   message="; ".join(filter(None, [outcome.message, *outcome.notes])),
                   exit_code=outcome.exit_code, signal=outcome.signal,
                   peak_memory_mb=outcome.peak_memory_mb, stderr_tail=outcome.stderr_tail[-4000:],
                   units=outcome.units, rules=rules.record_fields(task),
                   failure=outcome.failed_as,
                   traceback=their_traceback(outcome.stderr) if outcome.failed_as else "")


# Python's first line of a traceback; the child prints their frames only (child_main._trim).
TRACEBACK_HEAD = "Traceback (most recent call last):"
TRACEBACK_LINES = 40


def their_traceback(stderr: str) -> str:
    """The last traceback the child printed, at most its last TRACEBACK_LINES lines (the
    exception's own line is last), or "" when it printed none."""
    start = stderr.rfind(TRACEBACK_HEAD)
    if start < 0:
        return ""
    return "\n".join(stderr[start:].rstrip().splitlines()[-TRACEBACK_LINES:])


def _confinement_lines(outcome: TaskOutcome, protections: Protections) -> list[str]:
    """What the child itself said it installed before the participant's code ran."""
    if outcome.protections is None:
        return ["child confinement: NOT ACTIVE: the child sent no report (it died before "
                "its set-up finished)"]
    parts = [f"{name.split(' (')[0]} {'active' if on else 'NOT ACTIVE (' + detail + ')'}"
             for name, on, detail in outcome.protections]
    lines = ["child confinement: " + "; ".join(parts)]
    files = any(name == LANDLOCK_FILES and on for name, on, _ in outcome.protections)
    if not files and not protections.separate_user:
        lines.append("output, program and data folders were NOT protected from this child's "
                     "writes (same user, no Landlock)")
    return lines


def _time_used(task: TaskSpec, outcome: TaskOutcome, limits: Limits) -> str:
    """Both clocks: the budget's, from the call of their function, and the start-up's."""
    training = ("training never began" if outcome.training_seconds is None else
                f"training {outcome.training_seconds:.2f} s of its {task.budget_seconds:g} s budget")
    return (f"{training}; start-up {outcome.startup_seconds:.2f} s of its "
            f"{limits.startup_seconds:g} s allowance")


def _report(task: TaskSpec, outcome: TaskOutcome, protections: Protections, limits: Limits
            ) -> None:
    used = _time_used(task, outcome, limits)
    memory = f", peak memory {outcome.peak_memory_mb:.0f} MiB" if outcome.peak_memory_mb else ""
    if outcome.resident_peak_mb is not None:
        memory += (f", highest resident memory sampled {outcome.resident_peak_mb:.0f} MiB "
                   "(all its processes)")
    _say(f"[{task.name}] {outcome.status}: {used}{memory}"
         + (f"; prediction: {outcome.prediction}" if outcome.prediction else "; no prediction"))
    for line in _confinement_lines(outcome, protections):
        _say(f"[{task.name}]   {line}")
    for note in rules.task_notes(rules.record_fields(task)):
        _say(f"[{task.name}]   {note}")
    for line in rules.outcome_lines(task, outcome):
        _say(f"[{task.name}]   {line}")
    if outcome.scratch:
        _say(f"[{task.name}]   {outcome.scratch}")
    message = failures.headline(outcome.failed_as, outcome.message) if outcome.failed_as \
        else outcome.message
    for line in filter(None, [message, *outcome.notes]):
        _say(f"[{task.name}]   {line}")
    if outcome.deadline_to_gone_seconds is not None:
        _say(f"[{task.name}]   all its processes were gone {outcome.deadline_to_gone_seconds:.2f} s "
             "after the budget ended")
    if outcome.killed_descendants:
        _say(f"[{task.name}]   killed {outcome.killed_descendants} leftover process(es)")
    if outcome.status != "ok" and outcome.stderr_tail:
        _say(f"[{task.name}]   last lines of its stderr:")
        for line in outcome.stderr_tail.splitlines():
            _say(f"[{task.name}]   | {line}")


def _announce(config: IngestionConfig, hardware: dict, dirs: dict[str, Path | None]
              ) -> Protections:
    """The run, the machine and every protection, before anything of the participant runs."""
    _say(f"ingestion of phase {config.phase}: {len(config.tasks)} task(s), at most "
         f"{config.total_seconds():.0f} s in all")
    _say(f"hardware: {hardware['cpu']}, {hardware['cores']} cores, {hardware['memory_gib']} GiB"
         + (f", GPUs: {', '.join(hardware['gpus'])}" if hardware["gpus"] else ", no GPU"))
    protections = probe()
    dirs["output"].mkdir(parents=True, exist_ok=True)
    locked = lock_down(protections, [dirs["hidden"], dirs["program"], dirs["output"]])
    for line in describe(protections, config.limits, locked):
        _say(f"protection: {line}")
    if not (dirs["submission"] / f"{config.entry_module}.py").is_file():
        _say(f"the submission has no {config.entry_module}.py at its root")
    abandoned = remove_abandoned_staging()
    if abandoned:
        _say(f"removed staging folders of earlier, killed runs: {', '.join(abandoned)}")
    return protections


def _run_tasks(tasks: tuple[TaskSpec, ...], config: IngestionConfig, base: Path,
               dirs: dict[str, Path | None], protections: Protections, contract,
               shared: tuple[dict, Path, ModeGuard, Path], write: bool = True,
               folder: str = ""
               ) -> list[tuple[TaskSpec, TaskOutcome]]:
    """``folder``: the tasks' inputs are in that folder of the input data, their predictions
    go to that folder of the output (a run's ``folder``)."""
    forbidden = tuple(p for p in (*dirs.values(), base) if p)
    sources, submission, modes, inputs = shared
    done = []
    for task in tasks:
        started = time.monotonic()
        try:
            staging = _stage_task(base, task, (inputs, folder), sources, submission,
                                  protections.uid, forbidden, contract)
        except InputChanged as error:       # nothing of the link's target was read
            done.append((task, _input_refused(task, error)))
            continue
        modes.add(staging.workdir.parent)
        task = rules.task_budget(task, staging.data, contract)
        outcome = _run_task(task, config, staging, protections, contract)
        restored = modes.restore()         # the child may have changed them: see modes.py
        if not clean_workdir(staging.workdir):
            outcome.notes.append("its working folder could not be removed")
        if write:
            _write_outputs(dirs["output"] / folder, task, outcome)
        done.append((task, outcome))
        _report(task, outcome, protections, config.limits)
        for line in restored:
            _say(f"[{task.name}]   {line}")
        overhead = time.monotonic() - started - outcome.wall_seconds
        _say(f"[{task.name}]   staging, validation and writing took {overhead:.2f} s")
    return done


def _input_refused(task: TaskSpec, error: InputChanged) -> TaskOutcome:
    """The failed outcome of a task whose input data someone changed during the run: no
    child runs it, and it has no output to write."""
    outcome = TaskOutcome(status="failed", wall_seconds=0.0, failure=failures.SANDBOX,
                          message=f"its input data was not staged: {error}")
    _say(f"[{task.name}] failed: {outcome.message}")
    return outcome


def _held_folder(folder: Path) -> Path:
    """The input folder, opened once before any child runs: staging reads beneath this
    descriptor's path, so no name changed later redirects it, the folder's own included."""
    try:
        return fd_path(open_folder(folder))
    except OSError as error:
        raise ConfigError(f"{folder}: the input data folder cannot be opened "
                          f"({error.strerror})") from None


def _run_task(task: TaskSpec, config: IngestionConfig, staging: Staging,
              protections: Protections, contract) -> TaskOutcome:
    """In one child, or as a rule runs it (units: a child per stretch of units)."""
    entry = (config.entry_module, config.entry_function)

    def run_child(**window) -> TaskOutcome:
        return run_task(task, staging, protections, config.limits, entry, contract,
                        UnitWindow(**window) if window else None)
    runner = rules.task_runner(task, contract)
    return runner(run_child) if runner else run_child()


def _make_run(run: rules.Run, config: IngestionConfig, base: Path,
              dirs: dict[str, Path | None], protections: Protections, contract, shared
              ) -> tuple[list[tuple[TaskSpec, TaskOutcome]], dict, str | None]:
    """One run's tasks (``rules.Run``), a run not scored writing no output. Returns what it
    wrote, its entries in the run record and why the submission fails (None: it does not)."""
    if run.announcement:
        _say(run.announcement)
    if run.scored and run.folder:
        (dirs["output"] / run.folder).mkdir(exist_ok=True)
    done = _run_tasks(run.tasks, config, base, dirs, protections, contract, shared,
                      write=run.scored, folder=run.folder)
    written = done if run.scored else []
    if run.verdict is None:
        return written, dict(run.entries), None
    entries, failure = run.verdict(
        [(task, outcome, asdict(_task_run(task, outcome, config.limits)),
          rules.outcome_problems(task, outcome)) for task, outcome in done], contract)
    return written, entries, failure


def ingest(input_dir: Path, output_dir: Path, program_dir: Path, submission_dir: Path,
           hidden_dir: Path | None, worker_data: Path | None = None) -> int:
    """``worker_data``: the worker's data mount, where a phase keeps its input data instead
    of in ``$input`` (spec key on_worker)."""
    config: IngestionConfig = load_config(program_dir / CONFIG_NAME)
    try:
        contract = ingestion_runtime(config.kind)
    except (UnknownKind, ImportError, KindDefinitionError) as error:
        raise ConfigError(f"{program_dir / CONFIG_NAME}: kind: {error}") from None
    hardware = describe_hardware()
    worker_problem = None
    if config.worker_input is not None:
        problems = copy_problems(config.worker_input, worker_data)
        worker_problem = problems and (
            "the organizers must fix this competition's worker: "
            f"{copy_problem_text(config.worker_input, problems)} (a failed submission does "
            "not count toward the limits)")
        input_dir = input_dir if problems else worker_data / config.worker_input.folder
    dirs = {"input": input_dir, "output": output_dir, "program": program_dir,
            "submission": submission_dir, "hidden": hidden_dir}
    protections = _announce(config, hardware, dirs)
    key = _record_key(program_dir, hidden_dir)      # before any child runs
    ran = submission_digest(submission_dir)         # what the record vouches for
    refusal = _refusal(config, submission_dir, worker_problem or _key_problem(key, protections))
    if refusal:         # nothing of theirs has run: the key is still out of their reach
        return _refuse(config, output_dir, hardware, key, *refusal, submission=ran)
    inputs = _held_folder(input_dir)
    planned = rules.runs(config, submission_dir)
    base = new_staging_folder()
    os.chmod(base, 0o711)      # the child may pass through to its own folders, not list them
    before = set(os.listdir(output_dir))
    done: dict[str, list[tuple[TaskSpec, TaskOutcome]]] = {}
    entries: dict = {}
    failure = None
    try:
        # Modes are recorded once the submission's copy is staged, before any child runs; the
        # submission's own folder is not read again.
        shared = (_runtime_sources(dirs["program"], contract),
                  _stage_common(base, dirs["submission"]),
                  ModeGuard([dirs[name] for name in ("input", "output", "program", "hidden")]
                            + [base]),
                  inputs)
        for run in planned:
            written, found, failure = _make_run(run, config, base, dirs, protections,
                                                contract, shared)
            if run.scored:
                done.setdefault(run.folder, []).extend(written)
            clash = sorted(set(found) & set(entries))
            if clash:
                raise rules.RuleError(f"run {run.name}: sets {clash}, set by another run")
            entries.update(found)
            if failure is not None:
                break
    finally:
        if not force_remove(base):
            _say(f"could not remove the staging folder {base}")
    planted = _settle_output(output_dir, before, done)
    if planted:
        _say(f"removed from the output folder what a child put there: {', '.join(planted)}")
    ran_tasks = [(task, outcome, folder) for folder, outcomes in done.items()
                 for task, outcome in outcomes]
    runs = {task.name: _task_run(task, outcome, config.limits) for task, outcome, _ in ran_tasks}
    files = {name: file_digest(output_dir / name)
             for name in (_prediction_name(task, folder) for task, outcome, folder in ran_tasks
                          if outcome.predictions is not None)}
    write_run_record(output_dir / RECORD_NAME,
                     RunRecord(runs, hardware, files, rules=entries, submission=ran), key)
    if failure is not None:
        print(f"{failure}. The submission fails; failed submissions do not count toward the "
              "limits", file=sys.stderr)
        return rules.RULE_FAILED
    ok = sum(run.status == "ok" for run in runs.values())
    _say(f"done: {ok} of {len(runs)} task(s) ok; record written to {RECORD_NAME}, "
         + ("signed with the phase's key" if key else
            "unsigned (no key in this program or the hidden data: the scorer of a code phase "
            "will not accept it)"))
    return 0


def _refusal(config: IngestionConfig, submission_dir: Path,
             worker_problem: str | None) -> tuple[str, str] | None:
    """Why nothing of the submission runs, and its failure category: a command of its own
    would run outside the sandbox, a worker the organizers must fix starts no task, a rule
    refuses it."""
    command = own_command_problem(submission_dir)
    if command:
        return command, failures.SANDBOX
    if worker_problem:
        return worker_problem, failures.DID_NOT_START
    return rules.submission_refusal(config, submission_dir)


def _prediction_name(task: TaskSpec, folder: str) -> str:
    """A prediction file as the record names it, relative to the output folder."""
    return f"{folder}/{task.prediction_stem}.npy" if folder else f"{task.prediction_stem}.npy"


def _refuse(config: IngestionConfig, output_dir: Path, hardware: dict, key: bytes | None,
            reason: str, failure: str, submission: str | None = None) -> int:
    """Nothing of the submission runs; the signed record says why, so that the scorer fails
    it on a platform that scores whatever this program's exit status (Codabench).
    ``failure``: its category (a command of its own would run outside the sandbox; a worker
    the organizers must fix starts no task)."""
    runs = {task.name: TaskRun(status="failed", wall_seconds=0.0, message=reason,
                               failure=failure) for task in config.tasks}
    force_remove(output_dir / RECORD_NAME)
    write_run_record(output_dir / RECORD_NAME,
                     RunRecord(runs, hardware, refused=reason, submission=submission), key)
    print(f"submission refused: {failures.headline(failure, reason)}", file=sys.stderr)
    return SUBMISSION_REFUSED


KEY_UNPROTECTED = ("the organizers must fix this competition's worker: it cannot keep the "
                   "run record's signing key from participant code, which would run as this "
                   "program's user ({user}) without Landlock ({landlock}), free to read the key "
                   "or to change the files a later process of the run loads. Nothing of the "
                   "submission was run, and a failed submission does not count toward the "
                   "limits. A worker needs Landlock: Linux 5.13 or later with 'landlock' among "
                   "its security modules, in a container runtime that allows it "
                   "(docs/sandbox.md)")


def _key_problem(key: bytes | None, protections: Protections) -> str | None:
    """Why no code may run here, or None: a key the child could reach would vouch for
    nothing, in this run or any later one of the phase (the key is the phase's). Refusing
    to sign is not enough: the key itself must not leak. A kit's run has no key."""
    if key is None or protections.key_protected:
        return None
    why = protections.why_not
    return KEY_UNPROTECTED.format(user=why.get("user", "root"),
                                  landlock=why.get("landlock", "not available"))


def _record_key(program_dir: Path, hidden_dir: Path | None) -> bytes | None:
    """The signing key where the platform lets only this program read it: the hidden data
    CodaLab mounts for it; else this program's folder (Codabench, where the hidden data is not
    mounted: a Codabench bundle's key, or a v1.5 bundle's key for Codabench's importer;
    bundle/programs.py)."""
    return read_record_key(hidden_dir) or read_record_key(program_dir)


def _interrupted(number, _frame) -> None:
    for other in STOPPING_SIGNALS:
        signal.signal(other, signal.SIG_IGN)     # one clean-up, however many signals follow
    raise Interrupted(signal.Signals(number).name)


def main(argv: list[str], program_dir: Path) -> int:
    if len(argv) not in (4, 5, 6):
        print(USAGE, file=sys.stderr)
        return 2
    input_dir, output_dir, _, submission_dir = (Path(a) for a in argv[:4])
    hidden_dir = Path(argv[4]) if len(argv) >= 5 and not argv[4].startswith("$") else None
    worker_data = Path(argv[5]) if len(argv) == 6 else None
    for number in STOPPING_SIGNALS:
        signal.signal(number, _interrupted)
    try:
        return ingest(input_dir, output_dir, program_dir, submission_dir, hidden_dir,
                      worker_data)
    except (ConfigError, FormatError, rules.RuleError) as error:
        print(f"ingestion stopped, the organizer must fix: {error}", file=sys.stderr)
        return 1
    except Interrupted as error:
        print(f"ingestion stopped by {error}; its child processes and staging folder were "
              "removed", file=sys.stderr)
        return 2
    except Exception as error:      # noqa: BLE001 - last resort: explain before the traceback
        print(f"internal error in the ingestion program ({type(error).__name__}: {error}); "
              "please report it to the organizers with the traceback below", file=sys.stderr)
        traceback.print_exc()
        return 2

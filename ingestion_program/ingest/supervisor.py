"""Run one task's child under its budget: capture its output, read its results, kill it.

The child's start-up (Python, the runtime, importing the participant's module, loading the
task's data) has its own allowance; the budget's clock starts when the child reports that the
participant's function is being called (its BEGIN frame).

One loop in the parent watches the child's stdout, stderr and result pipe (selectors,
no threads: the child is started with a pre-exec function, which threads would make
unsafe), the clock and the disk. At the budget's end the whole process group gets
SIGTERM, after the grace period SIGKILL, and every remaining descendant is swept.
"""
from __future__ import annotations

import io
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from runtime import failures
from runtime.formats import FormatError

from .config import RESIDENT, RESIDENT_SAMPLE_SECONDS, Limits, TaskSpec, gib_text
from .confine import LANDLOCK_FILES, SECCOMP
from .frames import BEGIN, CHECKPOINT, FINAL, FRAME_TYPES, HEADER, MAGIC, PROTECTIONS
from .processes import (GONE, child_waiting, descendants, reap_zombies, resident_bytes,
                        signal_group, sweep, wait_exit)
from .sandbox import Protections, preexec
from .scratch import (MAX_DEPTH, Root, ScratchLeft, ScratchWatch, TreeWalk, force_remove,
                      held_open_roots, open_root)

POLL_SECONDS = 0.05
# The shortest budget the supervisor times well: it reads the clock every POLL_SECONDS, so a
# stop can come up to one poll late; with ten polls in a budget that is at most a tenth of it.
MIN_BUDGET_SECONDS = 10 * POLL_SECONDS
DISK_CHECK_SECONDS = 0.25
# The longest the disk walk holds up the loop at once; a walk in progress also shortens the
# loop's wait to this, so a big tree is walked at about half of one core.
WALK_SLICE_SECONDS = 0.02
# The task's orphans are re-parented to this program: a chain of processes that each fork and
# exit leaves thousands of zombies a second, each holding a pid until it is reaped.
REAP_SECONDS = 0.25
# After the child exits, descendants may still hold its pipes open: give them this long.
LINGER_SECONDS = 0.5
# Isolated (-I: no PYTHONPATH, user site or working folder on the path), unbuffered, no .pyc:
# only the runtime is on the path until the child has confined itself (child_main.py).
CHILD_FLAGS = ("-I", "-u", "-B")
BOOTSTRAP = ("import sys; sys.path.insert(0, sys.argv[2]); "
             "from ingest_runtime.child_main import main; sys.exit(main(sys.argv[:2]))")


class OutputCapture:
    """Keeps the first and last ``limit / 2`` bytes of a stream, and counts the rest."""

    def __init__(self, limit: int):
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[:-self.half]

    def text(self) -> str:
        omitted = self.total - len(self.head) - len(self.tail)
        middle = f"\n[... {omitted} bytes omitted ...]\n" if omitted > 0 else ""
        return (bytes(self.head).decode("utf-8", "replace") + middle
                + bytes(self.tail).decode("utf-8", "replace"))

    def last_lines(self, count: int = 15) -> str:
        return "\n".join(self.text().rstrip().splitlines()[-count:])


class FrameReader:
    """Parses result frames as bytes arrive; anything malformed is a protocol violation."""

    def __init__(self, max_payload: int, verify=lambda report: report):
        self.max_payload = max_payload
        self.verify = verify      # the report corrected by what the kernel says of the child
        self.buffer = bytearray()
        self.checkpoint: bytes | None = None
        self.final: bytes | None = None
        self.error: str | None = None
        self.violation: str | None = None
        # The violation broke a sandbox limit (a frame over the size limit, a forged report),
        # rather than being garbled output.
        self.refused = False
        self.checkpoints = 0
        self.frames = 0
        self.final_at: float | None = None
        self.protections: list | None = None     # what the child installed, from its first frame
        self.begun_at: float | None = None       # start-up ended: their function is called
        self.progress_at: float | None = None    # it began, or its last checkpoint arrived

    def feed(self, chunk: bytes) -> None:
        if self.violation:
            return
        self.buffer += chunk
        while len(self.buffer) >= HEADER.size:
            magic, frame_type, length = HEADER.unpack_from(self.buffer)
            if magic != MAGIC or frame_type not in FRAME_TYPES or length > self.max_payload:
                self.refused = magic == MAGIC and length > self.max_payload
                self.violation = (f"malformed result frame (type {frame_type!r}, {length} bytes; at most "
                                  f"{self.max_payload} expected)")
                self.buffer.clear()
                return
            if len(self.buffer) < HEADER.size + length:
                return
            payload = bytes(self.buffer[HEADER.size:HEADER.size + length])
            del self.buffer[:HEADER.size + length]
            self.frames += 1
            if frame_type == PROTECTIONS:
                self._protections(payload)
            elif frame_type == BEGIN:
                # Only the first counts: their module, imported before, could send one early,
                # which starts their own budget sooner and gains them nothing.
                if self.begun_at is None:
                    self.begun_at = self.progress_at = time.monotonic()
            elif frame_type == CHECKPOINT:
                self.checkpoint, self.checkpoints = payload, self.checkpoints + 1
                self.progress_at = time.monotonic()
            elif frame_type == FINAL:
                if self.final is None:
                    self.final_at = time.monotonic()
                self.final = payload
            else:
                self.error = payload.decode("utf-8", "replace")


    def _protections(self, payload: bytes) -> None:
        """Only our bootstrap writes a first frame; a later one is forged."""
        if self.frames != 1:
            self.violation = "a protection report after participant code started"
            self.refused = True
            return
        try:
            report = json.loads(payload)
            report = [(str(name), bool(on), str(detail)) for name, on, detail in report]
        except (ValueError, TypeError):
            self.violation = "an unreadable protection report"
            return
        self.protections = self.verify(report)


@dataclass
class TaskOutcome:
    status: str                          # ok | failed | timed_out | invalid
    message: str
    wall_seconds: float
    predictions: np.ndarray | None = None
    prediction: str | None = None        # final | anytime | None
    notes: list[str] = field(default_factory=list)
    exit_code: int | None = None
    signal: str | None = None
    peak_memory_mb: float | None = None
    resident_peak_mb: float | None = None    # the resident rule's highest sample, all processes
    stdout: str = ""
    stderr: str = ""
    stderr_tail: str = ""
    killed_descendants: int = 0
    deadline_to_gone_seconds: float | None = None   # kill latency, when the budget ran out
    protections: list | None = None      # (name, installed, detail) as the child reported them
    scratch: str | None = None           # what it left in /tmp, /var/tmp, /dev/shm, removed
    units_done: int = 0                  # checkpoints received: units finished (rules/units.py)
    resumable: bool = False              # it stopped inside a unit, at that unit's cost only
    units: dict | None = None            # per-unit statuses, for a task run in units
    startup_seconds: float = 0.0         # from its start to its function's call (or its end)
    training_seconds: float | None = None    # from its function's call on; None: never called
    budget_ends: float | None = None     # monotonic; None when its budget never began
    failure: str | None = None           # how it ended, if not ok (runtime/failures.py)

    @property
    def failed_as(self) -> str | None:
        """Its category as a failed task: none where a prediction was kept (a timeout with an
        anytime checkpoint is scored, not failed)."""
        return self.failure if self.prediction is None and self.status != "ok" else None


@dataclass(frozen=True)
class Staging:
    runtime: Path          # holds the ingest_runtime package (child_main, frames)
    submission: Path       # read-only copy of the participant's files
    data: Path             # this task's inputs, as the kind staged them for the child
    workdir: Path          # the child's own writable folder
    forbidden: tuple[Path, ...] = ()   # never readable: hidden data, output, input, programs
    base: Path | None = None           # the staging folder (not the child's scratch)


@dataclass(frozen=True)
class UnitWindow:
    """One child's share of a task run in units (``runtime/rules/units.py``): the units from
    ``first`` on, each with ``seconds``, all before the task's ``deadline`` (monotonic clock).
    The first child has none yet: its start-up has the allowance, and the task's budget begins
    when it calls the participant's function; a later child starts up within that budget."""
    names: tuple[str, ...]
    seconds: float
    first: int
    deadline: float | None

    def name(self, done: int) -> str:
        index = self.first + done
        return self.names[index] if index < len(self.names) else f"unit {index}"


# Set by the worker or the image, never by participants: which GPUs this container may use
# (a worker sharing its GPUs between runs says so here) and where the CUDA images put the
# driver's libraries.
GPU_VARIABLES = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
                 "LD_LIBRARY_PATH")


def _kernel_status(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            return dict(line.rstrip("\n").split(":\t", 1) for line in status if ":\t" in line)
    except OSError:
        return {}


def kernel_checked(report: list, pid: int) -> list:
    """What the child said it installed, with seccomp taken from the kernel's own view of the
    child (/proc/<pid>/status: a filter is mode 2 and needs no-new-privileges), so no module
    the child might have imported can make the log claim a filter that is not there."""
    status = _kernel_status(pid)
    filtered = status.get("Seccomp", "").strip() == "2" and status.get("NoNewPrivs", "").strip() == "1"
    checked = []
    for name, on, detail in report:
        if name == SECCOMP and on and not filtered:
            on, detail = False, ("the kernel shows no filter on the child "
                                 f"(Seccomp: {status.get('Seccomp', 'unknown').strip()})")
        checked.append((name, on, detail))
    return checked


def missing_protections(checked: list, promised: tuple[str, ...]) -> list[str]:
    """The promised protections a child's (kernel-checked) report lacks, with its reason."""
    installed = {name for name, on, _ in checked if on}
    details = {name: detail for name, _, detail in checked}
    return [f"{name.split(' (')[0]} ({details.get(name, 'not reported')})"
            for name in promised if name not in installed]


def _child_environment(workdir: Path, cores: int | None) -> dict[str, str]:
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = str(cores or available)
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(workdir), "TMPDIR": str(workdir),
            "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
            **{name: threads for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                          "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")},
            **{name: os.environ[name] for name in GPU_VARIABLES if name in os.environ}}


def _confinement_plan(staging: Staging, disabled: tuple[str, ...]) -> dict:
    return {"read": [str(staging.runtime), str(staging.submission), str(staging.data),
                     str(staging.workdir)],
            "write": [str(staging.workdir)], "forbidden": [str(p) for p in staging.forbidden],
            "disable": list(disabled)}


def _decode(payload: bytes, task: TaskSpec, contract, what: str):
    """The array a frame carries, checked by the kind's contract (its ``check_output``)."""
    try:
        array = np.load(io.BytesIO(payload), allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise FormatError(f"{what}: not a valid array ({error})") from None
    return contract.check_output(array, task, what)


class _Run:
    """The state of one supervised child; ``loop`` drives it to the end."""

    def __init__(self, task: TaskSpec, staging: Staging, protections: Protections,
                 limits: Limits, entry: tuple[str, str], contract, units: UnitWindow | None):
        self.task, self.limits, self.units = task, limits, units
        self.stdout, self.stderr = OutputCapture(limits.output_bytes), OutputCapture(limits.output_bytes)
        self.frames = FrameReader(max_payload=contract.output_bytes(task),
                                  verify=lambda report: self._kernel_checked(report))
        read_fd, write_fd = os.pipe()
        spec = {"name": task.name, "task_type": task.task_type, "contract": task.contract,
                "budget_seconds": task.budget_seconds,
                "data": str(staging.data), "result_fd": write_fd,
                "submission": str(staging.submission),
                "entry_module": entry[0], "entry_function": entry[1],
                "first_unit": units.first if units else 0, "rules": task.rules,
                "confine": _confinement_plan(staging, protections.disabled)}
        self.scratch = ScratchWatch(staging.base or staging.workdir, protections.uid)
        self.workdir_fd = open_root(staging.workdir)      # see Root.fd
        self.disk_walk: TreeWalk | None = None   # under way, a slice per turn of the loop
        # Whatever already runs below this program is not the task's: never counted or killed.
        self.apart = frozenset(descendants())
        self.resident_peak = 0
        self.entry_module = entry[0]
        self.promised = protections.promised()
        self.started = time.monotonic()
        self.startup_ends = self.started + limits.startup_seconds
        self.deadline = units.deadline if units else None    # set when it begins
        try:
            self.process = subprocess.Popen(
                [sys.executable, *CHILD_FLAGS, "-c", BOOTSTRAP, json.dumps(spec),
                 str(staging.runtime)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                pass_fds=(write_fd,), cwd=staging.workdir, start_new_session=True,
                env=_child_environment(staging.workdir, limits.cores),
                preexec_fn=preexec(protections, limits))
        except BaseException:
            os.close(read_fd)
            self._close_folders()
            raise
        finally:
            os.close(write_fd)
        self.result_fd = read_fd
        self.workdir = staging.workdir
        self.selector = selectors.DefaultSelector()
        for stream, sink in ((self.process.stdout.fileno(), self.stdout.feed),
                             (self.process.stderr.fileno(), self.stderr.feed),
                             (read_fd, self.frames.feed)):
            os.set_blocking(stream, False)
            self.selector.register(stream, selectors.EVENT_READ, sink)
        self.exit_status = self.usage = self.exited_at = None
        self.terminated_at = self.killed_at = None
        self.stop_reason: str | None = None      # why we stopped it, other than the budget
        self.stop_failure: str | None = None     # that reason's category
        self.unit_overrun = False                # killed: a unit ran past its own limit
        self.memory_exceeded = False             # killed by the resident rule
        self.killed: set[int] = set()            # distinct leftover processes we killed
        self.next_disk_check = self.started + DISK_CHECK_SECONDS
        self.next_memory_sample = self.next_reap = self.started

    def _kernel_checked(self, report: list) -> list:
        """The child's report as the kernel sees the child, then the child may go on, if it
        installed every protection this run found available: a child with less (a unit's
        later child, say) is killed before any code of theirs runs, so every child of a run
        is confined alike and the record key stays guarded (``Protections.key_protected``)."""
        checked = kernel_checked(report, self.process.pid)
        missing = missing_protections(checked, self.promised)
        if missing:
            # Killed before stdin closes: the child takes end-of-file for its go-ahead.
            self._stop(f"its process could not install {'; '.join(missing)}, which this "
                       "worker offered to every other process of the run; it was stopped "
                       "before your code started (please report this to the organizers)",
                       failures.SANDBOX)
        try:
            if not missing:
                self.process.stdin.write(b"1")
            self.process.stdin.close()
        except OSError:
            pass           # it is gone already: nothing of theirs will run
        return checked

    def _sweep(self) -> None:
        """One SIGKILL to the task's group reaches all its processes at once, and the kernel
        lets none of them fork once it is pending: seccomp keeps them from leaving the group
        (setsid, setpgid), so a fork bomb cannot outrun it. /proc is then swept for any that
        left anyway (the filter switched off or not installed)."""
        self.killed |= self._leftovers()
        signal_group(self.process.pid, signal.SIGKILL)
        self.killed |= sweep(spare=self.process.pid, apart=self.apart) - {self.process.pid}

    def _leftovers(self) -> set[int]:
        """The task's live processes other than its main child, counted before the kill."""
        return {pid for pid, state in descendants(apart=self.apart).items()
                if state not in GONE and pid != self.process.pid}

    def _stop(self, reason: str | None, failure: str | None = None) -> None:
        if reason and not self.stop_reason and self.terminated_at is None:
            self.stop_reason, self.stop_failure = reason, failure
        if self.killed_at is None:
            self.killed_at = time.monotonic()
        self._sweep()

    def confined(self) -> bool:
        """Whether Landlock keeps the child out of the shared scratch folders."""
        return any(name == LANDLOCK_FILES and on for name, on, _ in self.frames.protections or [])

    def _disk_roots(self) -> list[Root]:
        """Its working folder, the new entries of the scratch folders that may be its own
        (``ScratchWatch``) unless Landlock keeps it out, and the deleted files its processes
        hold open (in no folder, yet on the disk or in RAM)."""
        roots = [Root(str(self.workdir), fd=self.workdir_fd)]
        if not self.confined():
            roots += self.scratch.roots()
        return roots + held_open_roots(descendants(apart=self.apart))

    def _disk_problem(self, now: float) -> str | None:
        """Takes the disk walk a slice further, starting one when due; why the task must stop,
        as soon as the part walked is over a limit."""
        if self.disk_walk is None:
            if now < self.next_disk_check:
                return None
            self.disk_walk = TreeWalk(self._disk_roots())
        done = self.disk_walk.step(WALK_SLICE_SECONDS)
        problem = self._over_limits(self.disk_walk)
        if done or problem:
            self._end_walk()
            self.next_disk_check = time.monotonic() + DISK_CHECK_SECONDS
        return problem

    def _over_limits(self, walk: TreeWalk) -> str | None:
        limits = self.limits
        if walk.bytes > limits.disk_bytes:
            return f"wrote more than {limits.disk_bytes / 2**20:.0f} MiB to disk (disk limit)"
        if walk.entries > limits.max_entries:
            return (f"created more than {limits.max_entries} files and folders (file count "
                    "limit)")
        if walk.too_deep:
            return f"nested folders more than {MAX_DEPTH} deep (folder depth limit)"
        return None

    def _end_walk(self) -> None:
        if self.disk_walk is not None:
            self.disk_walk.close()
            self.disk_walk = None

    def _close_folders(self) -> None:
        self._end_walk()
        self.scratch.close()
        if self.workdir_fd is not None:
            os.close(self.workdir_fd)
            self.workdir_fd = None

    def abort(self) -> None:
        """This program is being stopped: take the child and its descendants with it."""
        self._close_folders()
        self._sweep()

    def _resident_exceeded(self, now: float) -> bool:
        """The resident rule, sampled: the grace period after SIGTERM is no licence to grow,
        but once the predictions are in, the linger stop ends the task anyway."""
        if (self.limits.memory_rule != RESIDENT or now < self.next_memory_sample
                or self.exit_status is not None or self.killed_at is not None
                or self.frames.final_at is not None):
            return False
        self.next_memory_sample = now + RESIDENT_SAMPLE_SECONDS
        used = resident_bytes(descendants(apart=self.apart))
        self.resident_peak = max(self.resident_peak, used)
        return used > self.limits.memory_bytes

    def _stop_for_memory(self) -> None:
        self.memory_exceeded = True
        if self.stop_reason is None:
            self.stop_failure = failures.MEMORY
        self.stop_reason = self.stop_reason or (
            f"used {self.resident_peak / 2**30:.2f} GiB of host RAM, over its memory limit of "
            f"{gib_text(self.limits.memory_bytes)} (rule: resident, the resident memory of "
            "all its processes summed, sampled every "
            f"{RESIDENT_SAMPLE_SECONDS * 1000:.0f} ms), and was killed")
        self._stop(None)

    def _startup_overrun(self) -> str:
        return (f"did not start within its start-up allowance of {self.limits.startup_seconds:g} s "
                f"(starting Python, importing {self.entry_module}.py, loading the task's data) "
                f"and was killed; its budget of {self.task.budget_seconds:g} s had not begun")

    def _enforce(self, now: float) -> None:
        if self.deadline is None and self.frames.begun_at is not None:
            self.deadline = self.frames.begun_at + self.task.budget_seconds
        if self._resident_exceeded(now):
            self._stop_for_memory()
        if self.exit_status is None and self.terminated_at is None and self.stop_reason is None:
            if self.deadline is None:
                if now >= self.startup_ends:
                    self._stop(self._startup_overrun(), failures.DID_NOT_START)
            elif now >= self.deadline:
                self.terminated_at = now
                signal_group(self.process.pid, signal.SIGTERM)
            elif self.frames.violation:
                self._stop(f"sent malformed results: {self.frames.violation}",
                           failures.SANDBOX if self.frames.refused else failures.INVALID_OUTPUT)
            elif self.frames.final_at is not None and now >= self.frames.final_at + LINGER_SECONDS:
                self._stop(None)     # it returned; whatever it left running is not waited for
            elif not self.unit_overrun and self._unit_overran(now):
                self.unit_overrun = True
                self._stop(None)     # no grace: the next unit's time is not this one's
            else:
                problem = self._disk_problem(now)
                if problem:
                    self._stop(problem, failures.SANDBOX)
        if self.terminated_at is not None and self.killed_at is None and \
                now >= self.terminated_at + self.limits.grace_seconds:
            self._stop(None)
        if self.exit_status is not None and now >= self.exited_at + LINGER_SECONDS:
            self._sweep()   # they hold the pipes

    def _reap_orphans(self, now: float) -> None:
        if now >= self.next_reap and child_waiting():
            self.next_reap = now + REAP_SECONDS
            reap_zombies(spare=self.process.pid, apart=self.apart)

    def _unit_overran(self, now: float) -> bool:
        """The unit under way has had its seconds since the child began (its start-up is not
        the first unit's) or since its last checkpoint."""
        started = self.frames.progress_at
        return (self.units is not None and started is not None and self.frames.final_at is None
                and now >= started + self.units.seconds)

    def loop(self) -> None:
        while True:
            now = time.monotonic()
            if self.exit_status is None:
                self.exit_status, self.usage = wait_exit(self.process.pid)
                if self.exit_status is not None:
                    self.exited_at = now
            if self.exit_status is not None and not self.selector.get_map():
                break
            self._reap_orphans(now)
            self._enforce(now)
            wait = POLL_SECONDS if self.disk_walk is None else WALK_SLICE_SECONDS
            for key, _ in self.selector.select(wait):
                chunk = os.read(key.fd, 1 << 16)
                if chunk:
                    key.data(chunk)
                else:
                    self.selector.unregister(key.fd)
                    if key.fd == self.result_fd:
                        os.close(key.fd)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            try:
                stream.close()
            except OSError:
                pass        # stdin: the child is gone, its pipe broken
        self.selector.close()
        self._close_folders()
        self.process.returncode = os.waitstatus_to_exitcode(self.exit_status)
        self._sweep()
        self.ended = time.monotonic()


def _exit_description(returncode: int) -> tuple[int | None, str | None]:
    if returncode < 0:
        return None, signal.Signals(-returncode).name
    return returncode, None


def _failure_message(run: _Run, limits: Limits) -> tuple[str, str, str]:
    """(status, category, message) for a child that did not deliver a valid final
    prediction; the categories are runtime/failures.py's."""
    task = run.task
    if run.stop_reason:
        status = "invalid" if run.stop_reason.startswith("sent malformed") else "failed"
        return status, run.stop_failure or failures.RAISED, run.stop_reason
    if run.unit_overrun:
        return "timed_out", failures.TIMED_OUT, (
            f"{run.units.name(run.frames.checkpoints)} did not finish within its "
            f"{run.units.seconds:g} s and was killed")
    if run.terminated_at is not None:
        how = ("ignored SIGTERM and was killed after the "
               f"{limits.grace_seconds:g} s grace period" if run.killed_at else "stopped by SIGTERM")
        return "timed_out", failures.TIMED_OUT, (
            f"did not finish within its budget of {task.budget_seconds:g} s ({how})")
    if run.frames.error:
        return ("failed", *_reported_error(run.frames.error, limits))
    return ("failed", *_exit_failure(run, limits))


def _reported_error(report: str, limits: Limits) -> tuple[str, str]:
    """The child's error frame: its category (first line; a code we do not know, from a
    frame their code forged, counts as an exception), then its message."""
    code, _, message = report.partition("\n")
    failure = failures.known(code)
    if failure is None:
        failure, message = failures.RAISED, report
    if "MemoryError" in message:
        message += f" (the memory limit is {memory_limit_text(limits)})"
    if "File too large" in message or "Disk quota" in message:
        message += f" (files are limited to {limits.max_file_bytes / 2**20:.0f} MiB)"
    return failure, message


# Deaths that only a sandbox limit explains: a file over RLIMIT_FSIZE, a system call refused.
SANDBOX_SIGNALS = ("SIGXFSZ", "SIGSYS")


def _exit_failure(run: _Run, limits: Limits) -> tuple[str, str]:
    """A child that ended with no report: by a signal, or an exit from their code."""
    code, signal_name = _exit_description(run.process.returncode)
    hint = _address_space_hint(run, limits, signal_name)
    begun = run.frames.begun_at is not None
    if signal_name:
        guess = signal_name == "SIGKILL" and run.killed_at is None   # not killed by us
        message = f"killed by {signal_name}" + (" (out of memory?)" if guess else "") + hint
        if guess or hint.startswith(" (probably"):
            return failures.MEMORY, message
        if signal_name in SANDBOX_SIGNALS:
            return failures.SANDBOX, message
        return (failures.RAISED if begun else failures.DID_NOT_START), message
    last = run.stderr.last_lines(1)
    message = (f"exited with code {code} before returning predictions"
               + (f": {last}" if last else "") + hint)
    if hint.startswith(" (probably"):
        return failures.MEMORY, message
    if not begun:
        return failures.DID_NOT_START, message
    return (failures.NOTHING if code == 0 else failures.RAISED), message


def memory_limit_text(limits: Limits) -> str:
    amount = gib_text(limits.memory_bytes)
    return (f"{amount} of resident memory, all processes summed" if limits.memory_rule == RESIDENT
            else f"{amount} of address space per process, which counts reservations too")


# How native code dies when RLIMIT_AS refuses a reservation (XLA, LLVM, CUDA, glibc), seen in
# its last words; a bare SIGABRT, SIGSEGV or SIGBUS is often the same thing unexplained.
ALLOCATION_SYMPTOMS = ("memoryerror", "bad_alloc", "pthread_create", "resource temporarily "
                       "unavailable", "cannot allocate memory", "out of memory", "out_of_memory",
                       "resource_exhausted", "failed to map segment")
CRASH_SIGNALS = ("SIGABRT", "SIGSEGV", "SIGBUS")


def _address_space_hint(run: _Run, limits: Limits, signal_name: str | None) -> str:
    if limits.memory_rule == RESIDENT:
        return ""
    words = run.stderr.last_lines(40).lower()
    if any(symptom in words for symptom in ALLOCATION_SYMPTOMS):
        return f" (probably the memory limit: {memory_limit_text(limits)})"
    if signal_name in CRASH_SIGNALS:
        return f" (a crash; possibly the memory limit: {memory_limit_text(limits)})"
    return ""


def run_task(task: TaskSpec, staging: Staging, protections: Protections, limits: Limits,
             entry: tuple[str, str], contract, units: UnitWindow | None = None) -> TaskOutcome:
    """``contract``: the record of the kind's runtime ``ingestion`` module (output size and
    checks);
    ``units``: the part of a task run in units this child runs, else the whole task."""
    try:
        run = _Run(task, staging, protections, limits, entry, contract, units)
    except (OSError, subprocess.SubprocessError) as error:
        return TaskOutcome(status="failed", wall_seconds=0.0, failure=failures.DID_NOT_START,
                           message=f"the ingestion could not start the task's process ({error}); "
                                   "please report this to the organizers")
    try:
        run.loop()
    except BaseException:
        run.abort()
        raise
    code, signal_name = _exit_description(run.process.returncode)
    end, begun = run.exited_at or run.ended, run.frames.begun_at
    in_time = (run.frames.final_at is not None and run.deadline is not None
               and run.frames.final_at < run.deadline)
    trained = run.frames.final_at if in_time else end     # to its prediction, not its exit
    outcome = TaskOutcome(
        status="ok", message="", wall_seconds=round(end - run.started, 3),
        # Not rounded: a prediction in time must never read as taking the whole budget.
        startup_seconds=(end if begun is None else begun) - run.started,
        training_seconds=None if begun is None else max(trained - begun, 0.0),
        budget_ends=run.deadline,
        exit_code=code, signal=signal_name,
        peak_memory_mb=round(run.usage.ru_maxrss / 1024, 1) if run.usage else None,
        resident_peak_mb=(round(run.resident_peak / 2**20, 1)
                          if limits.memory_rule == RESIDENT else None),
        stdout=run.stdout.text(), stderr=run.stderr.text(), stderr_tail=run.stderr.last_lines(),
        killed_descendants=len(run.killed),
        deadline_to_gone_seconds=(run.ended - run.deadline) if run.terminated_at else None,
        protections=run.frames.protections, scratch=_clean_scratch(run),
        units_done=run.frames.checkpoints)
    valid_final = None
    if in_time and not run.stop_reason:
        try:
            valid_final = _decode(run.frames.final, task, contract, "the returned predictions")
        except FormatError as error:
            outcome.status, outcome.message = "invalid", str(error)
            outcome.failure = failures.INVALID_OUTPUT
            return outcome
    if valid_final is not None:
        outcome.predictions, notes = valid_final
        outcome.prediction, outcome.notes = "final", list(notes)
        return outcome
    outcome.status, outcome.failure, outcome.message = _failure_message(run, limits)
    outcome.resumable = _stopped_inside_a_unit(run)
    if run.frames.checkpoint is not None and outcome.status != "invalid":
        try:
            outcome.predictions, notes = _decode(run.frames.checkpoint, task, contract,
                                                "the last checkpoint")
            outcome.prediction = "anytime"
            outcome.notes = list(notes) + [f"scored its last checkpoint (of {run.frames.checkpoints})"]
        except FormatError as error:
            outcome.notes.append(f"its last checkpoint was unusable: {error}")
    return outcome


def _stopped_inside_a_unit(run: _Run) -> bool:
    """Killed at a unit's limit or for its memory, or died in one without reporting an error (a
    crash, a signal, an exit from their code): a fresh child may go on with the next unit. Not
    so for an error report (their module does not import, ...), another stop for cause, or the
    task's budget."""
    if run.units is None or run.frames.begun_at is None:
        return False         # it never got to a unit: a fresh child would start up the same
    return run.unit_overrun or run.memory_exceeded or (
        run.frames.error is None and run.stop_reason is None and run.terminated_at is None)


# Entries named in full in the log before the rest are only counted
SCRATCH_NAMES_SHOWN = 20


def _clean_scratch(run: _Run) -> str | None:
    """What the task left in /tmp, /var/tmp or /dev/shm, removed where its own user marks it
    (``ScratchWatch``), for the log."""
    if run.confined():
        return None
    left = run.scratch.clean()
    if left.kept:
        return _kept_scratch(left)
    if not left.removed and not left.stuck:
        return None
    return (f"removed {left.removed} file(s) or folder(s), {left.bytes / 2**20:.1f} MiB, it "
            "left in /tmp, /var/tmp or /dev/shm"
            + (f"; could not remove {', '.join(left.stuck)}" if left.stuck else ""))


def _kept_scratch(left: ScratchLeft) -> str:
    shown = ", ".join(left.kept[:SCRATCH_NAMES_SHOWN])
    more = len(left.kept) - SCRATCH_NAMES_SHOWN
    return (f"not removed: {len(left.kept)} file(s) or folder(s), {left.bytes / 2**20:.1f} "
            "MiB, new in /tmp, /var/tmp or /dev/shm since the task started: "
            + shown + (f" and {more} more" if more > 0 else "")
            + ". They counted towards its disk limit; the task ran as this program's own "
            "user, without Landlock, so they cannot be told from files other programs of "
            "that user made meanwhile: remove those the task made yourself")


def clean_workdir(workdir: Path) -> bool:
    return force_remove(workdir)

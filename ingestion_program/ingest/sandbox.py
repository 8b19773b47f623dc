"""Which protections this machine allows, and the set-up that applies them in the child.

Probed once, before any participant code runs, so the log can state what is active and
why anything is not (errno name and system call); nothing is skipped silently. Two kinds:

- privileged, applied between fork and exec (``preexec``): network namespace, then the
  unprivileged user. They need CAP_SYS_ADMIN / CAP_SETUID (CodaLab v1's root has them,
  Codabench drops every capability).
- unprivileged, installed by the child itself before participant code is imported
  (``confine.py``: Landlock, seccomp); each child reports what it really installed.
"""
from __future__ import annotations

import ctypes
import errno
import os
import pwd
import resource
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import confine
from .config import Limits
from .processes import become_subreaper

SANDBOX_USER = "nobody"
PR_SET_DUMPABLE = 4


@dataclass(frozen=True)
class Protections:
    uid: int | None                   # the unprivileged user the child runs as, if any
    gid: int | None
    network_namespace: bool
    subreaper: bool
    landlock_abi: int | None = None   # what the kernel offers; each child confirms it
    seccomp: bool = False
    hidden_proc: bool = False         # this process is not dumpable: /proc/<pid>/environ...
    disabled: tuple[str, ...] = ()    # child protections switched off for a test run
    inactive: tuple[str, ...] = field(default_factory=tuple)   # why something is not active

    @property
    def separate_user(self) -> bool:
        return self.uid is not None

    @property
    def output_protected(self) -> bool:
        """Whether the child can be kept out of the output folder (checked again per task)."""
        return self.separate_user or (self.landlock_abi is not None
                                      and "landlock" not in self.disabled)


def _refusal(call: str, error: OSError) -> str:
    return f"{call}: {errno.errorcode.get(error.errno, error.errno)}"


def _attempt(action) -> str | None:
    """Runs ``action`` in a forked child; returns None if it worked, else its refusal."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            action()
            message = b""
        except confine.Refused as error:
            message = str(error).encode()
        except OSError as error:
            message = _refusal(getattr(action, "call", "?"), error).encode()
        os.write(write_end, message)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        message = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    if message:
        return message
    return None if os.waitstatus_to_exitcode(status) == 0 else "exit status " + str(
        os.waitstatus_to_exitcode(status))


def _named(call: str):
    def wrap(function):
        function.call = call
        return function
    return wrap


def _probe_network_namespace() -> str | None:
    @_named("unshare(CLONE_NEWNET)")
    def enter():
        os.unshare(os.CLONE_NEWNET)
    problem = _attempt(enter)
    return f"network namespace ({problem}); the child keeps the network" if problem else None


def _probe_sandbox_user(uid: int, gid: int) -> str | None:
    """The sandbox user must be able to start this interpreter with numpy."""
    def become():
        for call, function, argument in (("setgroups", os.setgroups, []), ("setgid", os.setgid, gid),
                                         ("setuid", os.setuid, uid)):
            try:
                function(argument)
            except OSError as error:
                raise confine.Refused(call, error.errno) from None
        os.chdir("/")
        os.execv(sys.executable, [sys.executable, "-c", "import numpy"])
    problem = _attempt(become)
    if problem:
        return (f"user {SANDBOX_USER!r} cannot start {sys.executable} with numpy ({problem}); "
                "the child runs as root")
    return None


def _probe_seccomp() -> str | None:
    def install():
        confine.no_new_privileges()
        confine.install_seccomp()
    return _attempt(install)


def _hide_from_children() -> str | None:
    """Not dumpable: a child with our uid cannot read /proc/<our pid>/environ, fd, mem."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        return f"prctl(PR_SET_DUMPABLE): {errno.errorcode.get(ctypes.get_errno())}"
    return None


def _user(inactive: list[str]) -> tuple[int | None, int | None]:
    if os.geteuid() != 0:
        inactive.append("unprivileged user: not running as root, so the child runs as the same "
                        "user; file permissions cannot hide the reference data or output folder")
        return None, None
    try:
        entry = pwd.getpwnam(SANDBOX_USER)
    except KeyError:
        inactive.append(f"unprivileged user: no user {SANDBOX_USER!r}: the child runs as root")
        return None, None
    problem = _probe_sandbox_user(entry.pw_uid, entry.pw_gid)
    if problem:
        inactive.append(f"unprivileged user: {problem}")
        return None, None
    return entry.pw_uid, entry.pw_gid


def _landlock(inactive: list[str], disabled: tuple[str, ...]) -> int | None:
    if "landlock" in disabled:
        inactive.append("Landlock: disabled for this run (INGESTION_SANDBOX_DISABLE)")
        return None
    try:
        return confine.landlock_abi()
    except confine.Refused as error:
        inactive.append(f"Landlock: {error}; the child can write wherever its user may")
        return None


def probe() -> Protections:
    inactive: list[str] = []
    disabled = tuple(filter(None, os.environ.get("INGESTION_SANDBOX_DISABLE", "").split(",")))
    subreaper_problem = become_subreaper()
    if subreaper_problem:
        inactive.append(f"child subreaper ({subreaper_problem}); escaped grandchildren are still "
                        "killed if found among descendants")
    hidden_problem = _hide_from_children()
    if hidden_problem:
        inactive.append(f"hiding this process's /proc files ({hidden_problem})")
    uid, gid = _user(inactive)
    network = _probe_network_namespace() if hasattr(os, "unshare") else \
        "network namespace (no os.unshare); the child keeps the network"
    if network:
        inactive.append(network)
    landlock_abi = _landlock(inactive, disabled)
    seccomp_problem = "disabled for this run" if "seccomp" in disabled else _probe_seccomp()
    if seccomp_problem:
        inactive.append(f"seccomp filter ({seccomp_problem})")
    return Protections(uid, gid, network is None, subreaper_problem is None, landlock_abi,
                       seccomp_problem is None, hidden_problem is None, disabled, tuple(inactive))


def lock_down(protections: Protections, paths: list[Path]) -> list[str]:
    """Make folders unreadable to the child's user (root-only, mode 700); returns what it did."""
    if not protections.separate_user:
        return []
    done = []
    for path in paths:
        if path and path.exists():
            os.chmod(path, 0o700)
            done.append(str(path))
    return done


def preexec(protections: Protections, limits: Limits):
    """The function run in the child after fork, before exec (no threads, no logging)."""
    def set_up() -> None:
        if protections.network_namespace:
            os.unshare(os.CLONE_NEWNET)
        for which, value in ((resource.RLIMIT_AS, limits.memory_bytes),
                             (resource.RLIMIT_FSIZE, limits.max_file_bytes),
                             (resource.RLIMIT_NOFILE, limits.open_files),
                             (resource.RLIMIT_CORE, 0)):
            _, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)     # raising a hard limit needs CAP_SYS_RESOURCE
            resource.setrlimit(which, (value, value))
        if protections.separate_user:
            # Only for a user of its own: RLIMIT_NPROC counts every process of that user.
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
            os.setgroups([])
            os.setgid(protections.gid)
            os.setuid(protections.uid)
    return set_up


def _state(active: bool) -> str:
    return "active" if active else "NOT ACTIVE"


def describe(protections: Protections, limits: Limits, locked: list[str]) -> list[str]:
    gib, p = 2 ** 30, protections
    landlock = (f"available (kernel ABI {p.landlock_abi}); each task's child reports what it "
                "installed" if p.landlock_abi is not None else "NOT ACTIVE")
    lines = [
        "own process group and session, killed as a group: active",
        f"child subreaper (escaped descendants swept after each task): {_state(p.subreaper)}",
        f"unprivileged user: {'active (' + SANDBOX_USER + ')' if p.separate_user else 'NOT ACTIVE'}",
        f"network namespace (no network): {_state(p.network_namespace)}",
        f"Landlock (files, TCP, signals): {landlock}",
        f"seccomp filter (no IP sockets, ptrace, io_uring, signals to this program): "
        f"{_state(p.seccomp)}",
        f"this program's /proc files hidden from the child: {_state(p.hidden_proc)}",
        f"limits: address space {limits.memory_bytes / gib:.1f} GiB, file size "
        f"{limits.max_file_bytes / 2**20:.0f} MiB, disk {limits.disk_bytes / 2**20:.0f} MiB "
        f"(working folder, and /tmp, /var/tmp, /dev/shm wherever the child can write them), "
        f"open files {limits.open_files}"
        + (f", processes {limits.processes}" if p.separate_user else ""),
        "output folder: written by this program only, from validated predictions"
        + ("" if p.separate_user else " (Landlock; each task's child confirms it below)")
        if p.output_protected else
        "output folder: NOT ACTIVE: the child runs as this program's user without Landlock "
        "and could write into it; predictions are still taken only from validated frames",
    ]
    if locked:
        lines.append(f"unreadable to the child: {', '.join(locked)}")
    lines += [f"NOT ACTIVE: {reason}" for reason in p.inactive]
    return lines

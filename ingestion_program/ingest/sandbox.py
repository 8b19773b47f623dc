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
from .config import ADDRESS_SPACE, MEMORY_RULE_TEXT, Limits, gib_text
from .processes import become_subreaper

SANDBOX_USER = "nobody"
PR_SET_DUMPABLE = 4
CLONE_NEWNET = 0x40000000      # os.unshare and os.CLONE_NEWNET only exist from Python 3.12
_LIBC = ctypes.CDLL(None, use_errno=True)


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
    why_not: dict[str, str] = field(default_factory=dict)   # protection -> why it is not active

    @property
    def separate_user(self) -> bool:
        return self.uid is not None

    @property
    def output_protected(self) -> bool:
        """Whether the child can be kept out of the output folder (checked again per task)."""
        return self.separate_user or (self.landlock_abi is not None
                                      and "landlock" not in self.disabled)

    @property
    def key_protected(self) -> bool:
        """Whether the child can be kept from the record key, and from every file a later
        process of this run loads: a separate user (the key's folder is then root-only) or
        Landlock (reads only of its own folders, writes only in its working folder), which
        every child must then install (the supervisor kills one that does not). A root child
        without either reads the key, and can rewrite the Python files a later child or this
        program imports, so nothing after its start can vouch for a record."""
        return self.output_protected

    def promised(self) -> tuple[str, ...]:
        """The child protections this run found available: every child must install them."""
        return ((confine.LANDLOCK_FILES,) if self.landlock_abi is not None else ()) + (
            (confine.SECCOMP,) if self.seccomp else ())


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


def _unshare_network() -> None:
    """unshare(CLONE_NEWNET) through libc, so that Python 3.10 (the GPU image's) has it too;
    libc is loaded before any fork, as this also runs between fork and exec."""
    if not hasattr(_LIBC, "unshare"):
        raise OSError(errno.ENOSYS, "no unshare in libc")
    if _LIBC.unshare(CLONE_NEWNET) != 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))


def _probe_network_namespace() -> str | None:
    @_named("unshare(CLONE_NEWNET)")
    def enter():
        _unshare_network()
    return _attempt(enter)


# Finds numpy as an import would and reads its first file, without importing it: an import
# costs every run a tenth of a CPU-second, and what fails the sandbox user in practice is a
# folder it may not enter or a file it may not read (a virtual environment under /root), which
# this meets as the child's import would.
NUMPY_READABLE = "import importlib.util; open(importlib.util.find_spec('numpy').origin, 'rb').close()"


def _probe_sandbox_user(uid: int, gid: int) -> str | None:
    """The sandbox user must be able to start this interpreter and read numpy."""
    calls = (("setgroups", os.setgroups, []), ("setgid", os.setgid, gid), ("setuid", os.setuid, uid),
             ("chdir", os.chdir, "/"),
             ("execv", lambda _: os.execv(sys.executable, [sys.executable, "-c", NUMPY_READABLE]),
              None))

    def become():
        for call, function, argument in calls:
            try:
                function(argument)
            except OSError as error:
                raise confine.Refused(call, error.errno) from None
    problem = _attempt(become)
    if not problem:
        return None
    if problem.startswith("set"):
        return f"{problem}: cannot switch to user {SANDBOX_USER!r}; the child runs as root"
    return (f"user {SANDBOX_USER!r} cannot start {sys.executable} with numpy ({problem}); "
            "the child runs as root")


def _probe_seccomp() -> str | None:
    def install():
        confine.no_new_privileges()
        confine.install_seccomp()
    return _attempt(install)


def _hide_from_children() -> str | None:
    """Not dumpable: a child with our uid cannot read /proc/<our pid>/environ, fd, mem."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "prctl"):
        return "prctl: ENOSYS"
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        return f"prctl(PR_SET_DUMPABLE): {errno.errorcode.get(ctypes.get_errno())}"
    return None


def _user(why_not: dict[str, str]) -> tuple[int | None, int | None]:
    if os.geteuid() != 0:
        why_not["user"] = ("not running as root, so the child runs as the same user; file "
                           "permissions cannot hide the reference data or output folder")
        return None, None
    try:
        entry = pwd.getpwnam(SANDBOX_USER)
    except KeyError:
        why_not["user"] = f"no user {SANDBOX_USER!r}: the child runs as root"
        return None, None
    problem = _probe_sandbox_user(entry.pw_uid, entry.pw_gid)
    if problem:
        why_not["user"] = problem
        return None, None
    return entry.pw_uid, entry.pw_gid


def _landlock(why_not: dict[str, str], disabled: tuple[str, ...]) -> int | None:
    if "landlock" in disabled:
        why_not["landlock"] = "disabled for this run (INGESTION_SANDBOX_DISABLE)"
        return None
    try:
        return confine.landlock_abi()
    except confine.Refused as error:
        why_not["landlock"] = f"{error}; the child can read and write wherever its user may"
        return None


def probe() -> Protections:
    why_not: dict[str, str] = {}
    disabled = tuple(filter(None, os.environ.get("INGESTION_SANDBOX_DISABLE", "").split(",")))
    subreaper_problem = become_subreaper()
    if subreaper_problem:
        why_not["subreaper"] = (f"{subreaper_problem}; escaped grandchildren are still killed "
                                "if found among descendants")
    hidden_problem = _hide_from_children()
    if hidden_problem:
        why_not["proc"] = hidden_problem
    uid, gid = _user(why_not)
    network = _probe_network_namespace()
    if network:
        why_not["network"] = network
    landlock_abi = _landlock(why_not, disabled)
    seccomp_problem = "disabled for this run" if "seccomp" in disabled else _probe_seccomp()
    if seccomp_problem:
        why_not["seccomp"] = seccomp_problem
    return Protections(uid, gid, network is None, subreaper_problem is None, landlock_abi,
                       seccomp_problem is None, hidden_problem is None, disabled, why_not)


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
    # The resident rule is the supervisor's: an RLIMIT_AS would stop a CUDA context.
    address_space = ((resource.RLIMIT_AS, limits.memory_bytes),) \
        if limits.memory_rule == ADDRESS_SPACE else ()

    def set_up() -> None:
        if protections.network_namespace:
            _unshare_network()
        for which, value in (*address_space,
                             (resource.RLIMIT_FSIZE, limits.max_file_bytes),
                             (resource.RLIMIT_NOFILE, limits.open_files),
                             (resource.RLIMIT_CORE, 0)):
            _, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)     # raising a hard limit needs CAP_SYS_RESOURCE
            resource.setrlimit(which, (value, value))
        if protections.separate_user:
            # Only for a user of its own: it counts all that user's processes, and root is exempt.
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
            os.setgroups([])
            os.setgid(protections.gid)
            os.setuid(protections.uid)
    return set_up


def _state(protections: Protections, key: str, active: bool, detail: str = "") -> str:
    if active:
        return f"active{detail}"
    return f"NOT ACTIVE ({protections.why_not.get(key, 'not available')})"


def describe(protections: Protections, limits: Limits, locked: list[str]) -> list[str]:
    p = protections
    lines = [
        "own process group and session, killed as a group: active",
        "child subreaper (escaped descendants swept after each task): "
        + _state(p, "subreaper", p.subreaper),
        f"unprivileged user: {_state(p, 'user', p.separate_user, f' ({SANDBOX_USER})')}",
        f"network namespace (no network): {_state(p, 'network', p.network_namespace)}",
        "Landlock (files, TCP, signals): " + _state(
            p, "landlock", p.landlock_abi is not None,
            f" (kernel ABI {p.landlock_abi}; each task's child confirms what it installed)"),
        "seccomp filter (no IP sockets, ptrace, io_uring, memfd or SysV shared memory, new "
        "sessions or process groups, signals to this program): " + _state(p, "seccomp", p.seccomp),
        f"this program's /proc files hidden from the child: {_state(p, 'proc', p.hidden_proc)}",
        f"limits: memory {gib_text(limits.memory_bytes)} "
        f"({MEMORY_RULE_TEXT[limits.memory_rule]}; rule: {limits.memory_rule}), file size "
        f"{limits.max_file_bytes / 2**20:.0f} MiB, disk {limits.disk_bytes / 2**20:.0f} MiB "
        f"(working folder, and /tmp, /var/tmp, /dev/shm wherever the child can write them), "
        f"open files {limits.open_files}, files and folders {limits.max_entries}"
        + (f", processes and threads {limits.processes} (RLIMIT_NPROC of user {SANDBOX_USER}: "
           "every thread counts)" if p.separate_user else ""),
        "output folder: written by this program only, from validated predictions"
        + ("" if p.separate_user else " (Landlock; each task's child confirms it below)")
        if p.output_protected else
        "output folder: NOT ACTIVE: the child runs as this program's user without Landlock "
        "and could write into it; it is rewritten from validated predictions at the end",
    ]
    if locked:
        lines.append(f"unreadable to the child: {', '.join(locked)}")
    return lines

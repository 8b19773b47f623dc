"""Which protections this machine allows, and the set-up that applies them in the child.

Probed once, before any participant code runs, so the log can state what is active and
why anything is not; nothing is skipped silently. Applied in the child between fork and
exec (``preexec``): network namespace, resource limits, then the unprivileged user.
"""
from __future__ import annotations

import os
import pwd
import resource
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .config import Limits
from .processes import become_subreaper

SANDBOX_USER = "nobody"


@dataclass(frozen=True)
class Protections:
    uid: int | None                   # the unprivileged user the child runs as, if any
    gid: int | None
    network_namespace: bool
    subreaper: bool
    inactive: tuple[str, ...] = field(default_factory=tuple)   # why something is not active

    @property
    def separate_user(self) -> bool:
        return self.uid is not None


def _probe_network_namespace() -> str | None:
    def enter():
        os.unshare(os.CLONE_NEWNET)
    try:
        subprocess.run([sys.executable, "-c", "pass"], preexec_fn=enter, check=True,
                       capture_output=True, timeout=30)
    except (subprocess.SubprocessError, OSError) as error:
        return f"network namespace not available ({error}); the child keeps the network"
    return None


def _probe_sandbox_user(uid: int, gid: int) -> str | None:
    """The sandbox user must be able to start this interpreter with numpy."""
    def become():
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    try:
        subprocess.run([sys.executable, "-c", "import numpy"], preexec_fn=become, check=True,
                       capture_output=True, timeout=60, cwd="/")
    except (subprocess.SubprocessError, OSError) as error:
        return (f"user {SANDBOX_USER!r} cannot start {sys.executable} with numpy ({error}); "
                "the child runs as root")
    return None


def probe() -> Protections:
    inactive = []
    subreaper_problem = become_subreaper()
    if subreaper_problem:
        inactive.append(f"child subreaper not available ({subreaper_problem}); escaped "
                        "grandchildren are still killed if found among descendants")
    uid = gid = None
    if os.geteuid() != 0:
        inactive.append("not running as root: the child runs as the same user, so file "
                        "permissions cannot hide the reference data or the output folder")
    else:
        try:
            entry = pwd.getpwnam(SANDBOX_USER)
            problem = _probe_sandbox_user(entry.pw_uid, entry.pw_gid)
            if problem:
                inactive.append(problem)
            else:
                uid, gid = entry.pw_uid, entry.pw_gid
        except KeyError:
            inactive.append(f"no user {SANDBOX_USER!r}: the child runs as root")
    network = None
    if not hasattr(os, "unshare"):
        network = "network namespace not available (no os.unshare)"
    elif os.geteuid() == 0:
        network = _probe_network_namespace()
    else:
        network = "network namespace needs root; the child keeps the network"
    if network:
        inactive.append(network)
    return Protections(uid, gid, network is None, subreaper_problem is None, tuple(inactive))


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
            resource.setrlimit(which, (value, value))
        if protections.separate_user:
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
            os.setgroups([])
            os.setgid(protections.gid)
            os.setuid(protections.uid)
    return set_up


def describe(protections: Protections, limits: Limits, locked: list[str]) -> list[str]:
    gib = 2 ** 30
    lines = [
        "own process group and session, killed as a group: active",
        f"child subreaper (escaped descendants swept after each task): "
        f"{'active' if protections.subreaper else 'not active'}",
        f"unprivileged user: {'active (' + SANDBOX_USER + ')' if protections.separate_user else 'not active'}",
        f"network namespace (no network): {'active' if protections.network_namespace else 'not active'}",
        f"limits: address space {limits.memory_bytes / gib:.1f} GiB, file size "
        f"{limits.max_file_bytes / 2**20:.0f} MiB, working directory {limits.disk_bytes / 2**20:.0f} MiB, "
        f"open files {limits.open_files}"
        + (f", processes {limits.processes}" if protections.separate_user else ""),
        "output folder: written by this program only, from validated predictions",
    ]
    if locked:
        lines.append(f"unreadable to the child: {', '.join(locked)}")
    lines += [f"NOT ACTIVE: {reason}" for reason in protections.inactive]
    return lines

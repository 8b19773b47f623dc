"""Process-tree control: become a child subreaper, find, kill and reap every descendant.

With PR_SET_CHILD_SUBREAPER, a grandchild that escapes its process group (setsid, double
fork) is re-parented to this process instead of init when its parent dies, so it stays
findable as a descendant and is swept after each task. The tree is read from /proc, so the
program needs no psutil (the first py312 images had none).
"""
from __future__ import annotations

import ctypes
import errno
import os
import signal
import subprocess
import time

PR_SET_CHILD_SUBREAPER = 36
GONE = ("Z", "X", "x")          # zombie or dead: nothing left to kill


def become_subreaper() -> str | None:
    """Returns None on success, else why not."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            return f"prctl(PR_SET_CHILD_SUBREAPER): {errno.errorcode.get(ctypes.get_errno())}"
    except (OSError, AttributeError) as error:
        return str(error)
    return None


def _process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state letter) for every process visible in /proc."""
    if not os.path.isdir("/proc/self"):
        return _ps_table()
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue                                  # exited while we looked
        table[int(name)] = (int(fields[1]), fields[0].decode())
    return table


def _ps_table() -> dict[int, tuple[int, str]]:
    """The same from ps(1), where there is no /proc (a participant's Mac running run_local)."""
    try:
        listing = subprocess.run(["ps", "-A", "-o", "pid=", "-o", "ppid=", "-o", "stat="],
                                 capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    table = {}
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0].isdigit() and fields[1].isdigit():
            table[int(fields[0])] = (int(fields[1]), fields[2][0])
    return table


def descendants(root: int | None = None, apart: frozenset[int] = frozenset()) -> dict[int, str]:
    """pid -> state of every process below ``root`` (this process by default), leaving out
    the processes in ``apart`` and everything below them."""
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, stack = {}, [root or os.getpid()]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found and child not in apart:
                found[child] = table[child][1]
                stack.append(child)
    return found


def resident_bytes(pids) -> int:
    """Host RAM the processes hold: anonymous and shared-memory resident pages, summed.

    File-backed pages (loaded libraries, mapped files) are left out: the kernel can drop them,
    and CUDA's libraries alone would otherwise weigh a gigabyte. A process that is gone, or
    whose figures cannot be read, counts 0."""
    return sum(_resident(pid) for pid in pids)


def _resident(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            fields = dict(line.split(b":", 1) for line in status.read().splitlines()
                          if line.startswith((b"RssAnon:", b"RssShmem:")))
    except (OSError, ValueError):
        return 0
    if fields:                                     # "RssAnon:   1234 kB"
        return sum(int(value.split()[0]) for value in fields.values()) * 1024
    return _resident_from_statm(pid)


def _resident_from_statm(pid: int) -> int:
    """Kernels before 4.5 have no RssAnon: resident minus shared pages is the anonymous part."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as statm:
            resident, shared = (int(v) for v in statm.read().split()[1:3])
    except (OSError, ValueError):
        return 0
    return (resident - shared) * os.sysconf("SC_PAGE_SIZE")


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        pass        # the group is gone and its id was reused by someone else's


def reap_zombies(spare: int | None = None, apart: frozenset[int] = frozenset()) -> None:
    """Collect exited children (re-parented orphans included) so none stays a zombie.

    ``spare`` is the task's main child: its exit status is collected by wait4 elsewhere;
    ``apart``: children that are not the task's, whose status is their starter's to collect.
    """
    me = os.getpid()
    for pid, (parent, state) in _process_table().items():
        if parent == me and state in GONE and pid != spare and pid not in apart:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def child_waiting() -> bool:
    """Whether some child of this process has exited and waits to be reaped; a cheap look
    before ``reap_zombies`` walks /proc."""
    if not hasattr(os, "waitid"):
        return True
    try:
        return os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return False


def sweep(spare: int | None = None, timeout: float = 2.0,
          apart: frozenset[int] = frozenset()) -> set[int]:
    """SIGKILL every descendant until none is left alive; returns the pids signalled.
    ``apart``: processes that ran below this one before the task began, with their own."""
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    while True:
        alive = [pid for pid, state in descendants(apart=apart).items() if state not in GONE]
        if not alive:
            reap_zombies(spare, apart)
            return killed
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        reap_zombies(spare, apart)
        if time.monotonic() > deadline:
            return killed
        time.sleep(0.01)


def wait_exit(pid: int) -> tuple[int | None, object | None]:
    """Non-blocking wait4: (raw status, rusage) once the child has exited, else (None, None)."""
    try:
        waited, status, usage = os.wait4(pid, os.WNOHANG)
    except OSError as error:
        if error.errno == errno.EINTR:
            return None, None
        raise
    return (status, usage) if waited else (None, None)

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


def descendants(root: int | None = None) -> dict[int, str]:
    """pid -> state of every process below ``root`` (this process by default)."""
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, stack = {}, [root or os.getpid()]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found[child] = table[child][1]
                stack.append(child)
    return found


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        pass        # the group is gone and its id was reused by someone else's


def reap_zombies(spare: int | None = None) -> None:
    """Collect exited children (re-parented orphans included) so none stays a zombie.

    ``spare`` is the task's main child: its exit status is collected by wait4 elsewhere.
    """
    me = os.getpid()
    for pid, (parent, state) in _process_table().items():
        if parent == me and state in GONE and pid != spare:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def sweep(spare: int | None = None, timeout: float = 2.0) -> set[int]:
    """SIGKILL every descendant until none is left alive; returns the pids signalled."""
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    while True:
        alive = [pid for pid, state in descendants().items() if state not in GONE]
        if not alive:
            reap_zombies(spare)
            return killed
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        reap_zombies(spare)
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

"""Process-tree control: become a child subreaper, find, kill and reap every descendant.

With PR_SET_CHILD_SUBREAPER, a grandchild that escapes its process group (setsid, double
fork) is re-parented to this process instead of init when its parent dies, so it stays
findable as a descendant and is swept after each task.
"""
from __future__ import annotations

import ctypes
import errno
import os
import signal
import time

import psutil

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> str | None:
    """Returns None on success, else why not."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            return os.strerror(ctypes.get_errno())
    except (OSError, AttributeError) as error:
        return str(error)
    return None


def descendants() -> list[psutil.Process]:
    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


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
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return
    for child in children:
        if child.pid == spare:
            continue
        try:
            os.waitpid(child.pid, os.WNOHANG)
        except ChildProcessError:
            pass


def sweep(spare: int | None = None, timeout: float = 2.0) -> int:
    """SIGKILL every descendant until none is left alive; returns how many were signalled."""
    killed = 0
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in descendants() if _is_alive(p)]
        if not alive:
            reap_zombies(spare)
            return killed
        for process in alive:
            try:
                process.send_signal(signal.SIGKILL)
                killed += 1
            except psutil.Error:
                pass
        reap_zombies(spare)
        if time.monotonic() > deadline:
            return killed
        time.sleep(0.01)


def _is_alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def wait_exit(pid: int) -> tuple[int | None, object | None]:
    """Non-blocking wait4: (raw status, rusage) once the child has exited, else (None, None)."""
    try:
        waited, status, usage = os.wait4(pid, os.WNOHANG)
    except OSError as error:
        if error.errno == errno.EINTR:
            return None, None
        raise
    return (status, usage) if waited else (None, None)

"""Bare virtual environments (pip only) shared by the tests that run a kit's install line:
one per distinct set of what the install lines install, made once a test run and shared by
pytest-xdist's workers (conftest.py's built_bundles does the same for bundles). Kits whose
requirement lines and files are the same would each install the same packages into a bare
environment; making it once spares a venv creation and a first pip install per kit.

The kits' commands run on one core there (``on_one_core``): see ``one_core``."""
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_folder

# What is installed in an environment, read by its own Python (cheaper than pip list).
INSTALLED = ("import importlib.metadata as m, json; "
             "print(json.dumps(sorted(d.metadata['Name'].lower() for d in m.distributions())))")
RECORD = ".installed-by-install-lines.json"     # what the creating test's install lines left
READY = ".ready"         # made, and its creator's install lines ran


def bare_environment(folder: Path) -> dict[str, str]:
    """A new virtual environment with pip only, as the environment its ``python`` runs in:
    first on PATH, no packages of this user or of another environment."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=600)
    return environment_of(folder)


def environment_of(folder: Path) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items()
           if name not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(PATH=f"{folder / 'bin'}{os.pathsep}{os.environ['PATH']}", VIRTUAL_ENV=str(folder),
               PYTHONNOUSERSITE="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def installed(env: dict[str, str]) -> list[str]:
    result = subprocess.run(["python", "-c", INSTALLED], env=env, capture_output=True,
                            text=True, check=True)
    return json.loads(result.stdout)


class SharedEnvironment:
    """What a test gets: ``env`` (run its commands with it), ``created`` (this test made it,
    so it is bare until its install lines run), ``installed_before`` (what the environment
    held when this test got it) and ``installed_by_install_lines`` (what the creating test's
    install lines left in it; None for the creating test)."""

    def __init__(self, folder: Path, created: bool):
        self.folder, self.created = folder, created
        self.env = environment_of(folder)
        self.installed_before = installed(self.env)
        self.installed_by_install_lines = None if created else json.loads(
            (folder / RECORD).read_text())


@pytest.fixture(scope="session")
def shared_bare_environment(tmp_path_factory):
    """``with shared_bare_environment(install_lines, requirements) as shared:``: the bare
    environment for kits with these install lines (those a reader runs: not the optional
    framework lines) and these requirement files' bytes, held under a lock (shared by the
    workers) while the caller runs its install lines, the only commands that write into it.
    The commands after the install lines run outside the ``with``, reading it only. A test
    that installs anything else must make an environment of its own."""
    shared = run_folder(tmp_path_factory) / "bare-environments"
    shared.mkdir(exist_ok=True)

    @contextlib.contextmanager
    def hold(install_lines: tuple[str, ...], requirements: bytes):
        key = hashlib.sha256(json.dumps(install_lines).encode() + b"\0" + requirements)
        folder = shared / key.hexdigest()[:16]
        with open(shared / f"{folder.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)      # one test at a time runs install lines
            created = not (folder / READY).exists()
            if created:
                shutil.rmtree(folder, ignore_errors=True)     # a creation that failed part-way
                bare_environment(folder)
            shared_environment = SharedEnvironment(folder, created)
            try:
                yield shared_environment
            except BaseException:
                # its state is unknown now: the next test makes it anew
                (folder / READY).unlink(missing_ok=True)
                raise
            if created:
                (folder / RECORD).write_text(json.dumps(installed(shared_environment.env)))
                (folder / READY).touch()

    return hold


@contextlib.contextmanager
def one_core():
    """The commands started inside on one core of those this process may use.

    Why: the ingestion gives each task's child one BLAS thread per core it may run on (as on
    the worker), and the newest numpy, which a bare environment's install line gets, spends
    far more with two threads on the small products of the BDL kit's sgld (a 64-row batch
    through an 8-unit layer, 9,000 times) on a machine whose cores the suite's workers keep
    busy: ``python run_local.py --code submission.zip`` in its evaluation kit took 14-17 CPU
    seconds (34-42 s) on two cores, 8-11 (12-19 s) on one, digits_shift's 9,000 steps 6-16 s
    against 1-2 s; its development kit's ``predictions_zip.py``, 9.3 CPU seconds against 7.
    (numpy 1.26, the image's, gains 5-7%, within this machine's noise: the other kit tests run
    as they are.) Nothing the tests check changes on one core: the same commands as written,
    in the same environment, under the same budgets, print the same keys; the ingestion still
    sets a thread per core it may use, here one.

    The affinity set is the calling thread's (each thread of a Linux process has its own),
    which the processes it starts inherit; the thread gets its cores back at the end. Each
    pytest-xdist worker takes another core (gw0 the first, gw1 the second, ...), so that two
    workers' kit runs do not queue on one core while another waits. Without the affinity call
    (not Linux) nothing changes."""
    if not hasattr(os, "sched_setaffinity"):
        yield
        return
    cores = sorted(os.sched_getaffinity(0))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    os.sched_setaffinity(0, {cores[(int(worker) if worker.isdigit() else 0) % len(cores)]})
    try:
        yield
    finally:
        os.sched_setaffinity(0, cores)


@pytest.fixture
def on_one_core():
    """The test's commands on one core (``one_core``)."""
    with one_core():
        yield

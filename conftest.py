"""Shared by every test module, the core's (tests/) and each kind's (kinds/<kind>/tests/):
bundles built once per test run (built_bundles, default_bundles), the run's signing secret and
temporary folder. At the repository's root so that both trees see it."""
import fcntl
import hashlib
import os
import re
import shutil
import sys
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent
# One BLAS thread in the test processes and what they start (builds, reference runs): the
# suite's workers already keep every core busy, and an idle OpenBLAS thread spins rather than
# sleeps, taking a core from another worker. Before numpy is first imported here. The
# ingestion still gives participants' code a thread per core, as on the worker.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
# The test helpers are imported by module name (``from local_runs import ...``) from either
# tree: the core's (pyproject's pythonpath) and every kind's, found here so that a new kind's
# tests need no line of their own.
sys.path[1:1] = [str(folder) for folder in sorted((REPO / "kinds").glob("*/tests"))
                 if str(folder) not in sys.path]
ARTIFACTS = REPO / "test-artifacts"          # gitignored; CI may keep it as a build artefact
_ARTIFACT_FOLDERS = pytest.StashKey[list]()
RUN_TEMPORARY_FOLDER = "BUNDLE_TESTS_TMPDIR"     # the test run's own (pytest_configure)


# each test's CPU seconds in its junit record (tests/cpu_accounting.py), which
# scripts/test_durations.py adds up
pytest_plugins = ("cpu_accounting",)

PLATFORM_NAMES = ("codalab", "codabench")


@pytest.fixture(scope="session")
def built_bundles(tmp_path_factory):
    """``built_bundles(spec, platform="codabench", phase="all", data_root=None)``: the folder
    holding what ``build_bundle.py --config spec --platform ... --phase ... [--data-root ...]
    --out folder`` writes, built in this process by the builder's Python API (bundle/build.py)
    once per test run for each (spec file and its content, platform, phase, data root, the
    environment that changes a build): pytest-xdist's workers share the first one's build,
    waiting on a lock of its own (the folder above each worker's own is the run's;
    pytest-xdist's documented recipe). Read only: a test that changes what it holds copies
    it first. For a spec or data that a test changes under the same path, build it yourself.
    The command line's own tests (its exit codes and output) start it as a subprocess."""
    shared = run_folder(tmp_path_factory) / "built-bundles"
    shared.mkdir(exist_ok=True)

    def build(spec: Path, platform: str | None = None, phase: str = "all",
              data_root: Path | None = None) -> Path:
        from bundle.platforms import DEFAULT_PLATFORM
        platform = platform or DEFAULT_PLATFORM
        key = _build_key(Path(spec), platform, phase, data_root)
        folder = shared / key
        with open(shared / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)      # the others wait for the first build
            if not (folder / ".built").exists():
                shutil.rmtree(folder, ignore_errors=True)     # a build that failed part-way
                _build_in_process(Path(spec), platform, phase, data_root, folder)
                (folder / ".built").touch()
        return folder

    return build


@pytest.fixture(scope="session")
def default_bundles(built_bundles) -> Mapping[str, Path]:
    """{platform: folder} with every phase and track of the default spec (built_bundles, a
    platform's when it is first looked up). Read only."""
    from bundle.spec import DEFAULT_SPEC

    class DefaultBundles(Mapping):
        def __getitem__(self, platform: str) -> Path:
            if platform not in PLATFORM_NAMES:
                raise KeyError(platform)
            return built_bundles(DEFAULT_SPEC, platform)

        def __iter__(self):
            return iter(PLATFORM_NAMES)

        def __len__(self) -> int:
            return len(PLATFORM_NAMES)

    return DefaultBundles()


def run_folder(tmp_path_factory) -> Path:
    """The test run's folder: a worker's folder is popen-gw<N> inside it; without xdist, the
    run's is its own."""
    run = tmp_path_factory.getbasetemp()
    return run.parent if os.environ.get("PYTEST_XDIST_WORKER") else run


def _build_key(spec: Path, platform: str, phase: str, data_root: Path | None) -> str:
    # what changes a build's output besides these: the run's signing secret and the build's
    # run of each kit's sample (tests that switch it on get builds of their own)
    from bundle.kit_check import SWITCH
    from bundle.record_key import SECRET_VARIABLE
    parts = [str(spec.resolve()), hashlib.sha256(spec.read_bytes()).hexdigest(), platform, phase,
             str(data_root.resolve()) if data_root else "",
             *(f"{name}={os.environ.get(name)}" for name in (SECRET_VARIABLE, SWITCH))]
    readable = "".join(c if c.isalnum() else "-" for c in f"{spec.parent.name}-{platform}-{phase}")
    return f"{readable}-{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:16]}"


def _build_in_process(spec_path: Path, platform: str, phase: str, data_root: Path | None,
                      out: Path) -> None:
    """What the command line writes into --out for a spec every bundle of which is ready
    (none waits for dataset keys): build_bundle.py's _build, without its printing."""
    from bundle.build import build_competition, competition_targets
    from bundle.spec import load_spec
    spec = load_spec(spec_path, data_root)
    out.mkdir(parents=True)
    for phases, track in competition_targets(spec, phase):
        built = build_competition(spec, phases, track, out, platform=platform)
        assert not built.waiting_for_keys, f"{built.path.name} waits for dataset keys: build " \
                                           "it with the command line"


def report_artifacts(config: pytest.Config, folder: Path) -> None:
    """Name `folder` in the summary at the end of the run, where it is seen without -s."""
    config.stash.setdefault(_ARTIFACT_FOLDERS, []).append(folder)


def pytest_terminal_summary(terminalreporter, config):
    for folder in config.stash.get(_ARTIFACT_FOLDERS, []):
        count = sum(1 for _ in folder.rglob("*.png"))
        terminalreporter.write_line(f"test artefacts: {count} screenshots in {folder}")


DURATIONS_TABLE = REPO / "docs" / "test_durations.md"     # scripts/test_durations.py writes it


def measured_file_seconds(table: Path = DURATIONS_TABLE) -> dict[str, float]:
    """Each test file's seconds in the last durations table ("| `path` | tests | seconds |")."""
    try:
        lines = table.read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    rows = (re.match(r"\| `([^`]+\.py)` \| \d+ \| ([0-9.]+) \|", line) for line in lines)
    return {row.group(1): float(row.group(2)) for row in rows if row}


class LongestFileFirst(OrderedDict):
    """pytest-xdist's queue of files for --dist loadfile, handing out the longest file (by its
    measured seconds) first. xdist's own order is most tests first, which left files of a few
    long tests (a kit's install line and guide, a real-size build) to the end: one worker ran
    them for a minute after the others were done. Ties keep xdist's order; a file the table
    does not know counts as short."""

    def __init__(self, seconds: dict[str, float]):
        super().__init__()
        self.seconds = seconds

    def popitem(self, last: bool = True):
        if last:
            return super().popitem(last=True)
        scope = max(self, key=lambda name: self.seconds.get(name, 0.0))
        return scope, self.pop(scope)


def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None                                   # xdist's own for any other mode
    from xdist.scheduler import LoadFileScheduling
    scheduler = LoadFileScheduling(config, log)
    scheduler.workqueue = LongestFileFirst(measured_file_seconds())
    return scheduler


def pytest_configure(config):
    """One signing secret for the whole run (the builds of a test must agree), not the one
    on this machine; subprocesses inherit it."""
    import atexit
    import os
    import shutil
    import tempfile
    from bundle.record_key import SECRET_VARIABLE
    if not os.environ.get(SECRET_VARIABLE):
        folder = tempfile.mkdtemp(prefix="record-secret-")
        atexit.register(shutil.rmtree, folder, True)
        os.environ[SECRET_VARIABLE] = str(Path(folder) / "record-secret")
    _temporary_folder_of_this_run(atexit, os, shutil, tempfile)
    # The build's run of each kit's sample (bundle/kit_check.py) would add half a minute to
    # every code-phase build here; the tests about it switch it back on.
    os.environ.setdefault("BUNDLE_KIT_CHECK", "off")


def _temporary_folder_of_this_run(atexit, os, shutil, tempfile):
    """Every temporary folder of this run (and of the programs it starts) under one made now.
    An ingestion whose child Landlock does not confine removes what appears at the top of
    /tmp while its task runs, as the worker's container holds nothing else; a test process
    running beside it (another pytest-xdist worker, another session) keeps its folders out of
    that sweep this way. Open like /tmp: the sandbox user passes through to its staging.
    pytest-xdist's workers inherit their controller's folder: a folder in a folder would make
    paths too long for a Unix socket (Chromium's profile holds one)."""
    inherited = os.environ.get(RUN_TEMPORARY_FOLDER)
    if inherited and inherited == os.environ.get("TMPDIR"):
        return
    # pytest's own folders stay where they were (paths of the same length in the logs)
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
    folder = tempfile.mkdtemp(prefix="bundle-tests-")
    os.chmod(folder, 0o1777)
    atexit.register(shutil.rmtree, folder, True)
    os.environ["TMPDIR"] = os.environ[RUN_TEMPORARY_FOLDER] = folder
    tempfile.tempdir = None          # tempfile reads TMPDIR again


@pytest.fixture(scope="session")
def shared_local_runs(tmp_path_factory):
    """``shared_local_runs(config, phase, **options)``: the organizer's local run of
    kit_runs.run_kit_locally (``python -m bundle.local_run --config config --phase phase
    ...``) run once per test run for the same spec (its path and content), phase and options,
    shared by pytest-xdist's workers as built_bundles' builds are (the first runs it, the
    others wait on its lock). Returns (its CompletedProcess, its --out folder). For tests in
    several files that read the same run (a baseline's scores and its report, as the
    organizer and the participants' browser see them): read only. A run whose own behaviour
    a test changes (its environment, a file under the same path) is the test's own."""
    import json
    import subprocess
    shared = run_folder(tmp_path_factory) / "local-runs"
    shared.mkdir(exist_ok=True)

    def run(config: Path, phase: str, **options) -> tuple[subprocess.CompletedProcess, Path]:
        from bundle.kit_check import SWITCH
        from bundle.record_key import SECRET_VARIABLE
        from kit_runs import run_kit_locally
        parts = [str(Path(config).resolve()), hashlib.sha256(Path(config).read_bytes()).hexdigest(),
                 phase, json.dumps(options, sort_keys=True, default=str),
                 *(f"{name}={os.environ.get(name)}" for name in (SECRET_VARIABLE, SWITCH))]
        key = hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:16]
        folder, record = shared / key, shared / f"{key}.json"
        with open(shared / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)      # the others wait for the first run
            if not record.exists():
                shutil.rmtree(folder, ignore_errors=True)     # a run cut short
                done = run_kit_locally(config, phase, folder, **options)
                written = shared / f"{key}.json.part"
                written.write_text(json.dumps([done.args, done.returncode, done.stdout,
                                               done.stderr]))
                os.replace(written, record)         # whole, or not there
        return subprocess.CompletedProcess(*json.loads(record.read_text())), folder

    return run

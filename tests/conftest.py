"""Shared by several test modules: the default spec's bundles, built once per session."""
import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"          # gitignored; CI may keep it as a build artefact
_ARTIFACT_FOLDERS = pytest.StashKey[list]()
RUN_TEMPORARY_FOLDER = "BUNDLE_TESTS_TMPDIR"     # the test run's own (pytest_configure)


@pytest.fixture(scope="session")
def default_bundles(tmp_path_factory) -> dict[str, Path]:
    """{platform: folder} with every phase and track of the default spec, built by the CLI
    once per test run: pytest-xdist's workers share the first one's build (the folder above
    each worker's own is the run's; pytest-xdist's documented recipe). Read only."""
    run = tmp_path_factory.getbasetemp()
    # a worker's folder is popen-gw<N> inside the run's; without xdist, the run's is its own
    shared = (run.parent if os.environ.get("PYTEST_XDIST_WORKER") else run) / "default-bundles"
    shared.mkdir(exist_ok=True)
    with open(shared / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)      # the others wait for the first build
        return {platform: _built_once(shared / platform, platform)
                for platform in ("codalab", "codabench")}


def _built_once(folder: Path, platform: str) -> Path:
    done = folder / ".built"
    if not done.exists():
        shutil.rmtree(folder, ignore_errors=True)     # a build that failed part-way
        result = subprocess.run([sys.executable, str(REPO / "build_bundle.py"), "--platform",
                                 platform, "--phase", "all", "--out", str(folder)], cwd=REPO,
                                capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, result.stdout + result.stderr
        done.touch()
    return folder


def report_artifacts(config: pytest.Config, folder: Path) -> None:
    """Name `folder` in the summary at the end of the run, where it is seen without -s."""
    config.stash.setdefault(_ARTIFACT_FOLDERS, []).append(folder)


def pytest_terminal_summary(terminalreporter, config):
    for folder in config.stash.get(_ARTIFACT_FOLDERS, []):
        count = sum(1 for _ in folder.rglob("*.png"))
        terminalreporter.write_line(f"test artefacts: {count} screenshots in {folder}")


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

"""Hostile submissions that go for the machine's resources or the ingestion's own folders
(issue 24): memory that belongs to no process, deleted files still open, mode changes to the
folders the ingestion needs, a pool of threads, a refilling fork bomb, a tree of files that
used to stall the supervisor's disk walk, and trees deeper or larger than the limits.

Each runs through the real ingestion program on every kind's code phase, as root and without
capabilities (as Codabench starts containers). The hostile code is ``hostile.py``, imported by
the first call of the kind's sample function, so that it runs in the task's budget (importing
the module is start-up, under an allowance of its own): it acts in the first task only, and
once per task where the kind runs a task in several processes (PGDL's units); what it found
comes back on its stderr.
"""
import dataclasses
import functools
import json
import os
import shutil
import stat
import textwrap
from pathlib import Path

import pytest

from bundle.phase_plan import phase_plan
from bundle.programs import assemble_ingestion_program
from bundle.spec import load_spec
from kinds.kind import KINDS as KIND_RECORDS
from runtime.formats import read_run_record
from ingestion_harness import (FAST_BDL, KIND_CODE_PHASES, KINDS, SETTINGS, TEST_LIMITS,
                               assert_nothing_left_behind, needs_root, new_kind_run,
                               prepare_kind, processes_of, run_ingestion)

pytestmark = pytest.mark.slow

# The start of every hostile.py. Its task is named by its working folder
# (<staging>/tasks/<task>/work); a marker there keeps it to one process per task.
HEADER = """
import os, sys, time
TASK = os.path.basename(os.path.dirname(os.getcwd()))
FIRST = TASK == {target!r} and not os.path.exists("hostile-ran")
if FIRST:
    open("hostile-ran", "w").close()

def report(name, value):          # one write: whole even when many processes report at once
    os.write(2, f"HOSTILE {{name}}={{value}}\\n".encode())

STARTED = time.monotonic()      # the first call of the entry function: its budget began

def age():
    \"\"\"Seconds of the budget (or of the first unit's share) gone, at most a little less.\"\"\"
    return time.monotonic() - STARTED

FIRST_CALL = []     # actions for the start of the first call (when imported at start-up)
LATER = []          # actions for when the entry function has returned
"""

# Wraps the sample's entry function: the first call imports hostile.py, and LATER runs once a
# call has returned.
WRAPPER = """
def _hostile(inner):
    def wrapped(*args, **kwargs):
        import hostile
        while hostile.FIRST_CALL:
            hostile.FIRST_CALL.pop()()
        result = inner(*args, **kwargs)
        while hostile.LATER:
            hostile.LATER.pop()()
        return result
    return wrapped

{function} = _hostile({function})
"""


def config(root: Path) -> dict:
    return json.loads((root / "ingestion_program" / "ingestion_config.json").read_text())


def window(task: dict) -> float:
    """The seconds the first process of ``task`` has: its budget, or its first unit's share."""
    return task["contract"].get("seconds_per_model") or task["budget_seconds"]


class Kind:
    """A kind's code phase, prepared once per module and budget."""

    def __init__(self, name: str, root: Path):
        self.name, self.root = name, root
        self.config = config(root)
        self.first = self.config["tasks"][0]
        self.target = self.first["name"]

    def files(self, code: str, at_import: bool = False) -> dict[str, str]:
        """The kind's sample module, its function wrapped by WRAPPER; ``at_import``: hostile.py
        runs when the module is imported, in the start-up, before the budget begins."""
        module, function = self.config["entry_module"], self.config["entry_function"]
        sample = FAST_BDL if self.name == "bdl2021" else \
            (self.root / "sample" / f"{module}.py").read_text()
        return {f"{module}.py": ("import hostile\n" if at_import else "") + sample
                + WRAPPER.format(function=function),
                "hostile.py": HEADER.format(target=self.target) + textwrap.dedent(code)}

    def run(self, tmp_path: Path, code: str, setting: str, at_import=False, **subst):
        for name, value in subst.items():
            code = code.replace(f"@{name}", repr(value))
        run = new_kind_run(self.root, tmp_path, self.files(code, at_import))
        result = run_ingestion(run, unprivileged=setting != "root")
        assert result.returncode == 0, result.stdout + result.stderr
        record = read_run_record(run / "run" / "output" / "ingestion_record.json")
        return run, result, record

    def findings(self, run: Path) -> dict[str, str]:
        stderr = run / "run" / "output" / f"{self.target}_stderr.txt"
        lines = stderr.read_text().splitlines() if stderr.exists() else []
        return dict(line[len("HOSTILE "):].split("=", 1) for line in lines
                    if line.startswith("HOSTILE "))


@functools.cache
def _default_spec(kind: str):
    return load_spec(KIND_RECORDS[kind].DEFAULT_SPEC)


def _kind_plan(kind: str, budget: float):
    """ingestion_harness.kind_plan, the kind's spec loaded once for this module (PGDL's takes
    a fifth of a CPU second)."""
    plan = phase_plan(_default_spec(kind), KIND_CODE_PHASES[kind], code_submission=True,
                      budget_seconds=budget)
    return dataclasses.replace(plan, tasks=tuple(sorted(plan.tasks, key=lambda t: t.name)))


@pytest.fixture(scope="module")
def kind_data(tmp_path_factory):
    """``kind_data(kind)``: ingestion_harness.prepare_kind's folder for the kind, made once for
    this module. Of what it prepares only the ingestion program's config depends on the budget
    and limits; the input and hidden data and the sample (PGDL's zoo: 130 files) are the same
    for every budget below, which links to them (a run copies them, new_kind_run)."""
    made = {}

    def data(kind: str) -> Path:
        if kind not in made:
            made[kind] = tmp_path_factory.mktemp(f"resources-data-{kind}")
            prepare_kind(made[kind], kind)
        return made[kind]
    return data


def prepared_kind(tmp_path_factory, kind_data, kind: str, seconds: float, limits=None) -> Kind:
    """``kind``'s code phase, its first process given ``seconds`` (PGDL: its first network,
    so the task's budget is that many times the number of networks): prepare_kind's folder,
    its ingestion program assembled for these seconds and limits."""
    root = tmp_path_factory.mktemp(f"resources-{kind}")
    data = kind_data(kind)
    for name in ("input", "hidden_ref", "sample"):
        (root / name).symlink_to(data / name, target_is_directory=True)

    def assemble(budget: float) -> None:
        shutil.rmtree(root / "ingestion_program", ignore_errors=True)
        assemble_ingestion_program(_kind_plan(kind, budget), root / "ingestion_program",
                                   {**TEST_LIMITS, **(limits or {})})
    assemble(seconds)
    scale = seconds / window(config(root)["tasks"][0])
    if scale != 1:
        assemble(seconds * scale)
    return Kind(kind, root)


@pytest.fixture(scope="module", params=KINDS)
def kind(request, tmp_path_factory, kind_data):
    """Ten seconds: these tests end well before, unless the defect they test is back."""
    return prepared_kind(tmp_path_factory, kind_data, request.param, 10.0)


@pytest.fixture(autouse=True)
def nothing_left_behind(tmp_path):
    yield
    assert_nothing_left_behind(tmp_path)


def all_ok(record) -> bool:
    return all(task.status == "ok" and task.prediction == "final"
               for task in record.tasks.values())


MEMORY_OUTSIDE_PROCESSES = """
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def refusal(result):
    if result < 0:
        raise OSError(ctypes.get_errno(), "refused")
    return result

def attempt(name, make, fill=None, drop=os.close):
    try:
        handle = make()
    except OSError as error:
        report(name, errno.errorcode.get(error.errno, error.errno))
        return
    try:
        report(name, fill(handle) if fill else "allowed")
    finally:
        drop(handle)

def fill(fd):
    \"\"\"More than the memory limit, by write(): in no process's address space or RSS.\"\"\"
    chunk, written = b"x" * 2**26, 0
    try:
        while written <= @limit:
            written += os.write(fd, chunk)
    except OSError as error:
        return f"{errno.errorcode.get(error.errno)} after {written} bytes"
    return f"held {written} bytes"

if FIRST:
    attempt("memfd_create", lambda: os.memfd_create("hog"), fill)
    attempt("memfd_secret", lambda: refusal(libc.syscall(447, 0)))
    # Removed at once if made: a SysV object outlives every process.
    attempt("shmget", lambda: refusal(libc.shmget(0, 2**20, 0o1600)),
            drop=lambda ident: libc.shmctl(ident, 0, None))
    attempt("msgget", lambda: refusal(libc.msgget(0, 0o1600)),
            drop=lambda ident: libc.msgctl(ident, 0, None))
"""


@needs_root
@pytest.mark.parametrize("setting", SETTINGS)
def test_memory_that_belongs_to_no_process_is_refused(kind, tmp_path, setting):
    """memfd pages filled by write() are in no address space or RSS: 6 GiB passed a 4 GiB
    limit. memfd_create and memfd_secret, SysV shared memory and message queues are refused
    with ENOSYS, as by a kernel without them, so code that can do without falls back."""
    run, result, record = kind.run(tmp_path, MEMORY_OUTSIDE_PROCESSES, setting,
                                   limit=kind.config["limits"]["memory_bytes"])
    assert kind.findings(run) == {name: "ENOSYS" for name in
                                  ("memfd_create", "memfd_secret", "shmget", "msgget")}
    assert all_ok(record), result.stdout


DELETED_BUT_OPEN = """
if FIRST:
    held = []
    for step in range(4):
        if step % 2:
            fd = os.open(".", os.O_TMPFILE | os.O_RDWR, 0o600)
        else:
            fd = os.open(f"gone{step}", os.O_CREAT | os.O_RDWR, 0o600)
            os.unlink(f"gone{step}")
        held.append(fd)
        for _ in range(@chunks):          # each file just under the file size limit
            os.write(fd, b"x" * 2**20)
    time.sleep(@seconds)                  # long enough for the disk walk, then returns
"""


@needs_root
@pytest.mark.parametrize("setting", SETTINGS)
def test_deleted_files_still_open_count_toward_the_disk_limit(kind, tmp_path, setting):
    """An O_TMPFILE file or one unlinked after opening is in no folder, on the disk (or in
    RAM on a tmpfs): four of them hold more than the disk limit."""
    limits = kind.config["limits"]
    assert 4 * (limits["max_file_bytes"] - 2**20) > limits["disk_bytes"]
    run, result, record = kind.run(tmp_path, DELETED_BUT_OPEN, setting,
                                   chunks=limits["max_file_bytes"] // 2**20 - 1,
                                   seconds=window(kind.first) / 2)
    hit = record.tasks[kind.target]      # killed as soon as the walk saw it, written or not
    assert hit.status == "failed" and "(disk limit)" in hit.message, hit.message


CHMOD = """
def lock_out():
    \"\"\"Mode 0 on everything, inner paths first: a folder at 0 cannot be passed through.\"\"\"
    base = os.path.dirname(os.path.dirname(os.path.dirname(os.getcwd())))
    staging = [os.path.join(base, "tasks"), os.path.join(base, "submission"), base,
               os.path.dirname(base)]
    for path in @paths + staging:
        try:
            os.chmod(path, 0)
            report(path, "changed")
        except OSError as error:
            report(path, type(error).__name__)

if FIRST:
    LATER.append(lock_out)         # once its modules are imported: it does not lock itself out
"""


def ingestion_paths(run: Path) -> list[str]:
    """The files of the folders the ingestion uses, the folders, then the run folder."""
    folders = [run / "run" / name for name in ("output", "ingestion_program", "input")]
    folders += [run / "hidden_ref"]
    files = [path for folder in folders[2:] for path in folder.rglob("*") if path.is_file()]
    files += [path for path in folders[1].iterdir() if path.is_file()]
    return [str(path) for path in [*files, *folders, run / "run"]]


def modes(paths: list[str]) -> dict[str, int]:
    return {path: os.lstat(path).st_mode for path in paths}


@needs_root
@pytest.mark.parametrize("setting", SETTINGS)
def test_modes_a_child_changes_are_put_back(kind, tmp_path, setting):
    """Landlock does not cover chmod: without capabilities the child owns every folder and
    set the output folder to 0, and the ingestion, which cannot pass such a mode either,
    crashed. Here it sets 0 on the output, program, input and hidden folders, their files,
    the run folder and the staging folders; every task still runs and the record is signed."""
    run_dir = new_kind_run(kind.root, tmp_path, {})          # the paths, before the run
    paths = ingestion_paths(run_dir)
    shutil.rmtree(tmp_path / "run")
    shutil.rmtree(tmp_path / "hidden_ref")
    run, result, record = kind.run(tmp_path, CHMOD, setting, paths=paths)
    found = kind.findings(run)
    assert set(found) >= set(paths)
    if setting == "root":        # the child is another user: refused
        assert set(found.values()) == {"PermissionError"}
    else:
        assert set(found.values()) == {"changed"}
        assert "modes it had changed were put back" in result.stdout
    # Its own later calls may fail (PGDL's next network is in the staging folder it locked):
    # what it returned before counts, and the other tasks are not hurt.
    assert record.tasks[kind.target].prediction in ("final", "anytime")
    assert all(task.status == "ok" for name, task in record.tasks.items()
               if name != kind.target), result.stdout
    assert record.signature and "signed with the phase's key" in result.stdout
    fresh = tmp_path / "fresh"
    expected = modes(ingestion_paths(new_kind_run(kind.root, fresh, {})))
    if setting == "root":          # made root-only by the ingestion itself (sandbox.lock_down)
        for name in ("run/output", "run/ingestion_program", "hidden_ref"):
            expected[str(fresh / name)] = stat.S_IFDIR | 0o700
    assert modes(paths) == {path: expected[path.replace(str(tmp_path), str(fresh))]
                            for path in paths}


THREADS = """
import threading
from concurrent.futures import ThreadPoolExecutor
if FIRST:
    # Under the address-space rule each thread's stack reservation counts (8 MiB by default):
    # this test is about the number of threads, not their stacks.
    threading.stack_size(2**20)
    together = threading.Barrier(@count)
    with ThreadPoolExecutor(@count) as pool:
        report("threads", sum(pool.map(lambda _: together.wait(60) >= 0, range(@count))))
"""


@needs_root
@pytest.mark.parametrize("setting", SETTINGS)
def test_a_pool_of_200_threads_works(kind, tmp_path, setting):
    """RLIMIT_NPROC counts threads: as user nobody under the old 128, such a pool failed."""
    run, result, record = kind.run(tmp_path, THREADS, setting, count=200)
    assert kind.findings(run) == {"threads": "200"}, result.stdout
    assert all_ok(record), result.stdout
    if setting == "root":
        assert f"processes and threads {kind.config['limits']['processes']}" in result.stdout


FORK_BOMB = """
import signal

def bomb(level):
    \"\"\"Keeps @width children alive down to level @levels, forking again for each one that
    dies, each trying to leave the task's process group; deaf to SIGTERM.\"\"\"
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        os.setsid()
        report("setsid", "allowed")
    except OSError as error:
        if level > 0:              # the task's first process leads its group: never allowed
            report("setsid", type(error).__name__)
    children = 0
    while True:
        while level < @levels and children < @width:
            try:
                if os.fork() == 0:
                    bomb(level + 1)
                children += 1
            except OSError:
                time.sleep(0.01)
        try:
            os.wait()
            children -= 1
        except ChildProcessError:
            time.sleep(1)

if FIRST:
    bomb(0)
"""


@pytest.fixture(scope="module", params=KINDS)
def short_kind(request, tmp_path_factory, kind_data):
    """Two seconds, which the fork bomb runs out."""
    return prepared_kind(tmp_path_factory, kind_data, request.param, 2.0)


def ended_by_its_budget(task) -> bool:
    units = task.units or {}
    return task.status == "timed_out" or bool(units.get("timed_out"))


@needs_root
@pytest.mark.parametrize("setting", SETTINGS)
def test_a_refilling_fork_bomb_is_gone_with_its_task(short_kind, tmp_path, setting):
    """Without capabilities there is no RLIMIT_NPROC: a bomb that escaped the group took the
    /proc sweep 49 s. seccomp now keeps every process in the task's group (setsid and setpgid
    are refused), whose one SIGKILL reaches them all at once; the fixture checks that none is
    left."""
    run, result, record = short_kind.run(tmp_path, FORK_BOMB, setting, width=3, levels=4)
    assert short_kind.findings(run) == {"setsid": "PermissionError"}
    hit = record.tasks[short_kind.target]
    assert ended_by_its_budget(hit), hit.message
    assert "killed" in hit.message and "leftover process(es)" in result.stdout
    assert all(task.status == "ok" for name, task in record.tasks.items()
               if name != short_kind.target)
    assert processes_of(tmp_path) == []


MANY_FILES = """
if FIRST:
    # Deep, so a walk by paths pays for every level of every entry, as the old one did.
    folder = os.open(".", os.O_RDONLY)
    for _ in range(@depth):
        os.mkdir("d", dir_fd=folder)
        inner = os.open("d", os.O_RDONLY, dir_fd=folder)
        os.close(folder)
        folder = inner
    def source(name):
        os.close(os.open(name, os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=folder))
        return name

    def links(linked, first, count):
        \"\"\"Links are the fastest files to make; ext4 gives a file at most 65000 names.\"\"\"
        for name in range(first, first + count):
            try:
                os.link(linked, str(name), src_dir_fd=folder, dst_dir_fd=folder)
            except OSError:
                linked = source(f"f{name}")
        return linked

    linked = source("f")
    for made in range(0, @files, 1000):
        linked = links(linked, made, 1000)
    report("files", @files)
    FIRST_CALL.append(lambda: time.sleep(@window - @slack))    # returns just before its time
"""


@pytest.fixture(scope="module", params=KINDS)
def roomy_kind(request, tmp_path_factory, kind_data):
    """Five seconds, room for many files, and a start-up long enough to make them in."""
    return prepared_kind(tmp_path_factory, kind_data, request.param, 5.0,
                         limits={"max_entries": 10**6, "startup_seconds": 120})


@needs_root
@pytest.mark.parametrize("setting", SETTINGS)
def test_many_files_do_not_make_a_prediction_late(roomy_kind, tmp_path, setting):
    """The supervisor walked a child's 335k files in one go, reading no result meanwhile: a
    prediction sent in time was taken for late. The walk now goes a slice per turn of the loop.
    The child returns its prediction a second before its time is up. (The old walk made it late
    only when it was busy long enough at that moment: often, not always. A PGDL network's clock
    restarts when its result is read, so there the old walk made nothing late.) The files are
    made in the start-up, so that their number does not depend on the machine's speed."""
    run, result, record = roomy_kind.run(
        tmp_path, MANY_FILES, setting, at_import=True, depth=500, files=20_000, slack=1.0,
        window=window(roomy_kind.first))
    assert int(roomy_kind.findings(run)["files"]) == 20_000
    assert all_ok(record), result.stdout
    units = record.tasks[roomy_kind.target].units or {}
    assert not units.get("timed_out")


TREES = """
if FIRST:
    folder = os.open(".", os.O_RDONLY)
    if @shape == "deep":                    # over a thousand deep: shutil.rmtree recursed
        for _ in range(@count):
            os.mkdir("d", dir_fd=folder)
            inner = os.open("d", os.O_RDONLY, dir_fd=folder)
            os.close(folder)
            folder = inner
    else:
        for name in range(@count):
            os.close(os.open(str(name), os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=folder))
    report("made", @count)
    time.sleep(@seconds)
"""


@pytest.fixture(scope="module")
def capped_kind(tmp_path_factory, kind_data):
    """One kind: the limits are the supervisor's, the same for every kind, and what a kind
    adds (PGDL's units) is covered by the tests above on every kind."""
    return prepared_kind(tmp_path_factory, kind_data, "bdl2021", 10.0,
                         limits={"max_entries": 2000})


@needs_root
@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("shape, count, limit", [("wide", 2500, "(file count limit)"),
                                                 ("deep", 1200, "(folder depth limit)")])
def test_trees_over_the_limits_are_stopped_and_removed(capped_kind, tmp_path, setting, shape,
                                                       count, limit):
    """Empty files cost an inode and walking time but no disk space; nesting costs the walk a
    descriptor per level, and shutil.rmtree's recursion made the removal after the task crash
    the ingestion."""
    kind = capped_kind
    run, result, record = kind.run(tmp_path, TREES, setting, shape=shape, count=count,
                                   seconds=window(kind.first) / 2)
    hit = record.tasks[kind.target]
    assert hit.status == "failed" and limit in hit.message, hit.message
    assert "could not be removed" not in result.stdout

"""A link planted in the input data never stages the hidden data or the record key.

Where something can write the input folder while the ingestion runs (a submission's own
command beside it: CodaLab v1, Codabench before v1.27; or a child without Landlock), it can
replace a later task's input file, or a folder on its path, with a symbolic link to the hidden
reference data or to the program's record key. The ingestion runs as root: staging must not
follow it. On every kind with two tasks in a code phase, as root and without capabilities, the
link is put in before the run (as a command beside the ingestion would) and by the first
task's child itself (without Landlock it is root and can write the input folder). The second
task's child reads every file staged for it and prints their digests and whether any holds the
hidden bytes; the second task must fail naming the link, before any child of it runs, and the
others still run. Also: where the child runs as root, image arrays are copies, not links of the
organizer's files, so what the child does to them leaves those unchanged.
"""
import dataclasses
import functools
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from bundle.phase_data import stage_input_data, stage_reference_data
from bundle.phase_plan import phase_plan
from bundle.programs import assemble_ingestion_program
from bundle.spec import load_spec
from ingestion_harness import (SETTINGS, TEST_LIMITS, needs_root, new_kind_run, run_ingestion,
                               staging_root)
from kinds.kind import KINDS as KIND_RECORDS
from runtime.formats import RECORD_KEY_NAME, read_run_record

pytestmark = pytest.mark.slow

# kind -> (code phase with two or more tasks, the entry module, a valid quick answer)
PHASES = {
    "bdl2021": ("development", "submission.py", """
def predict(task, x_train, y_train, x_test, checkpoint):
    import numpy as np
    return np.full((task.n_test, task.num_classes), 1.0 / task.num_classes)
"""),
    "label_accuracy": ("evaluation", "submission.py", """
def predict(task, x_train, y_train, x_test):
    return [0] * task.n_test
"""),
    "pgdl2020": ("convolutional", "complexity.py", """
def complexity(model, dataset):
    return 0.0
"""),
    "retina": ("final", "submission.py", """
def predict(task, x_train, y_train, x_test):
    import numpy as np
    return np.full(len(x_test), 0.5)
"""),
    "retina images": ("images", "submission.py", """
def predict(task, x_train, y_train, x_test):
    import numpy as np
    return np.full(len(x_test), 0.5)
"""),
}

# Runs when the entry module is imported, in every task's child, before the kind's contract
# reads anything: it reads every file staged for this task (DATA: the names a kind stages in
# the task's folder, which Landlock lets it read but not list) and prints each one's digest
# and whether it holds any of NEEDLES. Task FIRST's child, where SWAP is set, first puts the link in place itself.
SCAN = """
import hashlib, os
TASK = os.path.basename(os.path.dirname(os.getcwd()))
NEEDLES = {needles!r}
DATA = {data!r}
FIRST, SWAP = {first!r}, {swap!r}
if SWAP and TASK == FIRST:
    victim, target = SWAP
    try:
        os.rename(victim, victim + ".moved")
        os.symlink(target, victim)
        print("SWAPPED", victim, flush=True)
    except OSError as error:
        print("SWAP REFUSED", error, flush=True)
def files(path):
    if not os.path.isdir(path):
        return [path] if os.path.exists(path) else []
    return [os.path.join(root, name) for root, _, names in os.walk(path) for name in names]
for path in sorted(p for name in DATA for p in files(os.path.join(os.path.dirname(os.getcwd()), name))):
    try:
        data = open(path, "rb").read()
    except OSError as error:
        print("UNREADABLE", path, error, flush=True)
        continue
    found = [i for i, needle in enumerate(NEEDLES) if bytes.fromhex(needle) in data]
    print("STAGED", TASK, os.path.relpath(path, os.path.dirname(os.getcwd())),
          hashlib.sha256(data).hexdigest(), "HIDDEN" if found else "clean", flush=True)
"""
MESSAGE = "the input data was changed during the run; the organizers' files are never " \
          "followed through links"


def code_plan(kind: str):
    name = kind.split()[0]
    spec = load_spec(KIND_RECORDS[name].DEFAULT_SPEC)
    plan = phase_plan(spec, PHASES[kind][0], code_submission=True, budget_seconds=20)
    return dataclasses.replace(plan, tasks=tuple(sorted(plan.tasks, key=lambda t: t.name)))


def prepare_phase(kind: str, root: Path):
    plan = code_plan(kind)
    assemble_ingestion_program(plan, root / "ingestion_program", {
        **TEST_LIMITS, "max_file_bytes": 64 * 2**20, "disk_bytes": 256 * 2**20})
    stage_input_data(plan, root / "input")
    stage_reference_data(plan, root / "hidden_ref")
    KIND_RECORDS[kind.split()[0]].sample_code_submission(root / "sample")
    return kind, root, [task.name for task in plan.tasks]


@pytest.fixture(scope="module")
def prepared_phases(tmp_path_factory):
    """``prepared_phases(kind)``: prepare_phase's result, made once for this module: the
    image phase is both a kind of ``prepared`` and the phase of the image arrays' test."""
    made = {}

    def prepared(kind: str):
        if kind not in made:
            made[kind] = prepare_phase(kind, tmp_path_factory.mktemp(
                f"links-{kind.replace(' ', '-')}"))
        return made[kind]
    return prepared


@pytest.fixture(scope="module", params=list(PHASES))
def prepared(request, prepared_phases):
    return prepared_phases(request.param)


@pytest.fixture(scope="module")
def images(prepared_phases):
    return prepared_phases("retina images")


def hidden_targets(run: Path) -> dict[str, Path]:
    """What a link may aim at: a hidden reference file (CodaLab mounts the hidden data in
    the ingestion's container only) and the key in the program folder (a Codabench bundle's)."""
    hidden = run / "hidden_ref"
    reference = max((p for p in hidden.iterdir() if p.name != RECORD_KEY_NAME),
                    key=lambda p: p.stat().st_size)
    program_key = run / "run" / "ingestion_program" / RECORD_KEY_NAME
    shutil.copyfile(hidden / RECORD_KEY_NAME, program_key)
    return {"reference": reference, "key": program_key, "folder": hidden}


def needles(targets: dict[str, Path], inputs: Path) -> list[str]:
    """Byte strings found in the hidden files and in no input: the key's text, and the
    reference file's stretch of the most distinct bytes that no input holds."""
    key = targets["key"].read_bytes().strip()
    reference = targets["reference"].read_bytes()
    public = tuple(path.read_bytes() for path in sorted(inputs.rglob("*")) if path.is_file())
    return _needles(key, reference, public)


@functools.cache
def _needles(key: bytes, reference: bytes, public: tuple[bytes, ...]) -> list[str]:
    """needles() of these bytes, found once for this module: every run of a kind asks again,
    of copies of the same files (its prepared phase), and BDL's take half a CPU second."""
    windows = [reference[start:start + 48] for start in range(0, max(1, len(reference) - 48), 7)]
    # The first window of the most distinct bytes that no input holds (max() of those in no
    # input, in the reference's order): searched for in the inputs from the most distinct
    # down, so that only the few tried are (BDL's reference is 1 MB, its inputs 3 MB).
    by_distinct = sorted(range(len(windows)), key=lambda index: -len(set(windows[index])))
    chosen = next(windows[index] for index in by_distinct
                  if not any(windows[index] in data for data in public))
    return [key.hex(), chosen.hex()]


def hidden_digests(run: Path) -> set[str]:
    return {hashlib.sha256(path.read_bytes()).hexdigest()
            for path in [*(run / "hidden_ref").rglob("*"), run / "run" / "ingestion_program"
                         / RECORD_KEY_NAME] if path.is_file()}


def victim(run: Path, kind: str, task: str, aim: str) -> tuple[Path, Path]:
    """(the name replaced, the link's target) for ``task``'s input: its file, or for a folder
    of inputs (PGDL's zoo) the folder itself or a file in it."""
    config = json.loads((run / "run" / "ingestion_program" / "ingestion_config.json").read_text())
    spec = next(t for t in config["tasks"] if t["name"] == task)
    inputs = run / "run" / "input" / spec["inputs"]
    targets = hidden_targets(run)
    if inputs.is_dir():
        if aim == "folder":
            return inputs, targets["folder"]
        inputs = next(p for p in sorted(inputs.rglob("*.npz")))
    elif kind == "retina images" and aim == "folder":
        images = spec["contract"]["image_files"]["train_images.npy"]
        return run / "run" / "input" / images, targets["reference"]
    return inputs, targets["key" if aim == "key" else "reference"]


def swap(name: Path, target: Path) -> None:
    name.rename(name.with_name(name.name + ".moved"))
    name.symlink_to(target, target_is_directory=target.is_dir())


def run_swapped(prepared, tmp_path, setting, aim, during):
    kind, root, tasks = prepared
    first, second = tasks[0], tasks[1]
    module, code = PHASES[kind][1], PHASES[kind][2]
    run = tmp_path
    new_kind_run(root, run, {module: ""})
    name, target = victim(run, kind, second, aim)
    found = needles({**hidden_targets(run), "reference": target if target.is_file()
                     else hidden_targets(run)["reference"]}, run / "run" / "input")
    digests = hidden_digests(run)
    env = {}
    if during:
        env["INGESTION_SANDBOX_DISABLE"] = "landlock"
        # A child that could read the key refuses the run where it runs as root without
        # Landlock; the kit's runs have no key, and the link aims at the reference data.
        (run / "hidden_ref" / RECORD_KEY_NAME).unlink()
        (run / "run" / "ingestion_program" / RECORD_KEY_NAME).unlink()
    else:
        swap(name, target)
    config = json.loads((run / "run" / "ingestion_program" / "ingestion_config.json").read_text())
    data = ["data.npz", "data", "zoo"] + [Path(t["inputs"]).name for t in config["tasks"]]
    scan = SCAN.format(needles=found, data=data, first=first,
                       swap=(str(name), str(target)) if during else None)
    (run / "run" / "program" / module).write_text(scan + code)
    result = run_ingestion(run, unprivileged=setting != "root", env=env, timeout=600)
    shutil.rmtree(staging_root(tmp_path), ignore_errors=True)
    return run, result, digests, (first, second, tasks[2:])


def staged_lines(output: Path, task: str) -> list[str]:
    path = output / f"{task}_stdout.txt"
    text = path.read_text() if path.exists() else ""
    return [line for line in text.splitlines() if line.startswith(("STAGED", "SWAP", "UNREAD"))]


def assert_nothing_hidden(output: Path, tasks, digests: set[str]) -> None:
    for task in tasks:
        lines = staged_lines(output, task)
        assert not any(line.endswith("HIDDEN") for line in lines), (task, lines)
        assert not any(line.split()[3] in digests for line in lines if line.startswith("STAGED"))


def check(run, result, digests, tasks, during):
    first, second, later = tasks
    output = run / "run" / "output"
    assert (output / "ingestion_record.json").exists(), result.stdout + result.stderr
    record = read_run_record(output / "ingestion_record.json")
    if during:
        assert any(line.startswith("SWAPPED") for line in staged_lines(output, first)), \
            staged_lines(output, first) + [result.stdout[-3000:]]
    assert_nothing_hidden(output, (first, second, *later), digests)
    assert record.tasks[second].status == "failed", result.stdout[-3000:]
    assert MESSAGE in record.tasks[second].message, record.tasks[second].message
    assert record.tasks[second].failure == "refused_by_sandbox"
    assert not staged_lines(output, second), "a child of the refused task ran"
    assert f"[{second}] failed: its input data was not staged: " in result.stdout
    for task in (first, *later):
        assert record.tasks[task].status == "ok", (task, record.tasks[task].message,
                                                   result.stdout[-3000:])
        assert staged_lines(output, task), f"{task}: its child did not run"


@needs_root
@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("aim", ["reference", "key", "folder"])
def test_a_link_put_in_before_the_run_stages_nothing_hidden(prepared, tmp_path, setting, aim):
    kind = prepared[0]
    if aim == "folder" and kind in ("bdl2021", "label_accuracy", "retina"):
        pytest.skip("their inputs are single files at the top of the input folder")
    run, result, digests, tasks = run_swapped(prepared, tmp_path, setting, aim, False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    check(run, result, digests, tasks, during=False)


@needs_root
@pytest.mark.parametrize("setting", SETTINGS)
def test_a_link_the_first_child_puts_in_stages_nothing_hidden(prepared, tmp_path, setting):
    """Without Landlock the child can write the input folder where it is root (no
    capabilities); where it runs as the sandbox user (root with capabilities) the folders
    above the input are not its to pass, and its swap is refused: the later tasks run."""
    kind = prepared[0]
    run, result, digests, tasks = run_swapped(
        prepared, tmp_path, setting, "folder" if kind == "pgdl2020" else "reference", True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    if setting == "root":
        output = run / "run" / "output"
        assert any(line.startswith("SWAP REFUSED") for line in staged_lines(output, tasks[0]))
        record = read_run_record(output / "ingestion_record.json")
        assert all(run.status == "ok" for run in record.tasks.values())
        assert_nothing_hidden(output, record.tasks, digests)
        return
    check(run, result, digests, tasks, during=True)


# Does to its staged image arrays what a child may try: new times, a user.* attribute, and
# (giving itself the right to write first) a truncation; prints what each did.
CHANGES_ITS_ARRAYS = """
import json, os

def predict(task, x_train, y_train, x_test):
    done = {"inode": list(os.stat(x_train.filename)[1:3])}
    for name, change in (("chmod", lambda path: os.chmod(path, 0o644)),
                         ("utime", lambda path: os.utime(path, (1, 1))),
                         ("setxattr", lambda path: os.setxattr(path, "user.planted", b"1")),
                         ("truncate", lambda path: os.truncate(path, 0))):
        try:
            for array in (x_train, x_test):
                change(array.filename)
            done[name] = "done"
        except OSError as error:
            done[name] = type(error).__name__
    print("CHANGES", json.dumps(done), flush=True)
    return np.full(len(x_test), 0.5)
"""


def organizer_state(path: Path) -> tuple:
    status = path.stat()
    return status.st_mtime_ns, status.st_size, status.st_mode, sorted(os.listxattr(path))


@needs_root
@pytest.mark.parametrize("setting", SETTINGS)
def test_image_arrays_are_linked_only_where_the_child_cannot_change_them(images, tmp_path,
                                                                       setting):
    """Root with capabilities: the child runs as the sandbox user, which neither owns the
    organizer's arrays nor may write them, so they are hard links (the input and staging
    folders share a file system here). Without capabilities
    the child is root and owns the inode: they must be copies, and what the child does to
    them (times, extended attributes, size) leaves the organizer's files unchanged."""
    kind, root, tasks = images
    run = new_kind_run(root, tmp_path, {"submission.py": CHANGES_ITS_ARRAYS})
    config = json.loads((run / "run" / "ingestion_program" / "ingestion_config.json").read_text())
    arrays = {task["name"]: [run / "run" / "input" / task["contract"]["image_files"][name]
                             for name in ("train_images.npy", "test_images.npy")]
              for task in config["tasks"]}
    before = {path: organizer_state(path) for paths in arrays.values() for path in paths}
    result = run_ingestion(run, unprivileged=setting != "root", timeout=600)
    shutil.rmtree(staging_root(tmp_path), ignore_errors=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    output = run / "run" / "output"
    for task, paths in arrays.items():
        line = next(line for line in (output / f"{task}_stdout.txt").read_text().splitlines()
                    if line.startswith("CHANGES "))
        changes = json.loads(line[len("CHANGES "):])
        organizer = paths[0].stat()
        linked = changes["inode"] == [organizer.st_ino, organizer.st_dev]
        if setting != "root":
            assert not linked, f"{task}: the root child got the organizer's own inode"
            assert changes["utime"] == "done", changes      # its copy is its own to change
        else:
            assert linked, f"{task}: the sandbox user's arrays were copied, not linked"
            assert all(changes[name] != "done" for name in ("utime", "setxattr", "truncate")), \
                changes
    assert {path: organizer_state(path) for path in before} == before

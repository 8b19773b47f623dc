"""The ingestion program against hostile and broken submissions, as real subprocesses.

Each submission misbehaves on the `iris` task only; `digits` must still come out right.
After every run no process of the run may be left, and the record must say what happened.
"""
import dataclasses
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

from bundle.phase_data import stage_input_data, stage_reference_data
from bundle.programs import assemble_ingestion_program, assemble_scoring_program
from plans import embedded_phase
from runtime import failures
from runtime.formats import read_run_record
from ingestion_harness import BUDGET_SECONDS, TEST_LIMITS, new_run, processes_of, run_ingestion

pytestmark = pytest.mark.slow
# The default competition's development phase, which these runs take as a code phase, with
# two of its three tasks: iris, where each submission misbehaves, and digits, which must come
# out right. Its third, digits_cnn, was one more child process in every run (a seventh of the
# run's CPU) and held the same as digits.
DEVELOPMENT_TASKS = ("iris", "digits")
# The budget of the tests that wait for a task's time to run out spinning (an infinite loop,
# with or without a checkpoint, deaf to SIGTERM or not): they spent it all at 100% CPU. The
# others' tasks take milliseconds of it; a slow machine's start-up is not in it.
SPIN_BUDGET_SECONDS = 1.5

UNIFORM = """
import numpy as np
def uniform(task):
    return np.full((task.n_test, task.num_classes), 1.0 / task.num_classes)
"""


def submission(iris_body: str, prelude: str = "") -> str:
    """A submission whose predict() misbehaves on iris and is correct elsewhere."""
    body = "\n".join("        " + line for line in iris_body.strip().splitlines())
    return f"""{UNIFORM}
{prelude}
def predict(task, x_train, y_train, x_test, checkpoint):
    if task.name == "iris":
{body}
    return uniform(task)
"""


@pytest.fixture(autouse=True)
def nothing_left_behind(tmp_path):
    """Only this test's processes count: other runs on the machine may use 'nobody' too."""
    yield
    assert processes_of(tmp_path) == [], "processes left behind"


def development_plan(budget: float = BUDGET_SECONDS):
    """The development phase as a code phase, DEVELOPMENT_TASKS only."""
    plan = embedded_phase("development", code_submission=True, budget_seconds=budget,
                          kind="bdl2021")
    return dataclasses.replace(plan, tasks=tuple(task for task in plan.tasks
                                                 if task.name in DEVELOPMENT_TASKS))


def prepare(root: Path, budget: float = BUDGET_SECONDS) -> Path:
    """ingestion_harness.prepare for DEVELOPMENT_TASKS."""
    plan = development_plan(budget)
    assemble_ingestion_program(plan, root / "ingestion_program", TEST_LIMITS)
    stage_input_data(plan, root / "input")
    stage_reference_data(plan, root / "hidden_ref")
    return root


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    return prepare(tmp_path_factory.mktemp("ingestion"))


@pytest.fixture(scope="module")
def spinning(tmp_path_factory):
    """The phase with SPIN_BUDGET_SECONDS, for the submissions that spin until their time is
    up."""
    return prepare(tmp_path_factory.mktemp("ingestion-spinning"), SPIN_BUDGET_SECONDS)


@pytest.fixture(scope="module")
def uniform_run(prepared, tmp_path_factory):
    """(run, result, record) of the submission that is correct on every task: the normal run
    and every output the scorer must refuse once tampered with (copied first), run once."""
    run = tmp_path_factory.mktemp("uniform")
    outcome = ingest(prepared, run, submission("return uniform(task)"))
    assert processes_of(run) == [], "processes left behind"
    return outcome


@pytest.fixture(scope="module")
def scoring_root(prepared, tmp_path_factory):
    """The phase's scoring program (a code phase) and references, which each scorer test
    copies (scoring_harness.new_run)."""
    root = tmp_path_factory.mktemp("scoring")
    assemble_scoring_program(development_plan(), root / "program")
    shutil.copytree(prepared / "hidden_ref", root / "ref")
    return root


def ingest(prepared, tmp_path, code, env=None):
    run = new_run(prepared, tmp_path, code)
    result = run_ingestion(run, env=env)
    assert result.returncode == 0, result.stderr
    record = read_run_record(run / "run" / "output" / "ingestion_record.json")
    return run, result, record


def assert_digits_fine(run, record):
    assert record.tasks["digits"].status == "ok"
    predictions = np.load(run / "run" / "output" / "digits_probs.npy")
    assert predictions.shape == (599, 10)


def assert_nothing_left(run):
    assert processes_of(run) == []


def test_normal_run_writes_validated_predictions_and_the_record(uniform_run):
    run, result, record = uniform_run
    assert record.tasks["iris"].status == "ok" and record.tasks["iris"].prediction == "final"
    assert np.load(run / "run" / "output" / "iris_probs.npy").shape == (50, 3)
    assert_digits_fine(run, record)
    assert record.hardware["cores"] >= 1 and record.hardware["cpu"]
    assert "[iris] ok: training" in result.stdout and "protection:" in result.stdout


def test_task_object_carries_metadata_and_budget(prepared, tmp_path):
    code = submission("""
assert task.kind == "classification" and task.num_classes == 3 and task.n_test == 50
assert task.model["layer_sizes"] == [4, 16, 3] and task.prior["variance"] == 0.2
assert 0 < task.time_left() <= task.seconds
assert x_train.shape == (100, 4) and y_train.shape == (100,) and x_test.shape == (50, 4)
return uniform(task)""")
    run, result, record = ingest(prepared, tmp_path, code)
    assert record.tasks["iris"].status == "ok", record.tasks["iris"].message


def test_exception_in_participant_code(prepared, tmp_path):
    run, result, record = ingest(prepared, tmp_path, submission("raise ValueError('bad hyperparameter')"))
    iris = record.tasks["iris"]
    assert iris.status == "failed" and iris.prediction is None
    assert "predict() raised ValueError: bad hyperparameter" in iris.message
    assert "Traceback" in iris.stderr_tail and "submission.py" in iris.stderr_tail
    assert "ingest_runtime" not in iris.stderr_tail and "importlib" not in iris.stderr_tail
    assert iris.failure == failures.RAISED
    assert iris.traceback.startswith("Traceback (most recent call last):")
    assert iris.traceback.endswith("ValueError: bad hyperparameter")
    assert_digits_fine(run, record)


def test_infinite_loop_is_timed_out(spinning, tmp_path):
    run, result, record = ingest(spinning, tmp_path, submission("while True:\n    pass"))
    iris = record.tasks["iris"]
    assert iris.status == "timed_out" and iris.signal == "SIGTERM"
    assert iris.failure == failures.TIMED_OUT and iris.traceback == ""
    assert iris.wall_seconds >= SPIN_BUDGET_SECONDS     # no upper bound: a loaded machine is slow
    assert not (run / "run" / "output" / "iris_probs.npy").exists()
    assert_digits_fine(run, record)


def test_checkpoint_is_used_after_a_timeout(spinning, tmp_path):
    code = submission("checkpoint(uniform(task))\nwhile True:\n    pass")
    run, result, record = ingest(spinning, tmp_path, code)
    iris = record.tasks["iris"]
    assert iris.status == "timed_out" and iris.prediction == "anytime"
    assert "scored its last checkpoint" in iris.message
    assert np.load(run / "run" / "output" / "iris_probs.npy").shape == (50, 3)


def test_child_ignoring_sigterm_is_killed_after_the_grace_period(spinning, tmp_path):
    code = submission("signal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    pass",
                      prelude="import signal")
    run, result, record = ingest(spinning, tmp_path, code)
    iris = record.tasks["iris"]
    grace = TEST_LIMITS["grace_seconds"]
    assert iris.status == "timed_out" and iris.signal == "SIGKILL"
    assert "ignored SIGTERM and was killed after the 1 s grace period" in iris.message
    assert "out of memory" not in iris.message          # we killed it, not the kernel
    assert iris.wall_seconds >= SPIN_BUDGET_SECONDS + grace
    assert_digits_fine(run, record)


# Leaves the task's process group where it can (seccomp refuses setsid), says it tried, then
# sleeps.
ESCAPER = ("import os, sys, time\ntry:\n    os.setsid()\nexcept OSError as error:\n"
           "    print('setsid:', type(error).__name__, file=sys.stderr, flush=True)\n"
           "print('tried', flush=True)\ntime.sleep(600)")


@pytest.mark.parametrize("filter_", ["on", "off"])
def test_grandchild_that_calls_setsid_is_swept(prepared, tmp_path, filter_):
    """With seccomp, setsid is refused and the group's SIGKILL takes the grandchild; without,
    it leaves the group, and the /proc sweep finds it."""
    code = submission("""
escaper = subprocess.Popen([sys.executable, "-c", @escaper, "bdl-marker"],
                           stdout=subprocess.PIPE)
escaper.stdout.readline()          # it has tried setsid (however slowly it started)
return uniform(task)""".replace("@escaper", repr(ESCAPER)), prelude="import subprocess, sys")
    env = {"INGESTION_SANDBOX_DISABLE": "seccomp"} if filter_ == "off" else None
    run, result, record = ingest(prepared, tmp_path, code, env)
    assert record.tasks["iris"].status == "ok"
    assert "killed 1 leftover process(es)" in result.stdout
    stderr = run / "run" / "output" / "iris_stderr.txt"
    refused = stderr.exists() and "setsid: PermissionError" in stderr.read_text()
    assert refused is (filter_ == "on")
    assert_nothing_left(run)
    assert_digits_fine(run, record)


def test_a_process_killed_by_someone_else_gets_the_memory_hint(prepared, tmp_path):
    run, result, record = ingest(prepared, tmp_path,
                                 submission("os.kill(os.getpid(), 9)", prelude="import os"))
    assert record.tasks["iris"].message == "killed by SIGKILL (out of memory?)"
    assert record.tasks["iris"].failure == failures.MEMORY


def test_a_thread_left_running_does_not_lose_the_returned_prediction(prepared, tmp_path):
    code = submission("threading.Thread(target=time.sleep, args=(3600,)).start()\n"
                      "return uniform(task)", prelude="import threading, time")
    run, result, record = ingest(prepared, tmp_path, code)
    iris = record.tasks["iris"]
    assert iris.status == "ok" and iris.prediction == "final", iris.message


def test_leftover_processes_are_counted_once_each(prepared, tmp_path):
    code = submission("""
for _ in range(3):
    subprocess.Popen([sys.executable, "-c", @escaper])
time.sleep(0.5)
return uniform(task)""".replace("@escaper", repr(ESCAPER)), prelude="import subprocess, sys, time")
    run, result, record = ingest(prepared, tmp_path, code)
    assert "[iris]   killed 3 leftover process(es)" in result.stdout


def test_runs_without_psutil(prepared, tmp_path):
    """The first py312 images had no psutil: the process tree is read from /proc."""
    code = submission("""
subprocess.Popen([sys.executable, "-c", @escaper])
time.sleep(0.3)
return uniform(task)""".replace("@escaper", repr(ESCAPER)), prelude="import subprocess, sys, time")
    run = new_run(prepared, tmp_path, code)
    # First on the program's own path (the worker's PYTHONPATH never reaches it: python3 -I).
    (run / "run" / "ingestion_program" / "psutil.py").write_text(
        "raise ImportError('psutil is not installed')\n")
    result = run_ingestion(run)
    assert result.returncode == 0, result.stderr
    record = read_run_record(run / "run" / "output" / "ingestion_record.json")
    assert record.tasks["iris"].status == "ok" and record.hardware["memory_gib"] > 0
    assert "[iris]   killed 1 leftover process(es)" in result.stdout
    assert_nothing_left(run)


def test_forked_sleepers_holding_the_pipes_do_not_hang_the_run(prepared, tmp_path):
    code = submission("""
for _ in range(5):
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", @escaper, "bdl-marker"])
return uniform(task)""".replace("@escaper", repr(ESCAPER)), prelude="import os, sys")
    run, result, record = ingest(prepared, tmp_path, code)
    assert record.tasks["iris"].status == "ok"
    assert_nothing_left(run)


def test_memory_hog_fails_with_the_limit_named(prepared, tmp_path):
    code = submission("hog = np.ones((2**31 // 8 + 10,))\nreturn uniform(task)")
    run, result, record = ingest(prepared, tmp_path, code)
    iris = record.tasks["iris"]
    assert iris.status == "failed"
    assert "MemoryError" in iris.message and "memory limit is 2.0 GiB" in iris.message
    assert iris.failure == failures.MEMORY
    assert_digits_fine(run, record)


def test_disk_filler_is_stopped(prepared, tmp_path):
    code = submission("""
block = b"x" * 2**20
for index in range(1000):
    with open(f"fill{index}", "wb") as stream:
        for _ in range(8):
            stream.write(block)
return uniform(task)""")
    run, result, record = ingest(prepared, tmp_path, code)
    iris = record.tasks["iris"]
    assert iris.status == "failed"
    assert "disk limit" in iris.message and iris.failure == failures.SANDBOX
    assert_digits_fine(run, record)


def test_single_huge_file_hits_the_file_size_limit(prepared, tmp_path):
    code = submission("""
with open("big", "wb") as stream:
    stream.write(b"x" * (64 * 2**20))
return uniform(task)""")
    run, result, record = ingest(prepared, tmp_path, code)
    iris = record.tasks["iris"]
    assert iris.status == "failed" and "File too large" in iris.message
    assert "files are limited to 16 MiB" in iris.message and iris.failure == failures.SANDBOX


def test_hundred_megabytes_of_stdout_are_capped_and_do_not_block(prepared, tmp_path):
    code = submission("""
line = "y" * 1023 + "\\n"
for _ in range(100 * 1024):
    sys.stdout.write(line)
sys.stdout.flush()
return uniform(task)""", prelude="import sys")
    run, result, record = ingest(prepared, tmp_path, code)
    assert record.tasks["iris"].status == "ok"
    assert len(result.stdout) < 1_000_000
    kept = (run / "run" / "output" / "iris_stdout.txt").read_text()
    assert kept.startswith("yyy") and "bytes omitted" in kept and len(kept) < 20_000
    assert_digits_fine(run, record)


@pytest.mark.parametrize("body, message", [
    ("return np.ones((50, 4)) / 4", "expected shape (50, 3) = (test points, classes), found (50, 4)"),
    ("p = uniform(task); p[3, 1] = float('nan'); return p", "row 3, column 1 (0-based) is nan"),
    ("p = uniform(task); p[7] = [2.0, -1.0, 0.0]; return p", "expected a probability >= 0"),
    ("return 'not an array'", "not a numeric array"),
    ("return {'probs': 1}", "predict() returned something that is not a numeric array "
                            "(TypeError: float() argument must be a string or a real number, "
                            "not 'dict')"),
    ("return None", "predict() returned None"),
])
def test_invalid_predictions_are_refused_before_writing(prepared, tmp_path, body, message):
    run, result, record = ingest(prepared, tmp_path, submission(body))
    iris = record.tasks["iris"]
    assert iris.status in ("invalid", "failed") and message in iris.message, iris.message
    assert iris.failure == (failures.NOTHING if body == "return None" else
                            failures.INVALID_OUTPUT)
    assert "ingest_runtime" not in iris.stderr_tail         # no frames of ours
    assert not (run / "run" / "output" / "iris_probs.npy").exists()
    assert_digits_fine(run, record)


@pytest.mark.skipif(os.geteuid() != 0, reason="file permissions protect only when run as root")
def test_child_can_reach_neither_hidden_references_nor_output_nor_network(prepared, tmp_path):
    code = submission("""
results = {}
for name, action in (
        ("hidden", lambda: open(os.path.join(HIDDEN, "iris_probs.npy"), "rb").read()),
        ("hidden_list", lambda: os.listdir(HIDDEN)),
        ("output", lambda: open(os.path.join(OUTPUT, "iris_probs.npy"), "wb").write(b"x")),
        ("program", lambda: os.listdir(PROGRAM)),
        ("network", lambda: socket.create_connection(("127.0.0.1", 22), timeout=1))):
    try:
        action()
        results[name] = "allowed"
    except OSError as error:
        results[name] = type(error).__name__
print("PROBE", json.dumps(results), file=sys.stderr)
raise SystemExit("probe done")""", prelude="import json, os, socket, sys\nHIDDEN = '@hidden'\n"
                                           "OUTPUT = '@output'\nPROGRAM = '@program'")
    for placeholder, path in (("@hidden", tmp_path / "hidden_ref"),
                              ("@output", tmp_path / "run" / "output"),
                              ("@program", tmp_path / "run" / "ingestion_program")):
        code = code.replace(placeholder, str(path))
    run, result, record = ingest(prepared, tmp_path, code)
    probe_line = next(line for line in record.tasks["iris"].stderr_tail.splitlines()
                      if line.startswith("PROBE"))
    outcome = json.loads(probe_line[len("PROBE "):])
    assert outcome == {"hidden": "PermissionError", "hidden_list": "PermissionError",
                       "output": "PermissionError", "program": "PermissionError",
                       "network": "PermissionError"}, outcome   # seccomp refuses the socket
    assert "unprivileged user: active" in result.stdout
    assert "network namespace (no network): active" in result.stdout
    assert "seccomp active" in result.stdout                  # the unprivileged layers as well
    assert ("Landlock files active" in result.stdout) == (_landlock_abi() > 0)


def _landlock_abi() -> int:
    from ingestion_program.ingest import confine
    try:
        return confine.landlock_abi()
    except confine.Refused:
        return 0


def test_import_error_in_the_submission(prepared, tmp_path):
    run, result, record = ingest(prepared, tmp_path, "import package_that_does_not_exist\n")
    for name in ("iris", "digits"):
        run_record = record.tasks[name]
        assert run_record.status == "failed"
        assert ("importing submission.py failed: ModuleNotFoundError: No module named "
                "'package_that_does_not_exist'") in run_record.message
        assert run_record.failure == failures.IMPORT_ERROR
        assert f"[{name}]   Import error: importing submission.py failed" in result.stdout


def test_empty_submission(prepared, tmp_path):
    run, result, record = ingest(prepared, tmp_path, None)
    assert "the submission has no submission.py at its root" in result.stdout
    assert {name: r.status for name, r in record.tasks.items()} == dict.fromkeys(
        DEVELOPMENT_TASKS, "failed")
    assert "No module named 'submission'" in record.tasks["iris"].message
    assert record.tasks["iris"].failure == failures.DID_NOT_START     # no file: never began


def test_missing_function_is_named(prepared, tmp_path):
    run, result, record = ingest(prepared, tmp_path, "def fit(task):\n    pass\n")
    assert "submission.py defines no function predict(task, x_train, y_train, x_test, " \
           "checkpoint)" in record.tasks["iris"].message
    assert record.tasks["iris"].failure == failures.DID_NOT_START


def test_symbolic_links_in_the_submission_are_not_followed(prepared, tmp_path):
    run = new_run(prepared, tmp_path, submission("return uniform(task)"))
    os.symlink(tmp_path / "hidden_ref" / "iris_probs.npy", run / "run" / "program" / "leak.npy")
    result = run_ingestion(run)
    assert "symbolic links in the submission are not copied: leak.npy" in result.stdout


def test_broken_config_is_reported_for_the_organizer(prepared, tmp_path):
    run = new_run(prepared, tmp_path, submission("return uniform(task)"))
    config = run / "run" / "ingestion_program" / "ingestion_config.json"
    raw = json.loads(config.read_text())
    raw["tasks"][0]["budget_seconds"] = -1
    config.write_text(json.dumps(raw))
    result = run_ingestion(run)
    assert result.returncode == 1
    assert "ingestion stopped, the organizer must fix" in result.stderr
    assert "budget_seconds: must be positive" in result.stderr and "Traceback" not in result.stderr


def test_scorer_reads_what_ingestion_wrote(prepared, scoring_root, tmp_path):
    """The hand-over: ingestion output becomes the scorer's res/ and its record is honoured."""
    from scoring_harness import new_run as new_scoring_run, read_scores, run_scoring
    run, result, record = ingest(prepared, tmp_path / "ingest",
                                 submission("raise RuntimeError('diverged')"))
    scoring = new_scoring_run(scoring_root, tmp_path / "score")
    shutil.rmtree(scoring / "input" / "res")
    shutil.copytree(run / "run" / "output", scoring / "input" / "res")
    outcome = run_scoring(scoring)
    assert outcome.returncode == 0, outcome.stderr
    assert ("task iris penalised: Raised an exception: training run failed: predict() raised "
            "RuntimeError: diverged") in outcome.stderr
    # their own frames follow, not the ingestion's
    assert "task iris:   | RuntimeError: diverged" in outcome.stderr
    assert "ingest_runtime" not in outcome.stderr
    scores = read_scores(scoring)
    assert scores["iris_agreement"] == 0.0 and scores["digits_total_variation"] > 0.5
    assert 0 <= scores["digits_train_seconds"] < BUDGET_SECONDS     # measured, not the penalty


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch users")
def test_probe_reports_a_sandbox_user_that_cannot_start_python(monkeypatch):
    from ingestion_program.ingest import sandbox
    monkeypatch.setattr(sandbox.sys, "executable", "/nonexistent/python3")
    problem = sandbox._probe_sandbox_user(65534, 65534)
    assert problem and "cannot start /nonexistent/python3" in problem and "runs as root" in problem


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch users")
@pytest.mark.parametrize("readable", [True, False])
def test_probe_reports_a_numpy_the_sandbox_user_cannot_read(monkeypatch, readable):
    """The probe reads numpy where an import would find it first: a package on PYTHONPATH that
    the sandbox user may enter but not read fails it, as the child's import would fail."""
    from ingestion_program.ingest import sandbox
    shadow = Path(tempfile.mkdtemp(prefix="probe-shadow-"))    # pytest's tmp_path is root-only
    try:
        shadow.chmod(0o755)
        (shadow / "numpy").mkdir(mode=0o711)
        (shadow / "numpy" / "__init__.py").write_text("")
        (shadow / "numpy" / "__init__.py").chmod(0o644 if readable else 0o600)
        monkeypatch.setenv("PYTHONPATH", str(shadow))
        problem = sandbox._probe_sandbox_user(65534, 65534)
    finally:
        shutil.rmtree(shadow)
    if readable:
        assert problem is None
    else:
        assert problem and "with numpy (exit status 1)" in problem and "runs as root" in problem


def _forge_unsigned(res: Path) -> None:
    record = json.loads((res / "ingestion_record.json").read_text())
    record.pop("signature")
    (res / "ingestion_record.json").write_text(json.dumps(record))


def _swap_prediction(res: Path) -> None:
    probs = np.load(res / "digits_probs.npy")
    probs[0] = np.eye(probs.shape[1])[0]          # the first point now sure of class 0
    np.save(res / "digits_probs.npy", probs)


@pytest.mark.parametrize("tamper, message", [
    (lambda res: (res / "ingestion_record.json").unlink(), "holds no readable ingestion_record.json"),
    (_forge_unsigned, "ingestion_record.json is not signed"),
    (_swap_prediction, "digits_probs.npy differs from what the ingestion program wrote"),
])
def test_scorer_refuses_output_that_is_not_the_ingestions(uniform_run, scoring_root, tmp_path,
                                                         tamper, message):
    """On CodaLab a zip without metadata skips the ingestion and its files are scored as they
    are: in a code phase the scorer accepts only what the ingestion signed. The ingestion's
    output is the shared uniform run's, copied before it is tampered with."""
    from scoring_harness import new_run as new_scoring_run, read_unscored, run_scoring
    from scoring_program.scorer.main import NOTHING_SCORED
    run, _, record = uniform_run
    assert record.signature and set(record.files) == {f"{task}_probs.npy"
                                                      for task in DEVELOPMENT_TASKS}
    scoring = new_scoring_run(scoring_root, tmp_path / "score")
    shutil.rmtree(scoring / "input" / "res")
    shutil.copytree(run / "run" / "output", scoring / "input" / "res")
    tamper(scoring / "input" / "res")
    outcome = run_scoring(scoring)
    # no task scored: the submission fails (and uses up no submission)
    assert outcome.returncode == NOTHING_SCORED, outcome.stderr
    for task in ("iris", "digits"):
        assert (f"task {task} penalised: Wrong phase's files: training run invalid: this phase "
                "scores what your code") in outcome.stderr
    assert message in outcome.stderr and "Prediction files are not accepted" in outcome.stderr
    assert read_unscored(scoring)["iris_agreement"] == 0.0

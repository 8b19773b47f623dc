"""The ingestion's two memory rules (``limits.memory_rule``), on the label accuracy kind.

``address_space`` is RLIMIT_AS on each process; ``resident`` is the supervisor summing the
resident memory of the task's processes every 100 ms, which GPU code (CUDA, JAX, PyTorch
reserve far more address space than they use) survives. The JAX tests run the ingestion
with the main environment's interpreter, the one with jax (CPU only here: no GPU).
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bundle.phase_data import stage_input_data, stage_reference_data
from bundle.phase_plan import phase_plan
from bundle.programs import assemble_ingestion_program
from bundle.spec import load_spec
from runtime.formats import read_run_record
from ingestion_harness import TEST_LIMITS, new_run, processes_of, run_ingestion

REPO = Path(__file__).resolve().parents[1]
LABELS_SPEC = REPO / "kinds" / "label_accuracy" / "default_spec.yaml"
MAIN_PYTHON = str(REPO / ".venv" / "bin" / "python")
LIMIT = int(0.75 * 2**30)

JAX_STEP = """
import numpy as np

def predict(task, x_train, y_train, x_test):
    import jax
    import jax.numpy as jnp
    x = jnp.asarray(x_train, jnp.float32)
    y = jax.nn.one_hot(jnp.asarray(y_train), task.num_classes)

    def loss(w):
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(x @ w), axis=1))
    step = jax.jit(lambda w: w - 0.1 * jax.grad(loss)(w))
    w = jnp.zeros((x.shape[1], task.num_classes))
    for _ in range(20):
        w = step(w)
    print("devices:", jax.devices(), "loss:", float(loss(w)))
    return np.asarray(jnp.argmax(jnp.asarray(x_test, jnp.float32) @ w, axis=1))
"""

# iris grows by 64 MiB every 20 ms up to 4 GiB, touching every page; wine does nothing.
GROWS = """
import time
import numpy as np

def predict(task, x_train, y_train, x_test):
    if task.name == "iris":
        held = []
        for _ in range(64):
            held.append(np.ones(8 * 2**20))
            time.sleep(0.02)
    return np.zeros(task.n_test, dtype=int)
"""

# iris forks: each process holds 400 MiB, under the 0.75 GiB limit alone, over it together.
FORKS = """
import os
import time
import numpy as np

def predict(task, x_train, y_train, x_test):
    if task.name == "iris":
        child = os.fork()
        held = np.ones(50 * 2**20)
        time.sleep(30)
        if child == 0:
            os._exit(0)
    return np.zeros(task.n_test, dtype=int)
"""

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def nothing_left_behind(tmp_path):
    yield
    assert processes_of(tmp_path) == [], "processes left behind"


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """rule -> a prepared label accuracy evaluation phase with a 0.75 GiB memory limit."""
    plan = phase_plan(load_spec(LABELS_SPEC), "evaluation", code_submission=True,
                      budget_seconds=20.0)
    prepared = {}
    for rule in ("address_space", "resident"):
        root = tmp_path_factory.mktemp(rule)
        assemble_ingestion_program(plan, root / "ingestion_program",
                                   {**TEST_LIMITS, "memory_bytes": LIMIT, "memory_rule": rule})
        stage_input_data(plan, root / "input")
        stage_reference_data(plan, root / "hidden_ref")
        prepared[rule] = root
    return prepared


def ingest(prepared: Path, tmp_path: Path, code: str, python: str | None = None):
    run = new_run(prepared, tmp_path, code)
    result = run_ingestion(run, python=python)
    assert result.returncode == 0, result.stdout + result.stderr
    return run, result, read_run_record(run / "run" / "output" / "ingestion_record.json")


def test_a_jax_training_step_runs_under_the_resident_rule(programs, tmp_path):
    run, result, record = ingest(programs["resident"], tmp_path, JAX_STEP, MAIN_PYTHON)
    for task in ("iris", "wine"):
        assert record.tasks[task].status == "ok", record.tasks[task].message
        assert "devices:" in (run / "run" / "output" / f"{task}_stdout.txt").read_text()
    assert "rule: resident" in result.stdout and "sampled every 100 ms" in result.stdout
    assert "GPU memory is not limited by the ingestion" in result.stdout
    assert "highest resident memory sampled" in result.stdout


def test_the_same_step_fails_under_an_address_space_limit_of_the_same_size(programs, tmp_path):
    """On this machine JAX's CPU runtime needs about 1.1 GiB of address space for a step
    whose resident memory is about 70 MiB: under 0.75 GiB of RLIMIT_AS it dies in native
    code (pthread_create or std::bad_alloc, SIGABRT), or, as often, its std::bad_alloc reaches
    Python as a MemoryError: either way the task fails, and its message names the limit."""
    _, result, record = ingest(programs["address_space"], tmp_path, JAX_STEP, MAIN_PYTHON)
    assert "rule: address_space" in result.stdout
    for task in ("iris", "wine"):
        run = record.tasks[task]
        assert run.status == "failed", run.message
        assert "0.75 GiB of address space per process" in run.message, run.message


def test_the_resident_rule_stops_a_task_that_grows_past_its_limit(programs, tmp_path):
    run, result, record = ingest(programs["resident"], tmp_path, GROWS)
    iris = record.tasks["iris"]
    assert iris.status == "failed" and iris.prediction is None
    assert "GiB of host RAM, over its memory limit of 0.75 GiB (rule: resident" in iris.message
    # The figure has two decimals: a use just over 0.75 GiB reads "0.75". Stopped on its way,
    # not at the end: it was killed before it returned (no prediction, not timed out).
    used = float(iris.message.split("used ")[1].split(" GiB")[0])
    assert used >= 0.75
    assert record.tasks["wine"].status == "ok"
    assert "[iris]   Exceeded memory: used" in result.stdout     # its category first


def test_the_resident_rule_sums_every_process_of_the_task(programs, tmp_path):
    run, result, record = ingest(programs["resident"], tmp_path, FORKS)
    iris = record.tasks["iris"]
    assert iris.status == "failed", iris.message
    assert "over its memory limit of 0.75 GiB (rule: resident" in iris.message
    assert record.tasks["wine"].status == "ok"


def test_the_address_space_rule_still_limits_one_allocation(programs, tmp_path):
    _, _, record = ingest(programs["address_space"], tmp_path, GROWS)
    iris = record.tasks["iris"]
    assert iris.status == "failed" and "MemoryError" in iris.message
    assert "the memory limit is 0.75 GiB of address space per process" in iris.message


def test_the_workers_choice_of_gpus_reaches_the_code(programs, tmp_path):
    code = ("import os\nimport numpy as np\n\ndef predict(task, x_train, y_train, x_test):\n"
            "    print('visible:', os.environ.get('CUDA_VISIBLE_DEVICES'))\n"
            "    return np.zeros(task.n_test, dtype=int)\n")
    run = new_run(programs["resident"], tmp_path, code)
    result = run_ingestion(run, env={"CUDA_VISIBLE_DEVICES": "1"})
    assert result.returncode == 0, result.stderr
    assert "visible: 1" in (run / "run" / "output" / "iris_stdout.txt").read_text()


def test_processes_the_task_did_not_start_are_neither_counted_nor_killed(tmp_path):
    """Run in this process, beside a child of the test holding more than the limit."""
    from ingestion_program.ingest import main as ingestion_main
    from ingestion_program.ingest import supervisor
    from ingestion_program.ingest.config import Limits, TaskSpec
    from ingestion_program.ingest.processes import resident_bytes
    from ingestion_program.ingest.sandbox import Protections
    from kinds.kind import ingestion_runtime

    contract = ingestion_runtime("label_accuracy")
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "submission.py").write_text(     # 64 MiB for half a second
        "import time\n\ndef predict(task, x_train, y_train, x_test):\n"
        "    held = bytearray(64 * 2**20)\n    time.sleep(0.5)\n    return [0, 1, 0]\n")
    np.savez(tmp_path / "inputs.npz", x_train=np.zeros((4, 2)), y_train=np.array([0, 1, 0, 1]),
             x_test=np.zeros((3, 2)))
    (tmp_path / "work").mkdir()
    staging = supervisor.Staging(
        ingestion_main._stage_runtime(tmp_path / "task", ingestion_main._runtime_sources(
            REPO / "ingestion_program", contract)),
        tmp_path / "submission", tmp_path / "inputs.npz", tmp_path / "work")
    task = TaskSpec("iris", "classification", "inputs.npz", "iris_labels", 20.0,
                    {"n_test": 3, "num_classes": 2})
    limits = Limits(256 * 2**20, 2**24, 2**26, 64, 16, 1.0, 4096, 1, memory_rule="resident")
    bystander = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; held = bytearray(400 * 2**20); "
         "print('ready', flush=True); time.sleep(120)"], stdout=subprocess.PIPE, text=True)
    try:
        assert bystander.stdout.readline() == "ready\n"
        assert resident_bytes([bystander.pid]) > limits.memory_bytes     # it would count
        outcome = supervisor.run_task(
            task, staging, Protections(None, None, False, False, disabled=("landlock", "seccomp")),
            limits, ("submission", "predict"), contract)
        assert outcome.status == "ok", outcome.message
        assert 64 < outcome.resident_peak_mb < 256
        assert bystander.poll() is None, "the bystander was killed"
    finally:
        bystander.kill()
        bystander.wait()


def test_configs_without_the_rule_mean_address_space_and_others_are_refused():
    from ingestion_program.ingest.config import ConfigError, parse_config
    from bundle.programs import ingestion_config
    plan = phase_plan(load_spec(LABELS_SPEC), "evaluation", code_submission=True)
    config = ingestion_config(plan)
    config["limits"].pop("memory_rule", None)
    assert parse_config(config).limits.memory_rule == "address_space"
    config["limits"]["memory_rule"] = "virtual"
    with pytest.raises(ConfigError, match=r"limits.memory_rule: expected one of address_space, "
                                          r"resident, found 'virtual'"):
        parse_config(json.loads(json.dumps(config)))


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU machine: run it by hand")
def test_the_gpu_benchmark_runs_on_a_machine_without_a_gpu_and_says_so():
    result = subprocess.run(
        [MAIN_PYTHON, str(REPO / "benchmarks" / "gpu_sandbox.py"), "--framework", "jax",
         "--size", "64", "--batch", "64", "--steps", "2", "--budget", "60"],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("no GPU found")
    for rule in ("resident", "address_space"):
        assert f"| {rule} | ok | jax " in result.stdout
    assert "child confinement:" in result.stdout


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU machine: run it by hand")
def test_the_gpu_benchmark_runs_a_retina_kit_baseline_as_a_gpu_competition():
    """--retina: the image phase's kit for the GPU image (resident rule), a kit baseline run
    by the kit's own run_local, a row per task (here the numpy CNN, on the CPU). Three
    seconds a task: small_cnn trains while the budget lasts, keeping back twice the time its
    prediction takes at the pace it measured, plus a second, so a slower machine trains less
    and still ends in time; each second more was a second of CPU per task, asserted on by
    nothing here."""
    result = subprocess.run(
        [MAIN_PYTHON, str(REPO / "benchmarks" / "gpu_sandbox.py"), "--retina", "small_cnn",
         "--image-budget", "3"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("no GPU found")
    for task in ("digits_acquisition", "digits_severity"):
        assert f"| {task} | ok |" in result.stdout, result.stdout
    assert "rule: resident" in result.stdout

"""Generate every embedded task's data, HMC references, diagnostics and manifest.

Two engines. ``nuts`` (the default): BlackJAX's NUTS with window adaptation, every chain of a
task at once on the local devices (``nuts.py``). ``numpy-hmc``: our numpy HMC with a fixed
trajectory length, chains in parallel worker processes (one BLAS thread each: the matrices are
small, so processes scale and threads only contend), kept as the cross-check. Every file
written is a pure function of the task declarations, their seeds and the engine; wall times go
to a separate log, outside the references.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import json
import multiprocessing
import os
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from kinds.bdl2021.runtime.formats import (TaskInputs, write_batch_means, write_chain_probs,
                                           write_chain_samples, write_classification_probs,
                                           write_reference_mcse, write_regression_reference,
                                           write_task_inputs)
from runtime.formats.matrix_files import write_matrix

from .chains import ChainPredictions, run_task_chain, task_model
from .datasets import PreparedTask, prepare
from .expectation_file import write_expectation
from .manifest import write_manifest
from .gate import gate_problems, gate_summary
from .references import TaskReferences, build_references
from .task_files import (GENERATION_LOG_NAME, MANIFEST_NAME, UNLISTED_IN_MANIFEST, TaskFiles,
                         task_files)
from .tasks import REGRESSION_SAMPLES, TaskDeclaration

SINGLE_THREAD_ENV = {name: "1" for name in (
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")}
PROGRESS_STEPS = 10   # progress lines per chain and stage
ENGINES = {"nuts": "BlackJAX NUTS (max tree depth 10), Stan's window adaptation of the step "
                   "size and a diagonal mass matrix, float64",
           "numpy-hmc": "numpy HMC, fixed trajectory length, dual-averaging step size, "
                        "identity mass matrix"}
DEFAULT_ENGINE = "nuts"
# The BlackJAX engine's other sampler (``generate --sampler hmc``, ``fixed_hmc.py``).
FIXED_HMC_ENGINE = ("BlackJAX HMC, fixed trajectory length, step size fixed or by dual "
                    "averaging in warm-up, identity mass matrix, float64")


def machine_cpu() -> str:
    """The CPU model and a digest of its instruction-set flags (Linux's /proc/cpuinfo, else the
    platform's word for it): the code XLA and BLAS run, hence the files' last bits, follow
    them, so the files repeat to the byte where both are the same."""
    import hashlib
    try:
        fields = {key.strip(): value for key, value in (
            line.split(":", 1) for line in
            Path("/proc/cpuinfo").read_text().split("\n\n")[0].splitlines() if ":" in line)}
    except OSError:
        fields = {}
    model = fields.get("model name", "").strip() or platform.processor() or platform.machine()
    flags = fields.get("flags", "").split()
    digest = hashlib.sha256(" ".join(sorted(flags)).encode()).hexdigest()[:12]
    return f"{model}, flags {digest}" if flags else model


def _chain_job(task: TaskDeclaration, chain_index: int, queue) -> tuple[str, ChainPredictions, float]:
    started = time.perf_counter()
    every = max(1, max(task.hmc.num_warmup, task.hmc.num_samples) // PROGRESS_STEPS)

    def progress(stage: str, done: int, total: int) -> None:
        if done == total or done % every == 0:
            queue.put((task.name, chain_index, stage, done, total))

    result = run_task_chain(task, prepare(task), chain_index, progress)
    return task.name, result, time.perf_counter() - started


def _declaration_json(task: TaskDeclaration, prepared: PreparedTask, files, engine: str,
                      sampler=None) -> dict:
    model = task_model(task, prepared)
    outputs = {"num_classes": int(prepared.y_train.max()) + 1} if task.kind == "classification" \
        else {"num_samples": REGRESSION_SAMPLES}
    return {
        "name": task.name, "phase": task.phase, "summary": task.summary, "kind": task.kind,
        **outputs,
        "dataset": f"sklearn.datasets.load_{task.dataset}",
        "n_train": len(prepared.x_train), "n_test": len(prepared.x_test),
        "input_shape": list(prepared.x_train.shape[1:]),
        "test_blocks": [asdict(block) for block in prepared.blocks],
        "model": model_declaration(task, model),
        "likelihood": ({"name": "softmax", "definition": "y ~ Categorical(softmax(f(x)))"}
                       if task.kind == "classification" else
                       {"name": "gaussian", "definition":
                        "f(x) = (mu, r); y ~ Normal(mu, softplus(r)^2)"}),
        "prior": {"distribution": "normal", "mean": 0.0, "variance": task.prior_variance,
                  "applies_to": "every weight and bias"},
        "split": ({"method": "gap", "feature": task.gap_feature,
                   "definition": "sorted by the feature, the middle third is the test set"}
                  if task.split == "gap" else
                  {"method": "stratified", "test_fraction": task.test_fraction,
                   "random_state": task.seed}),
        "standardisation": prepared.standardisation,
        "hmc": sampler_settings(task, engine, sampler),
        "files": {role: path.name for role, path in files.all().items()},
    }


# What the NUTS engine takes from a task's HMC settings; the rest (trajectory length, initial
# step size, step cap) steer only the numpy engine, so a NUTS reference does not state them.
NUTS_SETTINGS = ("num_chains", "num_warmup", "num_samples", "target_acceptance")


def sampler_settings(task: TaskDeclaration, engine: str, sampler=None) -> dict:
    """The settings the engine used, as the declaration states them; ``sampler``: the
    fixed-trajectory HMC's (``fixed_hmc.FixedHMC``), None for NUTS (whose statement is
    unchanged, so that the committed references still verify byte for byte)."""
    settings = asdict(task.hmc)
    if sampler is not None:
        return {**{key: settings[key] for key in NUTS_SETTINGS[:3]},
                **sampler.settings(task.prior_variance, task.hmc.target_acceptance),
                "engine": FIXED_HMC_ENGINE}
    if engine == "nuts":
        from .nuts import MAX_TREE_DEPTH
        settings = {**{key: settings[key] for key in NUTS_SETTINGS},
                    "max_tree_depth": MAX_TREE_DEPTH}
    return {**settings, "engine": ENGINES[engine]}


def model_declaration(task: TaskDeclaration, model) -> dict:
    """The ``model`` participants must follow, with its parameter count and order."""
    if task.network is None:
        return {"type": "mlp", "activation": "tanh", "layer_sizes": list(model.layer_sizes),
                "num_parameters": model.num_parameters,
                "parameter_order": "per layer: weight (in x out, row-major) then bias"}
    return {**task.network, "num_parameters": model.num_parameters,
            "parameter_order": [[p.name, list(p.shape)] for p in model.parameters]}


def write_task(root: Path, task: TaskDeclaration, prepared: PreparedTask,
               references: TaskReferences, engine: str = DEFAULT_ENGINE, sampler=None) -> None:
    files = task_files(root, task.name, task.kind)
    files.folder.mkdir(parents=True, exist_ok=True)
    hidden_labels = np.zeros_like(prepared.y_test)
    write_task_inputs(files.inputs, TaskInputs(prepared.x_train, prepared.y_train,
                                               prepared.x_test, hidden_labels))
    write_matrix(files.test_labels, prepared.y_test.reshape(-1, 1))
    write_references(files, task, references, sampler)
    _write_json(files.declaration, _declaration_json(task, prepared, files, engine, sampler))


def write_references(files, task, references: TaskReferences, sampler=None) -> None:
    """The model average, each chain's predictive (and batch means), the Monte Carlo standard
    errors and the diagnostics of one task; with ``sampler`` (fixed-trajectory HMC) the
    diagnostics name it and its settings (NUTS's diagnostics stay as they were)."""
    if task.kind == "classification":
        write_classification_probs(files.reference, references.bma)
        write_chain_probs(files.chain_reference, references.chains)
        write_batch_means(files.batch_means, references.batch_means)
    else:
        write_regression_reference(files.reference, references.bma)
        write_chain_samples(files.chain_reference, references.chains)
    write_reference_mcse(files.reference_mcse, references.mcse)
    write_expectation(files, None if task.kind == "classification" else REGRESSION_SAMPLES)
    named = ({} if sampler is None else
             {"sampler": sampler.settings(task.prior_variance, task.hmc.target_acceptance)})
    _write_json(files.diagnostics, {"task": task.name, **named, **references.diagnostics})


def _write_json(path: Path, content: dict) -> None:
    path.write_text(json.dumps(content, indent=1) + "\n")


class ProgressPrinter:
    """One line per progress report: readable in a terminal and in a CI log alike."""

    def __init__(self, tasks: list[TaskDeclaration], stream=None):
        self.total = sum(task.hmc.num_chains for task in tasks)
        self.finished = 0
        self.started = time.perf_counter()
        self._stream = stream

    @property
    def stream(self):
        return self._stream or sys.stderr    # looked up late, so redirection is honoured

    def report(self, task: str, chain: int, stage: str, done: int, total: int) -> None:
        print(f"[{self._elapsed()}] {task} chain {chain}: {stage} {done}/{total}",
              file=self.stream, flush=True)

    def chain_done(self, task: str, result: ChainPredictions, seconds: float) -> None:
        self.finished += 1
        print(f"[{self._elapsed()}] {task} chain {result.chain_index} done in {seconds:.0f}s "
              f"(step size {result.step_size:.3g}, {result.num_steps:g} leapfrog steps, "
              f"acceptance {result.acceptance_rate:.2f}) - {self.finished}/{self.total} chains",
              file=self.stream, flush=True)

    def _elapsed(self) -> str:
        seconds = int(time.perf_counter() - self.started)
        return f"{seconds // 60:02d}:{seconds % 60:02d}"


def _cost(task: TaskDeclaration) -> float:
    prepared = prepare(task)
    return len(prepared.x_train) * task_model(task, prepared).num_parameters \
        * task.hmc.trajectory_length / task.hmc.initial_step_size


def run_chains(tasks: list[TaskDeclaration], jobs: int, printer: ProgressPrinter):
    """Every chain of every task, costliest tasks first so the workers finish together."""
    for name, value in SINGLE_THREAD_ENV.items():
        os.environ.setdefault(name, value)   # inherited by the spawned workers
    context = multiprocessing.get_context("spawn")
    results: dict[str, list[ChainPredictions]] = {task.name: [] for task in tasks}
    seconds: dict[str, float] = {task.name: 0.0 for task in tasks}
    with context.Manager() as manager, concurrent.futures.ProcessPoolExecutor(
            max_workers=jobs, mp_context=context) as pool:
        queue = manager.Queue()
        futures = [pool.submit(_chain_job, task, chain, queue)
                   for task in sorted(tasks, key=_cost, reverse=True)
                   for chain in range(task.hmc.num_chains)]
        pending = set(futures)
        while pending:
            done, pending = concurrent.futures.wait(pending, timeout=0.5)
            _drain(queue, printer)
            for future in done:
                name, result, wall = future.result()
                results[name].append(result)
                seconds[name] += wall
                printer.chain_done(name, result, wall)
        _drain(queue, printer)
    return results, seconds


def run_chains_nuts(tasks: list[TaskDeclaration], printer: ProgressPrinter, prepared_of=None,
                    shard_data: bool = False, run_options=None, sampler=None):
    """Every task in turn, its chains at once on NUTS, or on the fixed-trajectory HMC of
    ``sampler`` (the devices run them in parallel); ``prepared_of(task)``: its arrays
    (default: the embedded task's)."""
    from .chains import run_task_chains_nuts
    results, seconds = {}, {}
    for task in tasks:
        settings = task.hmc
        print(f"[{printer._elapsed()}] {task.name}: {_sampler_words(task, sampler)}, "
              f"{settings.num_chains} chains x "
              f"({settings.num_warmup} warm-up + {settings.num_samples} kept draws), compiling "
              "and sampling", file=printer.stream, flush=True)
        started = time.perf_counter()
        with transitions_bar(task, printer, run_options is not None) as bar:
            results[task.name] = run_task_chains_nuts(task, (prepared_of or prepare)(task),
                                                      shard_data=shard_data,
                                                      run_options=run_options, sampler=sampler,
                                                      progress=bar)
        seconds[task.name] = time.perf_counter() - started
        for chain in results[task.name]:
            printer.chain_done(task.name, chain, seconds[task.name])
    return results, seconds


@contextlib.contextmanager
def transitions_bar(task: TaskDeclaration, printer: ProgressPrinter, elsewhere: bool):
    """A bar over a task's transitions while its chains run in one compiled program, on a
    terminal only (None elsewhere: nothing is compiled in for it). The cluster path
    (``elsewhere``) gets none: its chunks print their own lines."""
    from bundle.progress import Progress
    bar = Progress(task.hmc.num_warmup + task.hmc.num_samples, f"{task.name} sampling",
                   "transitions", stream=printer.stream)
    try:
        yield bar if bar.shown and not elsewhere else None
    finally:
        bar.close()


def _sampler_words(task: TaskDeclaration, sampler) -> str:
    if sampler is None:
        return "NUTS"
    step = ("step size by dual averaging" if sampler.step_size is None
            else f"step size {sampler.step_size:g}")
    return (f"HMC (trajectory length {sampler.trajectory_for(task.prior_variance):.3g}, "
            f"{step})")


def _drain(queue, printer: ProgressPrinter) -> None:
    while not queue.empty():
        printer.report(*queue.get())


@contextlib.contextmanager
def staging_folder(destination: Path):
    """A fresh folder next to ``destination``: on the same filesystem, so what is written
    there moves into place by a rename; removed at the end, whatever happens."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f".{destination.name}.partial-",
                                   dir=destination.parent))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def failed_folder(destination: Path) -> Path:
    """Where a run whose references fail the gate leaves them, for inspection."""
    return destination.parent / f"{destination.name}.failed"


def _place(staged: Path, destination: Path, failed: Path, problems: list[str]) -> None:
    """References that passed the gate replace the destination's, file by file (a rename
    each); others replace the previous failed run's output and leave the destination as it
    was."""
    if problems:
        shutil.rmtree(failed, ignore_errors=True)
        failed.parent.mkdir(parents=True, exist_ok=True)
        staged.rename(failed)
        return
    destination.mkdir(parents=True, exist_ok=True)
    for path in sorted(staged.iterdir()):
        os.replace(path, destination / path.name)


def write_generated(tasks: list[TaskDeclaration], results: dict, chain_seconds: dict,
                    root: Path, engine: str = DEFAULT_ENGINE, sampler=None) -> dict:
    """Each task's files, written next to ``root`` and moved into it only if its chains pass
    the convergence gate (else into ``failed_folder(root)``); the log entry of each task."""
    entries = {}
    with staging_folder(root) as staging:
        for task in tasks:
            prepared = prepare(task)
            references = build_references(task, prepared, results[task.name])
            write_task(staging, task, prepared, references, engine, sampler)
            problems = gate_problems(task.name, references.diagnostics)
            _place(staging / task.name, root / task.name, failed_folder(root) / task.name,
                   problems)
            entries[task.name] = {"chain_seconds": round(chain_seconds[task.name], 1),
                                  "gate_passed": not problems, "gate_problems": problems,
                                  "gate": gate_summary(task.name, references.diagnostics)}
    return entries


def write_organizer_references(root: Path, task: TaskDeclaration, references: TaskReferences,
                               sampler=None) -> tuple[list[str], Path | None]:
    """An organizer's task's references, moved next to its inputs only if they pass the
    gate; the gate's problems, and where the failed references were kept (else None)."""
    destination = Path(root) / task.name
    with staging_folder(destination) as staging:
        write_references(TaskFiles(staging, task.name, task.kind), task, references, sampler)
        problems = gate_problems(task.name, references.diagnostics)
        _place(staging, destination, failed_folder(destination), problems)
    return problems, failed_folder(destination) if problems else None


def generate(tasks: list[TaskDeclaration], root: Path, jobs: int,
             printer: ProgressPrinter | None = None, engine: str = DEFAULT_ENGINE,
             shard_data: bool = False, run_options=None, sampler=None) -> dict | str:
    """Run all chains and write the files of every task that passes the convergence gate, with
    the manifest; return the run's log, with each task's gate (its problems, with the
    figures, where it fails). The log goes to ``root`` when a task was written there, and to
    ``failed_folder(root)`` when one failed. With ``run_options`` (several hosts, or
    checkpoints) only process 0 writes; the others return "not process 0". ``sampler``:
    ``fixed_hmc.FixedHMC`` to run fixed-trajectory HMC on the BlackJAX engine instead of
    NUTS."""
    printer = printer or ProgressPrinter(tasks)
    started = time.perf_counter()
    results, chain_seconds = (run_chains_nuts(tasks, printer, shard_data=shard_data,
                                              run_options=run_options, sampler=sampler)
                              if engine == "nuts"
                              else run_chains(tasks, jobs, printer))
    if run_options is not None and not _primary_process():
        return "not process 0"
    log = {"engine": engine, "jobs": jobs, "python": platform.python_version(),
           "numpy": np.__version__,
           "machine": f"{platform.machine()}, {os.cpu_count()} cores", "cpu": machine_cpu(),
           **({} if sampler is None else {"sampler": FIXED_HMC_ENGINE}),
           "tasks": write_generated(tasks, results, chain_seconds, root, engine, sampler)}
    log["wall_seconds"] = round(time.perf_counter() - started, 1)
    outcomes = {entry["gate_passed"] for entry in log["tasks"].values()}
    if True in outcomes:
        _write_json(root / GENERATION_LOG_NAME, log)
        write_manifest(root, MANIFEST_NAME, UNLISTED_IN_MANIFEST)
    if False in outcomes:
        _write_json(failed_folder(root) / GENERATION_LOG_NAME, log)
    return log


def _primary_process() -> bool:
    from .distributed import is_primary
    return is_primary()


def with_overrides(task: TaskDeclaration, num_warmup: int | None, num_samples: int | None,
                   num_chains: int | None) -> TaskDeclaration:
    """The task with other chain lengths or counts (the command line's --warmup, --samples,
    --chains); the declaration written with its references states them."""
    changes = {key: value for key, value in (("num_warmup", num_warmup),
               ("num_samples", num_samples), ("num_chains", num_chains)) if value is not None}
    return replace(task, hmc=replace(task.hmc, **changes)) if changes else task

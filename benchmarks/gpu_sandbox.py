"""A GPU training step as a participant's submission, under the ingestion sandbox, per memory rule.

Builds the label accuracy kind's ingestion program (its iris task alone) and runs it as the
worker does, once with each memory rule (``sandbox.memory_limit``): ``resident`` (no RLIMIT_AS;
the supervisor samples the resident memory of the task's processes) and ``address_space``
(RLIMIT_AS on each process, which CUDA's reservations exceed). The submission's ``predict``
imports PyTorch (else JAX), creates the CUDA context, and times SGD steps of a two-layer
network on a synthetic batch; it prints what it saw, which this script reads back from the
task's stdout file. Printed per rule: the task's status, the device, whether CUDA initialised
(and the framework's words if not), the first step (CUDA context, kernels, compilation) and the
median step, the peak resident memory (the child's ru_maxrss, file pages included, and the
highest resident sum the supervisor sampled), the GPU memory PyTorch allocated, and the
protections the log reports active.

On a machine without a GPU it says so and runs the same steps on the CPU, so the script and
the sandbox path are proven anywhere; those figures are no GPU figures.

Run with an interpreter that has torch or jax (the one running this script by default):

    python benchmarks/gpu_sandbox.py [--framework auto|torch|jax] [--memory-gib 4]
                                     [--size 2048] [--batch 4096] [--steps 50] [--budget 300]

Retina's image baselines (``--retina``): the image phase of Retina's default competition, as
a GPU competition would hold it (docker image ``codalab/codalab-legacy:gpu310``, so the
resident memory rule), built into a starting kit with its hidden references, then a kit
baseline run by that kit's own ``run_local.py`` as a participant with a GPU runs it: the
kit's ingestion and scoring programs, the sandbox, the budgets. ``--synthetic N`` adds a task
of N random 64 x 64 x 3 images (random labels: its scores mean nothing, its time and memory
do). Printed per task: status, the device the baseline used, training seconds of the budget,
peak memory (the child's ru_maxrss, file pages included, and the resident memory sampled),
in-domain AUROC and the joint referral area. Preparing the kit needs the builder's packages;
running a prepared kit needs numpy and the baseline's framework only, so the two can be done
on different machines:

    python benchmarks/gpu_sandbox.py --retina torch_mc_dropout --prepare-kit KIT [--synthetic N]
    python benchmarks/gpu_sandbox.py --retina torch_mc_dropout --kit KIT   # on the GPU machine
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "kinds" / "retina" / "tests")]

LABELS_SPEC = REPO / "kinds" / "label_accuracy" / "default_spec.yaml"
RULES = ("resident", "address_space")
MARK = "GPU_SANDBOX "

SUBMISSION = r'''
import json
import statistics
import time
import warnings

import numpy as np

SETTINGS = __SETTINGS__


def say(**fields):
    print("GPU_SANDBOX " + json.dumps(fields), flush=True)


def timed(step, steps):
    started = time.perf_counter()
    loss = step()
    first = time.perf_counter() - started
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - started)
    return {"first_step_seconds": round(first, 3),
            "step_ms": round(statistics.median(times) * 1000, 3), "loss": round(loss, 4)}


def run_torch(size, batch, steps):
    import torch
    say(stage="torch imported", framework="torch " + torch.__version__)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        started = time.perf_counter()
        cuda = torch.cuda.is_available()
        if cuda:
            torch.zeros(1, device="cuda")
            torch.cuda.synchronize()
    report = {"cuda_initialised": cuda, "init_seconds": round(time.perf_counter() - started, 3),
              "device": torch.cuda.get_device_name(0) if cuda else "cpu",
              "why_not": [str(w.message).strip() for w in caught][:3]}
    say(stage="device chosen", **report)
    device = "cuda" if cuda else "cpu"
    model = torch.nn.Sequential(torch.nn.Linear(size, size), torch.nn.ReLU(),
                                torch.nn.Linear(size, 10)).to(device)
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, size, device=device)
    y = torch.randint(0, 10, (batch,), device=device)

    def step():
        optimiser.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimiser.step()
        if cuda:
            torch.cuda.synchronize()
        return float(loss)
    report.update(timed(step, steps))
    if cuda:
        report["gpu_memory_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return report


def run_jax(size, batch, steps):
    import jax
    import jax.numpy as jnp
    say(stage="jax imported", framework="jax " + jax.__version__)
    started, why_not = time.perf_counter(), []
    try:
        gpus = jax.devices("gpu")
    except RuntimeError as error:
        gpus, why_not = [], [str(error).strip().splitlines()[0]]
    device = gpus[0] if gpus else jax.devices("cpu")[0]
    report = {"cuda_initialised": bool(gpus),
              "init_seconds": round(time.perf_counter() - started, 3),
              "device": getattr(device, "device_kind", str(device)), "why_not": why_not}
    say(stage="device chosen", **report)
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    params = [jax.random.normal(keys[0], (size, size)) / size ** 0.5,
              jax.random.normal(keys[1], (size, 10)) / size ** 0.5]
    x = jax.random.normal(keys[2], (batch, size))
    y = jax.nn.one_hot(jax.random.randint(keys[3], (batch,), 0, 10), 10)
    params, x, y = jax.device_put((params, x, y), device)

    def loss(params):
        hidden = jax.nn.relu(x @ params[0])
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(hidden @ params[1]), axis=1))

    @jax.jit
    def update(params):
        value, grads = jax.value_and_grad(loss)(params)
        return [p - 0.01 * g for p, g in zip(params, grads)], value

    state = {"params": params}

    def step():
        state["params"], value = update(state["params"])
        return float(value.block_until_ready())
    report.update(timed(step, steps))
    return report


def predict(task, x_train, y_train, x_test):
    size, batch, steps = SETTINGS["size"], SETTINGS["batch"], SETTINGS["steps"]
    order = {"auto": (run_torch, run_jax), "torch": (run_torch,), "jax": (run_jax,)}
    report, errors = None, []
    for run in order[SETTINGS["framework"]]:
        try:
            report = run(size, batch, steps)
            break
        except ImportError as error:
            errors.append(f"{run.__name__[4:]}: {error}")
    say(stage="done", **(report or {"error": "; ".join(errors)}))
    return np.zeros(task.n_test, dtype=int)
'''


def gpu_on_host() -> str | None:
    """nvidia-smi's list of GPUs, or None where there is none to be seen."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
                                 timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return listing or None


def prepare(root: Path, rule: str, args) -> Path:
    from bundle.phase_data import stage_input_data, stage_reference_data
    from bundle.phase_plan import phase_plan
    from bundle.programs import assemble_ingestion_program
    from bundle.spec import load_spec
    from ingestion_harness import new_run
    spec = load_spec(LABELS_SPEC)
    plan = phase_plan(spec, "evaluation", code_submission=True, budget_seconds=args.budget)
    plan = dataclasses.replace(plan, tasks=tuple(t for t in plan.tasks if t.name == "iris"))
    prepared = root / f"prepared-{rule}"
    assemble_ingestion_program(plan, prepared / "ingestion_program",
                               {"memory_bytes": int(args.memory_gib * 2**30),
                                "memory_rule": rule})
    stage_input_data(plan, prepared / "input")
    stage_reference_data(plan, prepared / "hidden_ref")
    settings = {"framework": args.framework, "size": args.size, "batch": args.batch,
                "steps": args.steps}
    code = SUBMISSION.replace("__SETTINGS__", repr(settings))
    return new_run(prepared, root / f"run-{rule}", code)


def reports(stdout_file: Path) -> dict:
    """What the submission said, stage by stage (a native crash leaves the last stage)."""
    merged: dict = {}
    if stdout_file.is_file():
        for line in stdout_file.read_text(errors="replace").splitlines():
            if line.startswith(MARK):
                merged.update(json.loads(line[len(MARK):]))
    return merged


STATE = re.compile(r"^(.*?)(?: \([^)]*\))?: (active|NOT ACTIVE)(.*)$")


def protections(log: str) -> list[str]:
    """The log's protection lines, each active one shortened to its name."""
    lines = [line.removeprefix("protection: ") for line in log.splitlines()
             if line.startswith("protection: ") and not line.startswith("protection: limits")]
    lines += [line.split("]", 1)[1].strip() for line in log.splitlines()
              if "child confinement:" in line]
    short = []
    for line in lines:
        match = STATE.match(line)
        short.append(f"{match.group(1)}: active" if match and match.group(2) == "active"
                     else line)
    return short


def run_rule(root: Path, rule: str, args) -> dict:
    from ingestion_harness import run_ingestion
    run = prepare(root, rule, args)
    result = run_ingestion(run, timeout=args.budget + 180, python=args.python)
    output = run / "run" / "output"
    record_file = output / "ingestion_record.json"
    task = json.loads(record_file.read_text())["tasks"]["iris"] if record_file.is_file() else {}
    sampled = re.search(r"highest resident memory sampled (\d+) MiB", result.stdout)
    return {"rule": rule, "exit": result.returncode, "status": task.get("status", "no record"),
            "message": task.get("message", result.stderr.strip()[-500:]),
            "ru_maxrss_mib": task.get("peak_memory_mb"),
            "resident_sampled_mib": int(sampled.group(1)) if sampled else None,
            "protections": protections(result.stdout),
            "limits": next((line for line in result.stdout.splitlines()
                            if line.startswith("protection: limits")), ""),
            **reports(output / "iris_stdout.txt")}


def _cell(value) -> str:
    return "-" if value is None or value == "" else str(value)


def print_results(results: list[dict], gpu: str | None, args) -> None:
    print(f"GPU on this machine: {gpu}" if gpu else
          "no GPU found (nvidia-smi absent or lists none): the figures below are CPU figures")
    print(f"interpreter: {args.python}; memory limit {args.memory_gib:g} GiB; network "
          f"{args.size}x{args.size}+{args.size}x10, batch {args.batch}, {args.steps} timed steps")
    columns = ("rule", "status", "framework", "device", "cuda_initialised", "init_seconds",
               "first_step_seconds", "step_ms", "ru_maxrss_mib", "resident_sampled_mib",
               "gpu_memory_mib")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for result in results:
        print("| " + " | ".join(_cell(result.get(c)) for c in columns) + " |")
    for result in results:
        print(f"\n{result['rule']}: {result['status']}"
              + (f": {result['message']}" if result["message"] else ""))
        for note in result.get("why_not") or []:
            print(f"  why no GPU was used: {note}")
        if result.get("error"):
            print(f"  {result['error']}")
        if result.get("stage") != "done":
            print(f"  the submission's last report: {result.get('stage', 'none')}")
        print(f"  {result['limits']}")
        for line in result["protections"]:
            print(f"  {line}")


# --- Retina's image baselines through a starting kit ---------------------------------------

RETINA_SPEC = REPO / "kinds" / "retina" / "default_spec.yaml"
GPU_IMAGE = "codalab/codalab-legacy:gpu310"
IMAGE_PHASE = "images"
SYNTHETIC = "synthetic"


def prepare_retina_kit(destination: Path, args) -> Path:
    """The image phase's kit for a GPU competition, with the hidden references to score on;
    with ``--synthetic``, a task of random images added to the phase."""
    import yaml
    from bundle.local_run import build_kit
    from bundle.spec import load_spec
    from retina_image_tasks import write_image_task
    spec = yaml.safe_load(RETINA_SPEC.read_text())
    tasks = list(spec["phases"][IMAGE_PHASE]["tasks"])
    work = destination.parent / f"{destination.name}-spec"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if args.synthetic:
        embedded = RETINA_SPEC.parent / "reference" / "embedded"
        for task in tasks:
            shutil.copytree(embedded / task, work / "tasks" / task)
        write_image_task(work / "tasks", SYNTHETIC, args.synthetic, max(args.synthetic // 4, 64), 64)
        spec["data_root"] = str(work / "tasks")
        tasks.append(SYNTHETIC)
    spec["docker_image"] = GPU_IMAGE
    spec["tasks"] = {name: {"budget_seconds": args.image_budget} for name in tasks}
    spec["phases"] = {IMAGE_PHASE: {**spec["phases"][IMAGE_PHASE], "tasks": tasks,
                                    "execution_time_limit": int(len(tasks) * (args.image_budget
                                                                                + 60) + 120)}}
    shutil.copyfile(RETINA_SPEC.parent / spec["logo"], work / spec["logo"])
    (work / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    kit = build_kit(load_spec(work / "spec.yaml"), IMAGE_PHASE, destination,
                    hidden_references=True)
    shutil.rmtree(work / "tasks", ignore_errors=True)
    return kit


def run_retina_kit(kit: Path, baseline: str, python: str, out: Path) -> tuple[int, str]:
    command = [python, "run_local.py", "--code", f"baselines/{baseline}.py", "--out", str(out)]
    result = subprocess.run(command, cwd=kit, capture_output=True, text=True, timeout=3600)
    return result.returncode, result.stdout + result.stderr


def retina_rows(out: Path, log: str) -> list[dict]:
    """Per task: the ingestion record's figures, the device line the baseline printed, the
    resident memory sampled and the scores."""
    records = list(out.rglob("ingestion_record.json"))
    tasks = json.loads(records[0].read_text())["tasks"] if records else {}
    scores = {}
    if "\nscores:\n" in log:
        for line in log.split("\nscores:\n")[1].split("\n\n")[0].splitlines():
            key, _, value = line.partition(":")
            scores[key.strip()] = value.strip()
    rows = []
    for name, task in tasks.items():
        stdout = next(out.rglob(f"{name}_stdout.txt"), None)
        said = stdout.read_text(errors="replace") if stdout else ""
        device = next((line.split("training on", 1)[1].strip() for line in said.splitlines()
                       if "training on" in line), "-")
        gpu_memory = re.findall(r"GPU memory peak (\d+) MiB", said)
        sampled = re.search(rf"\[{name}\] .*highest resident memory sampled (\d+) MiB", log)
        rows.append({"task": name, "status": task.get("status"), "device": device,
                     "training_seconds": round(task.get("training_seconds") or 0.0, 1),
                     "ru_maxrss_mib": task.get("peak_memory_mb"),
                     "resident_sampled_mib": int(sampled.group(1)) if sampled else None,
                     "gpu_memory_mib": gpu_memory[-1] if gpu_memory else None,
                     "auroc_in": scores.get(f"{name}_auroc_in"),
                     "referral_joint": scores.get(f"{name}_referral_joint"),
                     "message": task.get("message", "")})
    return rows


def retina(args, gpu: str | None) -> int:
    if args.prepare_kit:
        kit = prepare_retina_kit(args.prepare_kit.absolute(), args)
        print(f"prepared {kit}: run it with --retina {args.retina} --kit {kit}")
        return 0
    with tempfile.TemporaryDirectory(prefix="gpu-sandbox-retina-") as work:
        kit = args.kit or prepare_retina_kit(Path(work) / "kit", args)
        out = Path(work) / "run"
        code, log = run_retina_kit(kit, args.retina, args.python, out)
        rows = retina_rows(out, log)
    print(f"GPU on this machine: {gpu}" if gpu else
          "no GPU found (nvidia-smi absent or lists none): the figures below are CPU figures")
    print(f"interpreter: {args.python}; baseline {args.retina}; run_local exit {code}")
    columns = ("task", "status", "device", "training_seconds", "ru_maxrss_mib",
               "resident_sampled_mib", "gpu_memory_mib", "auroc_in", "referral_joint")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(_cell(row.get(c)) for c in columns) + " |")
    for row in rows:
        if row["message"]:
            print(f"{row['task']}: {row['message']}")
    if not rows or code != 0:
        print(log[-4000:])
    for line in log.splitlines():
        if line.startswith(("protection: limits", "protection: memory")):
            print(line)
    return 0 if rows and code == 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--framework", choices=("auto", "torch", "jax"), default="auto")
    parser.add_argument("--memory-gib", type=float, default=4.0,
                        help="the task's memory limit under both rules (the default spec's)")
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--budget", type=float, default=300.0, help="the task's seconds")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter of the ingestion and the submission")
    parser.add_argument("--retina", metavar="BASELINE",
                        help="run this Retina kit baseline on the image phase instead")
    parser.add_argument("--prepare-kit", type=Path, metavar="DIR",
                        help="with --retina: only build the kit into DIR")
    parser.add_argument("--kit", type=Path, metavar="DIR",
                        help="with --retina: run a kit prepared by --prepare-kit")
    parser.add_argument("--synthetic", type=int, default=0, metavar="N",
                        help="with --retina: add a task of N random 64x64x3 images")
    parser.add_argument("--image-budget", type=float, default=60.0,
                        help="with --retina: each image task's budget in seconds")
    args = parser.parse_args()
    gpu = gpu_on_host()
    if args.retina:
        return retina(args, gpu)
    with tempfile.TemporaryDirectory(prefix="gpu-sandbox-") as work:
        results = [run_rule(Path(work), rule, args) for rule in RULES]
    print_results(results, gpu, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

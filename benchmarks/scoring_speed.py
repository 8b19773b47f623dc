"""Scoring speed and memory at the real 2021 sizes, against the original pipeline, same run.

Writes a full extended-track submission and its references at the sizes of the 2021
evaluation phase (retinopathy 42,670 x 2, CIFAR-10 50,000 x 10 in 5 blocks, MedMNIST
2,000 x 7, UCI-gap 256 test points x 1,000 samples against a 1,000 x 256 reference, plus
4 per-chain references each), then times:

  (a) our scoring program as the worker runs it: a new process, from start to exit,
      detailed results included;
  (b) the 2021 way: np.loadtxt of every file, argmax agreement, total variation and
      scipy.stats.wasserstein_distance row by row; timed both as a whole process
      (interpreter start and imports included, like (a)) and in-process (work only).

Target: (a) <= 0.5 x (b), and (a)'s peak memory <= 3 x the bytes of the arrays it parses.
Prints the ratios. Usage: .venv/bin/python benchmarks/scoring_speed.py [--repeat N]
[--keep DIR] [--screenshot PNG] [--scale FRACTION]

--scale writes that fraction of each task's test rows (classes and samples per row kept): the
same files, programs and steps, for a test that the benchmark runs to the end; its figures are
not the 2021 sizes' then.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bundle.phase_plan import PhasePlan, load_planned_task  # noqa: E402
from bundle.phase_data import stage_reference_data
from bundle.programs import assemble_scoring_program  # noqa: E402
from runtime.formats import write_matrix  # noqa: E402
from kinds.bdl2021.runtime.formats import write_chain_probs, write_chain_samples

CHAINS = 4
TASKS = {   # name: (kind, N, classes or samples, blocks)
    "retinopathy": ("classification", 42_670, 2, 1),
    "cifar": ("classification", 50_000, 10, 5),
    "medmnist": ("classification", 2_000, 7, 1),
    "uci": ("regression", 256, 1_000, 1),
}
IMAGE_PYTHON = REPO / ".venv-image" / "bin" / "python"

ORIGINAL_PIPELINE = r'''
import sys, time
started = time.perf_counter()
import numpy as np
from scipy.stats import wasserstein_distance
imported = time.perf_counter()
res, ref = sys.argv[1], sys.argv[2]
for name in ("retinopathy", "cifar", "medmnist"):
    p = np.loadtxt(f"{res}/{name}_probs.csv")
    q = np.loadtxt(f"{ref}/{name}_probs.csv")
    agreement = np.mean(np.argmax(p, axis=1) == np.argmax(q, axis=1))
    tv = np.mean(np.sum(np.abs(p - q), axis=1)) / 2
s = np.loadtxt(f"{res}/uci_samples.csv")
r = np.loadtxt(f"{ref}/uci_samples.csv").T
w = -np.mean([wasserstein_distance(s[i], r[i]) for i in range(len(s))])
print(imported - started, time.perf_counter() - imported)
'''


def _probabilities(rng, n, c, concentration=1.0):
    return rng.dirichlet(np.full(c, concentration), size=n)


def scaled_rows(n: int, blocks: int, scale: float) -> int:
    """``scale`` of ``n`` test rows, a whole number of rows in each of ``blocks`` blocks (at
    least 10 in each)."""
    return blocks * max(10, round(n * scale / blocks))


def write_task(root: Path, res: Path, name: str, rng, scale: float = 1.0) -> int:
    """One task's declaration, references (csv + chains) and submission; returns parsed bytes.
    ``scale``: the fraction of the task's test rows written."""
    kind, n, width, blocks = TASKS[name]
    n = n if scale == 1 else scaled_rows(n, blocks, scale)
    folder = root / name
    folder.mkdir(parents=True)
    size = n // blocks
    declaration = {"name": name, "phase": "evaluation", "kind": kind, "n_test": n,
                   "test_blocks": [{"name": f"block_{b}", "start": b * size, "stop": (b + 1) * size}
                                   for b in range(blocks)],
                   ("num_classes" if kind == "classification" else "num_samples"): width}
    (folder / f"{name}_task.json").write_text(json.dumps(declaration))
    labels = rng.integers(0, width if kind == "classification" else 2, n).astype(float)
    if kind == "regression":
        labels = rng.normal(size=n)
    write_matrix(folder / f"{name}_test_labels.csv", labels[:, None])
    if kind == "classification":
        chains = np.stack([_probabilities(rng, n, width, 0.3) for _ in range(CHAINS)])
        write_matrix(folder / f"{name}_probs.csv", chains.mean(axis=0))
        write_chain_probs(folder / f"{name}_chain_probs.npy", chains)
        submission = _probabilities(rng, n, width, 0.3)
        write_matrix(res / f"{name}_probs.csv", submission)
    else:
        chains = rng.normal(size=(CHAINS, n, width))
        write_matrix(folder / f"{name}_samples.csv", chains[:, :, :width // CHAINS]
                     .transpose(1, 0, 2).reshape(n, width).T)
        write_chain_samples(folder / f"{name}_chain_samples.npy", chains)
        submission = rng.normal(0.1, 1.1, size=(n, width))
        write_matrix(res / f"{name}_samples.csv", submission)
    return submission.nbytes + chains.nbytes + chains[0].nbytes + labels.nbytes


def build(workdir: Path, scale: float = 1.0) -> tuple[Path, int]:
    """Worker-style run folder (program, input/ref, input/res, output) and parsed bytes."""
    rng = np.random.default_rng(2021)
    tasks_root, run = workdir / "tasks", workdir / "run"
    res = run / "input" / "res"
    res.mkdir(parents=True)
    parsed = sum(write_task(tasks_root, res, name, rng, scale) for name in TASKS)
    plan = PhasePlan("evaluation", "bdl2021", tuple(load_planned_task("bdl2021", name, tasks_root)
                                                    for name in TASKS),
                     code_submission=False)
    assemble_scoring_program(plan, run / "program")
    stage_reference_data(plan, run / "input" / "ref")
    original_ref = workdir / "original_ref"      # the 2021 reference csv files, as shipped
    original_ref.mkdir()
    for name in TASKS:
        for csv in (tasks_root / name).glob(f"{name}_[ps]*.csv"):
            shutil.copyfile(csv, original_ref / csv.name)
    return run, parsed


def timed_process(argv: list[str], cwd: Path) -> tuple[float, str]:
    """Wall seconds from start to exit, and stdout."""
    started = time.perf_counter()
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"{argv[:2]} exited {result.returncode}: {result.stderr[-2000:]}")
    return elapsed, result.stdout


def peak_tree_memory(argv: list[str], cwd: Path) -> int:
    """Peak over time of the summed PSS of a process and its descendants, sampled every 2 ms.

    PSS splits shared pages between the processes sharing them, so forked workers are not
    charged again for numpy's libraries. (ru_maxrss would not do: it survives exec and so
    includes the RSS of this benchmark at fork time.)
    """
    import psutil
    process = psutil.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    while process.poll() is None:
        total = 0
        for member in [process, *process.children(recursive=True)]:
            try:
                total += member.memory_full_info().pss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        peak = max(peak, total)
        time.sleep(0.002)
    return peak


def python_for_scoring() -> str:
    return str(IMAGE_PYTHON if IMAGE_PYTHON.exists() else sys.executable)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs of each side (median kept)")
    parser.add_argument("--keep", type=Path, help="leave the generated files in this folder")
    parser.add_argument("--screenshot", type=Path,
                        help="also render detailed_results.html to this PNG with headless Chromium")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="fraction of each task's test rows to write (default: 1, the "
                             "2021 sizes); a smaller one runs the same steps faster")
    args = parser.parse_args()
    if not 0 < args.scale <= 1:
        parser.error("--scale: expected a fraction in (0, 1]")
    workdir = Path(tempfile.mkdtemp(prefix="scoring-bench-")) if not args.keep else args.keep
    size = "real-size" if args.scale == 1 else f"{args.scale:g} of the real size's"
    print(f"writing {size} files to {workdir} ...", flush=True)
    run, parsed_bytes = build(workdir, args.scale)
    python = python_for_scoring()
    ours_cmd = [python, "program/score.py", "input", "output"]
    original_cmd = [python, "-c", ORIGINAL_PIPELINE, str(run / "input" / "res"),
                    str(workdir / "original_ref")]
    baseline_cmd = [python, "-c", "import time, numpy; time.sleep(0.3)"]
    ours, original, in_process = [], [], []
    for _ in range(args.repeat):       # interleaved, so drift in machine load hits both
        ours.append(timed_process(ours_cmd, run)[0])
        seconds, out = timed_process(original_cmd, run)
        original.append(seconds)
        in_process.append(float(out.split()[1]))
    peak = max(peak_tree_memory(ours_cmd, run) for _ in range(3))   # sampled: take the max
    baseline = peak_tree_memory(baseline_cmd, run)
    a, b, b_work = (statistics.median(x) for x in (ours, original, in_process))
    print(f"(a) our scoring run, whole process:          {a:.3f} s (median of {args.repeat})")
    print(f"(b) 2021 pipeline, whole process:            {b:.3f} s")
    print(f"    2021 pipeline, in-process work only:     {b_work:.3f} s")
    print(f"ratio (a)/(b), process vs process:           {a / b:.2f}   (target <= 0.5)")
    print(f"ratio (a)/(b work), process vs work only:    {a / b_work:.2f}")
    print(f"parsed arrays:                               {parsed_bytes / 2**20:.1f} MiB")
    print(f"peak memory of (a), all its processes (PSS): {peak / 2**20:.1f} MiB "
          f"= {peak / parsed_bytes:.2f} x parsed arrays (target <= 3)")
    print(f"  of which above an idle `import numpy` interpreter ({baseline / 2**20:.0f} MiB): "
          f"{(peak - baseline) / 2**20:.1f} MiB = {(peak - baseline) / parsed_bytes:.2f} x")
    if args.screenshot:
        screenshot(run / "output" / "detailed_results.html", args.screenshot)
    if not args.keep:
        shutil.rmtree(workdir)
    return 0


def screenshot(html: Path, png: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("no chromium on PATH (apt-get install chromium): screenshot skipped")
        return
    profile = tempfile.mkdtemp(prefix="chromium-")
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", f"--user-data-dir={profile}", "--window-size=1100,3000",
                    f"--screenshot={png.resolve()}", html.resolve().as_uri()],
                   check=True, capture_output=True, timeout=120)
    print(f"screenshot of the detailed results: {png}")


if __name__ == "__main__":
    sys.exit(main())

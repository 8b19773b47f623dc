"""Retina at EyePACS's size, rehearsed on this machine (issue 29, item 5).

A task shaped like RETINA's EyePACS data (35,126 training and 53,576 test images, 88,702 in
all, 512 x 512 x 3 by default; pixels random, generated here, never committed) is written as
``convert`` writes a task, then goes through

  1. ``build_bundle.py`` with its data uploaded apart (``upload_separately``): once without
     keys (the data zips are written, exit 3, no bundle), once with stand-in keys (the
     bundle), then ``--check`` of that bundle: the dry run, whose sample submission (a small
     network on each image's block means) reads every image by memory map under the GPU
     image's resident memory rule;
  2. ``python -m bundle.local_run`` of the kit's ``map`` baseline (the sample's method) on the
     full task, whose ingestion reports the child's memory, and of the numpy CNN baseline
     (``small_cnn``) on a slice of the task (``--slice`` images of each set) under its budget.

Each step is its own subprocess: its wall time and the peak resident memory of its largest
process (``ru_maxrss`` from ``os.wait4``) are printed, with the sizes on disk, the ingestion's
report of the child's memory (its ru_maxrss, file pages of the memory-mapped images included,
and the resident memory the supervisor sampled: anonymous and shared pages, what the limit
counts), and what would need a GPU.

Disk: the arrays take N x size x size x 3 bytes (69.8 GB at 512), and the data zips as much
again per zip that holds them (input data, public data, starting kit). ``--size`` and the
counts scale it to the disk at hand:

  .venv/bin/python benchmarks/retina_real_size.py [--size 512] [--train 35126] [--test 53576]
      [--slice 2000] [--work DIR] [--keep]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "kinds" / "retina" / "tests")]

from pgdl_real_size import (FAKE_KEY, Step, mb, printed_keys, run_step,  # noqa: E402
                            save_spec, size_of, tail)  # noqa: E402
from retina_image_tasks import write_image_task  # noqa: E402

PYTHON = sys.executable
SPEC_TEMPLATE = REPO / "kinds" / "retina" / "default_spec.yaml"
TASK, SLICE, PHASE, SLICE_PHASE = "eyepacs_like", "eyepacs_slice", "images", "slice"
APART = ("input_data", "public_data", "starting_kit")
GPU_IMAGE = "codalab/codalab-legacy:gpu310"
GPU_NOTE = """
== what would need a GPU
The programs, the memory maps and the build ran here on the CPU. What RETINA trained (a
ResNet-50 per method on 35,126 images at 512 x 512, for tens of epochs) needs a GPU: the
numpy CNN here trains a few thousand small images in its budget. On a GPU competition the
PyTorch baselines (kit/baselines/torch_*.py) run under the same programs and memory rule:
benchmarks/gpu_sandbox.py --retina torch_mc_dropout runs them there."""


def write_spec(work: Path, args, keys: dict | None = None) -> Path:
    """The default spec cut to one code phase on the two tasks, as a GPU competition (the
    resident memory rule), its data apart (``keys``: once the zips exist)."""
    import yaml
    spec = yaml.safe_load(SPEC_TEMPLATE.read_text())
    budgets = {TASK: args.budget, SLICE: args.slice_budget}
    phases = {PHASE: dict(spec["phases"][PHASE], tasks=[TASK],
                          execution_time_limit=int(args.budget + 1800)),
              SLICE_PHASE: dict(spec["phases"][PHASE], tasks=[SLICE], label="Slice",
                                start="2027-11-01 00:00:00",
                                execution_time_limit=int(args.slice_budget + 600))}
    spec.update(data_root=str(work / "tasks"), docker_image=GPU_IMAGE, slug="retina-real-size",
                tasks={name: {"budget_seconds": seconds} for name, seconds in budgets.items()},
                phases=phases, upload_separately=list(APART),
                codabench_queue=FAKE_KEY.format(0))
    return save_spec(work, spec, SPEC_TEMPLATE, keys)


def write_tasks(work: Path, args) -> Step:
    """In a child process: a process's peak resident memory passes to the children it forks
    (Linux copies the high-water mark with the address space), so the arrays written here
    through memory maps would show in every later step's figure."""
    return run_step("0 write the tasks' arrays", [
        PYTHON, Path(__file__), "--write-only", work, "--size", args.size, "--train", args.train,
        "--test", args.test, "--shifted", args.shifted, "--slice", args.slice],
        work / "write.log")


def write_only(work: Path, args) -> None:
    write_image_task(work / "tasks", TASK, args.train, args.test, args.size,
                     shifted_fraction=args.shifted / args.test)
    write_image_task(work / "tasks", SLICE, args.slice, args.slice // 2, args.size, seed=1)


def build_steps(work: Path, args) -> list[Step]:
    spec = write_spec(work, args)
    build = [PYTHON, "build_bundle.py", "--config", spec, "--phase", PHASE, "--out", work / "out"]
    first = run_step("1a build, data apart, no keys yet", build, work / "build1.log")
    print(tail(first.log, 30))
    keys = printed_keys(first.log)
    if not keys:
        return [first]
    for made in (work / "out").glob("*.zip"):      # the next build makes them again: disk
        made.unlink()
    write_spec(work, args, keys)
    second = run_step("1b build with the keys", build, work / "build2.log")
    print(tail(second.log, 12))
    bundles = [p for p in (work / "out").glob("*.zip") if p.name.count(".") == 1]
    if second.status or not bundles:
        return [first, second]
    check = run_step("1c --check of the bundle (dry run of the sample on all images)",
                     [PYTHON, "build_bundle.py", "--check", bundles[0]], work / "check.log")
    print(tail(check.log, 24))
    return [first, second, check]


def local_steps(work: Path) -> list[Step]:
    """The sample's pass over the full task and the CNN on the slice, each through a local
    run of the phase's kit, whose ingestion reports each child's memory."""
    steps = []
    for name, phase, baseline in (("2a", PHASE, "map"), ("2b", SLICE_PHASE, "small_cnn")):
        log = work / f"run-{phase}.log"
        step = run_step(f"{name} local run of {baseline} on phase {phase}", [
            PYTHON, "-m", "bundle.local_run", "--config", work / "spec.yaml", "--phase", phase,
            "--baseline", baseline, "--score-hidden", "--out", work / f"run-{phase}"], log)
        print(tail(step.log, 30))
        steps.append(step)
    return steps


def child_memory(log: Path) -> list[str]:
    """The ingestion's line per task: status, time, the child's peak memory figures."""
    if not log.is_file():
        return []
    return [line.strip() for line in log.read_text(errors="replace").splitlines()
            if re.search(r"\] (ok|failed|timed out).*peak memory", line)]


def print_sizes(work: Path) -> None:
    print("\n== sizes on disk")
    rows = [(f"tasks/{TASK} arrays", size_of(work / "tasks" / TASK, "*.npy")),
            (f"tasks/{SLICE} arrays", size_of(work / "tasks" / SLICE, "*.npy"))]
    rows += [(f"out/{path.name}", size_of(path)) for path in sorted((work / "out").glob("*.zip"))]
    for label, size in rows:
        print(f"  {label:<64}{mb(size)}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--train", type=int, default=35_126)
    parser.add_argument("--test", type=int, default=53_576)
    parser.add_argument("--shifted", type=int, default=3_524,
                        help="test images marked shifted (RETINA's severity-shift count)")
    parser.add_argument("--slice", type=int, default=2_000)
    parser.add_argument("--budget", type=float, default=1800.0,
                        help="the full task's budget, seconds (the sample's pass over it)")
    parser.add_argument("--slice-budget", type=float, default=120.0)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--write-only", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.write_only:
        write_only(args.write_only, args)
        return 0
    if args.work and args.work.exists() and any(args.work.iterdir()):
        raise SystemExit(f"--work {args.work}: not empty; name a new or empty folder")
    work = args.work or Path(tempfile.mkdtemp(prefix="retina_real_size_"))
    work.mkdir(parents=True, exist_ok=True)
    need = (args.train + args.test + 1.5 * args.slice) * args.size ** 2 * 3
    print(f"work folder {work}; {args.train} train / {args.test} test images at {args.size} x "
          f"{args.size} x 3 ({need / 1e9:.1f} GB of arrays, about 4 times that on disk with "
          f"the data zips); {os.cpu_count()} CPUs; {shutil.disk_usage(work).free / 1e9:.0f} "
          "GB free")
    try:
        steps = [write_tasks(work, args)]
        steps += build_steps(work, args)
        print_sizes(work)
        if all(step.status == 0 for step in steps[2:]):
            shutil.rmtree(work / "out")               # the local runs make kits of their own
            steps += local_steps(work)
        print("\n== summary (wall time; peak RSS = the step's largest process)")
        for step in steps:
            print(step.line())
        print("\n== the ingestion's report of each task's child (local runs)")
        for line in child_memory(work / f"run-{PHASE}.log") + child_memory(
                work / f"run-{SLICE_PHASE}.log"):
            print(f"  {line}")
        print(GPU_NOTE)
        return max((s.status for s in steps if not s.name.startswith("1a")), default=0)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

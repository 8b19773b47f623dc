"""Command line of the BDL references: ``python -m reference_data {generate,verify}``."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from reference_data.manifest import print_verification

from .task_files import DEFAULT_ROOT
from .tasks import TASKS, task_by_name

EPILOG = """examples:
  python -m reference_data verify                 check the committed references
  python -m reference_data generate               regenerate all of them (minutes)
  python -m reference_data generate --tasks iris --out /tmp/refs
  python -m reference_data generate --data-root my_tasks/      an organizer's own tasks
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m reference_data", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Generate or verify the embedded tasks' data and HMC references.")
    commands = parser.add_subparsers(dest="command", required=True)
    generate = commands.add_parser("generate", help="sample HMC chains and write every file")
    generate.add_argument("--tasks", default=None,
                          help="comma-separated task names (default: all)")
    generate.add_argument("--data-root", type=Path, default=None,
                          help="an organizer's task folders (docs/organizer_data.md): write "
                               "their references next to their inputs, with NUTS")
    generate.add_argument("--out", type=Path, default=DEFAULT_ROOT,
                          help=f"output folder (default: {DEFAULT_ROOT})")
    generate.add_argument("--engine", choices=("nuts", "numpy-hmc"), default="nuts",
                          help="nuts: BlackJAX NUTS on every local device (default); numpy-hmc: "
                               "our numpy HMC, the cross-check")
    generate.add_argument("--shard-data", action="store_true",
                          help="nuts: split the training rows across the devices (data too big "
                               "for one) instead of the chains")
    generate.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                          help="numpy-hmc: parallel chain processes (default: number of cores)")
    for name in ("warmup", "samples", "chains"):
        generate.add_argument(f"--{name}", type=int, default=None,
                              help=f"override every task's number of {name} (smoke tests only)")
    verify = commands.add_parser("verify", help="check manifest, shapes and convergence")
    verify.add_argument("--root", type=Path, default=DEFAULT_ROOT,
                        help=f"references folder (default: {DEFAULT_ROOT})")
    return parser


def _names(args, default: list[str]) -> list[str]:
    return [name.strip() for name in args.tasks.split(",") if name.strip()] if args.tasks \
        else default


def _gate_failed(problems: list[str]) -> int:
    print("error: the convergence gate is not met:\n  " + "\n  ".join(problems)
          + "\nsee the tasks' *_hmc_diagnostics.json, and lengthen the chains "
          "(--warmup, --samples)", file=sys.stderr)
    return 1


def _generate_organizer(args) -> int:
    """References for the task folders under --data-root, written next to their inputs."""
    from competition_formats import FormatError
    from .generate import ProgressPrinter, run_chains_nuts, write_references
    from .organizer import load_task, task_names
    from .references import build_references, gate_problems
    from .task_files import task_files
    if args.engine != "nuts":
        print("error: --data-root runs NUTS only (--engine nuts)", file=sys.stderr)
        return 2
    overrides = {key: value for key, value in (("num_warmup", args.warmup),
                 ("num_samples", args.samples), ("num_chains", args.chains)) if value is not None}
    try:
        names = _names(args, task_names(args.data_root))
        loaded = dict(load_task(args.data_root, name, overrides) for name in names)
    except (FormatError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not loaded:
        print(f"error: {args.data_root}: no task folder (<task>/<task>_task.json)", file=sys.stderr)
        return 2
    tasks = list(loaded)
    results, _ = run_chains_nuts(tasks, ProgressPrinter(tasks), prepared_of=loaded.get,
                                 shard_data=args.shard_data)
    problems = []
    for task in tasks:
        references = build_references(task, loaded[task], results[task.name])
        write_references(task_files(args.data_root, task.name, task.kind), task, references)
        problems += gate_problems(task.name, references.diagnostics)
        print(f"wrote the references of {task.name} to {args.data_root / task.name}")
    return _gate_failed(problems) if problems else 0


def _generate(args) -> int:
    from .generate import generate, with_overrides
    if args.data_root is not None:
        return _generate_organizer(args)
    try:
        tasks = [with_overrides(task_by_name(name), args.warmup, args.samples, args.chains)
                 for name in _names(args, [t.name for t in TASKS])]
    except KeyError as error:
        print(f"error: {error.args[0]}", file=sys.stderr)
        return 2
    log = generate(tasks, args.out, args.jobs, engine=args.engine, shard_data=args.shard_data)
    print(f"wrote {len(tasks)} task(s) to {args.out} in {log['wall_seconds']:.0f}s")
    problems = [problem for entry in log["tasks"].values() for problem in entry["gate_problems"]]
    if problems:
        return _gate_failed(problems)
    return _verify(args.out)


def _verify(root: Path) -> int:
    from .verify import summary_table, verify
    tasks, problems = verify(root)
    return print_verification(summary_table(tasks), problems, len(tasks), root)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "generate":
        return _generate(args)
    return _verify(args.root)


if __name__ == "__main__":
    sys.exit(main())

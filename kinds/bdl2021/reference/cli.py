"""Command line of the BDL references: ``python -m reference_data {generate,verify,export}``."""
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
  python -m reference_data export --tasks iris --out /tmp/export   ArviZ and posteriordb files
"""


# What each chain-length option sets, and what raising it does for the convergence gate.
LENGTHS = {"warmup": "warm-up iterations per chain", "samples": "kept draws per chain",
           "chains": "number of chains"}
REMEDY = ("more kept draws (--samples) raise the ESS of the potential energy, and a longer "
          "warm-up (--warmup) with more draws brings chains that disagree together (R-hat)")


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
    for name, what in LENGTHS.items():
        generate.add_argument(f"--{name}", type=int, default=None,
                              help=f"{what} of every task, instead of its declaration's "
                                   f"hmc.num_{name}; raise it when the convergence gate fails")
    _add_export(commands)
    verify = commands.add_parser("verify", help="check manifest, shapes and convergence")
    verify.add_argument("--root", type=Path, default=DEFAULT_ROOT,
                        help=f"references folder (default: {DEFAULT_ROOT})")
    return parser


def _add_export(commands) -> None:
    export = commands.add_parser(
        "export", help="write references as ArviZ (netCDF) and posteriordb (JSON) files")
    export.add_argument("--tasks", default=None,
                        help="comma-separated task names (default: every task under --root)")
    export.add_argument("--root", type=Path, default=DEFAULT_ROOT,
                        help=f"the references' folder (default: {DEFAULT_ROOT})")
    export.add_argument("--out", type=Path, required=True, help="folder to write into")


def _export(args) -> int:
    from .export import ExportError, export_task
    from .task_files import task_files
    import json
    found = sorted(path.parent.name for path in args.root.glob("*/*_task.json")
                   if path.name == f"{path.parent.name}_task.json")
    names = _names(args, found)
    unknown = [name for name in names if name not in found]
    if unknown:
        print(f"error: no task {', '.join(unknown)} under {args.root} (found: "
              f"{', '.join(found) or 'none'})", file=sys.stderr)
        return 2
    for name in names:
        kind = json.loads((args.root / name / f"{name}_task.json").read_text())["kind"]
        try:
            written = export_task(task_files(args.root, name, kind), args.out)
        except ExportError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        print(f"{name}: " + ", ".join(str(path) for path in written))
    return 0


def _names(args, default: list[str]) -> list[str]:
    return [name.strip() for name in args.tasks.split(",") if name.strip()] if args.tasks \
        else default


def _gate_failed(problems: list[str], failed: list, kept: list[Path], declared: str) -> int:
    """``failed``: the tasks whose gate failed (their settings), ``kept``: where their
    output is, ``declared``: where their chain lengths are declared."""
    ran = "; ".join(f"{task.name} ran {task.hmc.num_chains} chain(s) x ({task.hmc.num_warmup} "
                    f"warm-up + {task.hmc.num_samples} kept draws)" for task in failed)
    print("error: the convergence gate is not met:\n  " + "\n  ".join(problems)
          + "\nthe previous references of these tasks are untouched; this run's output is in "
          + ", ".join(str(folder) for folder in kept)
          + f" (see *_hmc_diagnostics.json)\nlengthen the chains: {REMEDY}; or declare longer "
          f"ones in {declared}. {ran}", file=sys.stderr)
    return 1


def _load_organizer_tasks(args) -> dict:
    """{name: (declaration, arrays)} of the task folders under --data-root, keyed by name: a
    declaration that holds its network's ``model`` dict cannot be a dict key itself."""
    from .organizer import load_task, task_names
    overrides = {key: value for key, value in (("num_warmup", args.warmup),
                 ("num_samples", args.samples), ("num_chains", args.chains)) if value is not None}
    return {name: load_task(args.data_root, name, overrides)
            for name in _names(args, task_names(args.data_root))}


def _generate_organizer(args) -> int:
    """References for the task folders under --data-root, written next to their inputs."""
    from runtime.formats import FormatError
    from .generate import ProgressPrinter, run_chains_nuts, write_organizer_references
    from .gate import gate_summary
    from .references import build_references
    if args.engine != "nuts":
        print("error: --data-root runs NUTS only (--engine nuts)", file=sys.stderr)
        return 2
    try:
        loaded = _load_organizer_tasks(args)
    except (FormatError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not loaded:
        print(f"error: {args.data_root}: no task folder (<task>/<task>_task.json)", file=sys.stderr)
        return 2
    tasks = [task for task, _ in loaded.values()]
    prepared = {name: arrays for name, (_, arrays) in loaded.items()}
    results, _ = run_chains_nuts(tasks, ProgressPrinter(tasks),
                                 prepared_of=lambda task: prepared[task.name],
                                 shard_data=args.shard_data)
    problems, failed, kept = [], [], []
    for task in tasks:
        references = build_references(task, prepared[task.name], results[task.name])
        task_problems, folder = write_organizer_references(args.data_root, task, references)
        print(gate_summary(task.name, references.diagnostics))
        if task_problems:
            problems, failed, kept = problems + task_problems, failed + [task], kept + [folder]
        else:
            print(f"wrote the references of {task.name} to {args.data_root / task.name}")
    declared = "each task's <task>_task.json (\"hmc\": {\"num_warmup\", \"num_samples\"})"
    return _gate_failed(problems, failed, kept, declared) if problems else 0


def _generate(args) -> int:
    from .generate import failed_folder, generate, with_overrides
    if args.data_root is not None:
        return _generate_organizer(args)
    try:
        tasks = [with_overrides(task_by_name(name), args.warmup, args.samples, args.chains)
                 for name in _names(args, [t.name for t in TASKS])]
    except KeyError as error:
        print(f"error: {error.args[0]}", file=sys.stderr)
        return 2
    log = generate(tasks, args.out, args.jobs, engine=args.engine, shard_data=args.shard_data)
    for entry in log["tasks"].values():
        print(entry["gate"])
    failed = [task for task in tasks if not log["tasks"][task.name]["gate_passed"]]
    print(f"wrote {len(tasks) - len(failed)} task(s) to {args.out} in "
          f"{log['wall_seconds']:.0f}s")
    if failed:
        problems = [problem for task in failed
                    for problem in log["tasks"][task.name]["gate_problems"]]
        return _gate_failed(problems, failed, [failed_folder(args.out)],
                            "kinds/bdl2021/reference/tasks.py (HMCSettings)")
    return _verify(args.out)


def _verify(root: Path) -> int:
    from .verify import summary_table, verify
    tasks, problems = verify(root)
    return print_verification(summary_table(tasks), problems, len(tasks), root)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "generate":
        return _generate(args)
    if args.command == "export":
        return _export(args)
    return _verify(args.root)


if __name__ == "__main__":
    sys.exit(main())

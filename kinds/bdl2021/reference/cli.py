"""Command line of the BDL references: ``python -m reference_data {generate,verify,export}``."""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from reference_data.manifest import print_verification

from .task_files import DEFAULT_ROOT
from .tasks import TASKS, chosen_names, task_by_name

EPILOG = """examples:
  python -m reference_data verify                 check the committed references
  python -m reference_data generate               regenerate all of them (minutes)
  python -m reference_data generate --tasks iris --out /tmp/refs
  python -m reference_data generate --tasks iris --sampler hmc --out /tmp/refs   fixed HMC
  python -m reference_data generate --data-root my_tasks/      an organizer's own tasks
  python -m reference_data export --tasks iris --out /tmp/export   ArviZ and posteriordb files
  python -m reference_data plan --data-root my_tasks/ --devices 8   the run's cost, measured here
  python -m reference_data generate --data-root my_tasks/ --coordinator node0:1234 \
      --num-processes 2 --process-id 0 --checkpoint ckpt/ --checkpoint-minutes 30   (per host)
  python -m reference_data generate ... --num-processes 8 --chain-groups 4   many chains on
      many hosts: each group of devices runs a quarter of the chains on all the rows
  python -m reference_data generate --data-root my_tasks/ ... --checkpoint ckpt/ --resume
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
    _add_sampler(generate)
    generate.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                          help="numpy-hmc: parallel chain processes (default: number of cores)")
    for name, what in LENGTHS.items():
        generate.add_argument(f"--{name}", type=int, default=None,
                              help=f"{what} of every task, instead of its declaration's "
                                   f"hmc.num_{name}; raise it when the convergence gate fails")
    _add_cluster(generate)
    _add_export(commands)
    _add_plan(commands)
    verify = commands.add_parser("verify", help="check manifest, shapes and convergence")
    verify.add_argument("--root", type=Path, default=DEFAULT_ROOT,
                        help=f"references folder (default: {DEFAULT_ROOT})")
    return parser


def _add_sampler(generate) -> None:
    """The BlackJAX engine's sampler (``fixed_hmc.py``): NUTS, or HMC with a fixed trajectory
    length for networks where NUTS's tree doubling costs too much."""
    generate.add_argument("--sampler", choices=("nuts", "hmc"), default="nuts",
                          help="nuts (default): NUTS with Stan's window adaptation; hmc: HMC "
                               "with a fixed trajectory length and identity mass matrix, the "
                               "2021 references' recipe (Izmailov et al. 2021)")
    generate.add_argument("--trajectory-length", type=float, default=None,
                          help="hmc: leapfrog steps x step size of every transition (default: "
                               "pi * sqrt(prior variance) / 2, a quarter period under the prior)")
    generate.add_argument("--step-size", type=float, default=None,
                          help="hmc: a fixed leapfrog step size (default: found in warm-up by "
                               "dual averaging towards the task's target acceptance, then fixed)")


def _sampler_problem(args) -> str | None:
    """What is wrong with the sampler flags, in one line, or None. Checked before anything
    of JAX is imported, so that a mistyped flag is answered at once."""
    given = [flag for flag, value in (("--trajectory-length", args.trajectory_length),
                                      ("--step-size", args.step_size)) if value is not None]
    if args.sampler == "nuts":
        if given:
            flags = " and ".join(given)
            verb = "are" if len(given) > 1 else "is"
            return (f"{flags} {verb} for --sampler hmc only (NUTS chooses its own "
                    f"trajectories and step size); add --sampler hmc or leave {flags} out")
        return None
    if args.engine != "nuts":
        return ("--sampler hmc runs on the BlackJAX engine (--engine nuts); "
                "--engine numpy-hmc is its own fixed-trajectory HMC, set by each task's "
                "declaration")
    # the rule FixedHMC enforces too; repeated here because building it imports JAX
    for flag, value in (("--trajectory-length", args.trajectory_length),
                        ("--step-size", args.step_size)):
        if value is not None and not (math.isfinite(value) and value > 0):
            return f"{flag} is {value}; expected a positive number"
    return None


def _sampler(args):
    """The fixed-trajectory HMC's settings, or None for NUTS (the flags already checked by
    ``_sampler_problem``)."""
    if args.sampler == "nuts":
        return None
    from .fixed_hmc import FixedHMC
    return FixedHMC(args.trajectory_length, args.step_size)


def _add_cluster(generate) -> None:
    """Several hosts and checkpoints (``distributed.py``): any of these flags runs NUTS with
    the rows split over every device of every process, in checkpointable chunks."""
    group = generate.add_argument_group(
        "several hosts and checkpoints (nuts; docs/references.md, 'On a cluster')")
    group.add_argument("--coordinator", default=None,
                       help="HOST:PORT of process 0 (default: from the cluster's environment, "
                            "e.g. SLURM's)")
    group.add_argument("--num-processes", type=int, default=None,
                       help="processes in the run, one per host (1: this host alone)")
    group.add_argument("--process-id", type=int, default=None, help="this process's index")
    group.add_argument("--checkpoint", type=Path, default=None,
                       help="folder for the checkpoints (one file per task and process)")
    group.add_argument("--checkpoint-every", type=int, default=None,
                       help="write a checkpoint every N transitions")
    group.add_argument("--checkpoint-minutes", type=float, default=None,
                       help="write a checkpoint when M minutes have passed since the last")
    group.add_argument("--resume", action="store_true",
                       help="continue from the checkpoints in --checkpoint")
    group.add_argument("--chain-groups", type=int, default=None,
                       help="split the devices into C groups, each running chains/C of the "
                            "chains with the rows split over its devices, so that the "
                            "gradient's all-reduce spans one group (default 1: every chain on "
                            "every device); C must divide the device and chain counts")


def _asks_for_a_run(args) -> bool:
    """Whether any flag of the distributed or checkpointed run is given."""
    flags = (args.coordinator, args.num_processes, args.process_id, args.checkpoint,
             args.checkpoint_every, args.checkpoint_minutes, args.chain_groups)
    return args.resume or any(flag is not None for flag in flags)


def _run_options(args):
    """The distributed run's options, or None where no flag asks for one (the default
    engine, unchanged)."""
    if not _asks_for_a_run(args):
        return None
    from .distributed import RunOptions
    return RunOptions(args.coordinator, args.num_processes, args.process_id, args.checkpoint,
                      args.checkpoint_every, args.checkpoint_minutes, args.resume,
                      1 if args.chain_groups is None else args.chain_groups)


def _check_run_options(options, chains: dict[str, int]) -> str | None:
    """What is wrong with the cluster flags, in one line, or None. ``chains``: {task: its
    chain count}."""
    import jax
    from .distributed import chain_groups_problem, checkpoint_path
    names = list(chains)
    problem = chain_groups_problem(options.chain_groups, chains, jax.device_count())
    if problem:
        return problem
    if options.checkpoint_every is not None and options.checkpoint_every < 1:
        return f"--checkpoint-every is {options.checkpoint_every}; expected a positive count"
    if options.checkpoint_minutes is not None and options.checkpoint_minutes <= 0:
        return f"--checkpoint-minutes is {options.checkpoint_minutes}; expected a positive time"
    if options.checkpoint is None and (options.checkpoint_every or options.checkpoint_minutes):
        return ("--checkpoint-every and --checkpoint-minutes need --checkpoint DIR, the folder "
                "to write to")
    if options.resume and options.checkpoint is None:
        return "--resume needs --checkpoint DIR, the folder the killed run wrote to"
    if options.resume and not any(checkpoint_path(options.checkpoint, name).exists()
                                  for name in names):
        return (f"--resume: no checkpoint in {options.checkpoint} for "
                f"{', '.join(names)}; expected <task>.process<id>.npz written by generate "
                f"--checkpoint {options.checkpoint}")
    return None


def _start(args, chains: dict[str, int]):
    """(run options or None, exit code or None): the runtime joined and the flags checked.
    ``chains``: {task: its chain count}."""
    if not _asks_for_a_run(args):
        return None, None
    if args.engine != "nuts" or args.sampler != "nuts":     # refused before JAX is imported
        print("error: --num-processes, --checkpoint, --resume and --chain-groups run NUTS only "
              "(--engine nuts, --sampler nuts)", file=sys.stderr)
        return None, 2
    options = _run_options(args)
    from .distributed import RunError, start_runtime
    try:
        start_runtime(options)
    except RunError as error:
        print(f"error: {error}", file=sys.stderr)
        return options, 2
    problem = _check_run_options(options, chains)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return options, 2
    return options, None


def _add_plan(commands) -> None:
    plan = commands.add_parser(
        "plan", help="measure one full-batch gradient here and print the run's expected cost")
    plan.add_argument("--tasks", default=None, help="comma-separated task names (default: all)")
    plan.add_argument("--data-root", type=Path, default=None,
                      help="an organizer's task folders (default: the embedded tasks)")
    plan.add_argument("--devices", type=int, default=None,
                      help="devices the run will have (default: this machine's); the rows are "
                           "split over them")
    plan.add_argument("--train-rows", type=int, default=None,
                      help="training rows of the run, where the folder holds a sample of them "
                           "(the gradient is measured on the folder's rows and scaled)")
    plan.add_argument("--leapfrog-steps", type=int, default=127,
                      help="NUTS gradients per transition assumed (default 127, tree depth 7, "
                           "as measured on digits_cnn; at most 1023)")
    for name, what in LENGTHS.items():
        plan.add_argument(f"--{name}", type=int, default=None, help=f"{what}, as for generate")
    plan.add_argument("--checkpoint-every", type=int, default=None,
                      help="transitions between checkpoints (for their count)")


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
    names = chosen_names(args.tasks, found)
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
            for name in chosen_names(args.tasks, task_names(args.data_root))}


def _generate_organizer(args) -> int:
    """References for the task folders under --data-root, written next to their inputs."""
    from runtime.formats import FormatError
    from .generate import ProgressPrinter, run_chains_nuts, write_organizer_references
    from .gate import gate_summary
    from .references import build_references
    if args.engine != "nuts":
        print("error: --data-root runs NUTS only (--engine nuts)", file=sys.stderr)
        return 2
    problem = _sampler_problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
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
    options, code = _start(args, {task.name: task.hmc.num_chains for task in tasks})
    if code is not None:
        return code
    sampler = _sampler(args)
    prepared = {name: arrays for name, (_, arrays) in loaded.items()}
    results = _refusing_bad_runs(lambda: run_chains_nuts(
        tasks, ProgressPrinter(tasks), prepared_of=lambda task: prepared[task.name],
        shard_data=args.shard_data, run_options=options, sampler=sampler)[0])
    if results is None:
        return 2
    if options is not None and not _primary():
        return 0
    problems, failed, kept = [], [], []
    for task in tasks:
        references = build_references(task, prepared[task.name], results[task.name])
        task_problems, folder = write_organizer_references(args.data_root, task, references,
                                                           sampler)
        print(gate_summary(task.name, references.diagnostics))
        if task_problems:
            problems, failed, kept = problems + task_problems, failed + [task], kept + [folder]
        else:
            print(f"wrote the references of {task.name} to {args.data_root / task.name}")
    declared = "each task's <task>_task.json (\"hmc\": {\"num_warmup\", \"num_samples\"})"
    return _gate_failed(problems, failed, kept, declared) if problems else 0


def _generate(args) -> int:
    if args.data_root is not None:
        return _generate_organizer(args)
    problem = _sampler_problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        declared = [task_by_name(name)
                    for name in chosen_names(args.tasks, [task.name for task in TASKS])]
    except KeyError as error:
        print(f"error: {error.args[0]}", file=sys.stderr)
        return 2
    options, code = _start(args, {task.name: task.hmc.num_chains if args.chains is None
                                  else args.chains for task in declared})
    if code is not None:
        return code
    # imported once the flags are known good: it loads scikit-learn's data sets (seconds)
    from .generate import failed_folder, generate, with_overrides
    tasks = [with_overrides(task, args.warmup, args.samples, args.chains) for task in declared]
    sampler = _sampler(args)
    log = _refusing_bad_runs(lambda: generate(tasks, args.out, args.jobs, engine=args.engine,
                                              shard_data=args.shard_data, run_options=options,
                                              sampler=sampler))
    if log is None:
        return 2
    if log == "not process 0":
        return 0    # process 0 writes the references
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


def _refusing_bad_runs(run):
    """``run()``, or None after one error line where a checkpoint does not fit the run."""
    from .distributed import RunError
    try:
        return run()
    except RunError as error:
        print(f"error: {error}", file=sys.stderr)
        return None


def _primary() -> bool:
    from .distributed import is_primary
    return is_primary()


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
    if args.command == "plan":
        from .plan import main as plan
        return plan(args)
    return _verify(args.root)


if __name__ == "__main__":
    sys.exit(main())

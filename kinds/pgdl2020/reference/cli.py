"""Command line of PGDL's model zoos.

``python -m kinds.pgdl2020.reference.cli {generate,verify,convert}`` (also reached as
``python -m reference_data --kind pgdl2020 ...``)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reference_data.manifest import print_verification

from .tasks import TASKS, task_by_name
from .zoo import DEFAULT_ROOT

EPILOG = """examples:
  python -m kinds.pgdl2020.reference.cli verify                 check the committed zoos
  python -m kinds.pgdl2020.reference.cli generate               retrain all of them (~2 min)
  python -m kinds.pgdl2020.reference.cli generate --tasks wine_mlp --out /tmp/zoo
  python -m reference_data --kind pgdl2020 convert input_data/task1 --out my_data
                                                PGDL's original task folders -> this layout
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m kinds.pgdl2020.reference.cli", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train or verify PGDL's embedded model zoos.")
    commands = parser.add_subparsers(dest="command", required=True)
    generate = commands.add_parser("generate", help="train every model and write the zoos")
    generate.add_argument("--tasks", default=",".join(t.name for t in TASKS),
                          help="comma-separated task names (default: all)")
    generate.add_argument("--out", type=Path, default=DEFAULT_ROOT,
                          help=f"output folder (default: {DEFAULT_ROOT})")
    verify = commands.add_parser("verify", help="check manifest, grids and recorded accuracies")
    verify.add_argument("--root", type=Path, default=DEFAULT_ROOT,
                        help=f"zoos folder (default: {DEFAULT_ROOT})")
    convert = commands.add_parser(
        "convert", help="convert PGDL task folders in their original formats (Keras HDF5, "
                        "TFRecord) into this kind's layout (see docs/pgdl_data.md)")
    convert.add_argument("sources", nargs="+", type=Path, metavar="SOURCE",
                         help="a PGDL task folder (model_<id>/, dataset_1/); its name is the "
                              "task's")
    convert.add_argument("--out", type=Path, required=True,
                         help="the data root to write the tasks into (the spec's data_root)")
    convert.add_argument("--phase", default="public",
                         help="the phase written in each declaration (default: public)")
    convert.add_argument("--model-configs", type=Path, default=None,
                         help="model_configs.json (one task), or a reference_data folder of "
                              "<task>/model_configs.json; default: the task folder, then "
                              "reference_data/<task>/ beside it or beside its parent")
    convert.add_argument("--force", action="store_true",
                         help="replace a task folder that exists in --out")
    return parser


def _convert(args) -> int:
    """One progress line per task written; one line per problem on stderr, exit 1."""
    from .convert import convert
    problems = convert(args.sources, args.out, args.phase, args.model_configs, args.force,
                       progress=lambda line: print(line, flush=True))
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        print(f"convert: {len(problems)} problem(s); tasks with problems were not written",
              file=sys.stderr)
        return 1
    print(f"converted {len(args.sources)} task(s) into {args.out}; point the spec's "
          f"data_root at it")
    return 0


def _generate(args) -> int:
    from .zoo import generate
    try:
        tasks = [task_by_name(name.strip()) for name in args.tasks.split(",") if name.strip()]
    except KeyError as error:
        print(f"error: {error.args[0]}", file=sys.stderr)
        return 2
    log = generate(tasks, args.out, progress=lambda line: print(line, flush=True))
    print(f"wrote {len(tasks)} task(s) to {args.out} in {log['wall_seconds']:.1f}s")
    return _verify(args.out)


def _verify(root: Path) -> int:
    from .verify import summary_table, verify
    rows, problems = verify(root)
    return print_verification(summary_table(rows), problems, len(rows), root)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "generate":
        return _generate(args)
    if args.command == "convert":
        return _convert(args)
    return _verify(args.root)


if __name__ == "__main__":
    sys.exit(main())

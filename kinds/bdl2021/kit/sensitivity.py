"""How much a baseline's scores depend on one of its hyperparameters, in one command.

  python kinds/bdl2021/kit/sensitivity.py sghmc STEP_FRACTION 0.025 0.1 0.4
  python kinds/bdl2021/kit/sensitivity.py mc_dropout DROP 0.01 0.05 0.2 --budget 10

The 2021 report found approximate inference sensitive to its hyperparameters. This runs the
baseline once per value of one of its module constants (a copy of the file with that line
changed; the constant must be assigned a number on its own line), each with the run_local of
the phase's starting kit (evaluation by default), built as the builder builds it
(bundle/local_run.py), and prints each task's primary metric and the weighted loss
per value, with the spread (largest minus smallest) per column.
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

KIT = Path(__file__).resolve().parent
REPO = KIT.parents[2]
sys.path.insert(0, str(REPO))

from bundle.local_run import build_kit, organizer_spec, run_kit, scored_details  # noqa: E402


def variant(source: str, constant: str, value: str) -> str:
    """The baseline's source with ``CONSTANT = <number>`` set to ``value``."""
    pattern = re.compile(rf"^{re.escape(constant)} = [-+0-9.e]+", re.MULTILINE)
    if not pattern.search(source):
        raise SystemExit(f"error: no line '{constant} = <number>' in the baseline")
    return pattern.sub(f"{constant} = {float(value)!r}", source, count=1)


def scores(code: Path, kit: Path) -> dict:
    """Each task's primary metric and the weighted loss, from one run in the phase's ``kit``."""
    with tempfile.TemporaryDirectory(prefix="sensitivity-") as work:
        log = Path(work) / "run_local.log"
        # penalised tasks are still scored, with their worst value: the exit status is not read
        run_kit(kit, Path(work), code=code, log=log)
        details = scored_details(Path(work), code.name, log)
    row = {task: next(iter(result["metrics"].items())) for task, result in
           details["tasks"].items()}
    return {**{f"{task} {name}": metric["value"] for task, (name, metric) in row.items()},
            "weighted loss": details["weighted_loss"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("baseline", help="a file of baselines/, without .py (e.g. sghmc)")
    parser.add_argument("constant", help="one of its module constants (e.g. STEP_FRACTION)")
    parser.add_argument("values", nargs="+", help="the values to try")
    parser.add_argument("--phase", default="evaluation")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds per task (default: the spec's budgets)")
    parser.add_argument("--config", type=Path, default=None, help="the spec (default: the default)")
    args = parser.parse_args(argv)
    source = (KIT / "baselines" / f"{args.baseline}.py").read_text()
    spec = organizer_spec(args.config)
    table = {}
    with tempfile.TemporaryDirectory(prefix="variants-") as folder:
        kit = build_kit(spec, args.phase, Path(folder) / "kit", budget_seconds=args.budget)
        variants = Path(folder) / "variants"
        # the kit's baselines: every module the baseline imports, the declared model included
        shutil.copytree(kit / "baselines", variants)
        for value in args.values:
            code = variants / f"{args.baseline}.py"
            code.write_text(variant(source, args.constant, value))
            table[value] = scores(code, kit)
            print(f"{args.constant} = {value}: " + ", ".join(
                f"{k} {v:.3f}" for k, v in table[value].items()), flush=True)
    columns = list(next(iter(table.values())))
    print(f"\n| {args.constant} | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for value, row in table.items():
        print(f"| {value} | " + " | ".join(f"{row[c]:.3f}" for c in columns) + " |")
    print("| spread | " + " | ".join(
        f"{max(r[c] for r in table.values()) - min(r[c] for r in table.values()):.3f}"
        for c in columns) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

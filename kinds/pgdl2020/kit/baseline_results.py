"""The PGDL measures' table on a spec's zoos, in one command.

  python kinds/pgdl2020/kit/baseline_results.py
  python kinds/pgdl2020/kit/baseline_results.py --config my_spec.yaml --data-root my_zoos/

Runs every measure of baselines/ as code on every phase of the spec (a results phase's zoo
too: the measure runs on its networks) through the phase's starting kit, built as the builder
builds it with the phase's hidden accuracies added (bundle/local_run.py, ``--score-hidden``),
with that kit's own run_local and the spec's budgets (``--budget`` overrides them), scores it
against those accuracies, and writes ``baseline_results.json`` next to the spec (the default spec's:
next to this file), which the builder shows on the overview page. Prints the table in Markdown.
A measure that fails a zoo makes the command exit 1 naming each failure, without writing the
table, unless ``--keep-going`` (kinds/baseline_table.py).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

KIT = Path(__file__).resolve().parent
REPO = KIT.parents[2]
sys.path.insert(0, str(REPO))

from bundle.progress import Progress  # noqa: E402
from bundle.local_run import (baseline_details, baselines_spec, build_kit,  # noqa: E402
                              write_baseline_table)
from kinds.baseline_table import (KEEP_GOING, KEEP_GOING_HELP, failed, failed_cell,  # noqa: E402
                                  failed_row)

MEASURES = {"sum_of_squares": "Sum of squared weights (PGDL's sample)",
            "sharpness": "Magnitude-aware PAC-Bayes flatness",
            "margin": "Spectrally normalised margin",
            "davies_bouldin": "Davies-Bouldin index of the representations (PGDL 2020's winner)"}
RESULTS_FILE = KIT / "baseline_results.json"
DEFAULT_SPEC = KIT.parent / "default_spec.yaml"


def results_file(spec) -> Path:
    """Next to the spec; the default spec's is this kit's (where the builder reads it)."""
    if Path(spec.path).resolve() == DEFAULT_SPEC.resolve():
        return RESULTS_FILE
    return Path(spec.path).parent / RESULTS_FILE.name


METRICS = ("cmi", "kendall_tau", "granulated_kendall")


def collect(spec, budget: float | None = None) -> dict:
    """``budget``: seconds for every zoo; None: each zoo's budget in the spec."""
    table = {"made_with": "kinds/pgdl2020/kit/baseline_results.py: python -m bundle.local_run "
                          "--score-hidden --baseline <measure>, with "
                          + (f"{budget:g} s per zoo" if budget else "the spec's budgets"),
             "measures": MEASURES, "tasks": {}}
    with tempfile.TemporaryDirectory() as scratch:
        kits = {phase.key: build_kit(spec, phase.key, Path(scratch) / "kits" / phase.key,
                                     budget_seconds=budget, hidden_references=True)
                for phase in spec.phases}
        runs = Progress(len(MEASURES) * len(spec.phases), "baseline runs", "runs")
        for measure in MEASURES:
            for phase in spec.phases:
                tasks = baseline_details(kits[phase.key], Path(scratch) / f"{measure}-{phase.key}",
                                         measure, f"{measure} on {phase.key}")["tasks"]
                for task, result in tasks.items():
                    row = _row(result)
                    table["tasks"].setdefault(task, {})[measure] = row
                    runs.clear()
                    print(f"{measure:15s} {phase.key:10s} {task:20s} {_progress(row)}",
                          flush=True)
                runs.advance()
        runs.close()
    return table


def _row(result: dict) -> dict:
    """A measure's row of one zoo: its figures with their standard errors, or why it failed
    (and no figure)."""
    failure = failed_row(result)
    if failure:
        return failure
    return {**{name: result["metrics"][name]["value"] for name in METRICS}, "penalty": None,
            "se": {name: result["metrics"][name]["se"] for name in METRICS}}


def _progress(row: dict) -> str:
    if failed(row):
        return f"{failed_cell(row)} ({row['penalty']})"
    return " ".join(f"{name}={row[name]:.3f}" for name in METRICS)


def _cells(row: dict) -> list[str]:
    if failed(row):
        return [failed_cell(row)] * len(METRICS)
    return [f"{row[name]:.3f}" for name in METRICS]


def markdown(table: dict) -> str:
    lines = ["| task | measure | " + " | ".join(METRICS) + " |",
             "|---|---|" + "---|" * len(METRICS)]
    for task, measures in table["tasks"].items():
        for measure, row in measures.items():
            lines.append(f"| {task} | {table['measures'][measure]} | "
                         + " | ".join(_cells(row)) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=DEFAULT_SPEC,
                        help="the organizer spec (default: the default PGDL competition's)")
    parser.add_argument("--data-root", type=Path, default=None,
                        help="the folder of the spec's zoos (default: the spec's)")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds for every zoo (default: each zoo's budget in the spec)")
    parser.add_argument("--out", type=Path, default=None,
                        help="the table's file (default: baseline_results.json next to the "
                             "spec, where the builder reads it)")
    parser.add_argument(KEEP_GOING, action="store_true", help=KEEP_GOING_HELP)
    args = parser.parse_args(argv)
    spec = baselines_spec(args.config, args.data_root, "pgdl2020")
    out = args.out or results_file(spec)
    return write_baseline_table(out, lambda: collect(spec, args.budget), markdown,
                                args.keep_going)


if __name__ == "__main__":
    sys.exit(main())

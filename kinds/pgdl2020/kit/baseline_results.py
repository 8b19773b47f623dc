"""The PGDL measures' table on a spec's zoos, in one command.

  python kinds/pgdl2020/kit/baseline_results.py
  python kinds/pgdl2020/kit/baseline_results.py --config my_spec.yaml --data-root my_zoos/

Runs every measure of baselines/ as code through run_local on every phase of the spec (a
results phase's zoo too: the measure runs on its networks), with the spec's budgets
(``--budget`` overrides them), scores it against the phase's hidden accuracies
(``--score-hidden``), and writes ``baseline_results.json`` next to the spec (the default spec's:
next to this file), which the builder shows on the overview page. Prints the table in Markdown.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

KIT = Path(__file__).resolve().parent
REPO = KIT.parents[2]
sys.path[:0] = [str(REPO), str(REPO / "starting_kit")]

from run_local import (LocalRunError, baselines_spec, run_local,  # noqa: E402
                       write_baseline_table)

MEASURES = {"sum_of_squares": "Sum of squared weights (PGDL's sample)",
            "sharpness": "Magnitude-aware PAC-Bayes flatness",
            "margin": "Spectrally normalised margin"}
RESULTS_FILE = KIT / "baseline_results.json"
DEFAULT_SPEC = KIT.parent / "default_spec.yaml"


def results_file(spec) -> Path:
    """Next to the spec; the default spec's is this kit's (where the builder reads it)."""
    if Path(spec.path).resolve() == DEFAULT_SPEC.resolve():
        return RESULTS_FILE
    return Path(spec.path).parent / RESULTS_FILE.name


def _scored(measure: str, phase: str, budget: float | None, config, data_root,
            work: Path) -> dict:
    """Each task's detailed results of one measure on one phase's zoos."""
    log = io.StringIO()
    try:
        with contextlib.redirect_stdout(log):
            run_local(phase, work, code=KIT / "baselines" / f"{measure}.py",
                      budget_seconds=budget, config=config, data_root=data_root,
                      hidden_references=True)
    except LocalRunError as error:          # a penalised zoo is still scored
        print(f"  note: {measure} on {phase}: {str(error).splitlines()[0]}", file=sys.stderr)
    details = work / "scoring" / "run" / "output" / "detailed_results.json"
    if not details.is_file():
        raise LocalRunError(f"{measure} on {phase}: nothing was scored; run_local's log:\n"
                            + log.getvalue()[-3000:])
    return json.loads(details.read_text())["tasks"]


def collect(spec, budget: float | None = None) -> dict:
    """``budget``: seconds for every zoo; None: each zoo's budget in the spec."""
    config, data_root = spec.path, spec.data_root
    table = {"made_with": "kinds/pgdl2020/kit/baseline_results.py: run_local --score-hidden "
                          "--code kinds/pgdl2020/kit/baselines/<measure>.py, with "
                          + (f"{budget:g} s per zoo" if budget else "the spec's budgets"),
             "measures": MEASURES, "tasks": {}}
    with tempfile.TemporaryDirectory() as scratch:
        for measure in MEASURES:
            for phase in spec.phases:
                tasks = _scored(measure, phase.key, budget, config, data_root,
                                Path(scratch) / f"{measure}-{phase.key}")
                for task, result in tasks.items():
                    row = {name: metric["value"] for name, metric in result["metrics"].items()}
                    row["penalty"] = result["penalty"]
                    table["tasks"].setdefault(task, {})[measure] = row
                    print(f"{measure:15s} {phase.key:10s} {task:20s} " + " ".join(
                        f"{name}={value:.3f}" for name, value in row.items()
                        if name != "penalty") + (f" penalised: {row['penalty']}"
                                                 if row["penalty"] else ""), flush=True)
    return table


def markdown(table: dict) -> str:
    metrics = [name for name in next(iter(next(iter(table["tasks"].values())).values()))
               if name != "penalty"]
    lines = ["| task | measure | " + " | ".join(metrics) + " |",
             "|---|---|" + "---|" * len(metrics)]
    for task, measures in table["tasks"].items():
        for measure, row in measures.items():
            penalised = " (penalised)" if row["penalty"] else ""
            lines.append(f"| {task} | {table['measures'][measure]}{penalised} | "
                         + " | ".join(f"{row[name]:.3f}" for name in metrics) + " |")
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
    args = parser.parse_args(argv)
    spec = baselines_spec(args.config, args.data_root, "pgdl2020")
    out = args.out or results_file(spec)
    return write_baseline_table(out, lambda: collect(spec, args.budget), markdown)


if __name__ == "__main__":
    sys.exit(main())

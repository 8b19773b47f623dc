"""The Retina baselines' table on a spec's tasks, in one command (about 30 s on 2 cores).

  python kinds/retina/kit/baseline_results.py
  python kinds/retina/kit/baseline_results.py --config my_spec.yaml --data-root my_tasks/

Runs every baseline as code on every phase of the spec (a results phase's tasks too: the code
trains on their training patients) through the phase's starting kit, built as the builder
builds it with the phase's hidden references added (bundle/local_run.py, ``--score-hidden``),
with that kit's own run_local, scores it against those references, and writes ``baseline_results.json`` next to the spec (the
default spec's: next to this file), which the builder shows on the overview page. Prints the
table in Markdown. A method that fails a task makes the command exit 1 naming each failure,
without writing the table, unless ``--keep-going`` (kinds/baseline_table.py).
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
                              organizer_spec, write_baseline_table)
from kinds.baseline_table import (KEEP_GOING, KEEP_GOING_HELP, failed, failed_cell,  # noqa: E402
                                  failed_row)

METHODS = {"map": "MAP (one network)", "mc_dropout": "MC dropout (50 passes)",
           "deep_ensemble": "Deep ensemble (5 networks)", "small_cnn": "Small CNN (numpy)",
           "torch_mc_dropout": "MC dropout ResNet (PyTorch)",
           "torch_deep_ensemble": "Deep ensemble of ResNets (PyTorch)"}
# What each method reads: the tabular ones read image tasks as block means (a format
# sample, not a method for images), so the table gives them feature tasks only.
INPUTS = {"map": "features", "mc_dropout": "features", "deep_ensemble": "features",
          "small_cnn": "images", "torch_mc_dropout": "images", "torch_deep_ensemble": "images"}
NEEDS_TORCH = ("torch_mc_dropout", "torch_deep_ensemble")
RESULTS_FILE = KIT / "baseline_results.json"
SHOWN = ("auroc_in", "referral_joint", "referral_in", "referral_shifted", "accuracy_shifted",
         "ece_in", "ece_shifted", "ood_auroc")
SET_FIGURES = ("in-domain accuracy", "shifted AUROC", "joint AUROC",
               "in-domain sensitivity at 80% specificity")


DEFAULT_SPEC = KIT.parent / "default_spec.yaml"


def results_file(spec) -> Path:
    """Next to the spec; the default spec's is this kit's (where the builder reads it)."""
    if Path(spec.path).resolve() == DEFAULT_SPEC.resolve():
        return RESULTS_FILE
    return Path(spec.path).parent / RESULTS_FILE.name


def phase_inputs(spec, phase: str) -> set[str]:
    """What the phase's tasks give: features, images or both."""
    from bundle.phase_plan import phase_plan
    from kinds.retina.kind import ingestion_contract
    return {ingestion_contract(task).get("inputs", "features")
            for task in phase_plan(spec, phase, None).tasks}


def runnable_methods() -> list[str]:
    """The methods this interpreter can run: the PyTorch ones where torch imports."""
    import importlib.util
    torch = importlib.util.find_spec("torch") is not None
    return [method for method in METHODS if torch or method not in NEEDS_TORCH]


def collect(config: Path, data_root: Path | None) -> dict:
    spec = organizer_spec(config, data_root)
    table = {"made_with": "kinds/retina/kit/baseline_results.py: python -m bundle.local_run "
                          "--score-hidden --baseline <method>, with the spec's budgets",
             "methods": METHODS, "tasks": {}}
    with tempfile.TemporaryDirectory() as scratch:
        kits = {phase.key: build_kit(spec, phase.key, Path(scratch) / "kits" / phase.key,
                                     hidden_references=True) for phase in spec.phases}
        runs = [(method, phase) for method in runnable_methods() for phase in spec.phases
                if phase_inputs(spec, phase.key) == {INPUTS[method]}]
        bar = Progress(len(runs), "baseline runs", "runs")
        for method, phase in runs:
            tasks = baseline_details(kits[phase.key], Path(scratch) / f"{method}-{phase.key}",
                                     method, f"{method} on {phase.key}")["tasks"]
            for task, result in tasks.items():
                row = _row(result)
                table["tasks"].setdefault(task, {})[method] = row
                bar.clear()
                print(f"{method:14s} {task:16s} {_progress(row)}", flush=True)
            bar.advance()
        bar.close()
    return table


def _row(result: dict) -> dict:
    """A method's row of one task: its figures with their standard errors, or why it failed
    (and no figure)."""
    failure = failed_row(result)
    if failure:
        return failure
    row = {name: result["metrics"][name]["value"] for name in SHOWN}
    row |= {name: result["extras"].get(name) for name in SET_FIGURES}
    return {**row, "penalty": None,
            "se": {name: result["metrics"][name]["se"] for name in SHOWN}}


def _progress(row: dict) -> str:
    if failed(row):
        return f"{failed_cell(row)} ({row['penalty']})"
    return " ".join(f"{name}={row[name]:.3f}" for name in SHOWN)


def markdown(table: dict) -> str:
    header = ["task", "method", *SHOWN, *SET_FIGURES]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for task, methods in table["tasks"].items():
        for method, row in methods.items():
            cells = [failed_cell(row) if failed(row) else "-" if row[name] is None
                     else f"{row[name]:.3f}" for name in (*SHOWN, *SET_FIGURES)]
            lines.append(f"| {task} | {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path,
                        default=DEFAULT_SPEC)
    parser.add_argument("--data-root", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(KEEP_GOING, action="store_true", help=KEEP_GOING_HELP)
    args = parser.parse_args(argv)
    out = args.out or results_file(baselines_spec(args.config, args.data_root, "retina"))
    return write_baseline_table(out, lambda: collect(args.config, args.data_root), markdown,
                                args.keep_going)


if __name__ == "__main__":
    sys.exit(main())

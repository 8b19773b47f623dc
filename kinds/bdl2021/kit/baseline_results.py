"""The baselines' results table on a spec's tasks, in one command.

  python kinds/bdl2021/kit/baseline_results.py       # the default spec: about 6.5 minutes on 2 cores
  python kinds/bdl2021/kit/baseline_results.py --config my_spec.yaml --data-root my_tasks/
  python kinds/bdl2021/kit/baseline_results.py --methods sgld,trivial   # some baselines only

Runs every baseline and the trivial submission, as a floor (``--methods``: those named, whose
rows then replace theirs in the table already there when it is of the same tasks and
budgets), through each phase's starting kit, built as the builder builds it
(bundle/local_run.py), with that kit's own run_local, on every phase of the spec, on its
tasks with its budgets (``--budget`` overrides them), printing one
line per baseline, phase and task as it completes. Then writes the table next to the spec,
``<spec folder>/baseline_results.json`` (for the default spec: ``baseline_results.json`` next
to this file; ``--out`` elsewhere), where the builder reads it for the overview page, and
prints it in Markdown: each
metric against the HMC model average, ± its standard error (over test rows and HMC chains), the
exact-posterior expectation (what an exact sampler's submission is expected to score
against this finite HMC reference), and clean vs shifted blocks.

A baseline that fails a task (penalised by the scorer: it raised, timed out, wrote nothing)
makes the command exit 1 naming each such baseline and task with the reason, and the table is
not written; ``--keep-going`` writes it with those rows shown failed (kinds/baseline_table.py).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

KIT = Path(__file__).resolve().parent
REPO = KIT.parents[2]
sys.path.insert(0, str(REPO))

from bundle.competition_rules.epoch_budgets import spec_epochs  # noqa: E402
from bundle.progress import Progress  # noqa: E402
from bundle.local_run import (LocalRunError, baseline_details, baselines_spec,  # noqa: E402
                              build_kit, organizer_spec)
from kinds.baseline_table import (KEEP_GOING, KEEP_GOING_HELP, failed, failed_cell,  # noqa: E402
                                  failed_row, stopped_by_failures)
from kinds.bdl2021.pages import baseline_cell, expectation_cell  # noqa: E402

METHODS = {"deep_ensemble": "Deep ensemble (10 MAP members)",
           "multi_swag": "MultiSWAG (5 SWAG members)",
           "sgld": "Cyclical SGLD",
           "sghmc": "SGHMC",
           "hmc": "Full-batch HMC (diagonal mass)",
           "mean_field_vi": "Mean-field VI",
           "mc_dropout": "MC dropout",
           "trivial": "Trivial (uniform / prior predictive)"}
RESULTS_FILE = KIT / "baseline_results.json"


def results_file(spec) -> Path:
    """Where the builder looks for a spec's table: next to it; the default spec's is this kit's."""
    from bundle.spec import DEFAULT_SPEC
    if Path(spec.path).resolve() == Path(DEFAULT_SPEC).resolve():
        return RESULTS_FILE
    return Path(spec.path).parent / RESULTS_FILE.name


def _each_run(spec, phases, budget: float | None, kits: Path, methods):
    """(method, phase, detailed results) of each baseline in ``methods`` on every phase, in
    the table's order; each phase's kit is built once, in ``kits``."""
    built = {phase: build_kit(spec, phase, kits / phase, budget_seconds=budget)
             for phase in phases}
    with Progress(len(methods) * len(phases), "baseline runs", "runs") as runs:
        for method in methods:
            for phase in phases:
                with tempfile.TemporaryDirectory(prefix=f"{method}-") as work:
                    details = baseline_details(built[phase], Path(work), method,
                                               f"{method} on {phase}")
                runs.clear()        # the caller prints this run's lines
                yield method, phase, details
                runs.advance()


def collect(budget: float | None = None, config: Path | None = None,
            data_root: Path | None = None, methods=tuple(METHODS)) -> dict:
    """``budget``: seconds for every task; None: each task's budget in the spec.
    ``methods``: keys of METHODS, in the table's order."""
    spec = organizer_spec(config, data_root)
    phases = {phase.key: phase.tasks for phase in spec.phases}
    tasks = sorted({task for names in phases.values() for task in names})
    budgets = {task: budget if budget is not None else spec.budgets[task] for task in tasks}
    table = {"budgets": budgets, "methods": {m: METHODS[m] for m in methods}, "tasks": {}}
    epochs = spec_epochs(spec)
    if budget is None and epochs:       # budgets stated in epochs: budgets are ceilings
        table["epochs"] = {task: epochs[task] for task in tasks if task in epochs}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kits-") as kits:
        for method, phase, details in _each_run(spec, phases, budget, Path(kits), methods):
            for task, result in details["tasks"].items():
                given = result.get("calibration", {}).get("budget_seconds", budgets[task])
                row = _row(result, given)
                print(f"[{time.monotonic() - started:7.1f} s] {method} / {phase} / {task}: "
                      f"{_progress(row)}, trained {result['train_seconds'] or 0:.1f} s of "
                      f"{given:g} s", flush=True)
                entry = table["tasks"].setdefault(task, {"phase": phase, "methods": {}})
                entry["methods"][method] = row
                # the reference's, not the baseline's: a penalised result carries it too
                entry["exact_posterior_expectation"] = {
                    name: {"value": m["exact_posterior_expectation"],
                           "spread": m["exact_posterior_expectation_spread"],
                           "interval": m["exact_posterior_expectation_interval"]}
                    for name, m in result["metrics"].items()}
    return table


def _row(result: dict, budget: float) -> dict:
    """A baseline's row of one task: its figures, or why it failed (and no figure)."""
    timing = {"train_seconds": result["train_seconds"], "budget_seconds": budget}
    failure = failed_row(result)
    if failure:
        return {**failure, **timing}
    return {"metrics": {name: {k: m[k] for k in ("value", "std", "se")}
                        for name, m in result["metrics"].items()},
            "blocks": result["blocks"], "penalty": None, **timing}


def _progress(row: dict) -> str:
    if failed(row):
        return f"{failed_cell(row)} ({row['penalty']})"
    name, metric = next(iter(row["metrics"].items()))
    return f"{name} {metric['value']:.3f}"


def _cell(row: dict, metric: str) -> str:
    return failed_cell(row) if failed(row) else baseline_cell(row["metrics"][metric])


def merged(previous: dict | None, table: dict) -> dict:
    """A table of some baselines merged into the previous one of the same tasks and budgets
    (rerunning one baseline keeps the others' rows); otherwise the new table alone."""
    if not previous or any(previous.get(key) != table.get(key) for key in ("budgets", "epochs")) \
            or set(previous.get("tasks", {})) != set(table["tasks"]):
        return table
    methods = [m for m in METHODS if m in previous["methods"] or m in table["methods"]]
    tasks = {task: {**entry, "methods": {m: {**previous["tasks"][task]["methods"],
                                              **entry["methods"]}[m] for m in methods}}
             for task, entry in table["tasks"].items()}
    return {**table, "methods": {m: METHODS[m] for m in methods}, "tasks": tasks}


def _block_order(task: str, data_root: Path | None, blocks: dict) -> list[str]:
    """The test set's own order (clean first, then increasing severity), as declared."""
    declaration = (Path(data_root) if data_root else KIT.parent / "reference" / "embedded") \
        / task / f"{task}_task.json"
    if not declaration.is_file():
        return list(blocks)
    return [block["name"] for block in json.loads(declaration.read_text())["test_blocks"]]


def markdown(table: dict, data_root: Path | None = None) -> str:
    """``data_root``: where the tasks' declarations are (default: the embedded tasks)."""
    methods = table["methods"]
    lines = ["| task | metric | " + " | ".join(methods.values())
             + " | exact-posterior expectation |",
             "|---|---|" + "---|" * (len(methods) + 1)]
    for task, entry in sorted(table["tasks"].items(), key=lambda item: (item[1]["phase"], item[0])):
        for metric, expected in entry["exact_posterior_expectation"].items():
            cells = [_cell(entry["methods"][m], metric) for m in methods]
            lines.append(f"| {task} ({entry['phase'][:3]}) | {metric} | " + " | ".join(cells)
                         + f" | {expectation_cell(expected)} |")
    for task, entry in table["tasks"].items():
        blocks = next((row["blocks"] for row in entry["methods"].values()
                       if not failed(row) and row["blocks"]), None)
        if not blocks:
            continue
        metrics = [m for m in next(iter(blocks.values())) if m != "size"]    # as scored
        lines += ["", f"{task}, {' / '.join(m.replace('_', ' ') for m in metrics)} per test block:",
                  "", "| block | " + " | ".join(methods.values()) + " |",
                  "|---|" + "---|" * len(methods)]
        for block in _block_order(task, data_root, blocks):
            rows = (entry["methods"][m] for m in methods)
            lines.append(f"| {block} | " + " | ".join(
                failed_cell(row) if failed(row) else
                " / ".join(f"{row['blocks'][block][metric]:.3f}" for metric in metrics)
                for row in rows) + " |")
    return "\n".join(lines)


def print_table(path: Path = RESULTS_FILE) -> None:
    print(markdown(json.loads(path.read_text())))


def _methods(text: str) -> tuple:
    chosen = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in chosen if name not in METHODS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"{', '.join(unknown) or 'none given'}: expected some of {', '.join(METHODS)}")
    return tuple(name for name in METHODS if name in chosen)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=None,
                        help="the organizer spec (default: the default competition's)")
    parser.add_argument("--data-root", type=Path, default=None,
                        help="the folder of the spec's task files (default: the spec's)")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds per task (default: each task's budget in the spec)")
    parser.add_argument("--out", type=Path, default=None,
                        help="the table's file (default: baseline_results.json next to the "
                             "spec, where the builder reads it)")
    parser.add_argument("--methods", type=_methods, default=tuple(METHODS),
                        help="baselines to run, comma-separated (default: all): "
                             + ", ".join(METHODS))
    parser.add_argument(KEEP_GOING, action="store_true", help=KEEP_GOING_HELP)
    args = parser.parse_args(argv)
    spec = baselines_spec(args.config, args.data_root, "bdl2021")
    out = args.out or results_file(spec)
    try:
        table = collect(args.budget, args.config, args.data_root, args.methods)
    except LocalRunError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if stopped_by_failures(table, args.keep_going):
        return 1
    if set(args.methods) != set(METHODS) and out.is_file():
        try:
            table = merged(json.loads(out.read_text()), table)
        except (ValueError, KeyError, TypeError):
            pass                            # an unreadable previous table is replaced
    out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(markdown(table, spec.data_root))
    print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

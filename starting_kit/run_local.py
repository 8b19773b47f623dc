"""Run a submission on your machine exactly as the platform does, and score it.

It uses the very ingestion and scoring programs the competition bundle ships, with the
same budgets, the same command lines and the same folder layout as the CodaLab worker.

  # training code: a folder or zip with submission.py, or a baseline file
  python run_local.py --code baselines/deep_ensemble.py
  python run_local.py --code my_submission/

  # prediction files (development phase): a folder or zip with <task>_probs.csv ...
  python run_local.py --results my_predictions/

Scores are printed, then the detailed results page's path. In the downloaded starting kit the
programs and data of its phase are in programs/ and data/; references of the development
phase are public, so those tasks are scored; evaluation references are hidden, so there the
run checks that your code trains in time and returns valid predictions. In the organizers'
repository (no programs/ folder) the programs are assembled from source for --phase.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

KIT = Path(__file__).resolve().parent
REPO = KIT.parent
sys.path.insert(0, str(KIT))

from submission_zip import SubmissionLayoutError, check_submission_folder  # noqa: E402

DEFAULT_BUDGET_SECONDS = 30.0
BASELINE_SUPPORT = ("training.py", "declared_model.py")


@dataclass(frozen=True)
class Layout:
    """Where the programs and data of a local run come from."""
    ingestion_program: Path
    scoring_program: Path
    input_data: Path
    reference_data: Path | None          # None: hidden, predictions are checked, not scored
    declared_model: Path


def kit_layout() -> Layout | None:
    """The downloaded starting kit: programs and data prebuilt by the bundle builder."""
    programs, data = KIT / "programs", KIT / "data"
    if not programs.is_dir():
        return None
    reference = data / "reference"
    return Layout(programs / "ingestion_program", programs / "scoring_program", data / "input",
                  reference if reference.is_dir() else None,
                  KIT / "baselines" / "declared_model.py")


def repository_layout(phase: str, budget_seconds: float, work: Path) -> Layout:
    """The organizers' repository: assemble the programs from source, as the builder does."""
    sys.path.insert(0, str(REPO))
    from bundle.phase_data import stage_input_data, stage_reference_data
    from bundle.phase_plan import embedded_phase
    from bundle.programs import assemble_ingestion_program, assemble_scoring_program
    from bundle.starting_kit import DECLARED_MODEL
    plan = embedded_phase(phase, code_submission=True, budget_seconds=budget_seconds)
    parts = work / "parts"
    assemble_ingestion_program(plan, parts / "ingestion_program")
    assemble_scoring_program(plan, parts / "scoring_program")
    stage_input_data(plan, parts / "input")
    has_references = all(task.files.reference.is_file() for task in plan.tasks)
    if has_references:
        stage_reference_data(plan, parts / "reference")
    return Layout(parts / "ingestion_program", parts / "scoring_program", parts / "input",
                  parts / "reference" if has_references else None, DECLARED_MODEL)


def _run_program(program: Path, variables: dict, cwd: Path):
    try:
        from worker import run_program          # the kit's copy of bundle/worker.py
    except ImportError:
        sys.path.insert(0, str(REPO))
        from bundle.worker import run_program
    return run_program(program, variables, sys.executable, cwd)


def package_code(source: Path, destination: Path, declared_model: Path) -> Path:
    """A submission folder: a baseline file (with its support modules), or your folder/zip."""
    if source.is_file() and source.suffix == ".py":
        destination.mkdir(parents=True)
        shutil.copyfile(source, destination / "submission.py")
        for name in BASELINE_SUPPORT:
            support = source.parent / name
            shutil.copyfile(support if support.is_file() else declared_model, destination / name)
        return destination
    if source.suffix == ".zip":
        with zipfile.ZipFile(source) as archive:
            archive.extractall(destination)
    else:
        shutil.copytree(source, destination)
    check_submission_folder(destination, required=("submission.py",))
    if not (destination / "declared_model.py").exists():
        shutil.copyfile(declared_model, destination / "declared_model.py")
    return destination


def _ingest(layout: Layout, submission: Path, work: Path) -> Path:
    run = work / "ingestion" / "run"
    for folder in ("output", "temp"):
        (run / folder).mkdir(parents=True)
    shutil.copytree(layout.ingestion_program, run / "ingestion_program")
    shutil.copytree(layout.input_data, run / "input")
    shutil.copytree(submission, run / "program")
    result = _run_program(run / "ingestion_program", {
        "$ingestion_program": run / "ingestion_program", "$submission_program": run / "program",
        "$input": run / "input", "$output": run / "output", "$tmp": run / "temp",
        "$hidden": "$hidden"}, cwd=run)
    print(result.stdout, end="")
    if result.returncode != 0:
        print(result.stderr, file=sys.stderr, end="")
        raise SystemExit(f"the ingestion program failed (exit {result.returncode})")
    return run / "output"


def _score(layout: Layout, predictions: Path, work: Path) -> Path | None:
    if layout.reference_data is None:
        print("references of this phase are hidden: predictions were checked, not scored")
        return None
    run = work / "scoring" / "run"
    (run / "output").mkdir(parents=True)
    shutil.copytree(layout.scoring_program, run / "program")
    shutil.copytree(layout.reference_data, run / "input" / "ref")
    shutil.copytree(predictions, run / "input" / "res")
    result = _run_program(run / "program", {"$program": run / "program", "$input": run / "input",
                                            "$output": run / "output"}, cwd=run)
    print(result.stderr, file=sys.stderr, end="")      # penalties and notes
    if result.returncode != 0:
        raise SystemExit(f"scoring failed (exit {result.returncode}); reasons above")
    return run / "output"


def run_local(phase: str, work: Path, code: Path | None = None, results: Path | None = None,
              budget_seconds: float = DEFAULT_BUDGET_SECONDS) -> Path | None:
    """Returns the scoring output folder (scores.txt, detailed_results.html), if scored."""
    work.mkdir(parents=True, exist_ok=True)
    layout = kit_layout() or repository_layout(phase, budget_seconds, work)
    if code is not None:
        predictions = _ingest(layout, package_code(code, work / "submission", layout.declared_model),
                              work)
    else:
        predictions = work / "results"
        if results.suffix == ".zip":
            with zipfile.ZipFile(results) as archive:
                archive.extractall(predictions)
        else:
            shutil.copytree(results, predictions)
    return _score(layout, predictions, work)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--code", type=Path, help="submission folder or zip, or a baseline .py file")
    what.add_argument("--results", type=Path, help="folder or zip of prediction files")
    parser.add_argument("--phase", choices=("development", "evaluation"), default="development",
                        help="repository only: which phase's tasks (the kit has its own)")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_SECONDS,
                        help="repository only: seconds per task (the kit uses its phase's)")
    parser.add_argument("--out", type=Path, help="keep the run here (default: a temporary folder)")
    args = parser.parse_args(argv)
    work = args.out or Path(tempfile.mkdtemp(prefix="run-local-"))
    try:
        output = run_local(args.phase, work, args.code, args.results, args.budget)
    except SubmissionLayoutError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if output is not None:
        scores = (output / "scores.txt").read_text()
        print(f"\nscores:\n{scores}")
        print(f"detailed results: {output / 'detailed_results.html'}")
        (work / "scores.json").write_text(json.dumps(
            {line.split(":")[0]: float(line.split(":")[1]) for line in scores.splitlines()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

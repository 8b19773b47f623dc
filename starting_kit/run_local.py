"""Run a submission on your machine exactly as the platform does, and score it.

It uses the very ingestion and scoring programs the competition bundle ships, with the
same budgets, the same command lines and the same folder layout as the CodaLab worker.

  # training code (evaluation-phase style): a folder with submission.py, or a baseline
  python starting_kit/run_local.py --code starting_kit/baselines/deep_ensemble.py
  python starting_kit/run_local.py --code my_submission/ --phase evaluation

  # prediction files (development phase): a folder or zip with <task>_probs.csv ...
  python starting_kit/run_local.py --results my_predictions/

Scores are printed; the detailed results page's path is printed last. References of the
development phase are public, so those tasks are always scored; evaluation references are
hidden, so evaluation tasks are scored only where the references are at hand (the
organizers' repository), otherwise the run checks that your code trains in time and
returns valid predictions.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

KIT = Path(__file__).resolve().parent
REPO = KIT.parent
sys.path.insert(0, str(REPO))

from bundle.phase_plan import embedded_phase  # noqa: E402
from bundle.phase_data import stage_input_data, stage_reference_data  # noqa: E402
from bundle.programs import assemble_ingestion_program, assemble_scoring_program  # noqa: E402
from bundle.starting_kit import DECLARED_MODEL, package_baseline  # noqa: E402
from bundle.worker import run_program  # noqa: E402
sys.path.insert(0, str(KIT))
from submission_zip import SubmissionLayoutError, check_submission_folder  # noqa: E402

DEFAULT_BUDGET_SECONDS = 30.0


def package_code(source: Path, destination: Path) -> Path:
    """A submission folder: a baseline file (with its support modules), or your folder."""
    if source.is_file():
        return package_baseline(source, destination)
    if source.suffix == ".zip":
        with zipfile.ZipFile(source) as archive:
            archive.extractall(destination)
    else:
        shutil.copytree(source, destination)
    check_submission_folder(destination, required=("submission.py",))
    if not (destination / "declared_model.py").exists():
        shutil.copyfile(DECLARED_MODEL, destination / "declared_model.py")
    return destination


def _ingest(plan, submission: Path, work: Path) -> Path:
    run = work / "ingestion" / "run"
    for folder in ("output", "temp"):
        (run / folder).mkdir(parents=True)
    assemble_ingestion_program(plan, run / "ingestion_program")
    stage_input_data(plan, run / "input")
    shutil.copytree(submission, run / "program")
    result = run_program(run / "ingestion_program", {
        "$ingestion_program": run / "ingestion_program", "$submission_program": run / "program",
        "$input": run / "input", "$output": run / "output", "$tmp": run / "temp",
        "$hidden": "$hidden"}, sys.executable, cwd=run)
    print(result.stdout, end="")
    if result.returncode != 0:
        print(result.stderr, file=sys.stderr, end="")
        raise SystemExit(f"the ingestion program failed (exit {result.returncode})")
    return run / "output"


def _score(plan, predictions: Path, work: Path) -> Path | None:
    if not all(task.files.reference.is_file() for task in plan.tasks):
        print("references of this phase are hidden: predictions were checked, not scored")
        return None
    run = work / "scoring" / "run"
    (run / "output").mkdir(parents=True)
    assemble_scoring_program(plan, run / "program")
    stage_reference_data(plan, run / "input" / "ref")
    shutil.copytree(predictions, run / "input" / "res")
    result = run_program(run / "program", {"$program": run / "program", "$input": run / "input",
                                           "$output": run / "output"}, sys.executable, cwd=run)
    print(result.stderr, file=sys.stderr, end="")      # penalties and notes
    if result.returncode != 0:
        raise SystemExit(f"scoring failed (exit {result.returncode}); reasons above")
    return run / "output"


def run_local(phase: str, work: Path, code: Path | None = None, results: Path | None = None,
              budget_seconds: float = DEFAULT_BUDGET_SECONDS) -> Path | None:
    """Returns the scoring output folder (scores.txt, detailed_results.html), if scored."""
    plan = embedded_phase(phase, code_submission=code is not None, budget_seconds=budget_seconds)
    work.mkdir(parents=True, exist_ok=True)
    if code is not None:
        predictions = _ingest(plan, package_code(code, work / "submission"), work)
    else:
        predictions = work / "results"
        package_results(results, predictions)
    return _score(plan, predictions, work)


def package_results(source: Path, destination: Path) -> None:
    if source.suffix == ".zip":
        with zipfile.ZipFile(source) as archive:
            archive.extractall(destination)
    else:
        shutil.copytree(source, destination)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--code", type=Path, help="submission folder or zip, or a baseline .py file")
    what.add_argument("--results", type=Path, help="folder or zip of prediction files")
    parser.add_argument("--phase", choices=("development", "evaluation"), default="development")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_SECONDS,
                        help=f"seconds per task (default: {DEFAULT_BUDGET_SECONDS:g}, the phase's)")
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
        print(f"\nscores ({args.phase} phase):\n{scores}")
        print(f"detailed results: {output / 'detailed_results.html'}")
        (work / "scores.json").write_text(json.dumps(
            {line.split(":")[0]: float(line.split(":")[1]) for line in scores.splitlines()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

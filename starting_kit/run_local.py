"""Run a submission on your machine exactly as the platform does, and score it.

It uses the very ingestion and scoring programs the competition bundle ships, with the
same budgets, the same command lines, the same folder layout and the same rule for
telling code from prediction files as the platform's worker.

  # training code: a zip, a folder with submission.py, or a baseline file
  python run_local.py --code submission.zip
  python run_local.py --code my_submission/
  python run_local.py --code baselines/deep_ensemble.py

  # prediction files (results phases): a zip or folder with one file per task
  python run_local.py --results my_predictions/

A folder is first zipped by submission_zip.py, as you would before uploading, and that zip
is what runs (its path is printed: upload that file). Scores are printed with exactly the
leaderboard's keys, then the detailed results page's path. The run exits with status 1
when the platform would not score your submission as you intend: a zip it would take for
something else, a task that failed or was penalised, no task scored (the platform fails such
a submission), scores it would refuse. In a results phase, code given as a folder or a .py
file is trained on the phase's tasks and scored (upload the prediction files
predictions_zip.py makes of it); a code zip is checked as the site takes it there.

The programs and data of the kit's phase are in programs/ and data/; where the phase's
references are public, tasks are scored; where they are hidden, the run checks that your code
trains in time and returns valid predictions, then runs it on the kit's public stand-in
(stand_in/) and scores that, saying which data the scores are on.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import signal
import subprocess
import sys
import threading
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

KIT = Path(__file__).resolve().parent
sys.path.insert(0, str(KIT))

from submission_zip import SubmissionLayoutError, ingestion_outputs, make_zip  # noqa: E402
import versions  # noqa: E402
import worker  # noqa: E402

RECORD_NAME = "ingestion_record.json"
# Ctrl-C, kill and a closed terminal: the ingestion stops its tasks' processes on each of
# these, so run_local passes them on and waits, rather than dying and leaving your code running.
STOPPING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP")
                         if hasattr(signal, name))


class LocalRunError(RuntimeError):
    """The platform would not score this submission as intended; the message says why."""


class Stopped(Exception):
    """This run was asked to stop; the program it was running stopped first."""

    def __init__(self, number: int):
        super().__init__(signal.Signals(number).name)
        self.number = number


@dataclass(frozen=True)
class Layout:
    """Where the programs and data of a local run come from, and what the platform expects."""
    ingestion_program: Path
    scoring_program: Path
    input_data: Path
    reference_data: Path | None          # None: hidden, predictions are checked, not scored
    platform: str
    phase: str
    code_phase: bool                     # the phase takes code (else prediction files)
    leaderboard_keys: tuple[str, ...]
    entry_file: str = "submission.py"    # what a code submission holds at its root (the kind's)
    image: str | None = None             # the competition's docker image
    image_requirements: Path | None = None   # its packages' versions, where the kit knows them
    # Where the references are hidden: public tasks a code run is scored on instead, and a
    # line per task saying what data they are (the kit's stand_in/, bundle/starting_kit.py)
    stand_in: "Layout | None" = None
    stand_in_about: tuple[str, ...] = ()


def kit_layout() -> Layout:
    """The starting kit: programs and data prebuilt by the bundle builder."""
    programs, data = KIT / "programs", KIT / "data"
    config = json.loads((KIT / "kit.json").read_text(encoding="utf-8"))
    reference = data / "reference"
    layout = Layout(programs / "ingestion_program", programs / "scoring_program", data / "input",
                    reference if reference.is_dir() else None, config["platform"], config["phase"],
                    config["code_submission"], tuple(config["leaderboard_keys"]),
                    config.get("entry_file", "submission.py"), config.get("docker_image"),
                    KIT / versions.IMAGE_REQUIREMENTS)
    stand_in = config.get("stand_in")
    if not stand_in:
        return layout
    folder = KIT / "stand_in"
    return dataclasses.replace(layout, stand_in=dataclasses.replace(
        layout, ingestion_program=folder / "ingestion_program",
        scoring_program=folder / "scoring_program", input_data=folder / "input",
        reference_data=folder / "reference", code_phase=True,
        leaderboard_keys=tuple(stand_in["leaderboard_keys"])),
        stand_in_about=tuple(stand_in["about"]))


def _baseline_folder(source: Path, destination: Path, entry: str) -> Path:
    """A baseline file as a submission folder: the .py files next to it under their own names
    (baselines import each other by name: multi_swag.py imports sgld), and the file again as
    the entry file (submission.py for BDL)."""
    destination.mkdir(parents=True)
    for module in sorted(source.parent.glob("*.py")):
        shutil.copyfile(module, destination / module.name)
    shutil.copyfile(source, destination / entry)
    return destination


def _zip_baseline(source: Path, layout: Layout, work: Path) -> Path:
    """The zip of a baseline file's folder; an error names the participant's folder, of which
    the staged one is a copy, never the staging folder."""
    staged = _baseline_folder(source, work / "baseline", layout.entry_file)
    destination = work / "submission.zip"
    try:
        names = make_zip(staged, destination, code=True, entry=layout.entry_file)
    except SubmissionLayoutError as error:
        raise SubmissionLayoutError(str(error).replace(str(staged), str(source.parent))) from None
    print(f"zipped {source} as {layout.entry_file}, with the .py files next to it, as "
          f"submission_zip.py does: {destination} ({', '.join(names[:6])}"
          + (" ..." if len(names) > 6 else "") + ")")
    return destination


def submission_zip(source: Path, code: bool, layout: Layout, work: Path) -> Path:
    """The zip that would be uploaded: given, or made by submission_zip.py from a folder."""
    if not source.exists():
        raise SubmissionLayoutError(f"{source} does not exist")
    if source.is_file() and source.suffix == ".zip":
        return source
    if code and source.is_file() and source.suffix == ".py":
        return _zip_baseline(source, layout, work)
    if source.is_file():
        raise SubmissionLayoutError(f"{source}: expected a folder or a .zip"
                                    + (" (or a baseline .py file)" if code else ""))
    destination = work / ("submission.zip" if code else "predictions.zip")
    names = make_zip(source, destination, code=code, entry=layout.entry_file)
    print(f"zipped {source} as submission_zip.py does: {destination} ({', '.join(names[:6])}"
          + (" ..." if len(names) > 6 else "") + ")")
    return destination


def _unzipped(archive: Path, destination: Path) -> Path:
    try:
        with zipfile.ZipFile(archive) as opened:
            opened.extractall(destination)
    except (OSError, zipfile.BadZipFile) as error:
        raise SubmissionLayoutError(f"{archive}: not a readable zip ({error})") from None
    return destination


def _run_streaming(program: Path, variables: dict, cwd: Path) -> subprocess.CompletedProcess:
    """Run a program as the worker does, printing its stdout line by line as it comes (each
    task's log while the ingestion runs); stderr is collected for the reasons of a failure.
    A stopping signal is passed on to the program, which stops its children; then Stopped."""
    argv = worker.program_command(program, variables, sys.executable)
    env = {**versions.program_environment(), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, errors="replace", env=env, bufsize=1)
    received: list[int] = []

    def pass_on(number, _frame):
        received.append(number)
        if process.poll() is None:
            process.send_signal(number)

    # handlers can only be set from the main thread (a caller may run this in another)
    in_main = threading.current_thread() is threading.main_thread()
    previous = {number: signal.signal(number, pass_on)
                for number in (STOPPING_SIGNALS if in_main else ())}
    try:
        errors: list[str] = []
        reader = threading.Thread(target=lambda: errors.extend(process.stderr), daemon=True)
        reader.start()
        lines = []
        for line in process.stdout:
            lines.append(line)
            print(line, end="", flush=True)
        returncode = process.wait()
        reader.join()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    if received:
        print("".join(errors), file=sys.stderr, end="")
        raise Stopped(received[0])
    return subprocess.CompletedProcess(argv, returncode, "".join(lines), "".join(errors))


def _ingest(layout: Layout, submission: Path, work: Path) -> Path:
    run = work / "ingestion" / "run"
    for folder in ("output", "temp"):
        (run / folder).mkdir(parents=True)
    shutil.copytree(layout.ingestion_program, run / "ingestion_program")
    shutil.copytree(layout.input_data, run / "input")
    shutil.copytree(submission, run / "program")
    result = _run_streaming(run / "ingestion_program", {
        "$ingestion_program": run / "ingestion_program", "$submission_program": run / "program",
        "$input": run / "input", "$output": run / "output", "$tmp": run / "temp",
        # As on CodaLab, where the ingestion reads the reference data to sign its record;
        # in the kit the references of a code phase are hidden, and nothing is scored.
        "$hidden": layout.reference_data or "$hidden"}, run)
    if result.returncode != 0:
        print(result.stderr, file=sys.stderr, end="")
        raise LocalRunError(f"the ingestion program failed (exit {result.returncode}); "
                            "reasons above")
    return run / "output"


def _failed_tasks(predictions: Path) -> list[str]:
    record = predictions / RECORD_NAME
    if not record.is_file():
        return []
    runs = json.loads(record.read_text(encoding="utf-8")).get("tasks", {})
    return [f"{name}: {run.get('status')}" + (f" ({run['message']})" if run.get("message") else "")
            for name, run in sorted(runs.items()) if run.get("status") != "ok"]


def _score(layout: Layout, predictions: Path, work: Path) -> Path | None:
    if layout.reference_data is None:
        print("references of this phase are hidden: predictions were checked, not scored"
              + ("; --code runs your code on a public stand-in and scores that"
                 if layout.stand_in else ""))
        return None
    run = work / "scoring" / "run"
    (run / "output").mkdir(parents=True)
    shutil.copytree(layout.scoring_program, run / "program")
    shutil.copytree(layout.reference_data, run / "input" / "ref")
    shutil.copytree(predictions, run / "input" / "res")
    result = worker.run_program(run / "program", {"$program": run / "program",
                                                  "$input": run / "input",
                                                  "$output": run / "output"}, sys.executable, run,
                                 env=versions.program_environment())
    print(result.stderr, file=sys.stderr, end="")      # penalties and notes
    if result.returncode != 0:
        # the platform fails a submission whose scoring exits non-zero; the scorer's last line
        # says why (no task scored, a rule, a refused submission)
        reason = (result.stderr.strip().splitlines() or ["reasons above"])[-1]
        raise LocalRunError(f"scoring failed (exit {result.returncode}), so the platform would "
                            f"fail the submission: {reason}")
    return run / "output"


def run_local(work: Path, code: Path | None = None,
              results: Path | None = None) -> Path | None:
    """Returns the scoring output folder (scores, detailed_results.html), if scored.

    Raises LocalRunError (or SubmissionLayoutError) where the platform would not score the
    submission as intended."""
    # Absolute: the programs run in folders of their own, where a relative path means another
    # place (--out run gave run/scoring/run/run/scoring/...).
    work = Path(work).absolute()
    work.mkdir(parents=True, exist_ok=True)
    layout = kit_layout()
    as_code = code is not None
    archive = submission_zip(code if as_code else results, as_code, layout, work)
    submission = _unzipped(archive, work / "submission")
    clash = worker.overwrite_problem(submission, ingestion_outputs()) if as_code else None
    if clash:           # whatever the kit's platform: the zip is meant to run on both
        raise LocalRunError(f"{archive}: {clash}")
    dispatch = worker.dispatch_submission(submission, layout.platform, has_ingestion=as_code)
    if dispatch.ok and as_code and not layout.code_phase and archive == code:
        # A zip given is one meant for upload: what the site does with it here, where no
        # ingestion program runs (Codabench fails a code zip). Code given as a folder or a
        # .py file is tried locally, as predictions_zip.py runs it for this phase.
        dispatch = worker.dispatch_submission(submission, layout.platform, has_ingestion=False)
    if not dispatch.ok:
        raise LocalRunError(f"{archive}: {dispatch.problem}")
    code_folders = [layout.scoring_program, Path(worker.__file__)] + (
        [layout.ingestion_program, submission] if as_code else [])
    print("\n".join(versions.report(layout.image_requirements, layout.image, code_folders)))
    if as_code and not layout.code_phase:
        print(f"note: the {layout.phase} phase takes prediction files; this run trains your code "
              "on its tasks and scores what it returns; upload the zip of prediction files that "
              "predictions_zip.py makes from it, not a code zip")
    if not as_code and layout.code_phase:
        raise LocalRunError(f"the {layout.phase} phase takes code: a zip of prediction files "
                            "is not accepted there (use --code)")
    predictions = _ingest(layout, submission, work) if as_code else submission
    output = _score(layout, predictions, work)
    problems = _failed_tasks(predictions) if as_code else []
    if output is not None:
        problems += _scores(layout, output, work, "scores")
    elif as_code and layout.stand_in:
        output, stand_in_problems = _stand_in_run(layout, submission, work / "stand_in")
        problems += stand_in_problems
    if problems:
        raise LocalRunError("the platform would not score this as intended:\n  "
                            + "\n  ".join(dict.fromkeys(problems)))
    return output


def _scores(layout: Layout, output: Path, work: Path, heading: str) -> list[str]:
    """Print the scores with the leaderboard's keys (``work``/scores.json keeps them);
    returns what the platform would not score as intended."""
    scores, problems = worker.read_scores(output, list(layout.leaderboard_keys), layout.platform)
    print(f"\n{heading}:\n" + "".join(f"{key}: {value}\n" for key, value in scores.items()))
    print(f"detailed results: {output / 'detailed_results.html'}")
    (work / "scores.json").write_text(json.dumps(scores, indent=1) + "\n")
    return [f"penalised {line}" for line in worker.penalised_tasks(output)] + problems


STAND_IN_HEADING = "scores on the public stand-in, not on this phase's hidden test data"


def _stand_in_run(layout: Layout, submission: Path, work: Path) -> tuple[Path, list[str]]:
    """The code again, on the kit's public stand-in tasks, scored by the phase's scoring
    program: what the hidden references cannot give here."""
    print("\nthis phase's references are hidden: your code ran on its tasks above, unscored. "
          "It now runs on a public stand-in, scored by the phase's scoring program; the site's "
          "scores, on the hidden data, will differ:\n  " + "\n  ".join(layout.stand_in_about))
    work.mkdir()
    predictions = _ingest(layout.stand_in, submission, work)
    output = _score(layout.stand_in, predictions, work)
    problems = [f"stand-in {line}" for line in _failed_tasks(predictions)
                + _scores(layout.stand_in, output, work, STAND_IN_HEADING)]
    return output, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--code", type=Path, help="submission zip or folder, or a baseline .py file")
    what.add_argument("--results", type=Path, help="zip or folder of prediction files")
    parser.add_argument("--out", type=Path, help="keep the run here (default: a temporary folder)")
    args = parser.parse_args(argv)
    work = args.out or Path(tempfile.mkdtemp(prefix="run-local-"))
    try:
        run_local(work, args.code, args.results)
    except SubmissionLayoutError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except LocalRunError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except Stopped as stop:
        print(f"stopped by {stop}: the ingestion stopped your code's processes before exiting; "
              f"nothing was scored (the run's folder: {work})", file=sys.stderr)
        return 128 + stop.number
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Turn your code into the prediction files this results phase takes, zipped for upload.

  python predictions_zip.py my_submission/ predictions.zip      # a folder with your code
  python predictions_zip.py baselines/<file>.py predictions.zip  # a baseline of this kit
  python predictions_zip.py submission.zip predictions.zip      # a code zip

Your code runs on this phase's input data (data/input/) with the kit's ingestion program, the
one a code phase runs, under the same budgets and sandbox, so the prediction files are exactly
those a code phase would score. submission_zip.py then zips them as this phase takes them.
Check the zip with `python run_local.py --results predictions.zip` before uploading it.
On an error (a task that failed or ran out of time without a prediction) nothing is written.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

KIT = Path(__file__).resolve().parent
sys.path.insert(0, str(KIT))

# The local run's own steps: the same zip, the same ingestion run, the same failure rules.
from run_local import (RECORD_NAME, LocalRunError, _failed_tasks, _ingest,  # noqa: E402
                       _unzipped, kit_layout, submission_zip)
from submission_zip import SubmissionLayoutError, make_zip  # noqa: E402


def prediction_files(output: Path) -> list[Path]:
    """The files the ingestion wrote as predictions, as its record lists them (not its logs)."""
    record = json.loads((output / RECORD_NAME).read_text(encoding="utf-8"))
    return [output / name for name in sorted(record.get("files", {}))]


def predictions_zip(source: Path, destination: Path, work: Path) -> list[str]:
    """Run ``source`` (code) on the phase's inputs and zip its predictions at ``destination``;
    returns the names zipped. Raises LocalRunError or SubmissionLayoutError, writing nothing."""
    layout = kit_layout()
    if layout.code_phase:
        raise LocalRunError(f"the {layout.phase} phase takes code: upload the zip that "
                            "submission_zip.py makes of your code, not prediction files")
    archive = submission_zip(source, True, layout, work)
    output = _ingest(layout, _unzipped(archive, work / "submission"), work)
    failed = _failed_tasks(output)
    if failed:
        raise LocalRunError("your code gave no usable prediction for:\n  " + "\n  ".join(failed))
    predictions = work / "predictions"
    predictions.mkdir()
    for path in prediction_files(output):
        (predictions / path.name).write_bytes(path.read_bytes())
    return make_zip(predictions, destination, code=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("code", type=Path, help="a folder or zip of code, or a baseline .py file")
    parser.add_argument("destination", type=Path, help="the zip of prediction files to write")
    args = parser.parse_args(argv)
    try:
        with tempfile.TemporaryDirectory(prefix="predictions-zip-") as work:
            written = predictions_zip(args.code, args.destination, Path(work))
    except SubmissionLayoutError as error:
        print(f"error: {error}\nnothing was written", file=sys.stderr)
        return 2
    except LocalRunError as error:
        print(f"error: {error}\nnothing was written", file=sys.stderr)
        return 1
    print(f"wrote {args.destination}: {', '.join(written)}\n"
          f"check it: python run_local.py --results {args.destination}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A run record is bound to the submission it ran (issue 47, item 1).

Since v1.27 Codabench copies the submission's files over the ingestion's output before scoring,
and shows the submission to the scoring step at /app/ingested_program. A zip that ships the
signed output of an earlier genuine run of the same phase (its record and predictions) beside
code that crashes used to be scored as that earlier run: the record's HMAC holds, since the
ingestion did write it, once. The record now carries the digest of the submission it ran, and
the scorer, where it is shown the submission, refuses a record signed for other files."""
import shutil
import subprocess
from pathlib import Path

import pytest

from bundle.programs import assemble_scoring_program
from ingestion_harness import FAST_LABELS, new_run, prepare, run_ingestion
from plans import embedded_phase
from runtime.formats import RECORD_NAME, read_run_record
from runtime.formats.run_record import submission_digest
from scoring_harness import image_python

pytestmark = pytest.mark.slow

CRASHES = "def predict(task, x_train, y_train, x_test):\n    raise SystemExit(3)\n"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("binding")
    # label_accuracy's development phase (plans.py), run as a code phase
    prepare(root, kind="label_accuracy")
    assemble_scoring_program(embedded_phase("development", code_submission=True),
                             root / "scoring_program", platform="codabench")
    return root


def _ingest(prepared: Path, run: Path, code: str, extra: Path | None = None) -> Path:
    """The ingestion's output for a submission of ``code`` (plus the files of ``extra``)."""
    new_run(prepared, run, code)
    if extra is not None:
        shutil.copytree(extra, run / "run" / "program", dirs_exist_ok=True)
    result = run_ingestion(run)
    assert result.returncode == 0, result.stdout + result.stderr
    return run / "run" / "output"


def _score_as_codabench(prepared: Path, run: Path, output: Path, submission: Path):
    """Scoring as the v1.27 worker lays it out: the submission copied over the output, and
    shown read-only beside the scoring program."""
    app = run / "app"
    shutil.copytree(prepared / "scoring_program", app / "program")
    shutil.copytree(prepared / "hidden_ref", app / "input" / "ref")
    shutil.copytree(output, app / "input" / "res")
    shutil.copytree(submission, app / "input" / "res", dirs_exist_ok=True)
    shutil.copytree(submission, app / "ingested_program")
    (app / "output").mkdir()
    result = subprocess.run([image_python(), "-I", str(app / "program" / "score.py"),
                             str(app / "input"), str(app / "output")],
                            cwd=app, capture_output=True, text=True, timeout=300)
    return result, result.stdout + result.stderr


def test_an_honest_run_is_bound_to_its_submission_and_scores(prepared, tmp_path):
    output = _ingest(prepared, tmp_path, FAST_LABELS)
    submission = tmp_path / "run" / "program"
    record = read_run_record(output / RECORD_NAME)
    assert record.submission == submission_digest(submission)
    result, log = _score_as_codabench(prepared, tmp_path, output, submission)
    assert result.returncode == 0, log[-3000:]
    assert (tmp_path / "app" / "output" / "scores.json").is_file()


def test_an_earlier_runs_output_shipped_in_the_zip_is_refused(prepared, tmp_path):
    earlier = _ingest(prepared, tmp_path / "earlier", FAST_LABELS)
    replay = tmp_path / "replayed-files"
    shutil.copytree(earlier, replay)                 # its signed record and predictions
    output = _ingest(prepared, tmp_path / "now", CRASHES, extra=replay)
    submission = tmp_path / "now" / "run" / "program"
    result, log = _score_as_codabench(prepared, tmp_path / "now", output, submission)
    assert "is not this submission's" in log, log[-3000:]
    assert "Codabench copies your submission's files over the ingestion's output" in log
    assert RECORD_NAME in log and "Traceback" not in log
    assert not (tmp_path / "now" / "app" / "output" / "scores.json").is_file()
    assert result.returncode != 0


def test_a_stray_prediction_file_is_named_with_the_reason(prepared, tmp_path):
    """An honest zip holding a predictions file of an earlier run: the ingestion's record
    stays, the file replaced the ingestion's prediction, and the log says why."""
    earlier = _ingest(prepared, tmp_path / "earlier", FAST_LABELS)
    stray = tmp_path / "stray"
    stray.mkdir()
    name = next(path.name for path in earlier.glob("*.npy"))
    shutil.copy(earlier / name, stray / name)
    data = (stray / name).read_bytes()          # its last 8 bytes changed, whatever they were
    (stray / name).write_bytes(data[:-8] + bytes(byte ^ 1 for byte in data[-8:]))
    output = _ingest(prepared, tmp_path / "now", FAST_LABELS, extra=stray)
    submission = tmp_path / "now" / "run" / "program"
    result, log = _score_as_codabench(prepared, tmp_path / "now", output, submission)
    assert f"{name} differs from what the ingestion program wrote" in log, log[-3000:]
    assert f"your zip holds {name}" in log

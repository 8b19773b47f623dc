"""A results phase's kit turns code into the prediction files the phase takes: the kit's
ingestion program runs it on the phase's inputs (as a code phase would), and the zip it writes
is accepted by run_local --results, as the guide shows (every kind's results kit runs that
command as written in tests/test_guide_commands.py); code that fails writes nothing."""
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from bundle.build import build_competition
from kinds.kind import KINDS
from bundle.spec import load_spec

from kit_guides import kit_of


def extracted_kit(kind: str, phase: str, out: Path) -> Path:
    """The phase's starting kit, from a bundle built of the kind's default spec, unzipped."""
    spec = load_spec(KINDS[kind].DEFAULT_SPEC)
    built = build_competition(spec, [phase], None, out / "dist")
    kit = out / "kit"
    with zipfile.ZipFile(built.path) as bundle:
        for name, data in kit_of(bundle, "starting_kit.zip").items():
            (kit / name).parent.mkdir(parents=True, exist_ok=True)
            (kit / name).write_bytes(data)
    return kit


def in_kit(kit: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=kit, capture_output=True, text=True,
                          timeout=600)


def test_code_that_fails_writes_nothing(tmp_path):
    kit = extracted_kit("label_accuracy", "development", tmp_path)
    broken = kit / "broken"
    broken.mkdir()
    (broken / "submission.py").write_text("def predict(task, x_train, y_train, x_test):\n"
                                          "    raise RuntimeError('not yet')\n")
    (kit / "predictions.zip").write_bytes(b"an earlier good zip")
    made = in_kit(kit, "predictions_zip.py", "broken/", "predictions.zip")
    assert made.returncode == 1, made.stdout[-3000:] + made.stderr[-3000:]
    assert "nothing was written" in made.stderr and "wine" in made.stderr
    assert (kit / "predictions.zip").read_bytes() == b"an earlier good zip"

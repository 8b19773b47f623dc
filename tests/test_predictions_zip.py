"""A results phase's kit turns code into the prediction files the phase takes: the kit's
ingestion program runs it on the phase's inputs (as a code phase would), and the zip it writes
is accepted by run_local --results, as the guide shows."""
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from bundle.build import build_competition
from bundle.kinds import kind_definition
from bundle.spec import load_spec

from kit_guides import kit_of

# kind: (a results phase of its default spec, a quick baseline of its kit)
RESULTS_PHASES = {"bdl2021": ("development", "trivial.py"),
                  "label_accuracy": ("development", "nearest_centroid.py"),
                  "pgdl2020": ("public", "sum_of_squares.py"),
                  "retina": ("development", "map.py")}


def extracted_kit(kind: str, phase: str, out: Path) -> Path:
    """The phase's starting kit, from a bundle built of the kind's default spec, unzipped."""
    spec = load_spec(kind_definition(kind).DEFAULT_SPEC)
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


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(RESULTS_PHASES))
def test_a_baseline_becomes_a_zip_the_results_phase_accepts(kind, tmp_path):
    phase, baseline = RESULTS_PHASES[kind]
    kit = extracted_kit(kind, phase, tmp_path)
    command = "python predictions_zip.py my_submission/ predictions.zip"
    assert command in (kit / "README.md").read_text()            # the guide shows it
    made = in_kit(kit, "predictions_zip.py", f"baselines/{baseline}", "predictions.zip")
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    with zipfile.ZipFile(kit / "predictions.zip") as archive:
        names = sorted(archive.namelist())
    tasks = json.loads((kit / "kit.json").read_text())["tasks"]
    # one file per task, each what the ingestion wrote (the logs and the record stay out)
    assert len(names) == len(tasks) and all(name.endswith(".npy") for name in names), names
    checked = in_kit(kit, "run_local.py", "--results", "predictions.zip")
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    assert "penalised" not in checked.stdout + checked.stderr
    if (kit / "data" / "reference").is_dir():           # public references: scored here
        assert "\nscores:\n" in checked.stdout


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

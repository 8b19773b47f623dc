"""Organizer mistakes end in one clear message (the file or key path, found, expected), exit 1
for a spec or data error, 2 for a usage error, never a traceback, and nothing in --out."""
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml

import build_bundle
from bundle.build import BuildError

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SPEC = REPO / "kinds" / "bdl2021" / "default_spec.yaml"
# name: (task type, n_test, classes or samples)
TASKS = {"alpha": ("classification", 20, 3), "beta": ("regression", 15, 30),
         "gamma": ("classification", 12, 2)}
FEATURES, N_TRAIN = 3, 40


def write_task(root: Path, name: str, rng) -> None:
    kind, n_test, width = TASKS[name]
    folder = root / name
    folder.mkdir(parents=True)
    classification = kind == "classification"
    y_train = rng.integers(0, width, N_TRAIN) if classification else rng.normal(size=N_TRAIN)
    np.savez(folder / f"{name}.npz", x_train=rng.normal(size=(N_TRAIN, FEATURES)),
             y_train=y_train, x_test=rng.normal(size=(n_test, FEATURES)), y_test=np.zeros(n_test))
    declaration = {"name": name, "phase": "development", "kind": kind, "n_train": N_TRAIN,
                   "n_test": n_test, "input_shape": [FEATURES],
                   "test_blocks": [{"name": "clean", "start": 0, "stop": n_test}],
                   "model": {"type": "mlp", "activation": "tanh",
                             "layer_sizes": [FEATURES, 4, width if classification else 2]},
                   "likelihood": {"name": "softmax" if classification else "gaussian"},
                   "prior": {"distribution": "normal", "variance": 0.1}, "summary": name,
                   ("num_classes" if classification else "num_samples"): width}
    (folder / f"{name}_task.json").write_text(json.dumps(declaration, indent=1))
    if classification:
        np.savetxt(folder / f"{name}_probs.csv", rng.dirichlet(np.ones(width), size=n_test))
    else:
        np.savetxt(folder / f"{name}_samples.csv", rng.normal(size=(width, n_test)))   # S x N


def base_spec() -> dict:
    spec = yaml.safe_load(DEFAULT_SPEC.read_text())
    spec.update(slug="bdl-mistakes", layout="per_phase",      # one bundle per phase
                tasks={name: {"budget_seconds": 5} for name in TASKS},
                phases={"development": {"label": "Development", "start": "2027-01-10 00:00:00",
                                        "submission": "results", "tasks": ["alpha", "beta"],
                                        "execution_time_limit": 600},
                        "evaluation": {"label": "Evaluation", "start": "2027-04-01 00:00:00",
                                       "submission": "code", "tasks": ["gamma"],
                                       "execution_time_limit": 600}},
                tracks={})
    return spec


@pytest.fixture
def organizer(tmp_path):
    data = tmp_path / "data"
    rng = np.random.default_rng(0)
    for name in TASKS:
        write_task(data, name, rng)
    # Codabench, the default platform, requires the spec's logo next to it.
    logo = yaml.safe_load(DEFAULT_SPEC.read_text())["logo"]
    shutil.copyfile(DEFAULT_SPEC.parent / logo, tmp_path / logo)
    return tmp_path, data


def run(tmp_path, data, spec=None, *args, text_spec=None):
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(text_spec if text_spec is not None
                         else yaml.safe_dump(spec or base_spec(), sort_keys=False))
    out = tmp_path / "dist"
    command = [sys.executable, str(REPO / "build_bundle.py"), "--config", str(spec_file),
               "--data-root", str(data), "--out", str(out)]
    command += list(args) or ["--phase", "development"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    return result.returncode, output, sorted(out.glob("*.zip")) if out.is_dir() else []


def refused(tmp_path, data, spec=None, *needles, text_spec=None):
    code, output, zips = run(tmp_path, data, spec, text_spec=text_spec)
    assert code == 1, output
    assert zips == [], zips
    for needle in needles:
        assert needle in output, output
    return output


# ---- data ----------------------------------------------------------------------------------

def test_missing_inputs_file(organizer):
    tmp_path, data = organizer
    (data / "alpha" / "alpha.npz").unlink()
    refused(tmp_path, data, None, "tasks.alpha:", str(data / "alpha" / "alpha.npz"),
            "file does not exist", "x_train, y_train, x_test, y_test")


def test_missing_reference_file(organizer):
    tmp_path, data = organizer
    (data / "alpha" / "alpha_probs.csv").unlink()
    refused(tmp_path, data, None, str(data / "alpha" / "alpha_probs.csv"), "file does not exist",
            "N x C class probabilities")


def test_declaration_without_a_required_key(organizer):
    tmp_path, data = organizer
    path = data / "beta" / "beta_task.json"
    declaration = json.loads(path.read_text())
    del declaration["n_test"]
    path.write_text(json.dumps(declaration))
    refused(tmp_path, data, None, str(path), "missing required key(s) n_test")


def test_truncated_declaration(organizer):
    tmp_path, data = organizer
    path = data / "alpha" / "alpha_task.json"
    path.write_text(path.read_text()[:200])
    refused(tmp_path, data, None, f"{path}, line ", ", column ", "not valid JSON")


def test_n_test_not_matching_the_inputs(organizer):
    tmp_path, data = organizer
    path = data / "alpha" / "alpha_task.json"
    declaration = json.loads(path.read_text())
    declaration.update(n_test=25, test_blocks=[{"name": "clean", "start": 0, "stop": 25}])
    path.write_text(json.dumps(declaration))
    refused(tmp_path, data, None, f"{data / 'alpha' / 'alpha.npz'}: x_test has 20 rows",
            "declares n_test = 25")


def test_reference_of_the_wrong_shape_is_refused_at_build_time(organizer):
    tmp_path, data = organizer
    path = data / "alpha" / "alpha_probs.csv"
    np.savetxt(path, np.full((20, 2), 0.5))
    output = refused(tmp_path, data, None, f"{path}: wrong shape", "20 (test points) x 3 (classes)",
                     "found 20 x 2")
    assert "looks transposed" not in output


def test_transposed_regression_reference(organizer):
    tmp_path, data = organizer
    path = data / "beta" / "beta_samples.csv"
    np.savetxt(path, np.random.default_rng(1).normal(size=(15, 30)))      # N x S, not S x N
    refused(tmp_path, data, None, str(path), "found 15 x 30", "looks transposed")


# ---- spec ----------------------------------------------------------------------------------

def test_impossible_date(organizer):
    tmp_path, data = organizer
    text = yaml.safe_dump(base_spec(), sort_keys=False).replace(
        "start: '2027-01-10 00:00:00'", "start: 2026-12-32")
    assert "2026-12-32" in text
    code, output, zips = run(tmp_path, data, text_spec=text)
    assert code == 1 and not zips
    assert "phases.development.start: found '2026-12-32', which is not a real date" in output


def test_time_zone_offset_is_refused_with_the_utc_date(organizer):
    tmp_path, data = organizer
    text = yaml.safe_dump(base_spec(), sort_keys=False).replace(
        "start: '2027-01-10 00:00:00'", "start: 2027-01-10 00:00:00+05:00")
    code, output, zips = run(tmp_path, data, text_spec=text)
    assert code == 1 and not zips
    assert "phases.development.start" in output and "write 2027-01-09 19:00:00" in output


def test_more_per_day_than_in_all(organizer):
    tmp_path, data = organizer
    spec = base_spec()
    spec["phases"]["development"].update(max_submissions=3, max_submissions_per_day=10)
    refused(tmp_path, data, spec, "phases.development.max_submissions_per_day: found 10, "
                                  "expected at most phases.development.max_submissions (3)")


def test_logo_that_is_not_an_image(organizer):
    tmp_path, data = organizer
    (tmp_path / "logo.png").write_text("<html>not a logo</html>")
    spec = base_spec()
    spec["logo"] = "logo.png"
    refused(tmp_path, data, spec, "logo:", "is not an image", "expected a PNG or JPEG file")


def test_past_dates_warn(organizer):
    """(A budget too short to time is refused by the spec: tests/test_spec.py.)"""
    tmp_path, data = organizer
    spec = base_spec()
    spec["phases"]["development"]["start"] = "2020-01-10 00:00:00"
    code, output, zips = run(tmp_path, data, spec)
    assert code == 0, output
    assert "warning:" in output and "phases.development.start: 2020-01-10 00:00:00 is in the past" in output
    assert [z.name for z in zips] == ["bdl-mistakes-development-codabench.zip"]
    assert "Codabench: Benchmarks > Management > Upload" in output and "sample submission" in output


# ---- leakage across bundles ----------------------------------------------------------------

def test_task_public_in_a_results_phase_and_hidden_in_a_code_phase(organizer):
    tmp_path, data = organizer
    spec = base_spec()
    spec["phases"]["development"]["tasks"] = ["alpha", "gamma"]
    refused(tmp_path, data, spec, "phases.evaluation.tasks: 'gamma' is also scored in the "
                                  "results phase phases.development",
            "public_reference_tasks_allowed_in_code_phases")
    spec["public_reference_tasks_allowed_in_code_phases"] = ["gamma"]
    code, output, zips = run(tmp_path, data, spec)
    assert code == 0, output


# ---- command line --------------------------------------------------------------------------

def test_check_on_a_missing_file_or_a_non_zip_is_a_usage_error(tmp_path):
    for given, needle in ((tmp_path / "missing.zip", "not found"),
                          (REPO / "README.md", "is not a zip file")):
        result = subprocess.run([sys.executable, str(REPO / "build_bundle.py"), "--check",
                                 str(given)], cwd=REPO, capture_output=True, text=True)
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip().count("\n") == 0 and needle in result.stderr
        assert str(given) in result.stderr and "Traceback" not in result.stderr


def test_empty_submission_zip_is_a_usage_error(tmp_path):
    empty = tmp_path / "empty.zip"
    zipfile.ZipFile(empty, "w").close()
    bundle = tmp_path / "bundle.zip"
    with zipfile.ZipFile(bundle, "w") as archive:
        archive.writestr("competition.yaml", "title: x\n")
    result = subprocess.run([sys.executable, str(REPO / "build_bundle.py"), "--check", str(bundle),
                             "--submission", str(empty)], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 2 and "is an empty zip" in result.stderr, result.stderr
    assert str(empty) in result.stderr and "Traceback" not in result.stderr


def test_unknown_phase_is_a_usage_error(organizer):
    tmp_path, data = organizer
    code, output, zips = run(tmp_path, data, None, "--phase", "final")
    assert code == 2 and "unknown phase 'final'" in output and not zips


def test_help_shows_the_phases_and_tracks_of_the_given_spec(organizer):
    tmp_path, data = organizer
    spec = base_spec()
    spec["phases"]["qualifier"] = spec["phases"].pop("development")
    spec["phases"] = {"qualifier": spec["phases"]["qualifier"],
                      "evaluation": spec["phases"]["evaluation"]}
    spec["tracks"] = {"small": {"label": "Small", "tasks": ["gamma"]}}
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = subprocess.run([sys.executable, str(REPO / "build_bundle.py"), "--config",
                             str(spec_file), "--help"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0
    flat = " ".join(result.stdout.split())
    assert "(qualifier, evaluation)" in flat and "(small)" in flat, flat
    assert "light, extended" not in flat and "development, evaluation" not in flat


def test_a_later_failure_leaves_no_earlier_zip(organizer, monkeypatch, capsys):
    tmp_path, data = organizer
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(base_spec(), sort_keys=False))
    real = build_bundle.build_competition
    calls = []

    def failing_later(spec, phases, *args, **kwargs):
        calls.append(phases)
        if len(calls) > 1:
            raise BuildError("the second bundle failed")
        return real(spec, phases, *args, **kwargs)

    monkeypatch.setattr(build_bundle, "build_competition", failing_later)
    out = tmp_path / "dist"
    code = build_bundle.main(["--config", str(spec_file), "--data-root", str(data),
                              "--out", str(out), "--phase", "all"])
    assert code == 1 and len(calls) == 2
    assert not list(out.glob("*.zip")) if out.is_dir() else True
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".building-")]
    assert "nothing was written" in capsys.readouterr().err


# ---- the baselines scripts -----------------------------------------------------------------

BASELINE_SCRIPTS = ("bdl2021", "pgdl2020", "retina")


@pytest.mark.parametrize("kind", BASELINE_SCRIPTS)
@pytest.mark.parametrize("mistake", ["date", "kind"])
def test_a_baselines_script_ends_in_one_error_line_on_a_bad_spec(kind, mistake, tmp_path):
    """A spec mistake (or a spec of another kind) is one line naming the spec and the key,
    exit 1, no traceback, and no table written."""
    spec = yaml.safe_load((REPO / "kinds" / kind / "default_spec.yaml").read_text())
    spec.pop("logo", None)
    first = next(iter(spec["phases"]))
    if mistake == "date":
        spec["phases"][first]["start"] = "2027-13-01 00:00:00"
        expected = f"phases.{first}.start"
    else:
        other = next(k for k in BASELINE_SCRIPTS if k != kind)
        spec = yaml.safe_load((REPO / "kinds" / other / "default_spec.yaml").read_text())
        spec.pop("logo", None)
        expected = f"kinds/{other}/kit/baseline_results.py"
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = subprocess.run([sys.executable, str(REPO / "kinds" / kind / "kit" /
                                                 "baseline_results.py"),
                             "--config", str(spec_file)],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {spec_file}: "), result.stderr
    assert expected in lines[0], lines[0]
    assert not (tmp_path / "baseline_results.json").exists()

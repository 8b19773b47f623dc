"""Organizer mistakes end in one clear message (the file or key path, found, expected), exit 1
for a spec or data error, 2 for a usage error, never a traceback, and nothing in --out."""
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

import build_bundle
from bundle.build import BuildError
from kinds.kind import KINDS

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SPEC = KINDS["label_accuracy"].DEFAULT_SPEC
# label_accuracy's default competition on a copy of its tasks as an organizer's data root, one
# bundle per phase, with dates of its own. The checks of a kind's own task files are its own:
# BDL's are kinds/bdl2021/tests/test_bdl_organizer_errors.py's.
def base_spec() -> dict:
    spec = yaml.safe_load(DEFAULT_SPEC.read_text())
    spec.update(slug="la-mistakes", layout="per_phase")      # one bundle per phase
    spec["phases"]["development"]["start"] = "2027-01-10 00:00:00"
    spec["phases"]["evaluation"]["start"] = "2027-04-01 00:00:00"
    return spec


@pytest.fixture
def organizer(tmp_path):
    """(the spec's folder, the data root: a copy of the kind's embedded tasks)."""
    data = tmp_path / "data"
    shutil.copytree(KINDS["label_accuracy"].EMBEDDED_ROOT, data)
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

def test_truncated_declaration(organizer):
    tmp_path, data = organizer
    path = data / "iris" / "iris_task.json"
    path.write_text(path.read_text()[:100])
    refused(tmp_path, data, None, f"{path}, line ", ", column ", "not valid JSON")


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
    assert [z.name for z in zips] == ["la-mistakes-development-codabench.zip"]
    assert "Codabench: Benchmarks > Management > Upload" in output and "sample submission" in output


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
    spec["tracks"] = {"small": {"label": "Small", "tasks": ["wine"]}}
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = subprocess.run([sys.executable, str(REPO / "build_bundle.py"), "--config",
                             str(spec_file), "--help"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0
    flat = " ".join(result.stdout.split())
    assert "(qualifier, evaluation)" in flat and "(small)" in flat, flat
    # not the built-in default spec's (BDL's phases and tracks)
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

# every kind whose kit has a baselines script (label_accuracy's has none)
BASELINE_SCRIPTS = tuple(kind for kind in sorted(KINDS)
                         if (KINDS[kind].KIT / "baseline_results.py").is_file())


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

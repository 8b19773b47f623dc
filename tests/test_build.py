"""The builder end to end: build, rebuild identically, dry-run, and refuse what is wrong. On
label_accuracy's default competition (the core tests' kind), a bundle per phase."""
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from bundle import build as build_module
from bundle.build import BuildError, build_bundle
from bundle.phase_data import leakage_problems
from bundle.spec import load_spec
from kinds.kind import KINDS
from array_bytes import npy_bytes, npz_bytes
from plans import per_phase_spec

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
CORE = KINDS["label_accuracy"]
DEVELOPMENT = "label-accuracy-development-codabench.zip"
EVALUATION = "label-accuracy-evaluation-codabench.zip"


def cli(*args, timeout=900):
    return subprocess.run([sys.executable, str(REPO / "build_bundle.py"), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> Path:
    """label_accuracy's default spec, one bundle per phase (its default puts both phases in
    one bundle: test_ranks.py and test_kind_conformance.py build that)."""
    return per_phase_spec(tmp_path_factory.mktemp("spec"))


@pytest.fixture(scope="module")
def built(tmp_path_factory, spec):
    """Every phase, for the default platform (Codabench), by the command line."""
    out = tmp_path_factory.mktemp("dist")
    result = cli("--config", str(spec), "--phase", "all", "--out", str(out))
    assert result.returncode == 0, result.stderr
    return out, result


@pytest.fixture(scope="module")
def bundles(built_bundles, spec):
    """The same bundles, built once per test run in process (conftest.py), for the tests of
    what a bundle holds or how its dry run goes rather than of what the command prints."""
    folder = built_bundles(spec, "codabench")
    assert len(list(folder.glob("*.zip"))) == 2
    return folder


@pytest.fixture(scope="module")
def built_codalab(built_bundles, spec):
    """The same phases as CodaLab v1.5 bundles (what is CodaLab's own): the test run's shared
    build."""
    folder = built_bundles(spec, "codalab")
    assert (folder / "label-accuracy-evaluation.zip").is_file()
    return folder


def test_all_phases_are_built_with_a_summary(built):
    out, result = built
    names = sorted(p.name for p in out.glob("*.zip"))
    assert names == [DEVELOPMENT, EVALUATION]
    assert "sha256" in result.stdout and "scoring_program.zip" in result.stdout
    assert "iris (10 s)" in result.stdout


def test_bundle_contents_and_yaml(built_codalab):
    out = built_codalab
    with zipfile.ZipFile(out / "label-accuracy-evaluation.zip") as bundle:
        names = bundle.namelist()
        competition = yaml.safe_load(bundle.read("competition.yaml"))
        overview = bundle.read("overview.html").decode()
        evaluation = bundle.read("evaluation.html").decode()
    assert {"competition.yaml", "overview.html", "evaluation.html", "data.html", "terms.html",
            "starting_kit.html", "scoring_program.zip", "ingestion_program.zip", "input_data.zip",
            "reference_data.zip", "public_data.zip", "starting_kit.zip", "logo.png"} == set(names)
    assert competition["image"] == "logo.png"
    phase = competition["phases"][1]
    assert phase["is_scoring_only"] is False and phase["execution_time_limit"] == 300
    assert competition["competition_docker_image"] == "codalab/codalab-legacy:py312"
    columns = competition["leaderboard"]["columns"]
    assert columns["average_rank"]["computed"] == {
        "operation": "Avg", "fields": "iris_accuracy,wine_accuracy"}     # the spec's order
    assert "wine" in overview and "125 / 53" in overview          # the kind's table of tasks
    assert "wine_balanced_accuracy" in evaluation and "<script" not in evaluation


def test_rebuild_is_byte_identical(built, bundles):
    """Two builds of the same phase: the command line's above and the run's shared one, built
    in process by the same builder."""
    out, result = built
    assert result.returncode == 0, result.stderr
    assert (bundles / DEVELOPMENT).read_bytes() == (out / DEVELOPMENT).read_bytes()


def rewrite_member(bundle: Path, target: Path, member: str, change) -> Path:
    """A copy of the bundle with one member (or one file inside a nested zip) changed."""
    with zipfile.ZipFile(bundle) as source, zipfile.ZipFile(target, "w") as copy:
        for name in source.namelist():
            data = source.read(name)
            if name == member.split("/")[0]:
                data = change(data) if "/" not in member else _rewrite_nested(
                    data, member.split("/", 1)[1], change)
            copy.writestr(name, data)
    return target


def _rewrite_nested(data: bytes, inner: str, change) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(buffer, "w") as copy:
        for name in source.namelist():
            content = source.read(name)
            copy.writestr(name, change(content) if name == inner else content)
    return buffer.getvalue()


def test_check_catches_a_scorer_that_writes_a_wrong_key(bundles, tmp_path):
    out = bundles

    def rename_key(data: bytes) -> bytes:
        config = json.loads(data)
        config["columns"][0]["key"] = "iris_acuracy"
        return json.dumps(config).encode()
    broken = rewrite_member(out / DEVELOPMENT, tmp_path / "b.zip",
                            "scoring_program.zip/scoring_config.json", rename_key)
    result = cli("--check", str(broken))
    assert result.returncode == 1
    assert "iris_acuracy" in result.stderr and "dry run FAILED" in result.stdout


def test_check_catches_an_ingestion_that_exceeds_the_time_limit(bundles, tmp_path):
    """A phase limit of 1 s under task budgets of 10 s: a submission that sleeps 2 s runs
    past the limit however fast the machine (sleeping through the whole budget proved nothing
    more and took 10 s a task); the worker lets it run on, and the rule of the limit against
    the budgets fails the bundle."""
    out = bundles
    broken = rewrite_member(out / EVALUATION, tmp_path / "t.zip", "competition.yaml",
                            lambda data: data.replace(b"execution_time_limit: 300",
                                                      b"execution_time_limit: 1"))
    slow = tmp_path / "slow.zip"
    with zipfile.ZipFile(slow, "w") as archive:
        archive.writestr("metadata", "description: sleeps past the phase limit\n")
        archive.writestr("submission.py", "import time\n\ndef predict(task, *args):\n"
                                          "    time.sleep(2)\n")
    result = cli("--check", str(broken), "--submission", str(slow))
    assert result.returncode == 1
    # Codabench's worker does not stop it (its alarm is lost, codabench_v2.md §3.6): the dry
    # run notes it, and the rule of the limit against the budgets fails the bundle
    assert "over the phase limit of 1 s: the worker would not stop it" in result.stdout
    assert "rule v2-time-and-keys" in result.stderr


def test_leakage_check_catches_planted_leaks(tmp_path):
    labels = np.arange(200, dtype=float)
    hidden = {"wine_test_labels.npy": npy_bytes(labels), "wine_probs.npy": npy_bytes(np.eye(50))}
    clean = {"starting_kit.zip": {"README.md": b"hello"}}
    assert leakage_problems(hidden, clean) == []
    planted = {"starting_kit.zip": {"notes.bin": b"xx" + labels.tobytes() + b"yy",
                                    "copy.npy": hidden["wine_probs.npy"]},
               "public_data.zip": {"wine.npz": npz_bytes(y_test=np.ones(5))}}
    problems = " ".join(leakage_problems(hidden, planted, zeroed=("y_test",)))
    assert "contains the bytes of hidden wine_test_labels.npy" in problems
    assert "copy.npy is a copy of hidden wine_probs.npy" in problems
    assert "y_test is not all zeros" in problems


def test_build_stops_on_a_leak(monkeypatch, tmp_path):
    original = build_module.stage_starting_kit

    def leaky_kit(plan, destination, *args):
        """The kit with the first task's hidden references in it, as the kind stages them."""
        folder = original(plan, destination, *args)
        CORE.stage_reference(plan.tasks[0], folder)
        return folder
    monkeypatch.setattr(build_module, "stage_starting_kit", leaky_kit)
    with pytest.raises(BuildError, match="leakage check failed"):
        build_bundle(load_spec(CORE.DEFAULT_SPEC), "evaluation", None, tmp_path)


def test_logo_is_shipped_and_referenced(tmp_path):
    import base64
    spec = yaml.safe_load(CORE.DEFAULT_SPEC.read_text())
    spec["logo"] = "logo.png"
    (tmp_path / "logo.png").write_bytes(base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="))
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec))
    built_bundle = build_bundle(load_spec(spec_file), "development", None, tmp_path / "dist")
    with zipfile.ZipFile(built_bundle.path) as bundle:
        assert yaml.safe_load(bundle.read("competition.yaml"))["image"] == "logo.png"
        assert bundle.read("logo.png").startswith(b"\x89PNG")
    spec["logo"] = "missing.png"
    spec_file.write_text(yaml.safe_dump(spec))
    with pytest.raises(Exception, match="logo: found 'missing.png', expected an image file"):
        load_spec(spec_file)


def test_downloaded_starting_kit_runs_alone(bundles, tmp_path):
    """Unzipped from the bundle, with only the docker image's packages and no repository: the
    kind's example baseline and the sample results run. The development phase's references
    are hidden (label_accuracy publishes none), so the kit checks the predictions and says
    that it scored nothing."""
    from scoring_harness import image_python
    out = bundles
    with zipfile.ZipFile(out / DEVELOPMENT) as bundle:
        kit_zip = bundle.read("starting_kit.zip")
    kit = tmp_path / "kit"
    zipfile.ZipFile(io.BytesIO(kit_zip)).extractall(kit)
    baseline = kit / "baselines" / CORE.EXAMPLE_BASELINE
    assert baseline.is_file(), "the kit lacks the kind's example baseline"
    for args in (["--code", f"baselines/{baseline.name}"],
                 ["--results", "sample_result_submission"]):
        result = subprocess.run([image_python(), "run_local.py", *args, "--out", str(tmp_path / args[0][2:])],
                                cwd=kit, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr
        assert "predictions were checked, not scored" in result.stdout, result.stdout[-2000:]


def kit_member(bundle: Path, member: str, destination: Path) -> Path:
    """One file of the starting kit inside a built bundle."""
    with zipfile.ZipFile(bundle) as outer:
        kit = zipfile.ZipFile(io.BytesIO(outer.read("starting_kit.zip")))
    destination.write_bytes(kit.read(member))
    return destination


def zip_without(source: Path, member: str, target: Path) -> Path:
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(target, "w") as copy:
        for name in original.namelist():
            if name != member:
                copy.writestr(name, original.read(name))
    return target


def test_the_kits_sample_code_zip_carries_a_description_only_metadata(bundles, tmp_path):
    out = bundles
    sample = kit_member(out / EVALUATION, "sample_code_submission.zip", tmp_path / "sample.zip")
    with zipfile.ZipFile(sample) as archive:
        assert "submission.py" in archive.namelist()
        assert list(yaml.safe_load(archive.read("metadata"))) == ["description"]


def test_check_fails_a_code_zip_without_metadata_as_codalab_would(built_codalab, tmp_path):
    """codalab_v1.md §4.1: without a root metadata the worker never runs the ingestion."""
    out = built_codalab
    bundle = out / "label-accuracy-evaluation.zip"
    sample = kit_member(bundle, "sample_code_submission.zip", tmp_path / "sample.zip")
    stripped = zip_without(sample, "metadata", tmp_path / "no_metadata.zip")
    result = cli("--check", str(bundle), "--submission", str(stripped))
    assert result.returncode == 1 and "dry run FAILED" in result.stdout
    assert "no file named 'metadata' at its root" in result.stderr
    assert "never runs the ingestion program" in result.stderr and "submission_zip.py" in result.stderr
    assert "ingestion" not in result.stdout.split("-" * 62)[1].split("not reproduced")[0]


def test_check_names_what_it_cannot_reproduce(bundles):
    out = bundles
    result = cli("--check", str(out / DEVELOPMENT))
    assert "not reproduced by this dry run" in result.stdout
    assert "the time limit as the real worker applies it" in result.stdout     # Codabench's


def test_check_fails_a_submission_whose_tasks_are_penalised(bundles, tmp_path):
    """What --check accepts must score on the worker: every task of the phase penalised,
    nothing is scored and the submission fails, with each task's reason."""
    out = bundles
    archive = tmp_path / "no_model.zip"
    with zipfile.ZipFile(archive, "w") as opened:
        opened.writestr("metadata", "description: forgot my_model.py\n")
        opened.writestr("submission.py", "from my_model import Model\n")
    result = cli("--check", str(out / EVALUATION), "--submission", str(archive))
    assert result.returncode == 1
    assert "task iris" in result.stderr and "task wine" in result.stderr
    assert "my_model" in result.stderr and "no task could be scored" in result.stderr

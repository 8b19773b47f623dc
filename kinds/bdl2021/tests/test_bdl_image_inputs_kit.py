"""A declared tanh MLP on image-shaped inputs (issue 48, item 2): the declaration allows any
example shape of ``layer_sizes[0]`` values, read flattened. An organizer's BDL competition of
such tasks, built for both platforms: the kit's sample and every baseline run through the
kit's own run_local.py (the phase's inputs, then the public stand-in, scored) and
predictions_zip.py writes its zip. The build itself runs the kit's sample that way
(bundle/kit_check.py), so a kit whose sample crashes fails the build with run_local's words."""
import contextlib
import io
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from test_bdl_image_inputs import write_task

REPO = Path(__file__).resolve().parents[3]
IMAGE_PYTHON = REPO / ".venv-image" / "bin" / "python"
BASELINES = REPO / "kinds" / "bdl2021" / "kit" / "baselines"
pytestmark = pytest.mark.slow
RNG = np.random.default_rng(48)
IMAGE = (8, 8, 3)
MLP = {"type": "mlp", "activation": "tanh", "layer_sizes": [192, 8, 3]}
REGRESSION_MLP = {"type": "mlp", "activation": "tanh", "layer_sizes": [192, 8, 2]}
BUDGET_SECONDS = 2
PLATFORMS = ("codabench", "codalab")
# A baseline defines the entry point; the other files are their shared code.
BASELINE_FILES = [path for path in BASELINES.glob("*.py") if "\ndef predict(" in path.read_text()]
NUMPY_BASELINES = sorted(path.stem for path in BASELINE_FILES
                         if not path.stem.startswith("torch_"))
TORCH_BASELINES = sorted(path.stem for path in BASELINE_FILES if path.stem.startswith("torch_"))


def images(n):
    return RNG.normal(size=(n, *IMAGE)).astype(np.float32)


def write_regression_task(root: Path, name: str) -> None:
    """An image regression task: the declared MLP reads 8x8x3 images; HMC samples of y are
    stand-ins (this test is about the inputs' shape, not the values)."""
    folder = root / name
    folder.mkdir(parents=True)
    n_train, n_test, draws = 16, 6, 20
    np.savez(folder / f"{name}.npz", x_train=images(n_train), y_train=RNG.normal(size=n_train),
             x_test=images(n_test), y_test=np.zeros(n_test))
    declaration = {"name": name, "phase": "evaluation", "kind": "regression",
                   "num_samples": draws, "n_train": n_train, "n_test": n_test,
                   "input_shape": list(IMAGE),
                   "test_blocks": [{"name": "clean", "start": 0, "stop": n_test}],
                   "model": REGRESSION_MLP, "likelihood": {"name": "gaussian"},
                   "prior": {"distribution": "normal", "variance": 0.1}, "summary": name}
    (folder / f"{name}_task.json").write_text(json.dumps(declaration))
    np.savetxt(folder / f"{name}_samples.csv", RNG.normal(size=(draws, n_test)))


def image_arrays(n_train=16, n_test=6):
    return {"x_train": images(n_train), "y_train": RNG.integers(0, 3, n_train),
            "x_test": images(n_test), "y_test": np.zeros(n_test, np.int64)}


def organizer_competition(root: Path) -> tuple[Path, Path]:
    """(spec, data root): a results phase on a public image task (the code phase's stand-in)
    and a code phase on an image classification and an image regression task, every model
    an MLP declared on 8x8x3 images."""
    data = root / "data"
    write_task(data, "pix", model=MLP, arrays=image_arrays(), phase="development")
    write_task(data, "img", model=MLP, arrays=image_arrays())
    write_regression_task(data, "img_reg")
    default_spec = REPO / "kinds" / "bdl2021" / "default_spec.yaml"
    spec = yaml.safe_load(default_spec.read_text())
    shutil.copyfile(default_spec.parent / spec["logo"], root / spec["logo"])
    spec.update(
        slug="bdl-image-mlp", tracks={},
        tasks={name: {"budget_seconds": BUDGET_SECONDS} for name in ("pix", "img", "img_reg")},
        phases={"development": {**spec["phases"]["development"], "tasks": ["pix"]},
                "evaluation": {**spec["phases"]["evaluation"], "tasks": ["img", "img_reg"]}})
    path = root / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path, data


def build(spec: Path, data: Path, out: Path, platform: str) -> subprocess.CompletedProcess:
    """As an organizer builds, ``python build_bundle.py --config ... --platform ... --phase all
    --out ...``, with the kit check the suite otherwise switches off: the command's ``main``
    on those arguments, run in this process (a new interpreter's start and the builder's
    imports saved; the command line's own exit codes and output have tests of their own,
    test_cli). The kit check's run of the sample is a subprocess, as from the command line."""
    import build_bundle
    args = ["--config", str(spec), "--data-root", str(data), "--platform", platform,
            "--phase", "all", "--out", str(out)]
    stdout, stderr = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as environment, \
            contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        environment.setenv("BUNDLE_KIT_CHECK", "on")
        returncode = build_bundle.main(args)
    return subprocess.CompletedProcess(["build_bundle.py", *args], returncode, stdout.getvalue(),
                                       stderr.getvalue())


def extract_kits(bundles: list[Path], destination: Path) -> dict[str, Path]:
    """{phase: extracted kit folder} of the bundles' starting kits."""
    kits = {}
    for bundle in bundles:
        with zipfile.ZipFile(bundle) as outer:
            for name in (n for n in outer.namelist() if n.endswith("starting_kit.zip")):
                with zipfile.ZipFile(io.BytesIO(outer.read(name))) as kit_zip:
                    config = next(n for n in kit_zip.namelist() if n.endswith("kit.json"))
                    phase = json.loads(kit_zip.read(config))["phase"]
                    kit_zip.extractall(destination / phase)
                kits[phase] = (destination / phase / config).parent
    return kits


@pytest.fixture(scope="module")
def kits(tmp_path_factory) -> dict[str, dict[str, Path]]:
    """{platform: {phase: kit}}, each competition built as by the command line (``build``)."""
    root = tmp_path_factory.mktemp("image-mlp")
    spec, data = organizer_competition(root)
    built = {}
    for platform in PLATFORMS:
        result = build(spec, data, root / f"dist-{platform}", platform)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert "kit check: passed: the sample returned predictions on all 3 task(s)" \
            in result.stdout, result.stdout[-3000:]
        built[platform] = extract_kits(sorted((root / f"dist-{platform}").glob("*.zip")),
                                       root / f"kits-{platform}")
        assert sorted(built[platform]) == ["development", "evaluation"]
    return built


def in_kit(kit: Path, *command: str) -> subprocess.CompletedProcess:
    """A kit command as a participant types it, with the image's Python as ``python``."""
    return subprocess.run([str(IMAGE_PYTHON), *command], cwd=kit, capture_output=True,
                          text=True, timeout=600)


def assert_ran(result: subprocess.CompletedProcess, what: str) -> None:
    log = result.stdout + result.stderr
    assert result.returncode == 0 and "Traceback" not in log, (what, log[-4000:])


def stand_in_scores(stdout: str) -> dict[str, float]:
    block = stdout.split("\nscores on the public stand-in, not on this phase's hidden test "
                         "data:\n")[1].split("\n\n")[0]
    return {key: float(value) for key, value in (line.split(": ") for line in block.splitlines())}


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_kits_sample_runs_and_is_scored_on_the_stand_in(kits, platform, tmp_path):
    kit = kits[platform]["evaluation"]
    result = in_kit(kit, "run_local.py", "--code", "sample_code_submission/", "--out",
                    str(tmp_path / "run"))
    assert_ran(result, f"{platform} sample")
    scores = stand_in_scores(result.stdout)
    assert list(scores) == json.loads((kit / "kit.json").read_text())["stand_in"][
        "leaderboard_keys"]
    assert all(np.isfinite(value) for value in scores.values()), scores
    assert 0.0 <= scores["pix_agreement"] <= 1.0


def test_both_platforms_ship_the_same_baselines(kits):
    """So running every baseline in one platform's kit runs those of both."""
    folders = [kits[platform]["evaluation"] / "baselines" for platform in PLATFORMS]
    contents = [{path.name: path.read_bytes() for path in folder.glob("*.py")}
                for folder in folders]
    assert contents[0] == contents[1] and len(contents[0]) > len(NUMPY_BASELINES)


def torch_in_image() -> bool:
    found = subprocess.run([str(IMAGE_PYTHON), "-c", "import importlib.util, sys; "
                            "sys.exit(importlib.util.find_spec('torch') is None)"])
    return found.returncode == 0


@pytest.mark.parametrize("baseline", NUMPY_BASELINES + TORCH_BASELINES)
def test_every_baseline_runs_on_the_image_tasks_and_the_stand_in(kits, baseline, tmp_path):
    if baseline in TORCH_BASELINES and not torch_in_image():
        pytest.skip("PyTorch is not in .venv-image: the PyTorch baselines cannot run here")
    result = in_kit(kits["codabench"]["evaluation"], "run_local.py", "--code",
                    f"baselines/{baseline}.py", "--out", str(tmp_path / "run"))
    assert_ran(result, baseline)
    assert all(np.isfinite(v) for v in stand_in_scores(result.stdout).values())


def test_predictions_zip_writes_the_image_tasks_predictions(kits, tmp_path):
    kit = kits["codabench"]["development"]
    archive = tmp_path / "predictions.zip"
    assert_ran(in_kit(kit, "predictions_zip.py", "baselines/sgld.py", str(archive)),
               "predictions_zip")
    with zipfile.ZipFile(archive) as opened:
        assert opened.namelist() == ["pix_probs.npy"]
    assert_ran(in_kit(kit, "run_local.py", "--results", str(archive), "--out",
                      str(tmp_path / "run")), "run_local --results")


# ---- the build's own check of the kit's sample ------------------------------------------------

# The defect this issue found, as a sample would carry it: the declared MLP applied to the
# inputs as they come, not as the declared network reads them.
UNFLATTENED_SAMPLE = '''import numpy as np

from declared_model import predictive_probabilities
from training import initial_parameters, task_model


def predict(task, x_train, y_train, x_test, checkpoint):
    model = task_model(task)
    theta = initial_parameters(model, task.likelihood["name"], np.random.default_rng(0))
    return predictive_probabilities(model, theta, x_test)
'''


def test_a_kit_whose_sample_crashes_fails_the_build(tmp_path, monkeypatch):
    """The kind's kit, copied to a test-only folder whose sample reads images unflattened:
    the build stops, naming the check, the command, the task and the sample's own error, and
    writes no bundle."""
    import kinds.bdl2021.kind as bdl_kind
    from bundle.build import BuildError, build_competition
    from bundle.spec import load_spec
    kit = tmp_path / "kit"
    shutil.copytree(bdl_kind.KIT, kit, ignore=shutil.ignore_patterns("__pycache__"))
    (kit / "baselines" / f"{bdl_kind.SAMPLE_BASELINE}.py").write_text(UNFLATTENED_SAMPLE)
    monkeypatch.setattr(bdl_kind, "KIT", kit)
    monkeypatch.setenv("BUNDLE_KIT_CHECK", "on")
    spec_path, data = organizer_competition(tmp_path)
    spec = load_spec(spec_path, data)
    said = []
    with pytest.raises(BuildError) as caught:
        build_competition(spec, ["evaluation"], None, tmp_path / "dist", say=said.append,
                          platform="codabench")
    message = str(caught.value)
    assert "starting kit's own sample fails" in message, message
    assert "python run_local.py --code sample_code_submission/" in message
    assert "img: failed" in message and "matmul" in message, message
    assert "Traceback" not in message
    assert any("kit check:" in line for line in said), said
    assert not list((tmp_path / "dist").glob("*.zip"))

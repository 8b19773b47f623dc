"""A custom competition (its own spec and tasks, --data-root): what participants get is its own.

The kit's guide names its tasks, task types, shapes and budgets and only its phase's commands;
run_local and baseline_results.py follow its spec."""
import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from in_process_commands import run_main

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TASKS = ("iris", "digits", "breast_cancer", "wine", "digits_shift", "diabetes_gap")
# name: (task type, n_test, classes or samples, blocks, budget)
TASKS = {"moons": ("classification", 40, 2, 1, 5),
         "spirals": ("classification", 30, 3, 1, 7),
         "housing": ("regression", 24, 50, 2, 9)}
FINAL = ["spirals", "housing"]
FEATURES, N_TRAIN = 3, 60


def write_task(root: Path, name: str, rng) -> None:
    """Organizer files in the 2021 formats (as tests/test_build_data_root.py writes them)."""
    task_type, n_test, width, blocks, _ = TASKS[name]
    folder = root / name
    folder.mkdir(parents=True)
    classification = task_type == "classification"
    y_train = rng.integers(0, width, N_TRAIN) if classification else rng.normal(size=N_TRAIN)
    true_test = rng.integers(0, width, n_test) if classification else rng.normal(size=n_test)
    np.savez(folder / f"{name}.npz", x_train=rng.normal(size=(N_TRAIN, FEATURES)), y_train=y_train,
             x_test=rng.normal(size=(n_test, FEATURES)), y_test=true_test)
    size = n_test // blocks
    declaration = {"name": name, "phase": "final", "kind": task_type, "n_train": N_TRAIN,
                   "n_test": n_test, "input_shape": [FEATURES],
                   "test_blocks": [{"name": "clean" if b == 0 else f"shift_{b}", "start": b * size,
                                    "stop": (b + 1) * size} for b in range(blocks)],
                   "model": {"type": "mlp", "activation": "tanh",
                             "layer_sizes": [FEATURES, 8, width if classification else 2]},
                   "likelihood": {"name": "softmax" if classification else "gaussian"},
                   "prior": {"distribution": "normal", "variance": 0.1},
                   "summary": f"the organizer's own {name} task",
                   ("num_classes" if classification else "num_samples"): width}
    (folder / f"{name}_task.json").write_text(json.dumps(declaration))
    if classification:
        chains = rng.dirichlet(np.ones(width), size=(4, n_test))
        np.savetxt(folder / f"{name}_probs.csv", chains.mean(axis=0))
        np.save(folder / f"{name}_chain_probs.npy", chains)
    else:
        chains = rng.normal(size=(4, width, n_test))
        np.savetxt(folder / f"{name}_samples.csv", chains[0])
        np.save(folder / f"{name}_chain_samples.npy", chains)


@pytest.fixture(scope="module")
def custom(tmp_path_factory):
    """(spec file, data root): a results phase on one task, a code phase on two others."""
    root = tmp_path_factory.mktemp("custom")
    rng = np.random.default_rng(1)
    data = root / "data"
    for name in TASKS:
        write_task(data, name, rng)
    default_spec = REPO / "kinds" / "bdl2021" / "default_spec.yaml"
    spec = yaml.safe_load(default_spec.read_text())
    spec.update(slug="custom-kit", title="Moons, spirals and housing",
                description="An organizer's own three tasks.",
                organizers=[{"name": "Ada Organizer", "contact": "ada@example.net"}],
                pages={"overview": "Three *small* tasks of our own.",
                       "terms": "Be kind; see [the rules](https://example.net/rules)."},
                tasks={n: {"budget_seconds": t[4]} for n, t in TASKS.items()},
                sandbox={**spec["sandbox"], "startup_seconds": 20},   # not the default 30 s
                phases={"warmup": {"label": "Warm-up", "start": "2027-01-10 00:00:00",
                                   "submission": "results", "tasks": ["moons"],
                                   "execution_time_limit": 300},
                        "final": {"label": "Final", "start": "2027-04-01 00:00:00",
                                  "submission": "code", "tasks": FINAL,
                                  "execution_time_limit": 300}},
                tracks={})
    spec_file = root / "spec" / "spec.yaml"
    spec_file.parent.mkdir()
    # Codabench, the default platform, requires a logo next to the spec.
    shutil.copyfile(default_spec.parent / spec["logo"], spec_file.parent / spec["logo"])
    spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    return spec_file, data


def build_bundle_main(*args) -> subprocess.CompletedProcess:
    """``python build_bundle.py ARGS`` by its ``main`` in this process (in_process_commands):
    for builds whose output is the claim here; the command line's exit codes and output have
    tests of their own (test_cli, test_organizer_errors). The programs a --check dry run
    starts are subprocesses as on the command line."""
    import build_bundle
    return run_main(build_bundle.main, *args)


@pytest.fixture(scope="module", params=["per_phase", "one"])
def bundles(custom, tmp_path_factory, request):
    """The competition built in each layout, and dry-run (--check): one bundle per phase, or
    one holding both."""
    spec_file, data = custom
    raw = yaml.safe_load(spec_file.read_text())
    spec_file = spec_file.with_name(f"spec-{request.param}.yaml")
    spec_file.write_text(yaml.safe_dump({**raw, "layout": request.param}, sort_keys=False))
    out = tmp_path_factory.mktemp("dist")
    build = build_bundle_main("--config", spec_file, "--data-root", data, "--phase", "all",
                              "--out", out, "--check")
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    return sorted(out.glob("*.zip"))     # one competition, or one bundle per phase


def kit_members(bundles: list[Path], phase: str) -> dict[str, bytes]:
    """The phase's starting kit, whether the competition is one bundle or one per phase."""
    for bundle in bundles:
        with zipfile.ZipFile(bundle) as outer:
            names = set(outer.namelist())
            if f"{phase}_starting_kit.zip" in names:
                kit_zip = outer.read(f"{phase}_starting_kit.zip")
            elif bundle.stem.removesuffix("-codabench").endswith(f"-{phase}") \
                    and "starting_kit.zip" in names:
                kit_zip = outer.read("starting_kit.zip")
            else:
                continue
        kit = zipfile.ZipFile(io.BytesIO(kit_zip))
        return {name.split("/", 1)[-1] if name.startswith("starting_kit/") else name:
                kit.read(name) for name in kit.namelist() if not name.endswith("/")}
    raise KeyError(f"no starting kit of phase {phase} in {bundles}")


def test_kit_guide_names_only_the_specs_tasks_and_figures(bundles):
    for phase in ("warmup", "final"):
        members = kit_members(bundles, phase)
        guide = members["README.md"].decode()
        for name in DEFAULT_TASKS:
            assert name not in guide, (phase, name)
        assert "30 s" not in guide and "1000 samples" not in guide
        assert "kinds/bdl2021" not in guide and "starting_kit/" not in guide
        assert "| classification | 60 / " in guide
        assert "baseline_results.json" not in members           # no table for these tasks
        assert "Baseline results are not available for these tasks." in guide
        # every kit path the guide names exists in the kit
        for path in ("run_local.py", "submission_zip.py", "baselines/declared_model.py",
                     "baselines/sgld.py", "baselines/training.py", "data/input/moons.npz",
                     "data/input/spirals.npz", "data/input/housing.npz"):
            if path in guide:
                assert path in members, (phase, path)


def test_kit_guides_agree_with_the_pages_and_yaml(bundles):
    """Ranking, limits and file names as the pages and competition.yaml state them, in both
    layouts (layout one ranks by the weighted loss)."""
    from kit_guides import agreement_problems
    problems = [problem for bundle in bundles for problem in agreement_problems(bundle)]
    assert not problems, "\n".join(problems)


def test_kit_guide_shows_its_phases_commands(bundles):
    warmup = kit_members(bundles, "warmup")["README.md"].decode()
    assert "python run_local.py --results predictions.zip" in warmup
    assert "`moons_probs.csv` | 40 x 2" in warmup and "sample_result_submission.zip" in warmup
    assert "--code" not in warmup and "def predict(" not in warmup
    assert "`moons` | classification | 60 / 40 | 3 | probabilities of 2 classes |\n" in warmup
    assert "housing" not in warmup and "budget" not in warmup.split("## 1.")[1].split("## 2.")[0]
    final = kit_members(bundles, "final")["README.md"].decode()
    assert "python run_local.py --code submission.zip" in final
    assert "def predict(task, x_train, y_train, x_test, checkpoint):" in final
    assert "--results" not in final and "_probs.csv" not in final
    assert "| `spirals` | classification | 60 / 30 | 3 | probabilities of 3 classes | 7 s |" in final
    assert "| `housing` | regression | 60 / 24 | 3 | 50 samples of y per test point | 9 s |" in final
    assert "`housing`: `clean`, `shift_1`" in final
    assert "**Training time budget per task**: spirals 7 s, housing 9 s" in final
    assert "sample_code_submission.zip" in final


def test_overview_says_no_baselines_for_custom_tasks(bundles):
    with zipfile.ZipFile(bundles[0]) as bundle:
        overview = next(bundle.read(n).decode() for n in bundle.namelist()
                        if n.endswith("overview.html"))
    assert "Baseline results are not available for these tasks." in overview
    assert "Deep ensemble" not in overview


def test_run_local_follows_the_spec_and_streams_the_log(custom, tmp_path):
    spec_file, data = custom
    run = subprocess.run([sys.executable, "-m", "bundle.local_run",
                          "--config", str(spec_file), "--data-root", str(data),
                          "--phase", "final", "--budget", "3", "--baseline", "trivial",
                          "--out", str(tmp_path / "run")],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    scores = dict(line.split(": ") for line in
                  run.stdout.split("\nscores:\n")[1].split("\n\n")[0].splitlines())
    assert {"spirals_agreement", "housing_w2", "spirals_train_seconds"} <= set(scores)
    assert not any(name in run.stdout for name in DEFAULT_TASKS)
    # the ingestion's log came before the scores (streamed), and names the tasks
    log = run.stdout.split("\nscores:\n")[0]
    assert "spirals" in log and "housing" in log


def test_run_local_offers_the_specs_phases(custom, tmp_path):
    """``python -m bundle.local_run`` run by its ``main`` in this process (the command line
    itself runs in the test above): a phase the spec lacks, refused naming the spec's own."""
    from bundle.local_run import main
    spec_file, data = custom
    refused = run_main(main, "--config", spec_file, "--data-root", data,
                       "--phase", "development", "--results", tmp_path)
    assert refused.returncode == 2 and "'warmup'" in refused.stderr and "'final'" in refused.stderr


def baseline_results_main(*args) -> subprocess.CompletedProcess:
    """``python kinds/bdl2021/kit/baseline_results.py ARGS`` run by its ``main`` in this
    process, as a CompletedProcess (an argparse refusal's SystemExit is its exit status): the
    same function on the same arguments, without a new interpreter's start and the imports of
    the builder (about half a CPU second). The kits' runs it makes are subprocesses as from
    the command line, which the test below also runs once as typed, as do
    test_bdl_failed_baselines and test_organizer_errors for its failures. Loaded from its
    file under a name of its own: each kind's kit has a baseline_results.py."""
    import importlib.util
    name = "bdl2021_kit_baseline_results"
    module = sys.modules.get(name)
    if module is None:
        found = importlib.util.spec_from_file_location(
            name, REPO / "kinds" / "bdl2021" / "kit" / "baseline_results.py")
        module = importlib.util.module_from_spec(found)
        found.loader.exec_module(module)
        sys.modules[name] = module
    return run_main(module.main, *args)


@pytest.mark.slow
def test_baseline_results_for_the_specs_tasks_are_written_next_to_it(custom, tmp_path):
    """Two baselines (every one is run on the default tasks by test_bdl_more_baselines and
    test_bdl_starting_kit), then one of them again: its rows are replaced, the other's kept."""
    spec_file, data = custom
    out = spec_file.parent / "baseline_results.json"
    command = [sys.executable, str(REPO / "kinds" / "bdl2021" / "kit" / "baseline_results.py"),
               "--config", str(spec_file), "--data-root", str(data), "--budget", "1"]
    run = subprocess.run(command + ["--methods", "trivial,sgld"], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    try:
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        progress = [line for line in run.stdout.splitlines() if line.startswith("[")]
        table = json.loads(out.read_text())
        # the table's order, whatever the command's; warmup: moons; final: spirals, housing
        assert list(table["methods"]) == ["sgld", "trivial"]
        assert len(progress) == 3 * 2, run.stdout
        assert any("sgld / final / housing: w2" in line for line in progress)
        assert set(table["tasks"]) == set(TASKS) and table["budgets"] == dict.fromkeys(TASKS, 1)
        assert all(metric["se"] > 0 for task in TASKS
                   for metric in table["tasks"][task]["methods"]["sgld"]["metrics"].values())
        again = baseline_results_main(*command[2:], "--methods", "trivial")
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        rerun = json.loads(out.read_text())
        assert list(rerun["methods"]) == ["sgld", "trivial"]
        for task in TASKS:
            assert rerun["tasks"][task]["methods"]["sgld"] == table["tasks"][task]["methods"]["sgld"]
        unknown = baseline_results_main(*command[2:], "--methods", "sgld,nuts")
        assert unknown.returncode == 2 and "nuts: expected some of deep_ensemble" in unknown.stderr
        # the builder now reads the spec's own table
        build = build_bundle_main("--config", spec_file, "--data-root", data, "--phase",
                                  "final", "--out", tmp_path / "dist")
        assert build.returncode == 0, build.stderr[-3000:]
        (bundle_file,) = (tmp_path / "dist").glob("*.zip")
        with zipfile.ZipFile(bundle_file) as bundle:
            overview = next(bundle.read(n).decode() for n in bundle.namelist()
                            if n.endswith("overview.html"))
        assert "Cyclical SGLD" in overview and "not available" not in overview
    finally:
        out.unlink(missing_ok=True)


TEXT_SUFFIXES = (".html", ".yaml", ".json", ".md", ".txt", ".py", ".csv")
DEFAULT_FIGURES = ("30 s", "bdl-approx-inference", "embedded edition", "organizers@example.org")


def text_members(data: bytes, where: str):
    """(path, text) of every text file in a zip, nested zips opened too."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for name in archive.namelist():
            member = archive.read(name)
            if name.endswith(".zip"):
                yield from text_members(member, f"{where}/{name}")
            elif name.endswith(TEXT_SUFFIXES):
                yield f"{where}/{name}", member.decode("utf-8", "replace")


def test_nothing_in_the_custom_bundles_is_the_default_competitions(bundles):
    """Every page, yaml, config, guide, program and data file of the custom competition:
    no default task name and no default figure, anywhere."""
    import re
    names = re.compile(r"\b(" + "|".join(DEFAULT_TASKS) + r")\b")
    found = []
    for bundle in bundles:
        for path, text in text_members(bundle.read_bytes(), bundle.name):
            found += [f"{path}: {match}" for match in sorted(set(names.findall(text)))]
            found += [f"{path}: {figure!r}" for figure in DEFAULT_FIGURES if figure in text
                      and not path.endswith(".py")]    # the programs' code states defaults
    assert not found, "\n".join(found[:40])


def extract_kit(bundles: list[Path], phase: str, destination: Path) -> Path:
    """The phase's starting kit unzipped, as a participant has it after downloading."""
    for name, data in kit_members(bundles, phase).items():
        (destination / name).parent.mkdir(parents=True, exist_ok=True)
        (destination / name).write_bytes(data)
    return destination


def in_kit(kit: Path, *args, timeout=300):
    """``python run_local.py ...`` typed in the kit's folder."""
    return subprocess.run([sys.executable, "run_local.py", *args], cwd=kit, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("bundles", ["per_phase"], indirect=True)
def test_a_baseline_that_imports_a_sibling_runs_from_the_kit_as_the_guide_says(bundles, tmp_path):
    """The guide's command: sgld.py is the entry, and multi_swag.py and sghmc.py, next to it,
    import it by its own name."""
    kit = extract_kit(bundles, "final", tmp_path / "kit")
    run = in_kit(kit, "--code", "baselines/sgld.py", "--out", str(tmp_path / "run"))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "is not in the folder" not in run.stderr


@pytest.mark.parametrize("bundles", ["per_phase"], indirect=True)
def test_a_baseline_files_missing_module_is_named_by_the_participants_path(bundles, tmp_path):
    kit = extract_kit(bundles, "final", tmp_path / "kit")
    (kit / "mine").mkdir()
    (kit / "mine" / "method.py").write_text("from sgld import largest_curvature\n\n"
                                            "def predict(*args):\n    pass\n")
    out = tmp_path / "run"
    run = in_kit(kit, "--code", "mine/method.py", "--out", str(out))
    assert run.returncode == 2, run.stdout[-3000:] + run.stderr[-3000:]
    assert "error: mine: your code imports sgld, but sgld.py is not in the folder" in run.stderr
    assert str(out) not in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize("bundles", ["per_phase"], indirect=True)
def test_a_relative_out_folder_is_taken_from_where_the_command_runs(bundles, tmp_path):
    kit = extract_kit(bundles, "warmup", tmp_path / "kit")
    run = in_kit(kit, "--results", "sample_result_submission.zip", "--out", "my_run")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert (kit / "my_run" / "scores.json").is_file()
    assert "moons_agreement: " in run.stdout


@pytest.mark.parametrize("bundles", ["per_phase"], indirect=True)
def test_the_run_names_its_python_and_packages_next_to_the_images(bundles, tmp_path):
    """The image's versions come with the kit, from requirements-image.txt; a difference is
    a warning that names the package (here the kit's copy is edited to differ)."""
    import numpy
    kit = extract_kit(bundles, "warmup", tmp_path / "kit")
    image = dict(line.split("==") for line in (REPO / "requirements-image.txt").read_text()
                 .splitlines() if "==" in line and not line.startswith("#"))
    assert (kit / "requirements-image.txt").read_bytes() == \
        (REPO / "requirements-image.txt").read_bytes()
    run = in_kit(kit, "--results", "sample_result_submission.zip", "--out", str(tmp_path / "a"))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"python: {sys.executable} (Python " in run.stdout
    assert f"  numpy {numpy.__version__} (the image: {image['numpy']})" in run.stdout
    assert f"  pyyaml {yaml.__version__} (the image: {image['pyyaml']})" in run.stdout
    (kit / "requirements-image.txt").write_text("numpy==0.1.0\npyyaml==6.0.2\n")
    run = in_kit(kit, "--results", "sample_result_submission.zip", "--out", str(tmp_path / "b"))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert (f"warning: numpy {numpy.__version__} here, not as in codalab/codalab-legacy:py312"
            in run.stdout)

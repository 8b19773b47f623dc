"""The PGDL kind end to end (its default competition's build and dry run on both platforms are
test_kind_conformance.py's): its scorer penalises unmeasured networks, its ingestion survives
hostile measures, an organizer's broken zoo is refused with the file named, and the baselines
command makes the table the pages show for an organizer's zoos."""
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from runtime.formats import TaskRun
from kinds.kind import scoring_runtime
from kinds.pgdl2020.runtime.formats import read_model_configs
from kinds.pgdl2020.runtime.metrics import conditional_mutual_information
from runtime.scoring import TaskConfig, score_task
from in_process_commands import run_main
from kit_runs import run_kit_locally

REPO = Path(__file__).resolve().parents[3]
SPEC = REPO / "kinds" / "pgdl2020" / "default_spec.yaml"
ZOOS = REPO / "kinds" / "pgdl2020" / "reference" / "embedded"
SCORING = scoring_runtime("pgdl2020")


def build(*args):
    """``build_bundle.py *args``, its main run in this process (in_process_commands.py): what
    is tested is what the builder builds, refuses and says, not a new interpreter's start
    (nor, in each, the builder's first scan of the installed packages for a kit's
    requirements, which this process keeps)."""
    import build_bundle
    return run_main(build_bundle.main, *args)


def task(name="breast_cancer_mlp") -> TaskConfig:
    zoo = read_model_configs(ZOOS / name / "model_configs.json")
    settings = SCORING.parse_settings("zoo", {"num_models": len(zoo.ids),
                                              "model_configs": "model_configs.json",
                                              "submission_stem": name}, "test")
    return TaskConfig(name, SCORING.TASK_TYPES["zoo"], {"cmi": 1.0}, 64.0, settings), zoo


def test_a_measure_equal_to_the_gaps_scores_pgdls_maximum(tmp_path):
    config, zoo = task()
    res = tmp_path / "res"
    res.mkdir()
    np.save(res / "breast_cancer_mlp.npy", zoo.gaps)
    result = score_task(SCORING, config, ZOOS / "breast_cancer_mlp", res, None)
    expected = conditional_mutual_information(zoo.gaps, zoo.gaps, zoo.hparams,
                                              value_order=zoo.possible_values)[0]
    assert not result.penalised and result.metrics["cmi"].value == pytest.approx(expected)
    assert expected > 0.99 and result.metrics["cmi"].value <= 1.0   # clipped to its bound
    assert result.metrics["kendall_tau"].value > 0.9     # tau-a: tied gaps keep it below 1


def test_an_unmeasured_network_penalises_the_task(tmp_path):
    config, zoo = task()
    res = tmp_path / "res"
    res.mkdir()
    values = {model: 1.0 + i for i, model in enumerate(zoo.ids)}
    values[zoo.ids[3]] = "EXCEEDED"
    (res / "breast_cancer_mlp.predict").write_text(json.dumps(values))
    result = score_task(SCORING, config, ZOOS / "breast_cancer_mlp", res, None)
    assert result.penalised and zoo.ids[3] in result.penalty
    assert result.metrics["cmi"].value == 0.0 and result.metrics["kendall_tau"].value == -1.0
    run = TaskRun("timeout", 64.0, prediction=None, message="budget exceeded")
    assert score_task(SCORING, config, ZOOS / "breast_cancer_mlp", res, run).penalised


HOSTILE = '''
import time
def complexity(model, dataset):
    if model.id == "model_1":
        time.sleep(1.5)                 # over its share of the budget
    if model.id == "model_2":
        return "big"                    # not a number
    if model.id == "model_3":
        raise RuntimeError("boom")      # a crash on one network
    return float(sum((w ** 2).sum() for w in model.weights))
'''


def test_hostile_measures_mark_those_networks_and_the_run_says_why(tmp_path):
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "complexity.py").write_text(HOSTILE)
    # `python -m bundle.local_run --phase phase1 --budget 16 --code ...`, its kit built in
    # this process (kit_runs.py)
    result = run_kit_locally(SPEC, "phase1", tmp_path / "run", code=folder, budget=16)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]        # the task is penalised: not scored
    assert "Traceback (most recent call last)" not in result.stderr or "boom" in output
    assert "networks have no finite measure" in output
    for model in ("model_1", "model_2", "model_3"):
        assert model in output


def test_an_incomplete_organizer_grid_is_refused_with_the_file_named(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(ZOOS / "wine_mlp", data / "wine_mlp")
    configs = data / "wine_mlp" / "model_configs.json"
    raw = json.loads(configs.read_text())
    raw.pop(next(iter(raw)))
    configs.write_text(json.dumps(raw))
    spec = yaml.safe_load(SPEC.read_text())
    spec.pop("logo")
    spec.update(tasks={"wine_mlp": {"budget_seconds": 64}}, phases={"only": {
        "label": "Only", "start": "2027-08-01 00:00:00", "submission": "code",
        "tasks": ["wine_mlp"], "execution_time_limit": 300}})
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = build("--config", str(tmp_path / "spec.yaml"), "--data-root", str(data),
                   "--phase", "all", "--out", str(tmp_path / "out"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "model_configs.json" in result.stderr and "incomplete" in result.stderr
    assert not list((tmp_path / "out").glob("*.zip")) if (tmp_path / "out").exists() else True


# --- an organizer's zoo in this kind's layout, checked at build time ------------------------

OWN_GRID = {"width": [4, 8], "dropout": [0.0, 0.25]}
OWN_CLASSES, OWN_FEATURES = 3, 5


def write_own_zoo(root: Path, name: str = "own_mlp", seed: int = 0) -> Path:
    """A zoo as docs/organizer_data.md describes it, written with numpy alone: 4 networks,
    kernels (in, out) under dense_<k>/ counted from 0, logits out, labels 0..C-1."""
    rng = np.random.default_rng(seed)
    folder = root / name
    (folder / "dataset_1").mkdir(parents=True)
    np.savez(folder / "dataset_1" / "train.npz",
             inputs=rng.normal(size=(30, OWN_FEATURES)).astype(np.float32),
             outputs=rng.integers(0, OWN_CLASSES, 30).astype(np.int32))
    configs = {}
    points = [(w, r) for w in OWN_GRID["width"] for r in OWN_GRID["dropout"]]
    for model_id, (width, rate) in enumerate(points):
        model = folder / f"model_{model_id}"
        model.mkdir()
        layers = [{"layer_name": "Dense", "units": width, "activation": "relu"},
                  {"layer_name": "Dropout", "rate": rate},
                  {"layer_name": "Dense", "units": OWN_CLASSES, "activation": "linear"}]
        (model / "config.json").write_text(json.dumps({"model_config": layers,
                                                       "input_shape": [OWN_FEATURES]}))
        shapes = [(OWN_FEATURES, width), (width, OWN_CLASSES)]
        arrays = {}
        for k, (fan_in, units) in enumerate(shapes):
            arrays[f"dense_{k}/kernel"] = rng.normal(size=(fan_in, units)).astype(np.float32)
            arrays[f"dense_{k}/bias"] = rng.normal(size=units).astype(np.float32)
        np.savez(model / "weights.npz", **arrays)
        configs[str(model_id)] = {
            "hparams": {"width": {"possible_values": OWN_GRID["width"], "current_value": width},
                        "dropout": {"possible_values": OWN_GRID["dropout"],
                                    "current_value": rate}},
            "metrics": {"train_acc": 1.0, "test_acc": 0.5 + 0.1 * model_id}}
    (folder / "model_configs.json").write_text(json.dumps(configs))
    (folder / f"{name}_task.json").write_text(json.dumps({
        "name": name, "phase": "phase1", "task_type": "zoo", "dataset": "random numbers",
        "summary": "an organizer's own zoo", "num_models": len(points),
        "input_shape": [OWN_FEATURES], "num_classes": OWN_CLASSES,
        "hyperparameters": OWN_GRID, "n_train": 30, "n_test": 0, "stopping_rule": "none"}))
    return folder


def own_spec(tmp_path: Path, task: str = "own_mlp") -> Path:
    spec = yaml.safe_load(SPEC.read_text())
    # Codabench, the default platform, requires the logo next to the spec
    shutil.copyfile(SPEC.parent / spec["logo"], tmp_path / spec["logo"])
    spec.update(slug="own-zoo", tasks={task: {"budget_seconds": 8}}, phases={"only": {
        "label": "Only", "start": "2027-08-01 00:00:00", "submission": "code",
        "tasks": [task], "execution_time_limit": 300}})
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _rewrite_weights(folder: Path, change) -> None:
    for weights in folder.glob("model_*/weights.npz"):
        with np.load(weights) as stored:
            arrays = dict(change({key: stored[key] for key in stored.files}))
        np.savez(weights, **arrays)


def _kernels_out_in(folder: Path) -> str:
    _rewrite_weights(folder, lambda arrays: {
        key: array.T if key.endswith("kernel") else array for key, array in arrays.items()})
    return ("model_0/weights.npz: dense_0/kernel has shape (4, 5); expected (5, 4) (stored "
            "(out, in); Keras's order is (in, out))")


def _keys_from_one(folder: Path) -> str:
    _rewrite_weights(folder, lambda arrays: {
        key.replace(f"dense_{key[6]}/", f"dense_{int(key[6]) + 1}/"): array
        for key, array in arrays.items()})
    return "model_0/weights.npz: no key dense_0/kernel; expected dense_0/kernel, dense_0/bias"


def _softmax_output(folder: Path) -> str:
    for config in folder.glob("model_*/config.json"):
        raw = json.loads(config.read_text())
        raw["model_config"][-1]["activation"] = "softmax"
        config.write_text(json.dumps(raw))
    return ("model_0/config.json: layer 2 (Dense) has activation 'softmax'; the last layer "
            "gives the logits")


def _labels_from_one(folder: Path) -> str:
    path = folder / "dataset_1" / "train.npz"
    with np.load(path) as stored:
        inputs, outputs = stored["inputs"], stored["outputs"]
    np.savez(path, inputs=inputs, outputs=outputs + 1)
    return ("dataset_1/train.npz: outputs span 1..3; expected class indices 0..2 (the "
            "networks have 3 outputs)")


@pytest.fixture(scope="module")
def good_own_bundle(tmp_path_factory):
    """An organizer's good zoo and the bundle it builds (built once for the cases below)."""
    tmp_path = tmp_path_factory.mktemp("own")
    write_own_zoo(tmp_path / "data")
    spec = own_spec(tmp_path)
    result = build("--config", str(spec), "--data-root", str(tmp_path / "data"), "--phase",
                   "all", "--out", str(tmp_path / "dist"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (bundle,) = (tmp_path / "dist").glob("*.zip")
    return spec, tmp_path / "data", bundle


@pytest.mark.parametrize("mistake", [_kernels_out_in, _keys_from_one, _softmax_output,
                                     _labels_from_one])
def test_a_native_zoo_mistake_fails_the_build_naming_file_key_and_expectation(
        mistake, good_own_bundle, tmp_path):
    spec, good_data, bundle = good_own_bundle
    before = bundle.read_bytes()
    data = tmp_path / "data"
    shutil.copytree(good_data, data)
    expected = mistake(data / "own_mlp")
    result = build("--config", str(spec), "--data-root", str(data), "--phase", "all",
                   "--out", str(bundle.parent))
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    problems = [line for line in result.stderr.splitlines() if line.startswith(str(spec))]
    assert len(problems) == 1, result.stderr
    assert str(data / "own_mlp" / expected) in problems[0] or expected in problems[0], problems
    assert list(bundle.parent.glob("*.zip")) == [bundle] and bundle.read_bytes() == before


@pytest.mark.slow
def test_the_baselines_command_makes_the_table_the_pages_show_for_an_organizers_zoo(
        tmp_path, good_own_bundle):
    write_own_zoo(tmp_path / "data")
    spec = own_spec(tmp_path)
    # Before the table: the build of this spec and zoo without it is good_own_bundle's (the
    # same spec text and the same zoo, seed 0; no table beside its spec), not built again.
    before_spec, _, before = good_own_bundle
    assert before_spec.read_text() == spec.read_text()
    assert not (before_spec.parent / "baseline_results.json").exists()
    assert "Baseline results are not available" in _overview(before.parent)
    run = subprocess.run([sys.executable, str(REPO / "kinds" / "pgdl2020" / "kit" /
                                              "baseline_results.py"),
                          "--config", str(spec), "--data-root", str(tmp_path / "data")],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    table = json.loads((tmp_path / "baseline_results.json").read_text())
    measures = sorted(p.stem for p in (REPO / "kinds" / "pgdl2020" / "kit" / "baselines").glob(
        "*.py"))
    assert sorted(table["measures"]) == measures and list(table["tasks"]) == ["own_mlp"]
    for row in table["tasks"]["own_mlp"].values():
        assert -1.0 <= row["kendall_tau"] <= 1.0 and 0.0 <= row["cmi"] + 1e-12 <= 1.0
        assert set(row["se"]) == {"cmi", "kendall_tau", "granulated_kendall"}     # for the
        assert all(se is None or se >= 0 for se in row["se"].values())          # build's check
    built = build("--config", str(spec), "--data-root", str(tmp_path / "data"), "--phase",
                  "all", "--out", str(tmp_path / "after"))
    assert built.returncode == 0, built.stderr[-3000:]
    overview = _overview(tmp_path / "after")
    assert "not available" not in overview
    for label in table["measures"].values():
        assert label.replace("'", "&#39;") in overview, label


def _overview(out: Path) -> str:
    (bundle,) = out.glob("*.zip")
    with zipfile.ZipFile(bundle) as archive:
        return next(archive.read(name).decode() for name in archive.namelist()
                    if name.endswith("overview.html"))

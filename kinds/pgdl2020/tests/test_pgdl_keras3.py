"""PGDL task folders whose networks current Keras saved (kinds/pgdl2020/tests/fixtures/pgdl_keras3, written by
Keras 3 and tf_keras themselves with its make_fixtures.py): each file kind converts and our
forward pass gives Keras's own logits; a broken file is refused in one line naming it, and
nothing already converted is replaced."""
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest

from kinds.pgdl2020.runtime.participant import Model
from test_pgdl_convert import convert_in_process, store_kernel_in_torch_order

REPO = Path(__file__).resolve().parents[3]
KERAS3 = REPO / "kinds" / "pgdl2020" / "tests" / "fixtures" / "pgdl_keras3"
# task: (the file kinds it covers, channels)
TASKS = {"saved_weights": ("PGDL layer list + Keras 3 save_weights", 3),
         "model_json": ("model.to_json() + Keras 3 save_weights", 1),
         "whole_keras": ("Keras 3 .keras archives", 3),
         "whole_h5": ("Keras 3 legacy whole-model HDF5", 1),
         "keras2_h5": ("Keras 2 whole-model HDF5", 1)}


def run_convert(*args) -> subprocess.CompletedProcess:
    """The command as organizers run it, for the fixture; the other tests run its main in
    this process (test_pgdl_convert.convert_in_process): what convert refuses and writes is
    their claim, not a new interpreter's start."""
    return subprocess.run([sys.executable, "-m", "reference_data", "--kind", "pgdl2020",
                           "convert", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    out = tmp_path_factory.mktemp("keras3") / "data"
    result = run_convert(*(KERAS3 / "input_data" / task for task in TASKS), "--out", out,
                         "--model-configs", KERAS3 / "reference_data")
    assert result.returncode == 0, result.stderr
    return out, result.stdout


def assert_keras_logits(model: Model, inputs: np.ndarray, expected: np.ndarray, what: str):
    """Within 1e-5, relative to the largest logit: float32 sums in another order."""
    np.testing.assert_allclose(model.logits(inputs), expected, rtol=1e-5,
                               atol=1e-5 * np.abs(expected).max(), err_msg=what)


def test_keras3_files_convert_to_the_keras_outputs(converted):
    """Every file kind current Keras writes, every layer kind of the 2020 zoos, 1 and 3
    channels: our forward pass on the converted files gives Keras's logits, trained and
    initial."""
    out, printed = converted
    kinds, channels = set(), set()
    for task in TASKS:
        line = next(line for line in printed.splitlines() if line.startswith(f"{task}: "))
        assert "1 models" in line and "matches model_configs.json for 1 of 1 models" in line
        with np.load(out / task / "dataset_1" / "train.npz") as stored:
            images = stored["inputs"]
        channels.add(images.shape[-1])
        expected = np.load(KERAS3 / "expected" / task / "model_0.npz")
        model = Model(out / task / "model_0")
        kinds |= {layer["class_name"] for layer in model.layers}
        assert_keras_logits(model, images, expected["logits"], task)
        if "logits_init" in expected:
            assert_keras_logits(model.with_weights(model.initial_weights), images,
                                expected["logits_init"], f"{task} (initial)")
    assert kinds == {"Conv2D", "MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D",
                     "BatchNormalization", "Activation", "Flatten", "Dropout", "Dense"}
    assert channels == {1, 3}
    assert (out / "whole_keras" / "model_0" / "weights_init.npz").is_file()
    assert not (out / "whole_h5" / "model_0" / "weights_init.npz").exists()


def test_keras_json_becomes_the_layer_list_the_runtime_reads(converted):
    """A Keras model's JSON (model.to_json(), a .keras archive's, an HDF5 file's) is written
    as PGDL's layer list: layer_name and the settings the runtime reads, nothing of Keras 3's
    serialisation (names, dtype policies, initialisers) that Keras 2 could not construct."""
    from kinds.pgdl2020.reference.keras_model import RUNTIME_SETTINGS
    out, _ = converted
    for task in ("model_json", "whole_keras", "whole_h5", "keras2_h5"):
        config = json.loads((out / task / "model_0" / "config.json").read_text())
        assert config["input_shape"][-1] in (1, 3)
        for layer in config["model_config"]:
            assert set(layer) <= {"layer_name", *RUNTIME_SETTINGS}, (task, layer)
    first = json.loads((out / "model_json" / "model_0" / "config.json").read_text())
    assert first["model_config"][0] == {
        "layer_name": "Conv2D", "filters": 3, "kernel_size": [3, 3], "strides": [1, 1],
        "padding": "same", "data_format": "channels_last", "dilation_rate": [1, 1],
        "groups": 1, "activation": "linear", "use_bias": True}
    assert first["input_shape"] == [8, 8, 1]


def _copy(tmp_path: Path, task: str) -> Path:
    for part in ("input_data", "reference_data"):
        shutil.copytree(KERAS3 / part / task, tmp_path / part / task)
    return tmp_path / "input_data" / task


def test_a_config_json_beside_a_whole_model_is_the_one_read(tmp_path):
    """An organizer who keeps PGDL's layer list beside a .keras archive: config.json is read,
    the archive's weights matched to it, and Keras's logits come out."""
    folder = _copy(tmp_path / "pgdl", "whole_keras")
    layers = [{"layer_name": "Conv2D", "filters": 6, "kernel_size": 3, "strides": 2,
               "padding": "same", "activation": "relu"},
              {"layer_name": "BatchNormalization"},
              {"layer_name": "MaxPooling2D", "pool_size": 2, "strides": 2, "padding": "same"},
              {"layer_name": "Flatten"}, {"layer_name": "Dropout", "rate": 0.5},
              {"layer_name": "Dense", "units": 3}]
    (folder / "model_0" / "config.json").write_text(json.dumps(
        {"model_config": layers, "input_shape": [8, 8, 3]}))
    result = convert_in_process(folder, "--out", tmp_path / "data")
    assert result.returncode == 0, result.stderr
    written = json.loads((tmp_path / "data" / "whole_keras" / "model_0" / "config.json")
                         .read_text())
    assert written["model_config"] == layers
    with np.load(tmp_path / "data" / "whole_keras" / "dataset_1" / "train.npz") as stored:
        images = stored["inputs"]
    expected = np.load(KERAS3 / "expected" / "whole_keras" / "model_0.npz")
    assert_keras_logits(Model(tmp_path / "data" / "whole_keras" / "model_0"), images,
                        expected["logits"], "config.json beside model.keras")


# --- refusals: one line naming the file ---------------------------------------------------

def _group_renamed(folder):
    with h5py.File(folder / "model_0" / "weights.weights.h5", "r+") as handle:
        handle.move("layers/conv2d_1", "layers/conv2d_7")
    return ("model_0/weights.weights.h5: no arrays for layer 3 (Conv2D conv2d_1) of "
            "config.json: Keras 3 keeps them in layers/conv2d_1")


def _array_dropped(folder):
    with h5py.File(folder / "model_0" / "weights.weights.h5", "r+") as handle:
        del handle["layers/batch_normalization/vars/3"]
    return ("model_0/weights.weights.h5: layer 'layers/batch_normalization' holds 3 array(s) "
            "(vars/0, vars/1, vars/2); expected gamma, beta, moving_mean, moving_variance")


def _kernel_in_torch_order(folder):
    store_kernel_in_torch_order(folder / "model_0" / "weights_init.weights.h5",
                                "layers/conv2d/vars/0")
    return ("model_0/weights_init.weights.h5: layer 'layers/conv2d' (Conv2D conv2d_0): kernel "
            "has shape (4, 3, 3, 3); config.json says (3, 3, 3, 4) (stored (out, in, kh, kw)")


def _neither_layout(folder):
    path = folder / "model_0" / "weights.weights.h5"
    path.unlink()
    with h5py.File(path, "w") as handle:
        handle.create_group("model").create_dataset("kernel", data=np.zeros(3, np.float32))
        handle.attrs["format"] = "mine"
    return ("model_0/weights.weights.h5: in neither of Keras's weight layouts: found groups "
            "model; attributes format; expected Keras 2's (a root attribute layer_names")


def _not_hdf5(folder):
    (folder / "model_0" / "weights.weights.h5").write_bytes(b"\x80\x02torch pickle")
    return "model_0/weights.weights.h5: neither an HDF5 file nor a .keras archive"


def _two_trained_files(folder):
    shutil.copyfile(folder / "model_0" / "weights.weights.h5", folder / "model_0" / "model.h5")
    return "model_0: 2 files of trained weights (weights.weights.h5, model.h5); keep one"


def _archive_without_weights(folder):
    path = folder / "model_0" / "model.keras"
    with zipfile.ZipFile(path) as archive:
        config = archive.read("config.json")
    path.unlink()
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", config)
    return ("model_0/model.keras: a zip archive without model.weights.h5 (it holds "
            "config.json)")


def _archive_truncated(folder):
    path = folder / "model_0" / "model_init.keras"
    path.write_bytes(path.read_bytes()[:4000])
    return "model_0/model_init.keras: not a readable .keras archive"


def _functional_model(folder):
    path = folder / "model_0" / "config.json"
    raw = json.loads(path.read_text())
    raw["class_name"] = "Functional"
    path.write_text(json.dumps(raw))
    return "model_0/config.json: a Keras Functional model; only Sequential models convert"


def _mixed_precision(folder):
    path = folder / "model_0" / "config.json"
    raw = json.loads(path.read_text())
    raw["config"]["layers"][1]["config"]["dtype"]["config"]["name"] = "mixed_float16"
    path.write_text(json.dumps(raw))
    return ("model_0/config.json: layer 0 (Conv2D 'features'): dtype 'mixed_float16'; only "
            "float32 networks convert")


def _weights_only_without_config(folder):
    (folder / "model_0" / "config.json").unlink()
    return ("model_0/model.weights.h5 holds weights only: add config.json (PGDL's layer list, "
            "or model.to_json()) or save the whole model (model.save('model.keras'))")


REFUSALS = {
    "saved_weights": [_group_renamed, _array_dropped, _kernel_in_torch_order, _neither_layout,
                      _not_hdf5, _two_trained_files],
    "whole_keras": [_archive_without_weights, _archive_truncated],
    "model_json": [_functional_model, _mixed_precision, _weights_only_without_config],
}


@pytest.mark.parametrize("task,breakage", [(task, breakage) for task, breakages
                                           in REFUSALS.items() for breakage in breakages],
                         ids=lambda value: getattr(value, "__name__", value))
def test_broken_keras3_files_are_refused_in_one_line(task, breakage, tmp_path):
    folder = _copy(tmp_path / "pgdl", task)
    expected = breakage(folder)
    result = convert_in_process(folder, "--out", tmp_path / "data")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    problems = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(problems) == 1 and expected in problems[0], result.stderr
    assert not (tmp_path / "data" / task).exists()


def test_a_broken_file_leaves_the_converted_task_as_it_was(tmp_path):
    """A rerun with --force over a good conversion fails on the broken file and keeps the
    good output byte for byte."""
    folder = _copy(tmp_path / "pgdl", "saved_weights")
    out = tmp_path / "data"
    assert convert_in_process(folder, "--out", out).returncode == 0
    before = {path.relative_to(out): path.read_bytes() for path in out.rglob("*")
              if path.is_file()}
    expected = _neither_layout(folder)
    result = convert_in_process(folder, "--out", out, "--force")
    assert result.returncode == 1 and expected in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    after = {path.relative_to(out): path.read_bytes() for path in out.rglob("*")
             if path.is_file()}
    assert after == before

"""PGDL's original task files (Keras HDF5 weights, TFRecord data) converted into the kind's
layout: the converted arrays equal those written, the networks give the logits of a numpy
forward pass, the converted root builds, and broken inputs are refused with the file named.

The TFRecord and protobuf bytes are written by a small encoder of this file's own (bitwise
CRC32C, hand-rolled varints), not by the module under test, so a decoder bug cannot cancel
out against the same bug in the encoder."""
import json
import struct
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

from kinds.pgdl2020.reference import tfrecord
from kinds.pgdl2020.runtime.participant import Model
from reference_data.__main__ import main as reference_main
from protobuf_bytes import length_field, tag, varint, varint_field
from in_process_commands import run_main

REPO = Path(__file__).resolve().parents[3]
SPEC = REPO / "kinds" / "pgdl2020" / "default_spec.yaml"
EMBEDDED = REPO / "kinds" / "pgdl2020" / "reference" / "embedded"


# --- the test's own encoder ----------------------------------------------------------------

def crc32c_bitwise(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 * (crc & 1))
    return crc ^ 0xFFFFFFFF


def masked(data: bytes) -> int:
    crc = crc32c_bitwise(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def tensor_proto(array: np.ndarray, style: str = "content") -> bytes:
    """A TensorProto: tensor_content, or the typed value lists (packed or not)."""
    dtype = {np.dtype("float32"): 1, np.dtype("float64"): 2, np.dtype("int32"): 3,
             np.dtype("int64"): 9}[array.dtype]
    shape = b"".join(length_field(2, varint_field(1, size)) for size in array.shape)
    message = varint_field(1, dtype) + length_field(2, shape)
    flat = array.reshape(-1)
    if style == "content":
        return message + length_field(4, array.astype(array.dtype.newbyteorder("<")).tobytes())
    if array.dtype == np.float32:
        packed = struct.pack(f"<{flat.size}f", *flat.tolist())
        if style == "packed":
            return message + length_field(5, packed)
        return message + b"".join(tag(5, 5) + struct.pack("<f", v) for v in flat.tolist())
    number = 7 if array.dtype == np.int32 else 10
    if style == "packed":
        return message + length_field(number, b"".join(varint(int(v)) for v in flat))
    return message + b"".join(varint_field(number, int(v)) for v in flat)


def example(inputs: np.ndarray, label: int, style: str = "content") -> bytes:
    def bytes_feature(payload):
        return length_field(1, length_field(1, payload))      # Feature.bytes_list.value
    entries = b"".join(length_field(1, length_field(1, key.encode()) + length_field(2, value))
                       for key, value in (("inputs", bytes_feature(tensor_proto(inputs, style))),
                                          ("output", bytes_feature(tensor_proto(
                                              np.array(label, dtype=np.int32), style)))))
    return length_field(1, entries)                            # Example.features


def tfrecord_bytes(records: list[bytes]) -> bytes:
    out = bytearray()
    for data in records:
        header = struct.pack("<Q", len(data))
        out += header + struct.pack("<I", masked(header)) + data + struct.pack("<I", masked(data))
    return bytes(out)


def write_keras_weights(path: Path, dense: list[tuple[np.ndarray, np.ndarray]],
                        layers: list[dict]) -> None:
    """Keras save_weights' layout: root layer_names, per group weight_names, nested datasets."""
    names, k, dropout = [], 0, 0
    with h5py.File(path, "w") as handle:
        for layer in layers:
            if layer["layer_name"] == "Dense":
                name = "dense" if k == 0 else f"dense_{k}"
                group = handle.create_group(name)
                weight_names = [f"{name}/kernel:0", f"{name}/bias:0"]
                group.attrs["weight_names"] = np.array([w.encode() for w in weight_names])
                group[weight_names[0]], group[weight_names[1]] = dense[k]
                k += 1
            else:
                name = layer["layer_name"].lower() + (f"_{dropout}" if dropout else "")
                dropout += 1
                group = handle.create_group(name)
                group.attrs["weight_names"] = np.array([], dtype="S1")
            names.append(name)
        handle.attrs["layer_names"] = np.array([n.encode() for n in names])
        handle.attrs["backend"] = b"tensorflow"


# --- a PGDL task in the original layout ----------------------------------------------------

GRID = {"width": [4, 8], "dropout": [0.0, 0.25]}
CLASSES = 3


def forward(x: np.ndarray, dense) -> np.ndarray:
    a = x.reshape(len(x), -1).astype(np.float64)
    for k, (kernel, bias) in enumerate(dense):
        a = a @ kernel.astype(np.float64) + bias.astype(np.float64)
        if k < len(dense) - 1:
            a = np.maximum(a, 0.0)
    return a


def write_pgdl_task(root: Path, name: str, shape=(5,), seed=0, n_train=23, n_test=11,
                    shards=2) -> dict:
    """input_data/<name>/ and reference_data/<name>/ as PGDL's zips held them; returns what
    was written (weights, data) for comparison."""
    rng = np.random.default_rng(seed)
    task = root / "input_data" / name
    d = int(np.prod(shape))
    data = {split: (rng.normal(size=(n, *shape)).astype(np.float32),
                    rng.integers(0, CLASSES, n).astype(np.int32))
            for split, n in (("train", n_train), ("test", n_test))}
    for split, (x, y) in data.items():
        folder = task / "dataset_1" / split
        folder.mkdir(parents=True)
        for s in range(shards):
            records = [example(x[i], int(y[i])) for i in range(s, len(y), shards)]
            (folder / f"shard_{s}.tfrecord").write_bytes(tfrecord_bytes(records))
    # Shards hold interleaved examples: the converted order is shard by shard.
    order = np.concatenate([np.arange(s, n_train, shards) for s in range(shards)])
    test_order = np.concatenate([np.arange(s, n_test, shards) for s in range(shards)])
    expected = {"train": (data["train"][0][order], data["train"][1][order]),
                "test": (data["test"][0][test_order], data["test"][1][test_order])}
    configs, weights = {}, {}
    for model_id, (width, rate) in enumerate((w, r) for w in GRID["width"]
                                             for r in GRID["dropout"]):
        layers = ([{"layer_name": "Flatten"}] if len(shape) > 1 else []) + [
            {"layer_name": "Dense", "units": width, "activation": "relu"},
            {"layer_name": "Dropout", "rate": rate},
            {"layer_name": "Dense", "units": CLASSES, "activation": None}]
        folder = task / f"model_{model_id}"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"model_config": layers,
                                                        "input_shape": list(shape)}))
        trained = [(rng.normal(size=(d, width)).astype(np.float32),
                    rng.normal(size=width).astype(np.float32)),
                   (rng.normal(size=(width, CLASSES)).astype(np.float32),
                    rng.normal(size=CLASSES).astype(np.float32))]
        initial = [(k * 0.5, b * 0.0) for k, b in trained]
        write_keras_weights(folder / "weights.hdf5", trained, layers)
        write_keras_weights(folder / "weights_init.hdf5", initial, layers)
        weights[f"model_{model_id}"] = (trained, initial)
        accuracy = lambda split: float((forward(expected[split][0], trained).argmax(1)  # noqa
                                        == expected[split][1]).mean())
        configs[str(model_id)] = {
            "hparams": {"width": {"possible_values": GRID["width"], "current_value": width},
                        "dropout": {"possible_values": GRID["dropout"], "current_value": rate}},
            "metrics": {"train_acc": accuracy("train"), "test_acc": accuracy("test")}}
    reference = root / "reference_data" / name
    reference.mkdir(parents=True)
    (reference / "model_configs.json").write_text(json.dumps(configs, indent=2))
    return {"folder": task, "weights": weights, "data": expected, "configs": reference}


def run_convert(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reference_data", "--kind", "pgdl2020",
                           "convert", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def convert_in_process(*args) -> subprocess.CompletedProcess:
    """run_convert's command, its main run in this process (in_process_commands.py), for the
    tests of what convert refuses or writes: a new interpreter's start and imports cost more
    than such a convert. The command as a process (its exit status through the interpreter)
    is run_convert's, in test_an_existing_task_folder_is_kept_unless_forced and the Keras
    files' fixture."""
    return run_main(reference_main, "--kind", "pgdl2020", "convert", *args)


# --- tests ---------------------------------------------------------------------------------

def test_crc32c_known_answer_from_both_implementations():
    assert crc32c_bitwise(b"123456789") == 0xE3069283
    assert tfrecord.crc32c(b"123456789") == 0xE3069283
    blob = bytes(range(256)) * 3
    assert tfrecord.masked_crc32c(blob) == masked(blob)


@pytest.mark.parametrize("style", ["content", "packed", "unpacked"])
def test_examples_decode_in_every_encoding_of_their_tensors(style, tmp_path):
    x = np.array([[1.5, -2.0, 0.0], [3.25, 1e-3, -7.0]], dtype=np.float32)
    path = tmp_path / "one.tfrecord"
    path.write_bytes(tfrecord_bytes([example(x, 2, style), example(x[::-1].copy(), 0, style)]))
    records = tfrecord.read_records(path)
    assert len(records) == 2
    features = tfrecord.parse_example(records[0])
    assert set(features) == {"inputs", "output"} and features["inputs"][0] == "bytes"
    decoded = tfrecord.parse_tensor(features["inputs"][1][0])
    assert decoded.dtype == np.float32 and np.array_equal(decoded, x)
    assert tfrecord.parse_tensor(features["output"][1][0]).item() == 2
    negative = np.array([-3, 5, -(2 ** 40)], dtype=np.int64)
    assert np.array_equal(tfrecord.parse_tensor(tensor_proto(negative, style)), negative)


def test_pgdl_task_folders_convert_to_the_kinds_layout(tmp_path, capsys):
    flat = write_pgdl_task(tmp_path / "pgdl", "mlp_flat", shape=(5,), seed=1)
    image = write_pgdl_task(tmp_path / "pgdl", "mlp_image", shape=(2, 3), seed=2, shards=3)
    out = tmp_path / "data"
    code = reference_main(["--kind", "pgdl2020", "convert", str(flat["folder"]),
                           str(image["folder"]), "--out", str(out), "--phase", "phase1"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "mlp_flat: 4 models (4 with initial weights), 23 train / 11 test" in printed.out
    assert "matches model_configs.json for 4 of 4 models" in printed.out
    assert sorted(p.name for p in out.iterdir()) == ["mlp_flat", "mlp_image"]   # no leftovers
    embedded_keys = set(json.loads((EMBEDDED / "wine_mlp" / "wine_mlp_task.json").read_text()))
    for written, shape in ((flat, (5,)), (image, (2, 3))):
        task = out / written["folder"].name
        for split in ("train", "test"):
            with np.load(task / "dataset_1" / f"{split}.npz") as stored:
                x, y = written["data"][split]
                assert stored["inputs"].dtype == np.float32 and stored["outputs"].dtype == np.int32
                assert np.array_equal(stored["inputs"], x) and np.array_equal(stored["outputs"], y)
        for model_id, (trained, initial) in written["weights"].items():
            for file, dense in (("weights.npz", trained), ("weights_init.npz", initial)):
                with np.load(task / model_id / file) as stored:
                    assert sorted(stored.files) == sorted(f"dense_{k}/{part}" for k in range(2)
                                                          for part in ("kernel", "bias"))
                    for k, (kernel, bias) in enumerate(dense):
                        assert stored[f"dense_{k}/kernel"].dtype == np.float32
                        assert np.array_equal(stored[f"dense_{k}/kernel"], kernel)
                        assert np.array_equal(stored[f"dense_{k}/bias"], bias)
            model = Model(task / model_id)
            x = written["data"]["train"][0]
            assert model.input_shape == shape and model.num_classes == CLASSES
            assert [layer["class_name"] for layer in model.layers] == (
                ["Flatten"] if len(shape) > 1 else []) + ["Dense", "Dropout", "Dense"]
            np.testing.assert_allclose(model.logits(x), forward(x, trained), rtol=1e-5,
                                       atol=1e-5)
        assert (task / "model_configs.json").read_bytes() == \
            (written["configs"] / "model_configs.json").read_bytes()
        declared = json.loads((task / f"{task.name}_task.json").read_text())
        assert set(declared) == embedded_keys
        assert declared["phase"] == "phase1" and declared["task_type"] == "zoo"
        assert declared["hyperparameters"] == GRID and declared["num_models"] == 4
        assert declared["input_shape"] == list(shape) and declared["num_classes"] == CLASSES
        assert (declared["n_train"], declared["n_test"]) == (23, 11)
        assert declared["stopping_rule"].startswith("unknown")


def test_an_existing_task_folder_is_kept_unless_forced(tmp_path):
    task = write_pgdl_task(tmp_path / "pgdl", "mlp", n_train=6, n_test=4)
    out = tmp_path / "data"
    (out / "mlp").mkdir(parents=True)
    (out / "mlp" / "mine.txt").write_text("keep")
    result = run_convert(task["folder"], "--out", out)
    assert result.returncode == 1 and "exists already" in result.stderr
    assert (out / "mlp" / "mine.txt").is_file()
    assert run_convert(task["folder"], "--out", out, "--force").returncode == 0
    assert not (out / "mlp" / "mine.txt").exists() and (out / "mlp" / "mlp_task.json").is_file()
    assert sorted(p.name for p in out.iterdir()) == ["mlp"]


def test_model_configs_elsewhere_is_named_or_found(tmp_path):
    task = write_pgdl_task(tmp_path / "pgdl", "mlp", n_train=6, n_test=4)
    moved = tmp_path / "kept" / "configs.json"
    moved.parent.mkdir()
    (task["configs"] / "model_configs.json").rename(moved)
    missing = convert_in_process(task["folder"], "--out", tmp_path / "data")
    assert missing.returncode == 1 and "no model_configs.json found" in missing.stderr
    assert "--model-configs" in missing.stderr and "Traceback" not in missing.stderr
    found = convert_in_process(task["folder"], "--out", tmp_path / "data", "--model-configs",
                               moved)
    assert found.returncode == 0, found.stderr
    assert (tmp_path / "data" / "mlp" / "model_configs.json").read_bytes() == moved.read_bytes()


@pytest.mark.slow
def test_a_converted_root_builds_and_dry_runs(tmp_path):
    for name, seed in (("mlp_public", 3), ("mlp_private", 4)):
        task = write_pgdl_task(tmp_path / "pgdl", name, seed=seed)
        # the convert is the claim of the tests above; here the build and dry run are
        assert convert_in_process(task["folder"], "--out", tmp_path / "data").returncode == 0
    spec = yaml.safe_load(SPEC.read_text())
    # Codabench, the default platform, requires the logo next to the spec
    shutil.copyfile(SPEC.parent / spec["logo"], tmp_path / spec["logo"])
    spec.update(data_root=str(tmp_path / "data"),
                tasks={"mlp_public": {"budget_seconds": 20}, "mlp_private": {"budget_seconds": 20}})
    phases = spec["phases"]
    phases["public"]["tasks"] = ["mlp_public"]
    phases["phase1"]["tasks"] = ["mlp_private"]
    phases.pop("phase2")
    phases.pop("convolutional")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    import build_bundle         # its main in this process: the build and dry run are the claim
    result = run_main(build_bundle.main, "--config", tmp_path / "spec.yaml", "--phase", "all",
                      "--check", "--out", tmp_path / "out")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert list((tmp_path / "out").rglob("*.zip"))


def _unsupported_layer(task):
    config = task["folder"] / "model_2" / "config.json"
    raw = json.loads(config.read_text())
    raw["model_config"].insert(1, {"layer_name": "LSTM", "units": 4})
    config.write_text(json.dumps(raw))
    return "model_2/config.json: layer 1 (LSTM): layer_name 'LSTM' is not supported"


def _kernel_shape(task):
    path = task["folder"] / "model_1" / "weights.hdf5"
    with h5py.File(path, "r+") as handle:
        del handle["dense/dense/kernel:0"]
        handle["dense"]["dense/kernel:0"] = np.zeros((7, 4), dtype=np.float32)
    return ("model_1/weights.hdf5: layer 'dense' (Dense dense_0): kernel has shape (7, 4); "
            "config.json says (5, 4)")


def _truncated(task):
    path = task["folder"] / "dataset_1" / "train" / "shard_1.tfrecord"
    path.write_bytes(path.read_bytes()[:-9])
    return "train/shard_1.tfrecord: record 10"


def _crc_mismatch(task):
    path = task["folder"] / "dataset_1" / "test" / "shard_0.tfrecord"
    content = bytearray(path.read_bytes())
    content[30] ^= 0x01                       # inside the first record's data
    path.write_bytes(bytes(content))
    return "test/shard_0.tfrecord: record 0 (byte 0): the data's CRC32C does not match"


def _not_an_example(task):
    path = task["folder"] / "dataset_1" / "train" / "shard_0.tfrecord"
    records = [example(np.zeros(5, np.float32), 1), b"\x08\x01"]    # features as a varint
    path.write_bytes(tfrecord_bytes(records))
    return "train/shard_0.tfrecord: record 1: field 1 should be a message"


def _missing_weights(task):
    (task["folder"] / "model_3" / "weights.hdf5").unlink()
    return "model_3/weights.hdf5: missing"


def _incomplete_grid(task):
    path = task["configs"] / "model_configs.json"
    raw = json.loads(path.read_text())
    raw.pop("2")
    path.write_text(json.dumps(raw))
    return "model_configs.json: the hyperparameter grid is incomplete"


def _labels_from_one(task):
    """Classes counted 1..C: the builder's own check (kinds/pgdl2020/reference/checks.py)."""
    x, y = task["data"]["train"]
    folder = task["folder"] / "dataset_1" / "train"
    for shard in folder.glob("*.tfrecord"):
        shard.unlink()
    (folder / "shard_0.tfrecord").write_bytes(tfrecord_bytes(
        [example(x[i], int(y[i]) + 1) for i in range(len(y))]))
    return "dataset_1/train: outputs span 1..3; expected class indices 0..2"


@pytest.mark.parametrize("breakage", [_unsupported_layer, _kernel_shape, _truncated, _crc_mismatch,
                                      _not_an_example, _missing_weights, _incomplete_grid,
                                      _labels_from_one])
def test_broken_inputs_are_refused_naming_the_file(breakage, tmp_path):
    task = write_pgdl_task(tmp_path / "pgdl", "mlp", seed=5)
    good = write_pgdl_task(tmp_path / "pgdl", "fine", seed=6)
    expected = breakage(task)
    out = tmp_path / "data"
    result = convert_in_process(task["folder"], good["folder"], "--out", out)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert expected in result.stderr, result.stderr
    problems = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(problems) == 1, result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["fine"]     # nothing half written
    assert "fine: 4 models" in result.stdout


# --- files Keras itself wrote (kinds/pgdl2020/tests/fixtures/pgdl_keras, made by its make_fixtures.py) -------

KERAS = Path(__file__).resolve().parent / "fixtures" / "pgdl_keras"
KERAS_TASKS = ("vgg_like", "nin_like", "allconv_bn", "fashion_like")


@pytest.fixture(scope="module")
def converted_keras(tmp_path_factory):
    out = tmp_path_factory.mktemp("keras") / "data"
    result = run_convert(*(KERAS / "input_data" / task for task in KERAS_TASKS), "--out", out,
                         "--model-configs", KERAS / "reference_data")
    assert result.returncode == 0, result.stderr
    return out, result.stdout


def test_keras_written_cnn_zoos_convert_to_the_keras_outputs(converted_keras):
    """Every layer type of the 2020 zoos, as Keras wrote them: our forward pass on the
    converted files gives Keras's own logits, trained and initial, to 1e-5."""
    out, printed = converted_keras
    kinds = set()
    for task in KERAS_TASKS:
        configs = json.loads((KERAS / "reference_data" / task / "model_configs.json").read_text())
        assert f"matches model_configs.json for {len(configs)} of {len(configs)}" in printed
        with np.load(out / task / "dataset_1" / "train.npz") as stored:
            images = stored["inputs"]
        for expected_file in sorted((KERAS / "expected" / task).glob("model_*.npz")):
            model = Model(out / task / expected_file.stem)
            kinds |= {layer["class_name"] for layer in model.layers}
            expected = np.load(expected_file)
            scale = np.abs(expected["logits"]).max()
            np.testing.assert_allclose(model.logits(images), expected["logits"], rtol=1e-5,
                                       atol=1e-5 * scale, err_msg=f"{task}/{expected_file.stem}")
            initial = model.with_weights(model.initial_weights)
            np.testing.assert_allclose(initial.logits(images), expected["logits_init"],
                                       rtol=1e-5, atol=1e-5 * np.abs(expected["logits_init"]).max())
    assert kinds == {"Conv2D", "MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D",
                     "BatchNormalization", "Activation", "Flatten", "Dropout", "Dense"}
    declared = json.loads((out / "nin_like" / "nin_like_task.json").read_text())
    assert declared["input_shape"] == [32, 32, 3] and declared["num_classes"] == 102
    assert json.loads((out / "fashion_like" / "fashion_like_task.json").read_text())[
        "input_shape"] == [28, 28, 1]


def _keras_copy(tmp_path, task="allconv_bn"):
    for part in ("input_data", "reference_data"):
        shutil.copytree(KERAS / part / task, tmp_path / part / task)
    return tmp_path / "input_data" / task


def _keras_layer_unsupported(folder):
    config = folder / "model_1" / "config.json"
    raw = json.loads(config.read_text())
    raw["model_config"].insert(2, {"layer_name": "SeparableConv2D", "filters": 4,
                                   "kernel_size": 3})
    config.write_text(json.dumps(raw))
    return ("model_1/config.json: layer 2 (SeparableConv2D): layer_name 'SeparableConv2D' is "
            "not supported")


def store_kernel_in_torch_order(path: Path, key: str) -> None:
    """Rewrites a Keras kernel (kh, kw, in, out) in place as PyTorch stores one (out, in, kh,
    kw): the mistake of an organizer who exported from the wrong framework."""
    with h5py.File(path, "r+") as handle:
        kernel = np.array(handle[key])
        del handle[key]
        handle[key] = kernel.transpose(3, 2, 0, 1)


def _keras_kernel_in_torch_order(folder):
    store_kernel_in_torch_order(folder / "model_0" / "weights.hdf5",
                                "conv2d_1/conv2d_1/kernel:0")
    return ("model_0/weights.hdf5: layer 'conv2d_1' (Conv2D conv2d_1): kernel has shape "
            "(8, 6, 3, 3); config.json says (3, 3, 6, 8) (stored (out, in, kh, kw) as PyTorch")


def _keras_image_of_another_size(folder):
    shard = folder / "dataset_1" / "train" / "shard_1.tfrecord"
    records = tfrecord.read_records(shard)
    records[4] = example(np.zeros((30, 30, 3), np.float32), 1)
    shard.write_bytes(tfrecord_bytes(records))
    return ("train/shard_1.tfrecord: record 4: an image of shape (30, 30, 3); the networks' "
            "input_shape is (32, 32, 3)")


def _keras_image_of_bytes(folder):
    shard = folder / "dataset_1" / "test" / "shard_0.tfrecord"
    records = tfrecord.read_records(shard)
    records[2] = example(np.zeros((32, 32, 3), np.int32), 1)
    shard.write_bytes(tfrecord_bytes(records))
    return "test/shard_0.tfrecord: record 2: inputs are int32; expected float32"


def _keras_truncated_shard(folder):
    shard = folder / "dataset_1" / "train" / "shard_0.tfrecord"
    shard.write_bytes(shard.read_bytes()[:-5000])
    return "train/shard_0.tfrecord: record 12"


@pytest.mark.parametrize("breakage", [_keras_layer_unsupported, _keras_kernel_in_torch_order,
                                      _keras_image_of_another_size, _keras_image_of_bytes,
                                      _keras_truncated_shard])
def test_broken_keras_files_are_refused_in_one_line(breakage, tmp_path):
    folder = _keras_copy(tmp_path / "pgdl")
    expected = breakage(folder)
    result = convert_in_process(folder, "--out", tmp_path / "data")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    problems = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(problems) == 1 and expected in problems[0], result.stderr
    assert not (tmp_path / "data" / "allconv_bn").exists()


def test_a_sampled_accuracy_agrees_within_its_standard_error_only():
    from kinds.pgdl2020.reference.convert import accuracy_agrees
    assert accuracy_agrees(0.5 + 1 / 23, 0.5, 23, sampled=False)
    assert not accuracy_agrees(0.5 + 2 / 23, 0.5, 23, sampled=False)
    assert accuracy_agrees(0.54, 0.5, 2048, sampled=True)         # 4 standard errors: 0.044
    assert not accuracy_agrees(0.55, 0.5, 2048, sampled=True)
    assert accuracy_agrees(1.0, 1.0, 2048, sampled=True)
    assert not accuracy_agrees(0.1, 1.0, 2048, sampled=True)      # chance: a wrong layout

"""BDL image tasks: inputs read through memory maps (equal to np.load, bounded memory), staged
and copied a block at a time, checked against the declared network, and the organizer's
parameter draws checked against the declared layout from their headers."""
import io
import json
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from bundle.phase_plan import task_data_problems
from kinds.bdl2021.kind import copy_public_inputs
from kinds.bdl2021.runtime import ingestion, participant
from kinds.bdl2021.runtime.formats import (TASK_INPUT_KEYS, FormatError, map_npz, npz_headers,
                                           read_task_inputs)
from kinds.bdl2021.runtime.networks import Network

REPO = Path(__file__).resolve().parents[3]
RNG = np.random.default_rng(7)
IMAGE = [8, 8, 3]
# A small declared CNN: the shape checks are the point, not the network's size.
CNN = {"type": "sequential", "input_shape": IMAGE, "outputs": 3,
       "layers": [{"type": "conv", "channels": 2, "kernel": 3}, {"type": "activation",
                                                                   "name": "relu"},
                  {"type": "avg_pool", "size": 2}, {"type": "flatten"},
                  {"type": "dense", "units": 3}]}


def image_arrays(n_train=12, n_test=6, shape=IMAGE, dtype=np.float32, y_test=None):
    return {"x_train": RNG.normal(size=(n_train, *shape)).astype(dtype),
            "y_train": RNG.integers(0, 3, n_train),
            "x_test": RNG.normal(size=(n_test, *shape)).astype(dtype),
            "y_test": np.zeros(n_test, np.int64) if y_test is None else y_test}


def assert_equal_to_np_load(arrays, path):
    with np.load(path, allow_pickle=False) as reference:
        for key, array in arrays.items():
            assert array.dtype == reference[key].dtype and np.array_equal(array, reference[key])
            assert not array.flags.writeable


# ---- memory maps ---------------------------------------------------------------------------

def test_stored_members_are_read_only_maps_equal_to_np_load(tmp_path):
    path = tmp_path / "t.npz"
    arrays = image_arrays()
    arrays["x_test"] = np.asfortranarray(arrays["x_test"])     # a Fortran member maps too
    np.savez(path, **arrays)
    mapped = map_npz(path, TASK_INPUT_KEYS)
    assert all(isinstance(a, np.memmap) for a in mapped.values())
    assert_equal_to_np_load(mapped, path)
    inputs = read_task_inputs(path, mapped=True)
    assert_equal_to_np_load(inputs._asdict(), path)


def test_a_compressed_npz_is_loaded_instead_and_still_works(tmp_path):
    path = tmp_path / "t.npz"
    np.savez_compressed(path, **image_arrays())
    mapped = map_npz(path, TASK_INPUT_KEYS)
    assert not any(isinstance(a, np.memmap) for a in mapped.values())
    assert_equal_to_np_load(mapped, path)
    task = SimpleNamespace(inputs="t.npz")
    data = ingestion.stage_inputs(task, tmp_path, _folder(tmp_path))
    with zipfile.ZipFile(data) as archive:        # the staged copy is stored: the child maps it
        assert {i.compress_type for i in archive.infolist()} == {zipfile.ZIP_STORED}
    assert_equal_to_np_load({k: v for k, v in map_npz(data).items()}, data)


def _folder(tmp_path):
    folder = tmp_path / "task"
    folder.mkdir(exist_ok=True)
    return folder


def npy_bytes(array):
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array)
    return buffer.getvalue()


def corrupt_files(tmp_path):
    """name -> a broken .npz: cut short, a damaged .npy header, data shorter than its header."""
    whole = tmp_path / "whole.npz"
    np.savez(whole, **image_arrays())
    content = whole.read_bytes()
    cut = tmp_path / "cut.npz"
    cut.write_bytes(content[: len(content) // 2])
    header = tmp_path / "header.npz"
    start = content.index(b"\x93NUMPY")
    header.write_bytes(content[:start] + b"garbage!" + content[start + 8:])
    short = tmp_path / "short.npz"
    with zipfile.ZipFile(short, "w") as archive:
        archive.writestr("x_train.npy", npy_bytes(np.ones((12, *IMAGE)))[:-100])
        for key in ("y_train", "x_test", "y_test"):
            archive.writestr(f"{key}.npy", npy_bytes(np.ones(6)))
    return {"cut": cut, "header": header, "short": short}


@pytest.mark.parametrize("name", ["cut", "header", "short"])
def test_a_broken_npz_is_one_line_naming_the_file(tmp_path, name):
    path = corrupt_files(tmp_path)[name]
    for read in (lambda: map_npz(path, TASK_INPUT_KEYS),
                 lambda: read_task_inputs(path, mapped=True)):
        with pytest.raises(FormatError) as caught:
            read()
        message = str(caught.value)
        assert str(path) in message and "\n" not in message, message
        assert "Traceback" not in message
    if name != "cut":
        assert "x_train.npy" in message


@pytest.mark.parametrize("arrays, expected", [
    (dict(y_test=None, x_test=None), "missing keys x_test, y_test"),
    (dict(x_val=np.ones((2, 2))), "unexpected keys x_val"),
    (dict(x_test=np.array([[1.0, np.nan]] * 3)), "x_test element at index (0, 1)"),
    (dict(x_train=np.ones((5, 2), bool)), "x_train, found dtype bool"),
    (dict(y_train=np.array([None] * 5)), "y_train.npy cannot be read"),
    (dict(x_train=np.ones((5, 2), complex)), "found dtype complex128"),
])
def test_the_maps_refuse_what_loading_refuses(tmp_path, arrays, expected):
    default = {"x_train": np.ones((5, 2)), "y_train": np.arange(5), "x_test": np.ones((3, 2)),
               "y_test": np.zeros(3)}
    default.update(arrays)
    path = tmp_path / "task.npz"
    np.savez(path, **{k: v for k, v in default.items() if v is not None})
    with pytest.raises(FormatError) as caught:
        read_task_inputs(path, mapped=True)
    assert str(path) in str(caught.value) and expected in str(caught.value)


def test_a_nan_deep_in_a_map_is_found_with_its_index(tmp_path, monkeypatch):
    import kinds.bdl2021.runtime.formats as formats
    monkeypatch.setattr(formats, "BLOCK_BYTES", 64)      # many blocks: the index is computed
    arrays = image_arrays()
    arrays["x_train"][9, 4, 5, 1] = np.inf
    np.savez(tmp_path / "t.npz", **arrays)
    with pytest.raises(FormatError, match=r"x_train element at index \(9, 4, 5, 1\)"):
        read_task_inputs(tmp_path / "t.npz", mapped=True)


# ---- staging, public copies, the child's side ------------------------------------------------

def test_staging_copies_the_members_and_the_child_gets_read_only_maps(tmp_path):
    arrays = image_arrays(dtype=np.uint8)
    arrays["y_train"] = arrays["y_train"].reshape(-1, 1)         # an N x 1 column
    np.savez(tmp_path / "t.npz", **arrays)
    data = ingestion.stage_inputs(SimpleNamespace(inputs="t.npz"), tmp_path, _folder(tmp_path))
    assert data.stat().st_mode & 0o777 == 0o644
    with np.load(data) as staged:
        assert staged.files == ["x_train", "y_train", "x_test"]
        assert np.array_equal(staged["x_train"], arrays["x_train"])
        assert staged["y_train"].shape == (12,)                    # flattened, as before
    received = {}

    def predict(task, x_train, y_train, x_test, checkpoint):
        received.update(x_train=x_train, y_train=y_train, x_test=x_test)
        return np.zeros((len(x_test), 3))

    spec = {"data": str(data), "name": "t", "task_type": "classification", "budget_seconds": 5,
            "contract": {"n_test": 6, "width": 3, "declaration": {"model": CNN}}}
    participant.call(predict, spec, lambda: 0.0, lambda predictions: None)
    assert all(type(a) is np.ndarray and not a.flags.writeable for a in received.values())
    assert isinstance(received["x_train"].base, np.memmap)
    assert np.array_equal(received["x_test"], arrays["x_test"])
    assert np.array_equal(received["y_train"], arrays["y_train"][:, 0])


def test_public_copy_zeroes_true_labels_member_by_member(tmp_path):
    arrays = image_arrays(y_test=RNG.integers(0, 3, 6))
    np.savez(tmp_path / "t.npz", **arrays)
    copy_public_inputs(tmp_path / "t.npz", tmp_path / "public.npz")
    with np.load(tmp_path / "public.npz") as public:
        assert public.files == list(TASK_INPUT_KEYS)
        assert not public["y_test"].any() and public["y_test"].dtype == arrays["y_test"].dtype
        for key in ("x_train", "y_train", "x_test"):
            assert np.array_equal(public[key], arrays[key])
    # zeros already: the file itself
    np.savez(tmp_path / "z.npz", **image_arrays())
    copy_public_inputs(tmp_path / "z.npz", tmp_path / "z_public.npz")
    assert (tmp_path / "z.npz").read_bytes() == (tmp_path / "z_public.npz").read_bytes()


def test_epoch_seconds_reads_the_staged_maps(tmp_path):
    arrays = {"x_train": RNG.normal(size=(30, 4)), "y_train": RNG.integers(0, 3, 30),
              "x_test": RNG.normal(size=(5, 4)), "y_test": np.zeros(5)}
    np.savez(tmp_path / "t.npz", **arrays)
    data = ingestion.stage_inputs(SimpleNamespace(inputs="t.npz"), tmp_path, _folder(tmp_path))
    declaration = {"model": {"type": "mlp", "activation": "tanh", "layer_sizes": [4, 5, 3]},
                   "likelihood": {"name": "softmax"}, "prior": {"variance": 0.1}}
    timed = ingestion.epoch_seconds(SimpleNamespace(contract={"declaration": declaration}),
                                    data)
    assert timed["samples"] and all(s > 0 for s in timed["samples"])
    assert timed["timed_with"] == "numpy"            # no PyTorch in this environment


# ---- memory: subprocesses, resident growth against the data's size ---------------------------

MEASURE = textwrap.dedent("""
    import resource, sys, json
    from pathlib import Path
    from types import SimpleNamespace
    sys.path.insert(0, {repo!r})
    from kinds.bdl2021.runtime import ingestion, participant
    from kinds.bdl2021.runtime.formats import read_task_inputs
    import numpy as np
    source = Path({source!r})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    {body}
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({{"growth_bytes": (after - before) * 1024}}))
""")
BODIES = {
    "staging": "ingestion.stage_inputs(SimpleNamespace(inputs=source.name), source.parent, "
               "Path({folder!r}))",
    "checks": "read_task_inputs(source, mapped=True)",
    "child": "participant.call(lambda task, x, y, xt, c: float(x[:100].sum()), "
             "{{'data': {staged!r}, 'name': 't', 'task_type': 'classification', "
             "'budget_seconds': 9, 'contract': {{'n_test': 1, 'width': 3, "
             "'declaration': {{}}}}}}, lambda: 0.0, None)",
}


@pytest.fixture(scope="module")
def large_npz(tmp_path_factory):
    """About 200 MB of float32 images, written without holding them all at once."""
    folder = tmp_path_factory.mktemp("large")
    path = folder / "large.npz"
    n_train, n_test = 40_000, 10_000
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for key, rows in (("x_train", n_train), ("x_test", n_test)):
            with archive.open(f"{key}.npy", "w", force_zip64=True) as member:
                header = {"descr": "<f4", "fortran_order": False, "shape": (rows, 32, 32, 1)}
                np.lib.format.write_array_header_1_0(member, header)
                for _ in range(rows // 1000):
                    member.write(RNG.random((1000, 32, 32, 1), np.float32).tobytes())
            archive.writestr(f"y_{key[2:]}.npy", npy_bytes(np.zeros(rows, np.int64)))
    return path


@pytest.mark.parametrize("what", ["staging", "checks", "child"])
def test_memory_stays_far_below_the_data_size(large_npz, tmp_path, what):
    folder = tmp_path / "task"
    folder.mkdir()
    staged = folder / "data.npz"
    if what == "child":
        ingestion.stage_inputs(SimpleNamespace(inputs=large_npz.name), large_npz.parent, folder)
    body = BODIES[what].format(folder=str(folder), staged=str(staged))
    script = MEASURE.format(repo=str(REPO), source=str(large_npz), body=body)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    growth = json.loads(result.stdout.strip().splitlines()[-1])["growth_bytes"]
    size = large_npz.stat().st_size
    assert size > 190e6
    assert growth < 0.5 * size, f"{what}: grew {growth / 1e6:.0f} MB for {size / 1e6:.0f} MB"


# ---- the arrays against the declared network -------------------------------------------------

def write_task(root: Path, name: str = "img", model=None, arrays=None, **declared) -> Path:
    """An organizer task folder: inputs, declaration, reference (the smallest valid set)."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    arrays = arrays or image_arrays()
    np.savez(folder / f"{name}.npz", **arrays)
    n_test = len(arrays["x_test"])
    declaration = {"name": name, "phase": "evaluation", "kind": "classification",
                   "num_classes": 3, "n_train": len(arrays["x_train"]), "n_test": n_test,
                   "input_shape": list(arrays["x_train"].shape[1:]),
                   "test_blocks": [{"name": "clean", "start": 0, "stop": n_test}],
                   "model": model or CNN, "likelihood": {"name": "softmax"},
                   "prior": {"distribution": "normal", "variance": 0.05}, "summary": name,
                   **declared}
    (folder / f"{name}_task.json").write_text(json.dumps(declaration))
    np.savetxt(folder / f"{name}_probs.csv", RNG.dirichlet(np.ones(3), size=n_test))
    return folder


def problems(root, name="img"):
    return task_data_problems("bdl2021", name, root)


def one_line(found: list[str]) -> str:
    assert len(found) == 1 and "\n" not in found[0], found
    return found[0]


def test_an_image_task_that_matches_its_network_has_no_problems(tmp_path):
    write_task(tmp_path)
    assert problems(tmp_path) == []
    write_task(tmp_path, "u8", arrays=image_arrays(dtype=np.uint8))     # integer pixels too
    assert problems(tmp_path, "u8") == []


def test_images_of_another_shape_name_the_file_array_and_declaration_key(tmp_path):
    folder = write_task(tmp_path, arrays=image_arrays(shape=[8, 8, 1]))
    found = problems(tmp_path)
    assert len(found) == 2
    line = found[0]
    assert line.startswith(f"{folder / 'img.npz'}: x_train ")
    assert "(8, 8, 1)" in line and "(8, 8, 3)" in line and "model.input_shape" in line
    assert str(folder / "img_task.json") in line and "x_test" in found[1]


@pytest.mark.parametrize("dtype", [bool, complex, "U1"])
def test_non_numeric_images_are_refused(tmp_path, dtype):
    arrays = image_arrays()
    arrays["x_train"] = np.zeros((12, *IMAGE), dtype)
    folder = write_task(tmp_path, arrays=arrays)
    line = one_line(problems(tmp_path))
    assert str(folder / "img.npz") in line and "x_train" in line and "dtype" in line


def test_the_mlp_reads_any_example_shape_of_its_input_size(tmp_path):
    mlp = {"type": "mlp", "activation": "tanh", "layer_sizes": [192, 4, 3]}
    write_task(tmp_path, model=mlp)                    # 8 x 8 x 3 = 192 features
    assert problems(tmp_path) == []
    write_task(tmp_path, "other", model={**mlp, "layer_sizes": [100, 4, 3]})
    line = problems(tmp_path, "other")[0]
    assert "x_train" in line and "192 features" in line and "model.layer_sizes[0]" in line


def test_a_bad_network_declaration_is_one_line_naming_the_key(tmp_path):
    folder = write_task(tmp_path, model={**CNN, "type": "resnet21"})
    line = one_line(problems(tmp_path))
    assert line.startswith(str(folder / "img_task.json")) and "model.type" in line


def test_token_ids_must_be_integers_within_the_vocabulary(tmp_path):
    model = {"type": "cnn_lstm", "input_shape": [12], "outputs": 3, "vocabulary": 50}

    def tokens(high, dtype=np.int32):
        return {"x_train": RNG.integers(0, high, (10, 12)).astype(dtype),
                "y_train": RNG.integers(0, 3, 10), "x_test": RNG.integers(0, 50, (4, 12)),
                "y_test": np.zeros(4)}
    write_task(tmp_path, "ok", model=model, arrays=tokens(50))
    assert problems(tmp_path, "ok") == []
    write_task(tmp_path, "big", model=model, arrays=tokens(80))
    line = one_line(problems(tmp_path, "big"))
    assert "x_train holds values from 0 to" in line and "[0, 50)" in line
    assert "model.vocabulary" in line
    write_task(tmp_path, "float", model=model, arrays=tokens(50, np.float32))
    line = one_line(problems(tmp_path, "float"))
    assert "dtype float32" in line and "token ids" in line


# ---- the organizer's parameter draws ---------------------------------------------------------

def write_parameters(folder: Path, model, chains=2, draws=3, change=None):
    arrays = {p.name: np.zeros((chains, draws, *p.shape), np.float32)
              for p in Network(model).parameters}
    for name, value in (change or {}).items():
        if value is None:
            arrays.pop(name)
        else:
            arrays[name] = value
    np.savez(folder / f"{folder.name}_parameters.npz", **arrays)
    return folder / f"{folder.name}_parameters.npz"


def test_parameter_draws_of_the_declared_layout_pass(tmp_path):
    write_parameters(write_task(tmp_path), CNN)
    assert problems(tmp_path) == []
    mlp = {"type": "mlp", "activation": "tanh", "layer_sizes": [192, 4, 3]}
    write_parameters(write_task(tmp_path, "mlp", model=mlp), mlp)
    assert problems(tmp_path, "mlp") == []
    names = list(npz_headers(tmp_path / "mlp" / "mlp_parameters.npz"))
    assert names == ["0.dense/w", "0.dense/b", "2.dense/w", "2.dense/b"]


def test_each_parameter_problem_is_one_line(tmp_path):
    folder = write_task(tmp_path)
    path = write_parameters(folder, CNN, change={
        "0.conv/b": None, "extra/w": np.zeros((2, 3, 4), np.float32),
        "0.conv/w": np.zeros((2, 3, 3, 3, 1, 2), np.float32),        # (3, 3, 3, 2) declared
        "4.dense/b": np.zeros((2, 5, 3), np.float32)})                # 5 draws, not 3
    found = problems(tmp_path)
    assert all(line.startswith(f"{path}: ") and "\n" not in line for line in found), found
    text = "\n".join(found)
    assert "no array '0.conv/b'" in text and "shape (chains, draws, 2)" in text
    assert "'extra/w' is no parameter" in text
    assert "'0.conv/w' has shape (2, 3, 3, 3, 1, 2)" in text and "(3, 3, 3, 2)" in text
    assert "'4.dense/b' holds (chains, draws) = (2, 5)" in text and "(2, 3)" in text
    assert len(found) == 4


def test_declared_num_parameters_must_be_the_layouts_count(tmp_path):
    count = Network(CNN).num_parameters
    folder = write_task(tmp_path, model={**CNN, "num_parameters": count + 1})
    write_parameters(folder, CNN)
    line = one_line(problems(tmp_path))
    assert line.startswith(str(folder / "img_task.json")) and "model.num_parameters" in line
    assert str(count) in line


def test_an_unreadable_parameters_file_is_one_line(tmp_path):
    folder = write_task(tmp_path)
    (folder / "img_parameters.npz").write_bytes(b"PK\x03\x04 not really")
    line = one_line(problems(tmp_path))
    assert line.startswith(str(folder / "img_parameters.npz")) and "Traceback" not in line


# ---- through the real builder ----------------------------------------------------------------

def build(tmp_path, model, arrays, submission="results"):
    import shutil
    import yaml
    default_spec = REPO / "kinds" / "bdl2021" / "default_spec.yaml"
    spec = yaml.safe_load(default_spec.read_text())
    shutil.copyfile(default_spec.parent / spec["logo"], tmp_path / spec["logo"])
    write_task(tmp_path / "data", "img", model=model, arrays=arrays)
    spec.update(slug="bdl-img", tasks={"img": {"budget_seconds": 5}}, tracks={},
                phases={"evaluation": {"label": "Evaluation", "start": "2027-04-01 00:00:00",
                                       "submission": submission, "tasks": ["img"],
                                       "execution_time_limit": 300}})
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    return subprocess.run([sys.executable, str(REPO / "build_bundle.py"), "--config",
                           str(tmp_path / "spec.yaml"), "--data-root", str(tmp_path / "data"),
                           "--phase", "evaluation", "--out", str(tmp_path / "dist"), "--check"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)


def test_an_image_task_declared_to_the_mlp_builds_with_its_labels_zeroed(tmp_path):
    """uint8 images, true test labels in the organizer's file: the public copy is rewritten
    member by member, and the bundle passes its dry run."""
    arrays = image_arrays(dtype=np.uint8, y_test=RNG.integers(1, 3, 6))
    mlp = {"type": "mlp", "activation": "tanh", "layer_sizes": [192, 4, 3],
           "num_parameters": 192 * 4 + 4 + 4 * 3 + 3}
    result = build(tmp_path, mlp, arrays)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    with zipfile.ZipFile(tmp_path / "dist" / "bdl-img-codabench.zip") as bundle:
        public = zipfile.ZipFile(io.BytesIO(bundle.read("public_data.zip")))
    with np.load(io.BytesIO(public.read("img.npz"))) as inputs:
        assert not inputs["y_test"].any()
        assert np.array_equal(inputs["x_train"], arrays["x_train"])


"""BDL's readers and writers of its competition files (kinds/bdl2021/runtime/formats.py), on
real files: class probabilities, regression samples (a reference is stored transposed),
reference chains and task inputs; their round trips, the 2021 competition's sizes and layouts,
and the wording of every rejection. The matrix files they build on are
tests/test_competition_formats.py's."""
import zipfile
from pathlib import Path

import numpy as np
import pytest

from kinds.bdl2021.runtime.formats import (POINTS_BY_SAMPLES, SAMPLES_BY_POINTS, TASK_INPUT_KEYS,
                                           TaskInputs, read_chain_probs, read_chain_samples,
                                           read_classification_probs, read_regression_samples,
                                           read_task_inputs, write_chain_probs,
                                           write_chain_samples, write_classification_probs,
                                           write_regression_reference, write_regression_samples,
                                           write_task_inputs)
from test_competition_formats import RNG, error_message, random_probs


# --- round trips -----------------------------------------------------------------------------

def test_classification_round_trip(tmp_path):
    probs = random_probs(50, 10)
    write_classification_probs(tmp_path / "p.csv", probs)
    read = read_classification_probs(tmp_path / "p.csv", n_points=50, n_classes=10)
    assert read.dtype == np.float64 and np.array_equal(read, probs)


def test_regression_submission_round_trip(tmp_path):
    samples = RNG.normal(size=(30, 100))
    write_regression_samples(tmp_path / "s.csv", samples, layout=POINTS_BY_SAMPLES)
    assert np.loadtxt(tmp_path / "s.csv").shape == (30, 100)
    read = read_regression_samples(tmp_path / "s.csv", layout=POINTS_BY_SAMPLES,
                                   n_points=30, n_samples=100)
    assert np.array_equal(read, samples)


def test_regression_reference_is_transposed_on_disk(tmp_path):
    samples = RNG.normal(size=(30, 100))  # N x S in memory
    write_regression_reference(tmp_path / "ref.csv", samples)
    assert np.array_equal(np.loadtxt(tmp_path / "ref.csv"), samples.T)  # S x N on disk
    read = read_regression_samples(tmp_path / "ref.csv", layout=SAMPLES_BY_POINTS,
                                   n_points=30, n_samples=100)
    assert read.shape == (30, 100) and np.array_equal(read, samples)


def test_chain_probs_round_trip(tmp_path):
    chains = np.stack([random_probs(20, 3) for _ in range(4)])
    write_chain_probs(tmp_path / "c.npy", chains)
    read = read_chain_probs(tmp_path / "c.npy", n_points=20, n_classes=3)
    assert read.dtype == np.float64 and np.array_equal(read, chains)


def test_chain_samples_round_trip_and_disk_layout(tmp_path):
    chains = RNG.normal(size=(3, 20, 50))  # (K, N, S)
    write_chain_samples(tmp_path / "c.npy", chains)
    assert np.load(tmp_path / "c.npy").shape == (3, 50, 20)  # (K, S, N) on disk
    read = read_chain_samples(tmp_path / "c.npy", n_points=20, n_samples=50)
    assert np.array_equal(read, chains)


def cifar_like_inputs() -> TaskInputs:
    """Small arrays shaped like the CIFAR task (uint8 images, integer labels)."""
    return TaskInputs(x_train=RNG.integers(0, 256, size=(6, 32, 32, 3), dtype=np.uint8),
                      y_train=RNG.integers(0, 10, size=6),
                      x_test=np.zeros((4, 32, 32, 3), np.uint8),
                      y_test=np.zeros(4, dtype=np.int64))


def test_task_inputs_round_trip(tmp_path):
    inputs = cifar_like_inputs()
    write_task_inputs(tmp_path / "t.npz", inputs)
    read = read_task_inputs(tmp_path / "t.npz")
    for key in TASK_INPUT_KEYS:
        assert getattr(read, key).dtype == getattr(inputs, key).dtype
        assert np.array_equal(getattr(read, key), getattr(inputs, key))
    with np.load(tmp_path / "t.npz") as archive:  # plain numpy reads it, keys in the fixed order
        assert archive.files == list(TASK_INPUT_KEYS)


def test_task_inputs_are_byte_identical_when_rewritten(tmp_path):
    inputs = cifar_like_inputs()
    write_task_inputs(tmp_path / "a.npz", inputs)
    write_task_inputs(tmp_path / "b.npz", inputs)
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    with zipfile.ZipFile(tmp_path / "a.npz") as archive:
        assert {info.compress_type for info in archive.infolist()} == {zipfile.ZIP_STORED}


def test_task_inputs_flatten_column_targets(tmp_path):
    np.savez(tmp_path / "t.npz", x_train=np.ones((5, 2)), y_train=np.arange(5.0).reshape(5, 1),
             x_test=np.ones((3, 2)), y_test=np.zeros((3, 1)))
    read = read_task_inputs(tmp_path / "t.npz")
    assert read.y_train.shape == (5,) and read.y_test.shape == (3,)
    assert np.array_equal(read.y_train, np.arange(5.0))


# --- the 2021 competition's sizes and layouts, and shape errors -----------------------------

def test_real_size_regression_reference(tmp_path):
    reference = RNG.normal(size=(1_000, 256))  # uci_samples.csv: 1000 samples x 256 test points
    np.savetxt(tmp_path / "uci_samples.csv", reference)
    read = read_regression_samples(tmp_path / "uci_samples.csv", layout=SAMPLES_BY_POINTS,
                                   n_points=256, n_samples=1_000)
    assert read.shape == (256, 1_000) and np.array_equal(read, reference.T)


def test_shape_error_of_reference_is_in_the_files_orientation(tmp_path):
    write_regression_reference(tmp_path / "ref.csv", np.zeros((146, 1_000)))
    message = error_message(read_regression_samples, tmp_path / "ref.csv",
                            layout=SAMPLES_BY_POINTS, n_points=147, n_samples=1_000)
    assert ("ref.csv: wrong number of columns: expected 1000 rows (samples) x 147 columns "
            "(test points), found 1000 rows x 146 columns") in message


def test_probabilities_shape_errors_name_test_points_and_classes(tmp_path):
    np.savetxt(tmp_path / "p.csv", np.ones((5, 3)))
    message = error_message(read_classification_probs, tmp_path / "p.csv", n_points=6, n_classes=3)
    assert message == (f"{tmp_path / 'p.csv'}: wrong number of rows: expected 6 rows (test points) "
                       "x 3 columns (classes), found 5 rows x 3 columns")


# --- rejections: chains -----------------------------------------------------------------------

def test_rejects_bad_chain_files(tmp_path):
    np.save(tmp_path / "c.npy", np.ones((3, 20)))
    assert "expected a 3-D array (chains, test points, classes), found shape (3, 20)" in \
        error_message(read_chain_probs, tmp_path / "c.npy")
    np.save(tmp_path / "c.npy", np.ones((3, 1000, 146)))
    message = error_message(read_chain_samples, tmp_path / "c.npy", n_points=147, n_samples=1000)
    assert ("c.npy: expected 147 test points along axis 2 of (chains, samples, test points), "
            "found 146 (array shape (3, 1000, 146))") in message
    chains = np.ones((2, 4, 3))
    chains[1, 2, 0] = np.inf
    np.save(tmp_path / "c.npy", chains)
    assert "index (1, 2, 0)" in error_message(read_chain_probs, tmp_path / "c.npy")
    np.savetxt(tmp_path / "c.csv", np.ones((3, 2)))
    assert "accepted: .npy" in error_message(read_chain_probs, tmp_path / "c.csv")


# --- rejections: task inputs -----------------------------------------------------------------

def save_task(path: Path, **arrays) -> Path:
    """np.savez a task file from valid defaults overridden (or removed, with None) by `arrays`."""
    default = dict(x_train=np.ones((5, 2)), y_train=np.ones(5), x_test=np.ones((3, 2)),
                   y_test=np.zeros(3))
    default.update(arrays)
    np.savez(path, **{key: value for key, value in default.items() if value is not None})
    return path


@pytest.mark.parametrize("arrays, expected", [
    (dict(y_test=None, x_test=None), "missing keys x_test, y_test"),
    (dict(x_val=np.ones((2, 2))), "unexpected keys x_val"),
    (dict(y_train=np.ones(4)), "x_train has 5 rows but y_train has 4"),
    (dict(x_test=np.ones((3, 4))), "x_train has feature shape (2,) but x_test has (4,)"),
    (dict(x_train=np.ones(5)), "x_train must have ndim >= 2"),
    (dict(y_test=np.zeros((3, 2))), "y_test must be 1-D (or N x 1), found shape (3, 2)"),
    (dict(x_test=np.array([[1.0, np.nan]] * 3)), "x_test element at index (0, 1)"),
    (dict(y_train=np.array(["a"] * 5)), "y_train, found dtype <U1"),
    (dict(y_train=np.array([None] * 5)), "array y_train cannot be read"),
])
def test_rejects_bad_task_inputs(tmp_path, arrays, expected):
    message = error_message(read_task_inputs, save_task(tmp_path / "task.npz", **arrays))
    assert "task.npz" in message and expected in message


@pytest.mark.parametrize("content", [b"just text", b"PK\x03\x04 broken zip", b""])
def test_rejects_non_zip_task_file(tmp_path, content):
    (tmp_path / "task.npz").write_bytes(content)
    assert "task.npz: not a valid .npz archive" in error_message(read_task_inputs,
                                                                 tmp_path / "task.npz")


def test_rejects_npy_saved_under_npz_name(tmp_path):
    np.save(tmp_path / "task.npy", np.ones(3))
    (tmp_path / "task.npy").rename(tmp_path / "task.npz")
    assert "is a single .npy array" in error_message(read_task_inputs, tmp_path / "task.npz")


def test_rejects_task_archive_with_non_npy_members(tmp_path):
    with zipfile.ZipFile(tmp_path / "task.npz", "w") as archive:
        for key in TASK_INPUT_KEYS:
            archive.writestr(key, "1,2,3")
    message = error_message(read_task_inputs, tmp_path / "task.npz")
    assert "task.npz: member x_train is not a .npy array" in message


def test_rejects_task_file_with_wrong_extension(tmp_path):
    save_task(tmp_path / "task.npz").rename(tmp_path / "task.zip")
    assert "accepted: .npz" in error_message(read_task_inputs, tmp_path / "task.zip")


def test_writers_and_readers_reject_wrong_shapes_names_and_layouts(tmp_path):
    with pytest.raises(ValueError, match=".npy"):
        write_chain_probs(tmp_path / "c.csv", np.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="3-D"):
        write_chain_samples(tmp_path / "c.npy", np.ones((2, 2)))
    with pytest.raises(ValueError, match="layout"):
        read_regression_samples(tmp_path / "s.csv", layout="points_x_samples")

"""Data preparation of the embedded tasks: splits, standardisation, shifted blocks."""
import numpy as np
import pytest
from sklearn import datasets as sklearn_datasets

from kinds.bdl2021.reference.corruptions import CORRUPTIONS, corrupt
from kinds.bdl2021.reference.datasets import prepare
from kinds.bdl2021.reference.tasks import TASKS, task_by_name


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_standardised_with_training_statistics_only(task):
    prepared = prepare(task)
    axis = None if task.standardisation == "global" else 0
    np.testing.assert_allclose(prepared.x_train.mean(axis=axis), 0.0, atol=1e-9)
    std = prepared.x_train.std(axis=axis)
    assert np.all((np.abs(std - 1) < 1e-9) | (std < 1e-8))     # constant columns stay 0
    # The test inputs were not used: their statistics are not forced to 0 / 1.
    assert np.abs(prepared.x_test.mean(axis=0)).max() > 1e-3


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_split_is_deterministic_and_disjoint(task):
    first, second = prepare(task), prepare(task)
    np.testing.assert_array_equal(first.x_test, second.x_test)
    clean = first.blocks[0]
    train_rows = {row.tobytes() for row in first.x_train}
    overlap = sum(row.tobytes() in train_rows for row in first.x_test[clean.start:clean.stop])
    assert overlap <= 2   # sklearn's digits holds a few exact duplicate images


def test_gap_split_holds_out_the_middle_third_by_bmi():
    task = task_by_name("diabetes_gap")
    raw = sklearn_datasets.load_diabetes()
    bmi = raw.data[:, list(raw.feature_names).index("bmi")]
    prepared = prepare(task)
    mean, std = prepared.standardisation["x_mean"], prepared.standardisation["x_std"]
    index = list(raw.feature_names).index("bmi")
    test_bmi = prepared.x_test[:, index] * std[index] + mean[index]
    train_bmi = prepared.x_train[:, index] * std[index] + mean[index]
    low, high = np.sort(bmi)[len(bmi) // 3 - 1], np.sort(bmi)[len(bmi) - len(bmi) // 3]
    assert len(prepared.x_test) == len(bmi) - 2 * (len(bmi) // 3)
    assert test_bmi.min() >= low and test_bmi.max() <= high
    assert np.mean((train_bmi <= low) | (train_bmi >= high)) == 1.0
    # Targets are standardised with training statistics, and kept as floats.
    assert abs(prepared.y_train.mean()) < 1e-9 and prepared.y_test.dtype == float


def test_shifted_digits_are_blocks_of_the_same_images():
    task = task_by_name("digits_shift")
    prepared = prepare(task)
    names = [block.name for block in prepared.blocks]
    assert names == ["clean"] + [b.name for b in task.shift_blocks]
    sizes = {block.stop - block.start for block in prepared.blocks}
    assert len(sizes) == 1 and prepared.blocks[-1].stop == len(prepared.x_test)
    n = prepared.blocks[0].stop
    for block in prepared.blocks[1:]:
        np.testing.assert_array_equal(prepared.y_test[block.start:block.stop], prepared.y_test[:n])
        assert not np.allclose(prepared.x_test[block.start:block.stop], prepared.x_test[:n])


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_corruptions_stay_in_pixel_range_and_grow_with_severity(name):
    images = sklearn_datasets.load_digits().images[:200].astype(float)
    distances = []
    for severity in range(1, 6):
        corrupted = corrupt(images, name, severity, np.random.default_rng(0))
        assert corrupted.shape == images.shape
        assert corrupted.min() >= 0 and corrupted.max() <= 16
        distances.append(np.abs(corrupted - images).mean())
    assert distances[0] > 0
    assert all(b >= a - 1e-12 for a, b in zip(distances, distances[1:]))


def test_unknown_corruption_is_named():
    with pytest.raises(ValueError, match="unknown corruption 'fog'; known: gaussian_noise"):
        corrupt(np.zeros((1, 8, 8)), "fog", 1, np.random.default_rng(0))

"""The participant's batched image helpers (kinds/retina/runtime/images.py): batches cover every
image once per pass, in order or shuffled; augmenting keeps shape and dtype and a quarter turn
is exactly numpy's; standardising centres and scales each channel by the training images."""
import numpy as np
import pytest

from kinds.retina.runtime import images


@pytest.fixture
def stack(tmp_path):
    """50 images of 12 x 12 x 3, memory-mapped as a participant gets them."""
    rng = np.random.default_rng(0)
    array = rng.integers(0, 256, (50, 12, 12, 3), dtype=np.uint8)
    array[..., 1] //= 4                 # channels of different spread
    np.save(tmp_path / "images.npy", array)
    return np.load(tmp_path / "images.npy", mmap_mode="r")


def test_batches_in_order_cover_every_image_once(stack):
    seen = [(indices, batch) for indices, batch in images.batches(stack, 16)]
    assert [len(indices) for indices, _ in seen] == [16, 16, 16, 2]
    assert np.array_equal(np.concatenate([i for i, _ in seen]), np.arange(50))
    for indices, batch in seen:
        assert isinstance(batch, np.ndarray) and not isinstance(batch, np.memmap)
        assert np.array_equal(batch, stack[indices])


def test_shuffled_batches_draw_a_new_order_each_pass(stack):
    rng = np.random.default_rng(1)
    passes = [np.concatenate([i for i, _ in images.batches(stack, 16, rng)]) for _ in range(2)]
    for order in passes:
        assert sorted(order) == list(range(50))
    assert not np.array_equal(passes[0], passes[1])
    for indices, batch in images.batches(stack, 16, rng):
        assert np.all(np.diff(indices) > 0)          # read forward within a batch
        assert np.array_equal(batch, stack[indices])


def test_a_batch_size_below_one_is_refused(stack):
    with pytest.raises(ValueError, match="batch_size"):
        next(images.batches(stack, 0))


def test_augment_keeps_shape_and_dtype_and_changes_images(stack):
    batch = np.asarray(stack[:8])
    out = images.augment(batch, np.random.default_rng(2))
    assert out.shape == batch.shape and out.dtype == np.uint8
    assert not np.array_equal(out, batch)
    assert np.array_equal(images.augment(batch, np.random.default_rng(2)), out)


def test_a_quarter_turn_is_numpys_and_a_full_turn_the_identity(stack):
    image = np.asarray(stack[0])
    assert np.array_equal(images.rotate(image, 0.0, 12, 12), image)
    turned = images.rotate(image, np.pi / 2, 12, 12)
    assert any(np.array_equal(turned, np.rot90(image, k)) for k in (1, 3))
    assert np.array_equal(images.rotate(image, 2 * np.pi, 12, 12), image)


def test_a_rotation_fills_the_corners_it_cannot_see_with_black(stack):
    turned = images.rotate(np.full((12, 12, 3), 200, np.uint8), np.pi / 4, 12, 12)
    assert turned[0, 0].tolist() == [0, 0, 0] and turned[6, 6].tolist() == [200, 200, 200]


def test_standardise_centres_and_scales_each_channel(stack):
    mean, spread = images.channel_statistics(stack)
    out = images.standardise(np.asarray(stack), mean, spread)
    assert out.dtype == np.float32 and out.shape == stack.shape
    np.testing.assert_allclose(out.mean(axis=(0, 1, 2)), 0.0, atol=1e-5)
    np.testing.assert_allclose(out.std(axis=(0, 1, 2)), 1.0, atol=1e-4)


def test_a_constant_channel_is_not_divided_by_zero(tmp_path):
    flat = np.zeros((4, 5, 5, 1), np.uint8)
    mean, spread = images.channel_statistics(flat)
    assert spread.tolist() == [1.0]
    assert np.all(np.isfinite(images.standardise(flat, mean, spread)))

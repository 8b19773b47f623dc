"""The Retina kit's PyTorch baselines (torch_mc_dropout.py, torch_deep_ensemble.py) against
the image-task contract, on the CPU: a fake task with the contract's helpers, and a small
synthetic fundus problem (a bright disc; referable ones carry dark spots) whose label a
network learns in seconds. Skipped where torch is not installed (the project's own venv)."""
import importlib
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

BASELINES = Path(__file__).resolve().parents[3] / "kinds" / "retina" / "kit" / "baselines"
NAMES = ("torch_mc_dropout", "torch_deep_ensemble")


class FakeTask:
    """The contract's helpers, written plainly; the clock is the real one, `seconds` long."""
    inputs = "images"

    def __init__(self, x_train, grades_train, seconds=600.0):
        self.image_shape = tuple(x_train.shape[1:])
        self.grades_train = grades_train
        every = np.linspace(0, len(x_train) - 1, min(2048, len(x_train))).astype(int)
        sample = x_train[every] / 255.0
        self.mean = sample.mean(axis=(0, 1, 2))
        self.std = sample.std(axis=(0, 1, 2)) + 1e-6
        self.deadline = time.monotonic() + seconds
        self.saved = []

    def time_left(self):
        return max(0.0, self.deadline - time.monotonic())

    def checkpoint(self, probability, uncertainty=None):
        self.saved.append((np.array(probability, float), np.array(uncertainty, float)))

    def standardise(self, batch):
        return ((batch / 255.0 - self.mean) / self.std).astype(np.float32)

    def augment(self, batch, rng):
        out = np.empty_like(batch)
        for i, image in enumerate(batch):
            if rng.random() < 0.5:
                image = image[:, ::-1]
            if rng.random() < 0.5:
                image = image[::-1]
            out[i] = rotate(image, rng.uniform(0, 2 * np.pi))
        return out

    def batches(self, x, batch_size, rng=None):
        order = np.arange(len(x)) if rng is None else rng.permutation(len(x))
        for start in range(0, len(x), batch_size):
            indices = order[start:start + batch_size]
            yield indices, np.asarray(x[indices])


def rotate(image, angle):
    """Nearest neighbour about the centre; what falls outside the image is black."""
    h, w = image.shape[:2]
    yy, xx = np.mgrid[0:h, 0:w]
    cy, cx = (h - 1) / 2, (w - 1) / 2
    cos, sin = np.cos(angle), np.sin(angle)
    sy = np.rint(cos * (yy - cy) - sin * (xx - cx) + cy).astype(int)
    sx = np.rint(sin * (yy - cy) + cos * (xx - cx) + cx).astype(int)
    inside = (sy >= 0) & (sy < h) & (sx >= 0) & (sx < w)
    out = np.zeros_like(image)
    out[inside] = image[sy[inside], sx[inside]]
    return out


def fundus(n, side, seed):
    """(images, labels): a reddish disc on black; about 30% referable, with 2 to 4 dark spots."""
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < 0.3).astype(np.int64)
    yy, xx = np.mgrid[0:side, 0:side]
    images = np.empty((n, side, side, 3), np.uint8)
    for i in range(n):
        centre = (side - 1) / 2 + rng.uniform(-1, 1, 2)
        radius = side * rng.uniform(0.33, 0.42)
        disc = (yy - centre[0]) ** 2 + (xx - centre[1]) ** 2 <= radius ** 2
        shade = disc * rng.uniform(0.6, 0.9)
        for _ in range(rng.integers(2, 5) if labels[i] else 0):
            r, a = radius * np.sqrt(rng.uniform(0, 0.6)), rng.uniform(0, 2 * np.pi)
            spot = (np.abs(yy - centre[0] - r * np.sin(a)) < side / 16 + 0.5) & (
                np.abs(xx - centre[1] - r * np.cos(a)) < side / 16 + 0.5)
            shade = np.where(spot & disc, shade * 0.3, shade)
        colour = np.array([250, 140, 60]) * shade[..., None] + rng.normal(0, 8, (side, side, 3))
        images[i] = np.clip(colour, 0, 255)
    return images, labels


def auroc(score, labels):
    ranks = np.empty(len(score))
    ranks[np.argsort(score, kind="stable")] = np.arange(1, len(score) + 1)
    positive = labels == 1
    n1, n0 = positive.sum(), (~positive).sum()
    return (ranks[positive].sum() - n1 * (n1 + 1) / 2) / (n1 * n0)


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    """Read-only memory maps, as the staged task gives them."""
    folder = tmp_path_factory.mktemp("fundus")
    (x_train, y_train), (x_test, y_test) = fundus(400, 16, 1), fundus(200, 16, 2)
    np.save(folder / "train.npy", x_train)
    np.save(folder / "test.npy", x_test)
    return (np.load(folder / "train.npy", mmap_mode="r"), y_train,
            np.load(folder / "test.npy", mmap_mode="r"), y_test)


@pytest.fixture
def baselines(monkeypatch):
    """The modules, on one thread: the suite's two workers share two cores in CI, and
    torch's threads spinning against each other made steps ten times slower."""
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    monkeypatch.syspath_prepend(str(BASELINES))
    yield {name: importlib.import_module(name) for name in NAMES}
    torch.set_num_threads(threads)


def run(module, problem, seconds=600.0):
    x_train, y_train, x_test, _ = problem
    task = FakeTask(x_train, 2 * y_train, seconds)
    p, uncertainty = module.predict(task, x_train, y_train, x_test)
    return task, np.asarray(p), np.asarray(uncertainty)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_each_baseline_learns_and_saves_its_first_prediction(baselines, problem, name,
                                                             monkeypatch):
    monkeypatch.setattr(sys.modules["torch_resnet"], "EPOCHS", 8)   # 6 reach 1.0 here
    task, p, uncertainty = run(baselines[name], problem)
    assert p.shape == uncertainty.shape == (len(problem[2]),)
    assert np.all((p >= 0) & (p <= 1)) and np.all(np.isfinite(uncertainty))
    assert auroc(p, problem[3]) > 0.8
    assert task.saved and task.saved[0][0].shape == p.shape


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_a_fixed_seed_gives_the_same_predictions_on_the_cpu(baselines, problem, name,
                                                            monkeypatch):
    import torch
    monkeypatch.setattr(sys.modules["torch_resnet"], "EPOCHS", 3)
    # cuDNN's kernel choice may vary between runs: the promise holds on the CPU only
    monkeypatch.setattr(sys.modules["torch_resnet"], "device", lambda: torch.device("cpu"))
    first, second = run(baselines[name], problem), run(baselines[name], problem)
    np.testing.assert_array_equal(first[1], second[1])
    np.testing.assert_array_equal(first[2], second[2])


@pytest.mark.parametrize("name", NAMES)
def test_a_short_budget_stops_training_early_and_still_returns(baselines, problem, name,
                                                               monkeypatch):
    monkeypatch.setattr(sys.modules["torch_resnet"], "EPOCHS", 10_000)
    began = time.monotonic()
    task, p, uncertainty = run(baselines[name], problem, seconds=2.0)
    assert time.monotonic() - began < 2.0 + 2.0
    assert p.shape == (len(problem[2]),) and np.all(np.isfinite(uncertainty))
    assert task.saved


def test_the_budget_is_split_between_the_members_that_fit(baselines):
    plan = sys.modules["torch_resnet"].plan
    # a member: 2 epochs of 1,000 images at 10 ms (20 s), then 500 predictions (10 s)
    members, seconds = plan(100.0, 0.01, 1000, 500, 1, 3)
    assert members == 3 and seconds == pytest.approx((95 - 3 * 10) / 3)
    assert plan(50.0, 0.01, 1000, 500, 1, 3)[0] == 1
    assert plan(5.0, 0.01, 1000, 500, 1, 3) == (0, 0.0)

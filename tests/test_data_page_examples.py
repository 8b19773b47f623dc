"""The data page's figures of the public training data and its example images
(bundle/data_examples.py), and the leakage check of those images (bundle/leakage.py,
page_images and shown_test_inputs, run by bundle/build.py)."""
from __future__ import annotations

import base64
import dataclasses
import io
import re

import numpy as np
import pytest

from bundle import data_examples
from bundle.data_examples import (PAGE_IMAGE_BYTES, data_page_tasks, eight_bit, png_bytes,
                                  thumbnail, thumbnail_shape)
from bundle.leakage import native_pixels, page_images, png_pixels, shown_test_inputs
from bundle.phase_plan import phase_plan
from bundle.spec import load_spec
from kinds.kind import KINDS, PublicTraining, kind

IMG = re.compile(r'<img src="(data:image/png;base64,[^"]+)" width="(\d+)" height="(\d+)" '
                 r'alt="training row (\d+)(?:, (\w+) (\S+))?"')


def _plans(name: str):
    spec = load_spec(KINDS[name].DEFAULT_SPEC)
    return spec, [(phase, phase_plan(spec, phase.key, None)) for phase in spec.phases]


def _trainings(plan) -> dict:
    hook = kind(plan.kind).public_training
    return {task.name: hook(task) for task in plan.tasks} if hook else {}


@pytest.mark.parametrize("name", list(KINDS))
def test_figures_of_every_default_task_are_its_training_data(name):
    """Each kind describes the training data of every task of its default competition, and
    the page's figures are those of the rows the kind reads: the count of rows, the count and
    share of each class, or the range and mean of y."""
    _, plans = _plans(name)
    described = 0
    for phase, plan in plans:
        (summaries,) = data_page_tasks([plan])
        trainings = _trainings(plan)
        assert [s["task"] for s in summaries] == [t.name for t in plan.tasks], phase.key
        for summary in summaries:
            training = trainings[summary["task"]]
            targets = np.asarray(training.targets).ravel()
            assert summary["rows"] == targets.size > 0
            shape = " x ".join(map(str, training.input_shape))
            assert shape in summary["shape"] or f"{training.input_shape[0]} features" \
                == summary["shape"]
            if training.classification:
                classes, counts = np.unique(targets, return_counts=True)
                assert [(b["value"], b["count"]) for b in summary["balance"]] == \
                    [(str(int(c)), int(n)) for c, n in zip(classes, counts)]
                assert sum(b["count"] for b in summary["balance"]) == summary["rows"]
            else:
                low, high = summary["range"].split(" to ")
                assert float(low) == pytest.approx(targets.min(), rel=1e-3)
                assert float(high) == pytest.approx(targets.max(), rel=1e-3)
            described += 1
    assert described, f"kind {name} describes no task of its default competition"


def test_figures_state_shapes_and_balances_in_words():
    """What a reader sees for label_accuracy's tasks: flat features, the rows, and each class's
    count and share. (8x8 images and a regression's range: BDL's tasks,
    kinds/bdl2021/tests/test_bdl_data_page_examples.py.)"""
    _, plans = _plans("label_accuracy")
    summaries = {s["task"]: s for _, plan in plans for s in data_page_tasks([plan])[0]}
    assert summaries["iris"]["shape"] == "4 features" and summaries["iris"]["rows"] == 105
    assert summaries["wine"]["shape"] == "13 features" and not summaries["wine"]["examples"]
    assert [(b["value"], b["count"], b["share"]) for b in summaries["wine"]["balance"]] == [
        ("0", 49, "39.2%"), ("1", 44, "35.2%"), ("2", 32, "25.6%")]


def _page(name: str, phase_key: str) -> str:
    from bundle.leaderboard import competition_columns
    from bundle.render import page_contexts, render_pages
    spec = load_spec(KINDS[name].DEFAULT_SPEC)
    phase = spec.phase(phase_key)
    plan = phase_plan(spec, phase_key, None)
    contexts = page_contexts(spec, [phase], [plan], competition_columns([plan]), spec.title,
                             None)
    return render_pages(contexts, KINDS[name].TEMPLATES)


def _image_phases():
    """(kind, phase) of every default phase with image tasks, read from the kinds."""
    found = []
    for name in KINDS:
        for phase, plan in _plans(name)[1]:
            if any(t.images is not None for t in _trainings(plan).values()):
                found.append((name, phase.key))
    return found


@pytest.mark.parametrize("name,phase_key", _image_phases())
def test_thumbnails_are_public_training_rows_of_their_class(name, phase_key):
    """Every image on the data page decodes to the 8-bit form of the training row its alt
    text names, of the class it is shown under, drawn from the kind's public training data
    (never another row, never a test row); the page holds at most PAGE_IMAGE_BYTES of them."""
    pages = _page(name, phase_key)
    html = pages["data.html"]
    plan = phase_plan(load_spec(KINDS[name].DEFAULT_SPEC), phase_key, None)
    trainings = {n: t for n, t in _trainings(plan).items() if t.images is not None}
    shown = IMG.findall(html)
    assert shown, "no image on the data page"
    assert sum(len(uri) for uri, *_ in shown) <= PAGE_IMAGE_BYTES
    matched = 0
    for uri, width, height, row, target, value in shown:
        pixels = png_pixels(base64.b64decode(uri.split(",", 1)[1]))
        assert pixels.shape[:2] == (int(height), int(width))
        row = int(row)
        owners = [t for t in trainings.values()
                  if row < np.asarray(t.targets).size
                  and np.array_equal(thumbnail(eight_bit(t.images(np.array([row])))[0]), pixels)]
        assert owners, f"image of training row {row} is no such training row"
        assert any(str(int(np.asarray(t.targets)[row])) == value for t in owners)
        matched += 1
    assert matched == len(shown)
    assert not page_images({"data.html": html})[1]


def test_png_written_and_read_back_exactly():
    """The pages' PNG writer and the leakage check's reader agree, and the reader undoes the
    filters other writers use (Pillow's adaptive ones)."""
    rng = np.random.default_rng(0)
    grey = rng.integers(0, 256, (13, 7), dtype=np.uint8)
    colour = rng.integers(0, 256, (5, 9, 3), dtype=np.uint8)
    for pixels in (grey, colour):
        assert np.array_equal(png_pixels(png_bytes(pixels)), pixels)
    from PIL import Image
    smooth = (np.add.outer(np.arange(40), np.arange(30)) % 256).astype(np.uint8)
    for pixels in (smooth, np.stack([smooth, smooth[::-1], smooth.T[:40, :30]], -1)
                   if smooth.T.shape == smooth.shape else np.dstack([smooth] * 3)):
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="PNG", optimize=True)
        assert np.array_equal(png_pixels(buffer.getvalue()), pixels)


def test_small_images_enlarged_and_photographs_reduced():
    digit = np.arange(64, dtype=np.uint8).reshape(8, 8)
    big = thumbnail(digit)
    assert big.shape == (48, 48) == thumbnail_shape((8, 8))
    assert np.array_equal(native_pixels(big), digit)
    photo = np.full((512, 400, 3), 200, np.uint8)
    small = thumbnail(photo)
    assert max(small.shape[:2]) <= data_examples.LARGEST_SIDE
    assert small.shape == thumbnail_shape((512, 400, 3)) and small.shape[2] == 3
    assert (small == 200).all()


def test_page_images_held_to_the_byte_cap():
    """Incompressible colour photographs of ten classes in two tasks: the page keeps under
    PAGE_IMAGE_BYTES, shows at least one image per class and says how many it left out."""
    rng = np.random.default_rng(1)
    photos = rng.integers(0, 256, (60, 48, 48, 3), dtype=np.uint8)
    training = PublicTraining(source="x", input_shape=(48, 48, 3), targets=np.arange(60) % 10,
                              images=lambda rows: photos[rows])
    summaries = [[{**data_examples._figures(training, name), "_training": training}
                  for name in ("a", "b")]]
    data_examples.add_examples(summaries)
    total = sum(len(image["src"]) for summary in summaries[0]
                for strip in summary["examples"] for image in strip["images"])
    assert 0 < total <= PAGE_IMAGE_BYTES
    for summary in summaries[0]:
        assert len(summary["examples"]) == 10
        assert "left out" in summary["examples_note"]
        assert "stretched" not in summary["examples_note"]      # 8-bit photographs


def test_images_of_other_values_than_pixels_say_how_they_were_drawn():
    """Standardised inputs (BDL's digits) are stretched into pixels per image; the page says
    so (they look grainy), and 8-bit images get no such note (the test above)."""
    rng = np.random.default_rng(2)
    values = rng.standard_normal((20, 8, 8))
    training = PublicTraining(source="x", input_shape=(8, 8), targets=np.arange(20) % 2,
                              images=lambda rows: values[rows])
    summaries = [[{**data_examples._figures(training, "a"), "_training": training}]]
    data_examples.add_examples(summaries)
    assert summaries[0][0]["examples_note"] == data_examples.STRETCHED_NOTE


def test_overview_names_the_kit_and_every_phase_close():
    for name in KINDS:
        html = _page(name, load_spec(KINDS[name].DEFAULT_SPEC).phases[0].key)["overview.html"]
        assert "<h3>Starting kit</h3>" in html and "Files tab" in html, name
        assert html.count(", closes ") == len(load_spec(KINDS[name].DEFAULT_SPEC).phases), name


def test_test_image_on_a_page_refuses_the_build(tmp_path, monkeypatch):
    """A hostile (or buggy) kind hook that shows test images as training examples: the build
    stops, naming the page and the test file, and writes nothing."""
    from bundle.build import BuildError, build_competition
    name = "retina"
    spec = load_spec(KINDS[name].DEFAULT_SPEC)
    honest = KINDS[name]
    phase_key = next(key for key in ("images",) if key in {p.key for p in spec.phases})

    def hostile(task):
        training = honest.public_training(task)
        if training.images is None:
            return training
        test = np.load(task.folder / "test_images.npy", mmap_mode="r")
        return dataclasses.replace(training, images=lambda rows: test[rows])

    monkeypatch.setattr(data_examples, "kind",
                        lambda _: dataclasses.replace(honest, public_training=hostile))
    monkeypatch.setenv("BUNDLE_KIT_CHECK", "off")
    with pytest.raises(BuildError) as refused:
        build_competition(spec, [phase_key], None, tmp_path / "out")
    message = str(refused.value)
    assert "page data.html" in message and "test_images.npy" in message, message
    assert not list((tmp_path / "out").glob("*.zip"))


def test_unreadable_page_image_is_a_problem():
    html = '<img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUg==">'
    images, problems = page_images({"page data.html": html})
    assert not images and problems and "page data.html: image 1" in problems[0]


def test_test_rows_found_after_the_page_conversion():
    """A standardised (float) test image shown on a page is found through the same 8-bit
    conversion and enlarging the page applies; a training image is not."""
    rng = np.random.default_rng(2)
    x_test = rng.standard_normal((20, 8, 8, 1))
    x_train = rng.standard_normal((20, 8, 8, 1))
    buffer = io.BytesIO()
    np.savez(buffer, x_train=x_train, x_test=x_test)
    inputs = {"input_data.zip": {"task.npz": buffer.getvalue()}}
    for source, leaks in ((x_test, True), (x_train, False)):
        html = f'<img src="{data_examples.data_uri(thumbnail(eight_bit(source[[7]])[0]))}">'
        images, _ = page_images({"page data.html": html})
        problems = shown_test_inputs(images, inputs)
        assert bool(problems) == leaks, problems
        if leaks:
            assert "row 7 of input_data.zip:task.npz:x_test" in problems[0]

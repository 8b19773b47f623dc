"""The data page's figures of each task's public training data: the input shape, the number of
training rows, the class (or grade) counts or the range and mean of y, and, for image inputs,
a strip of example training images per class, embedded as PNG ``data:`` URIs.

Everything comes from the kind's ``public_training(task)`` (``kinds.kind.PublicTraining``),
which reads only what participants download for training; nothing here opens a test or
reference file. The PNGs are written with zlib and struct (no imaging library), and the
images of one page are held to ``PAGE_IMAGE_BYTES`` in all, so that a page with many image
tasks stays small (Codabench keeps a page's HTML in its database and sends it whole).
``bundle/leakage.py`` (``page_images``) reads the images back for the build's leakage check.
"""
from __future__ import annotations

import base64
import struct
import zlib

import numpy as np

from kinds.kind import kind

EXAMPLES_PER_CLASS = 3
# The images of all tasks of one page, as base64 text, at most this many bytes.
PAGE_IMAGE_BYTES = 300_000
# Thumbnails are drawn between these sizes (longest side, pixels): small images are enlarged
# by repeating pixels, so that an 8x8 digit stays sharp where the site strips the page's CSS;
# large ones (photographs) are reduced by averaging blocks of pixels.
SMALLEST_SIDE, LARGEST_SIDE = 48, 96
DATA_URI_PREFIX = "data:image/png;base64,"


def png_bytes(pixels: np.ndarray) -> bytes:
    """A PNG of 8-bit pixels (H, W) grey or (H, W, 3) colour: one IDAT, no filter."""
    pixels = np.ascontiguousarray(pixels, dtype=np.uint8)
    height, width = pixels.shape[:2]
    colour = 2 if pixels.ndim == 3 else 0
    rows = pixels.reshape(height, -1)
    raw = np.concatenate([np.zeros((height, 1), np.uint8), rows], axis=1).tobytes()

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    return (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def eight_bit(images: np.ndarray) -> np.ndarray:
    """Images (n, H, W[, C]) as 8-bit pixels (n, H, W) or (n, H, W, 3): uint8 as they are,
    anything else (standardised inputs) stretched per image from its minimum to its maximum.
    Also what the leakage check applies to test inputs, so that it compares like with like."""
    images = np.asarray(images)
    if images.ndim == 4 and images.shape[-1] == 1:
        images = images[..., 0]
    if images.ndim == 4 and images.shape[-1] != 3:
        images = images[..., 0]                         # one channel of an odd count
    if images.dtype == np.uint8:
        return images
    values = images.astype(np.float64)
    axes = tuple(range(1, values.ndim))
    low, high = values.min(axis=axes, keepdims=True), values.max(axis=axes, keepdims=True)
    spread = np.where(high > low, high - low, 1.0)
    return np.rint((values - low) / spread * 255).astype(np.uint8)


def thumbnail_shape(shape: tuple) -> tuple:
    """The shape ``thumbnails`` gives an 8-bit image of ``shape`` (H, W[, 3]), known from the
    shape alone (the leakage check reads only the test arrays that could give a page's)."""
    side = max(shape[:2])
    if side < SMALLEST_SIDE:
        factor = -(-SMALLEST_SIDE // side)
        return (shape[0] * factor, shape[1] * factor, *shape[2:])
    if side > LARGEST_SIDE:
        factor = -(-side // LARGEST_SIDE)
        return (shape[0] // factor, shape[1] // factor, *shape[2:])
    return tuple(shape)


def thumbnails(images: np.ndarray) -> np.ndarray:
    """8-bit images (n, H, W[, 3]) brought to a thumbnail's size (SMALLEST_SIDE to
    LARGEST_SIDE): small ones enlarged by repeating pixels, large ones reduced by the mean of
    each block of pixels."""
    side = max(images.shape[1:3])
    if side < SMALLEST_SIDE:
        factor = -(-SMALLEST_SIDE // side)
        return images.repeat(factor, axis=1).repeat(factor, axis=2)
    if side > LARGEST_SIDE:
        factor = -(-side // LARGEST_SIDE)
        n, height, width = images.shape[0], images.shape[1] // factor, images.shape[2] // factor
        blocks = images[:, :height * factor, :width * factor].astype(np.float64).reshape(
            n, height, factor, width, factor, *images.shape[3:])
        return np.rint(blocks.mean(axis=(2, 4))).astype(np.uint8)
    return images


def thumbnail(pixels: np.ndarray) -> np.ndarray:
    return thumbnails(pixels[None])[0]


def data_uri(pixels: np.ndarray) -> str:
    return DATA_URI_PREFIX + base64.b64encode(png_bytes(pixels)).decode("ascii")


def _shape_text(shape: tuple, images: bool) -> str:
    if images:
        return " x ".join(map(str, shape)) + " images"
    if len(shape) == 1:
        return f"{shape[0]} features"
    return " x ".join(map(str, shape)) + " arrays"


def _label(value) -> str:
    number = float(value)
    return f"{int(number)}" if number.is_integer() else f"{number:g}"


def _counts(values: np.ndarray) -> list[dict]:
    classes, counts = np.unique(values, return_counts=True)
    total = int(counts.sum())
    return [{"value": _label(c), "count": int(n), "share": f"{n / total:.1%}"}
            for c, n in zip(classes, counts)]


def _figures(training, name: str) -> dict:
    targets = np.asarray(training.targets).ravel()
    summary = {"task": name, "source": training.source, "rows": int(targets.size),
               "shape": _shape_text(tuple(training.input_shape), training.images is not None),
               "target": training.target, "classification": training.classification,
               "balance": [], "also": [], "range": "", "mean": "", "examples": [],
               "examples_note": ""}
    if training.classification:
        summary["balance"] = _counts(targets)
        summary["also"] = [{"name": label, "counts": _counts(np.asarray(values).ravel())}
                           for label, values in training.also.items()]
    elif targets.size:
        # standardised targets have a mean of 1e-16 or so: shown as the 0 it is
        mean, sd = float(targets.mean()), float(targets.std())
        mean = 0.0 if abs(mean) < 1e-9 * max(1.0, sd) else mean
        summary["range"] = f"{targets.min():.4g} to {targets.max():.4g}"
        summary["mean"] = f"{mean:.4g} (standard deviation {sd:.4g})"
    return summary


def _candidates(training) -> list[tuple[str, list[int]]]:
    """Per class, the first rows of the training data (the file's order: nothing drawn at
    random, so every build shows the same ones)."""
    targets = np.asarray(training.targets).ravel()
    if not training.classification:
        return [("", list(range(min(EXAMPLES_PER_CLASS, targets.size))))]
    return [(_label(c), [int(i) for i in np.flatnonzero(targets == c)[:EXAMPLES_PER_CLASS]])
            for c in np.unique(targets)]


# Inputs that are not 8-bit pixels (standardised values, say) are drawn stretched per image
# (``eight_bit``): where each value was standardised at its place, the pictures look grainier
# than the originals, and the page says how they were drawn.
STRETCHED_NOTE = ("drawn from the input values as you get them, each image stretched from its "
                  "lowest value to its highest")


def _examples(training, budget: int) -> tuple[list[dict], int, bool]:
    """Up to EXAMPLES_PER_CLASS thumbnails per class, taken in rounds (the first of every
    class, then the second, ...) until the next would pass ``budget`` bytes of data URIs.
    Returns the strip (one entry per class), how many were left out for the budget, and
    whether they were stretched from values other than 8-bit pixels."""
    chosen = _candidates(training)
    rows = sorted({row for _, picked in chosen for row in picked})
    if not rows:
        return [], 0, False
    images = training.images(np.asarray(rows))
    stretched = np.asarray(images).dtype != np.uint8
    pixels = dict(zip(rows, eight_bit(images)))
    strip = [{"value": value, "images": []} for value, _ in chosen]
    used, left_out = 0, 0
    for position in range(EXAMPLES_PER_CLASS):
        for entry, (value, picked) in zip(strip, chosen):
            if position >= len(picked):
                continue
            small = thumbnail(pixels[picked[position]])
            uri = data_uri(small)
            if used + len(uri) > budget:
                left_out += 1
                continue
            used += len(uri)
            entry["images"].append({
                "src": uri, "height": int(small.shape[0]), "width": int(small.shape[1]),
                "alt": f"training row {picked[position]}"
                       + (f", {training.target} {value}" if value else "")})
    return [entry for entry in strip if entry["images"]], left_out, stretched


def task_summaries(plan) -> list[dict]:
    """One entry per task of the phase whose kind describes its public training data."""
    hook = kind(plan.kind).public_training
    if hook is None:
        return []
    return [{**_figures(training, task.name), "_training": training}
            for task in plan.tasks if (training := hook(task)) is not None]


def add_examples(summaries_per_phase: list[list[dict]]) -> None:
    """The example strips of one page's tasks, sharing PAGE_IMAGE_BYTES equally; in place."""
    imaged = [s for summaries in summaries_per_phase for s in summaries
              if s["_training"].images is not None]
    seen: dict[str, tuple[list[dict], int, bool]] = {}
    for summary in imaged:
        # a task shown in two phases of one page is drawn once and shown twice
        if summary["task"] not in seen:
            share = PAGE_IMAGE_BYTES // len({s["task"] for s in imaged})
            seen[summary["task"]] = _examples(summary["_training"], share)
        summary["examples"], left_out, stretched = seen[summary["task"]]
        notes = [STRETCHED_NOTE] if stretched else []
        if left_out:
            notes.append(f"{left_out} more example(s) left out to keep the page under "
                         f"{PAGE_IMAGE_BYTES // 1000} kB of images")
        summary["examples_note"] = "; ".join(notes)
    for summaries in summaries_per_phase:
        for summary in summaries:
            summary.pop("_training", None)


def data_page_tasks(plans: list) -> list[list[dict]]:
    """Per phase of the page, its tasks' figures and example strips."""
    per_phase = [task_summaries(plan) for plan in plans]
    add_examples(per_phase)
    return per_phase

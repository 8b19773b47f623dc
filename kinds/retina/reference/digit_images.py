"""The embedded image tasks: real images that ship inside scikit-learn, converted as an
organizer's images are.

Data: scikit-learn's ``load_digits`` (the UCI "Optical Recognition of Handwritten Digits"
test set, Alpaydin and Kaynak 1998; CC BY 4.0): 1,797 real 8 x 8 grayscale scans of
handwritten digits, 0-16 per pixel. They are no fundus photographs: they stand in for them
so that the image route (layouts, convert, memory-mapped arrays, the CNN baselines) runs out
of the box and trains in seconds. We grade each image 0-4 by its digit in pairs (0-1: grade 0,
... 8-9: grade 4) and call it *referable* at grade 2 or above, as RETINA binarises its grades.

Two tasks, RETINA's two shifts:

* ``digits_acquisition`` (a camera shift, **simulated**): half of the images train; the test
  set pools a quarter as they are (in-domain) and a quarter re-acquired by a worse camera:
  blurred, lower contrast, a raised black level and sensor noise (``reacquired``);
* ``digits_severity`` (RETINA's Severity Shift, a real split of the real images): training
  and in-domain images are grades 0-2, the shifted set grades 3-4, all referable.

``write_sources`` writes each task's images as 8-bit grayscale PNG files with a labels file
in the ``csv`` layout (``image,label,grade``) and the task's declaration; ``convert`` then
resizes them to 16 x 16, as any organizer's images. The PNG sources are made anew by
``python -m reference_data --kind retina generate`` and not kept: the converted arrays are.
"""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np

SEED = 2021
IMAGE_SIZE = 16
REFERABLE_FROM_GRADE = 2
TASKS = ("digits_acquisition", "digits_severity")
SUMMARIES = {
    "digits_acquisition": (
        "Real handwritten digits from scikit-learn (8 x 8 scans, resized to 16 x 16), graded "
        "0-4 by digit pairs; half train, the test set pools a quarter as scanned and a quarter "
        "through a simulated worse camera."),
    "digits_severity": (
        "Real handwritten digits from scikit-learn (8 x 8 scans, resized to 16 x 16), graded "
        "0-4 by digit pairs; trained on grades 0-2, tested on held-out grades 0-2 and on "
        "grades 3-4."),
}
SHIFTS = {
    "digits_acquisition": "acquisition: blur, lower contrast, raised black level and noise "
                          "(simulated)",
    "digits_severity": "severity: grades 0-2 to grades 3-4 (a real split)",
}


def digit_images() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 scans as uint8 (n, 8, 8), 0-16 scaled to 0-255, and their digits."""
    from sklearn.datasets import load_digits
    data = load_digits()
    return np.rint(data.images * (255 / 16)).astype(np.uint8), data.target.astype(np.int64)


def reacquired(images: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The images through a simulated worse camera: a 3 x 3 binomial blur, contrast cut to
    55% above a black level of 60, and Gaussian noise of sd 12, clipped to 0-255."""
    padded = np.pad(images.astype(np.float64), ((0, 0), (1, 1), (1, 1)), mode="edge")
    kernel = np.array([1.0, 2.0, 1.0]) / 4
    rows = sum(w * padded[:, i:i + images.shape[1], :] for i, w in enumerate(kernel))
    blurred = sum(w * rows[:, :, i:i + images.shape[2]] for i, w in enumerate(kernel))
    shifted = 60 + 0.55 * blurred + rng.normal(0.0, 12.0, blurred.shape)
    return np.clip(np.rint(shifted), 0, 255).astype(np.uint8)


def _splits(digits: np.ndarray, rng: np.random.Generator) -> dict[str, dict[str, np.ndarray]]:
    """Per task, the rows of each source: train, test (in-domain) and shifted."""
    grades = digits // 2
    order = rng.permutation(digits.size)
    quarter = digits.size // 4
    mild, severe = order[grades[order] <= 2], order[grades[order] > 2]
    third = mild.size // 3
    return {"digits_acquisition": {"train": order[2 * quarter:], "test": order[:quarter],
                                   "shifted": order[quarter:2 * quarter]},
            "digits_severity": {"train": mild[third:], "test": mild[:third],
                                "shifted": severe[:severe.size // 2]}}


def _write_source(folder: Path, images: np.ndarray, digits: np.ndarray) -> None:
    from PIL import Image
    folder.mkdir(parents=True)
    with open(folder / "labels.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image", "label", "grade"])
        for index, (image, digit) in enumerate(zip(images, digits)):
            name = f"digit_{index:04d}.png"
            Image.fromarray(image, mode="L").save(folder / name, optimize=False)
            grade = int(digit) // 2
            writer.writerow([name, int(grade >= REFERABLE_FROM_GRADE), grade])


def declaration(task: str) -> dict:
    sources = {part: {"layout": "csv", "labels": f"sources/{part}/labels.csv",
                      "folder": f"sources/{part}"} for part in ("train", "test", "shifted")}
    return {"task_type": "diagnosis", "shift": SHIFTS[task], "summary": SUMMARIES[task],
            "dataset": "scikit-learn's handwritten digits (UCI optdigits, CC BY 4.0)",
            "label": "referable: digit grade (digit // 2) of 2 or above",
            "images": {"size": IMAGE_SIZE, "channels": 1, "crop_border": False, "seed": 0,
                       "train": [sources["train"]],
                       "test": [{**sources["test"], "shifted": False},
                                {**sources["shifted"], "shifted": True}]}}


def write_sources(root: Path) -> list[Path]:
    """Each task's folder under ``root``: its declaration and its PNG sources, ready for
    ``convert``."""
    images, digits = digit_images()
    rng = np.random.default_rng(SEED)
    splits = _splits(digits, rng)
    folders = []
    for task in TASKS:
        folder = root / task
        rows = splits[task]
        pixels = {"train": images[rows["train"]], "test": images[rows["test"]],
                  "shifted": images[rows["shifted"]]}
        if task == "digits_acquisition":
            pixels["shifted"] = reacquired(pixels["shifted"], rng)
        for part, part_pixels in pixels.items():
            _write_source(folder / "sources" / part, part_pixels, digits[rows[part]])
        (folder / f"{task}_task.json").write_text(json.dumps(declaration(task), indent=1) + "\n")
        folders.append(folder)
    return folders


def generate(root: Path) -> list[str]:
    """The converted tasks in ``root`` (their sources made and converted in a temporary
    folder, then left out: the arrays stand for them)."""
    import shutil
    import tempfile
    from .images import convert
    with tempfile.TemporaryDirectory(prefix="retina-digits-") as scratch:
        for folder in write_sources(Path(scratch)):
            with open(os.devnull, "w") as quiet:
                convert(folder, workers=1, log=quiet)
            destination = root / folder.name
            destination.mkdir(parents=True, exist_ok=True)
            for path in sorted(folder.iterdir()):
                if path.is_file():
                    shutil.copyfile(path, destination / path.name)
    return list(TASKS)

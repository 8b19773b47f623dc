"""Converted Retina image tasks written straight into a data root, for tests that need a
task of a given size without decoding images (reference/images.py's convert is tested on
real files in test_retina_images.py)."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from kinds.retina.reference.images import images_settings

RETINA_EMBEDDED = Path(__file__).resolve().parents[3] / "kinds" / "retina" / "reference" / "embedded"


def declaration(size: int, channels: int) -> dict:
    source = {"layout": "csv", "labels": "sources/labels.csv", "folder": "sources"}
    return {"task_type": "diagnosis", "shift": "synthetic (a test)", "summary": "a test task",
            "images": {"size": size, "channels": channels, "crop_border": False,
                       "train": [source], "test": [{**source, "shifted": False}]}}


def write_image_task(root: Path, name: str, n_train: int, n_test: int, size: int,
                     channels: int = 3, seed: int = 0, shifted_fraction: float = 1 / 3) -> Path:
    """``root/name``: random uint8 images (written in chunks, never whole in memory), random
    grades 0-4 (referable from 2), a test set in random order with ``shifted_fraction`` of it
    shifted."""
    rng = np.random.default_rng(seed)
    folder = root / name
    folder.mkdir(parents=True)
    decl = declaration(size, channels)
    (folder / f"{name}_task.json").write_text(json.dumps(decl))
    arrays = {}
    for file, count in (("train_images.npy", n_train), ("test_images.npy", n_test)):
        images = np.lib.format.open_memmap(folder / file, mode="w+", dtype=np.uint8,
                                           shape=(count, size, size, channels))
        for start in range(0, count, 1024):
            stop = min(count, start + 1024)
            images[start:stop] = rng.integers(0, 256, (stop - start, size, size, channels),
                                              dtype=np.uint8)
        images.flush()
        del images
        arrays[file] = {"shape": [count, size, size, channels],
                        "bytes": (folder / file).stat().st_size}
    grades = rng.integers(0, 5, n_train)
    with open(folder / "train.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image", "label", "grade"])
        writer.writerows((f"image_{i}.png", int(g >= 2), int(g)) for i, g in enumerate(grades))
    test_grades = rng.integers(0, 5, n_test)
    shifted = rng.random(n_test) < shifted_fraction
    with open(folder / "test_reference.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["label", "grade", "shifted"])
        writer.writerows((int(g >= 2), int(g), int(s)) for g, s in zip(test_grades, shifted))
    settings, problems = images_settings(decl)
    assert not problems, problems
    (folder / "images_converted.json").write_text(json.dumps(
        {"format": 1, "settings": settings, "train": n_train, "test": n_test,
         "shifted": int(shifted.sum()), "skipped": [], "arrays": arrays}))
    return folder

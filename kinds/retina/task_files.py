"""A Retina task's files on the builder's side, in either of its two forms, behind one set of
methods: tables of features (``train.csv``, ``test.csv``) or images converted from their
original layouts (``train_images.npy``, ``test_images.npy``; reference/images.py writes them).
Both share the hidden ``test_reference.csv``. ``task_files(folder, declaration)`` gives the
right one; kind.py never asks which.
"""
from __future__ import annotations

import csv
import functools
import io
import json
import os
import shutil
from pathlib import Path

import numpy as np

from runtime.formats import FormatError

from .runtime import tables
from .runtime.participant import IMAGE_FILES

CONVERTED_RECORD = "images_converted.json"


def is_image_task(declaration: dict) -> bool:
    return "images" in declaration


@functools.lru_cache(maxsize=None)
def _cached(folder: Path, images: bool):
    return ImageFiles(folder) if images else TableFiles(folder)


def task_files(folder: Path, declaration: dict):
    """The task's files, each read once per build."""
    return _cached(Path(folder).resolve(), is_image_task(declaration))


def _npz(destination: Path, **arrays) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    destination.write_bytes(buffer.getvalue())


def link_or_copy(source: Path, destination: Path) -> None:
    """A hard link where the file system allows one (arrays of tens of GB are not copied per
    zip), else a copy."""
    try:
        os.link(source, destination)
    except OSError:
        shutil.copyfile(source, destination)


class TableFiles:
    """Feature columns: ``train.csv`` (features, label, grade) and ``test.csv``."""
    inputs = "features"

    def __init__(self, folder: Path):
        self.folder = folder
        train = tables.columns(folder / tables.TRAIN_FILE, tables.TARGET_COLUMNS)
        self.test_header, self.x_test = tables.read_table(folder / tables.FEATURES_FILE)
        self.features = [name for name in train if name not in tables.TARGET_COLUMNS]
        self.x_train = np.column_stack([train[name] for name in self.features])
        self.labels = train["label"].astype(np.int64)
        self.grades = train["grade"].astype(np.int64)
        self.reference = tables.reference(folder / tables.REFERENCE_FILE)
        self.n_test = len(self.x_test)

    def contract(self, name: str) -> dict:
        return {"n_test": self.n_test, "feature_names": self.features}

    def description(self) -> str:
        return f"{len(self.features)} features"

    def stage_inputs(self, name: str, destination: Path) -> None:
        _npz(destination / f"{name}_inputs.npz", x_train=self.x_train, y_train=self.labels,
             grades_train=self.grades, x_test=self.x_test)

    def stage_public(self, name: str, destination: Path) -> None:
        for file in (tables.TRAIN_FILE, tables.FEATURES_FILE):
            shutil.copyfile(self.folder / file, destination / f"{name}_{file}")

    def x_train_and_test(self) -> tuple[np.ndarray, np.ndarray]:
        return self.x_train, self.x_test

    def write_stand_in(self, folder: Path, kept, held, shifted) -> None:
        header = ",".join(self.features)
        np.savetxt(folder / tables.TRAIN_FILE,
                   np.column_stack([self.x_train[kept], self.labels[kept], self.grades[kept]]),
                   fmt="%.10g", delimiter=",", header=header + ",label,grade", comments="")
        np.savetxt(folder / tables.FEATURES_FILE, self.x_train[held], fmt="%.10g",
                   delimiter=",", header=header, comments="")
        self._write_reference(folder, held, shifted)

    def _write_reference(self, folder: Path, held, shifted) -> None:
        np.savetxt(folder / tables.REFERENCE_FILE,
                   np.column_stack([self.labels[held], self.grades[held], shifted]), fmt="%d",
                   delimiter=",", header=",".join(tables.REFERENCE_COLUMNS), comments="")

    def problems(self, declaration: dict) -> list[str]:
        column = _column_problem(self.test_header, self.features)
        return [f"{self.folder / tables.FEATURES_FILE}: {column}"] if column else []


class ImageFiles(TableFiles):
    """Images converted by ``python -m reference_data --kind retina convert``: uint8 arrays
    (n, H, W, C) and ``train.csv`` of ``image,label,grade`` (the image's source name)."""
    inputs = "images"

    def __init__(self, folder: Path):
        from .reference.images import read_header
        self.folder = folder
        self.names, self.labels, self.grades = _image_rows(folder / tables.TRAIN_FILE)
        self.reference = tables.reference(folder / tables.REFERENCE_FILE)
        self.n_test = self.reference["label"].size
        self.shapes = {}
        for name in IMAGE_FILES:
            path = folder / name
            if not path.is_file():
                raise FormatError(f"{path}: file does not exist (run `python -m reference_data "
                                  f"--kind retina convert {folder}`)")
            self.shapes[name] = read_header(path)[0]
        self.skipped = _skipped(folder / CONVERTED_RECORD)

    @property
    def image_shape(self) -> tuple[int, ...]:
        return tuple(self.shapes[IMAGE_FILES[0]][1:])

    def contract(self, name: str) -> dict:
        return {"n_test": self.n_test, "inputs": "images", "image_shape": list(self.image_shape),
                "image_files": {file: f"{name}_{file}" for file in IMAGE_FILES},
                # the child maps both arrays: under RLIMIT_AS they count in full
                "mapped_bytes": sum((self.folder / file).stat().st_size for file in IMAGE_FILES)}

    def description(self) -> str:
        """The images' shape, and how many the convert left out as unreadable (skip mode):
        participants see what the task lost."""
        shape = "images " + " x ".join(map(str, self.image_shape))
        return shape + (f"; {self.skipped} unreadable image(s) left out" if self.skipped else "")

    def stage_inputs(self, name: str, destination: Path) -> None:
        _npz(destination / f"{name}_inputs.npz", y_train=self.labels, grades_train=self.grades)
        for file in IMAGE_FILES:
            link_or_copy(self.folder / file, destination / f"{name}_{file}")

    def stage_public(self, name: str, destination: Path) -> None:
        shutil.copyfile(self.folder / tables.TRAIN_FILE, destination / f"{name}_{tables.TRAIN_FILE}")

    def images(self, file: str) -> np.ndarray:
        return np.load(self.folder / file, mmap_mode="r", allow_pickle=False)

    def x_train_and_test(self) -> tuple[np.ndarray, np.ndarray]:
        return tuple(self.images(file) for file in IMAGE_FILES)

    def write_stand_in(self, folder: Path, kept, held, shifted) -> None:
        for file, rows in zip(IMAGE_FILES, (kept, held)):
            copy_rows(self.folder / IMAGE_FILES[0], rows, folder / file)
        with open(folder / tables.TRAIN_FILE, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["image", "label", "grade"])
            writer.writerows(zip(np.asarray(self.names)[kept], self.labels[kept],
                                 self.grades[kept]))
        self._write_reference(folder, held, shifted)
        record = json.loads((self.folder / CONVERTED_RECORD).read_text())
        record.update(train=int(len(kept)), test=int(len(held)), shifted=int(np.sum(shifted)),
                      skipped=[], arrays={file: {"shape": [len(rows), *self.image_shape],
                                                 "bytes": (folder / file).stat().st_size}
                                          for file, rows in zip(IMAGE_FILES, (kept, held))})
        (folder / CONVERTED_RECORD).write_text(json.dumps(record, indent=1))

    def problems(self, declaration: dict) -> list[str]:
        from .reference.images import converted_problems
        return converted_problems(self.folder, declaration)


def copy_rows(source: Path, rows, path: Path, chunk_bytes: int = 64 * 2**20) -> None:
    """Rows ``rows`` of the .npy file ``source`` (C order) written to the .npy file ``path``,
    read row by row with pread and written a chunk at a time: never mapped, since a map of
    rows drawn across a file brings most of the file's pages into resident memory (the
    kernel reads ahead around each), and a stand-in of 35,000 photographs would count whole."""
    from .reference.images import array_layout
    rows = np.asarray(rows, dtype=np.int64)
    shape, dtype, fortran, start_of_data = array_layout(source)
    with open(source, "rb") as handle:
        row_bytes = int(np.prod(shape[1:])) * dtype.itemsize
        header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": fortran,
                  "shape": (rows.size, *shape[1:])}
        step = max(1, chunk_bytes // max(1, row_bytes))
        with open(path, "wb") as out:
            np.lib.format.write_array_header_1_0(out, header)
            for first in range(0, rows.size, step):
                out.write(b"".join(os.pread(handle.fileno(), row_bytes,
                                            start_of_data + int(row) * row_bytes)
                                   for row in rows[first:first + step]))


def _skipped(record: Path) -> int:
    """The images convert left out (skip mode), from its record; 0 without a record (the
    build's check names a missing one)."""
    try:
        return len(json.loads(record.read_text()).get("skipped", []))
    except (OSError, ValueError, AttributeError):
        return 0


def _image_rows(path: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``image,label,grade`` rows: the names, labels 0/1 and integer grades; FormatError
    names the line and column of the first bad value."""
    if not path.is_file():
        raise FormatError(f"{path}: file does not exist")
    with open(path, newline="", encoding="utf-8") as handle:
        rows = [row for row in csv.reader(handle) if row]
    if not rows or [cell.strip() for cell in rows[0]] != ["image", "label", "grade"]:
        raise FormatError(f"{path}: line 1 should be the header image,label,grade")
    names, labels, grades = [], [], []
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != 3 or row[1].strip() not in ("0", "1") \
                or not row[2].strip().lstrip("-").isdigit():
            raise FormatError(f"{path}: line {line}: expected image,label (0 or 1),grade "
                              f"(an integer), found {','.join(row)}")
        names.append(row[0])
        labels.append(int(row[1]))
        grades.append(int(row[2]))
    if not names:
        raise FormatError(f"{path}: no data rows after the header")
    return names, np.asarray(labels, np.int64), np.asarray(grades, np.int64)


def _column_problem(found: list[str], expected: list[str]) -> str | None:
    """The first column of test.csv that differs from train.csv's features."""
    for position, (name, wanted) in enumerate(zip(found, expected), start=1):
        if name != wanted:
            return (f"column {position} is {name!r}; expected {wanted!r} (column {position} of "
                    f"{tables.TRAIN_FILE}: the same feature columns, same order)")
    if len(found) > len(expected):
        return (f"column {len(expected) + 1} is {found[len(expected)]!r}; expected no column "
                f"after {expected[-1]!r} (test.csv holds {tables.TRAIN_FILE}'s feature columns "
                "only: the labels stay in test_reference.csv)")
    if len(found) < len(expected):
        return (f"{len(found)} columns; expected {len(expected)}: column {len(found) + 1} "
                f"({expected[len(found)]!r}, as in {tables.TRAIN_FILE}) is missing")
    return None

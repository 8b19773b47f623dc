"""Convert a Retina image task from the organizer's sources into the arrays the build stages.

    python -m reference_data --kind retina convert <task folder> [--workers N]

The task folder holds ``<task>_task.json`` with an ``images`` section naming label files and
image folders in their original layouts (Kaggle EyePACS, APTOS 2019, or a plain csv). Every
listed image is decoded with Pillow, cropped to its retina's disc (``disc_box``), padded to a
square, resized to ``size`` x ``size`` and written, with the tables that describe it, into the
task folder:

    train_images.npy, train.csv, test_images.npy, test_reference.csv, test_sources.csv,
    images_converted.json

All problems are collected, one line each naming the file and the row, before anything is
put in place (the images' modes are read from their headers before any image is decoded); the files are written in a temporary folder inside the task folder and moved
into place only when every check passed, so a failed convert leaves the folder as it was.
The build reads back only headers and row counts (``converted_problems``), never pixels.
``docs/retina_images.md`` is the organizer's guide.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import multiprocessing
import os
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

CONVERTED = "images_converted.json"
TRAIN_IMAGES, TEST_IMAGES = "train_images.npy", "test_images.npy"
TRAIN_TABLE, REFERENCE_TABLE, SOURCES_TABLE = "train.csv", "test_reference.csv", "test_sources.csv"
OUTPUTS = (TRAIN_IMAGES, TEST_IMAGES, TRAIN_TABLE, REFERENCE_TABLE, SOURCES_TABLE)
FORMAT = 1
GRADES = (0, 1, 2, 3, 4)
MODES = {3: "RGB", 1: "L"}
DEFAULTS = {"channels": 3, "crop_border": True, "border_threshold": 10, "unreadable": "stop",
            "referable_from_grade": 2, "seed": 0}
SECTION_KEYS = ("size", *DEFAULTS, "train", "test")
SOURCE_KEYS = ("layout", "labels", "folder", "grades", "shifted", "share")
# JPEG's DCT scaling keeps the shorter side at least this many times the target side, so
# the retina (most of the shorter side) is still downscaled, never blown up, by the resize.
DRAFT_MARGIN = 2
# Pillow first box-reduces by an integer factor while the image stays this many times the
# target: much faster than a bilinear filter over a 4,000-pixel-wide source, and as close.
REDUCING_GAP = 3.0
# Images per task sent to a worker, and tasks in flight per worker: the decoded images held
# in memory at once stay below workers x CHUNK x IN_FLIGHT, whatever the number of images.
CHUNK = 8
IN_FLIGHT = 4
COPY_BLOCK = 64
# EyePACS names a patient's photographs <patient>_left and <patient>_right
EYE = re.compile(r"(?P<patient>.+)_(left|right)", re.IGNORECASE)
# Images named one per line in a refusal of bad headers, and patients in the eye-pair warning
HEADERS_SHOWN = 20
# The disc is searched on a copy reduced to at most this many pixels a side: pixel noise
# averages out, and the search costs a few milliseconds whatever the photograph's size.
DISC_SEARCH_SIDE = 320
# The disc's edge is where the brightness rises this share of the way from the background to
# the disc's middle: well below a retina's dim rim, well above faint noise or a grey frame.
DISC_LEVEL = 0.25
# Square opening, as a share of the reduced copy's shorter side: removes a camera's notch or a
# label's strokes joined to the disc, keeps the disc (a disc is unchanged by a smaller square).
DISC_OPENING = 0.03
# Reduced pixels either side of the region's edge searched at full resolution for the disc's
# edge: covers the reduced copy's rounding and the blur.
DISC_MARGIN = 2
# At least this many full-resolution pixels either side of the region's edge are searched
# for the disc's own edge: JPEG's ringing, which the crop always kept, stays within the
# 8 x 8 block of the edge.
EDGE_PIXELS = 8


def _rerun(folder: Path) -> str:
    return f"run `python -m reference_data --kind retina convert {folder}`"


class ConvertError(Exception):
    """The problems that stopped a convert, one line each."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


# --- the images section --------------------------------------------------------------------

@dataclass(frozen=True)
class Layout:
    name_column: str
    grade_column: str
    label_column: str | None
    suffix: str | None          # appended to the name column; None: the name is the file name
    extensions: tuple[str, ...]  # files in the folder that a row should name


LAYOUTS = {
    "eyepacs": Layout("image", "level", None, ".jpeg", (".jpeg",)),
    "aptos": Layout("id_code", "diagnosis", None, ".png", (".png",)),
    "csv": Layout("image", "grade", "label", None, (".jpeg", ".jpg", ".png")),
}


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_problem(where: str, value, low: int, high: int | None) -> list[str]:
    if not _is_int(value):
        return [f"{where}: {value!r} is not an integer"]
    if value < low or (high is not None and value > high):
        return [f"{where}: {value} is outside {low}..{'' if high is None else high}"]
    return []


def _choice_problem(where: str, value, choices) -> list[str]:
    if value in choices and not isinstance(value, bool):
        return []
    return [f"{where}: {value!r} is not one of {', '.join(map(str, choices))}"]


def _unknown_keys(where: str, given: dict, known) -> list[str]:
    return [f"{where}.{key}: unknown key (known: {', '.join(known)})"
            for key in given if key not in known]


def _source_settings(where: str, source, split: str) -> tuple[dict, list[str]]:
    """One SOURCE with its defaults filled (``grades`` all five; ``shifted`` False in
    training, None for a csv test source whose rows carry a ``shifted`` column)."""
    if not isinstance(source, dict):
        return {}, [f"{where}: expected an object with keys {', '.join(SOURCE_KEYS)}"]
    problems = _unknown_keys(where, source, SOURCE_KEYS)
    problems += _choice_problem(f"{where}.layout", source.get("layout"), LAYOUTS)
    for key in ("labels", "folder"):
        if not isinstance(source.get(key), str) or not source.get(key):
            problems.append(f"{where}.{key}: expected a path (a string), got "
                            f"{source.get(key)!r}")
    grades = source.get("grades", list(GRADES))
    if not isinstance(grades, list) or not grades or any(
            not _is_int(grade) or grade not in GRADES for grade in grades):
        problems.append(f"{where}.grades: {grades!r} is not a list of grades 0-4")
        grades = list(GRADES)
    shifted = source.get("shifted", None if split == "test" else False)
    if split == "train" and shifted is not False:
        problems.append(f"{where}.shifted: training sources are never shifted, got {shifted!r}")
    elif shifted is None and split == "test" and source.get("layout") != "csv":
        problems.append(f"{where}.shifted: required (true or false) for the "
                        f"{source.get('layout')} layout")
    elif shifted is not None and not isinstance(shifted, bool):
        problems.append(f"{where}.shifted: {shifted!r} is not true or false")
    filled = {"layout": source.get("layout"), "labels": source.get("labels"),
              "folder": source.get("folder"), "grades": sorted(set(grades)), "shifted": shifted}
    share = source.get("share", [0, 1])
    problems += _share_problem(f"{where}.share", share)
    if share != [0, 1]:      # the whole file: left out, as if not given
        filled["share"] = share
    return filled, problems


def _share_problem(where: str, share) -> list[str]:
    if isinstance(share, list) and len(share) == 2 and all(
            isinstance(end, (int, float)) and not isinstance(end, bool) for end in share) \
            and 0 <= share[0] < share[1] <= 1:
        return []
    return [f"{where}: {share!r} is not [from, to] with 0 <= from < to <= 1"]


def images_settings(declaration: dict) -> tuple[dict, list[str]]:
    """The declaration's ``images`` section with every default filled, and its problems (each
    naming the key, e.g. ``images.test[1].layout``); the settings are meaningful only when
    there are no problems. Equal sections give equal settings, whatever the defaults left out."""
    section = declaration.get("images") if isinstance(declaration, dict) else None
    if not isinstance(section, dict):
        return {}, ["images: the declaration has no images section (an object)"]
    problems = _unknown_keys("images", section, SECTION_KEYS)
    settings = {**DEFAULTS, **{key: section[key] for key in SECTION_KEYS if key in section}}
    problems += _scalar_problems(settings, section)
    for split in ("train", "test"):
        sources = section.get(split)
        if not isinstance(sources, list) or not sources:
            problems.append(f"images.{split}: expected a non-empty list of sources")
            settings[split] = []
            continue
        filled = [_source_settings(f"images.{split}[{index}]", source, split)
                  for index, source in enumerate(sources)]
        settings[split] = [source for source, _ in filled]
        problems += [problem for _, found in filled for problem in found]
    return settings, problems


def _scalar_problems(settings: dict, section: dict) -> list[str]:
    problems = []
    if "size" not in section:
        problems.append("images.size: required (the side in pixels, 8..1024)")
    else:
        problems += _int_problem("images.size", settings["size"], 8, 1024)
    problems += _choice_problem("images.channels", settings["channels"], tuple(MODES))
    if not isinstance(settings["crop_border"], bool):
        problems.append(f"images.crop_border: {settings['crop_border']!r} is not true or false")
    problems += _int_problem("images.border_threshold", settings["border_threshold"], 0, 255)
    problems += _choice_problem("images.unreadable", settings["unreadable"], ("stop", "skip"))
    problems += _int_problem("images.referable_from_grade", settings["referable_from_grade"],
                             1, 4)
    problems += _int_problem("images.seed", settings["seed"], 0, None)
    return problems


# --- the label files -----------------------------------------------------------------------

@dataclass
class Row:
    """One image to convert: its file, its targets, and where it was listed."""
    path: Path
    image: str        # the file name relative to the source's folder
    label: int
    grade: int
    shifted: bool
    labels: Path      # the label file that lists it...
    line: int         # ...on this line
    source: str       # "train[0]", "test[1]"
    folder: str       # the source's folder as declared

    @property
    def where(self) -> str:
        return f"{self.labels}, line {self.line}"


@dataclass
class Listing:
    train: list[Row]
    test: list[Row]   # in the order of test_images: pooled, then shuffled


def _grade(text: str) -> tuple[int | None, str]:
    text = text.strip()
    if not re.fullmatch(r"[+-]?\d+", text):
        return None, f"grade {text!r} is not an integer"
    if int(text) not in GRADES:
        return None, f"grade {int(text)} is outside 0-4"
    return int(text), ""


def _flag(text: str, what: str) -> tuple[int | None, str]:
    value = {"0": 0, "1": 1, "false": 0, "true": 1}.get(text.strip().lower())
    return (value, "") if value is not None else (None, f"{what} {text!r} is not 0 or 1")


def _read_csv(path: Path) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """(header, [(line number, fields)]) of a utf-8 csv file, blank lines left out; raises
    ConvertError with one line naming the file when it cannot be read as csv."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            rows = [(reader.line_num, row) for row in reader]
    except FileNotFoundError:
        raise ConvertError([f"{path}: label file does not exist"]) from None
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise ConvertError([f"{path}: cannot be read as a utf-8 csv file ({error})"]) from None
    rows = [(line, row) for line, row in rows if any(field.strip() for field in row)]
    if not rows:
        raise ConvertError([f"{path}: empty, expected a header row"])
    return [name.strip() for name in rows[0][1]], rows[1:]


def _row_targets(layout: Layout, fields: dict, settings: dict,
                 shifted: bool | None) -> tuple[tuple | None, list[str]]:
    """(label, grade, shifted) of one labels row, or None and what is wrong with it."""
    grade, wrong = _grade(fields[layout.grade_column])
    problems = [wrong] if wrong else []
    label = None if grade is None else int(grade >= settings["referable_from_grade"])
    if layout.label_column:
        label, wrong = _flag(fields[layout.label_column], "label")
        problems += [wrong] if wrong else []
    if shifted is None:
        shifted, wrong = _flag(fields["shifted"], "shifted")
        problems += [wrong] if wrong else []
    return (None if problems else (label, grade, bool(shifted))), problems


class Folders:
    """The files directly in each image folder, listed once, and the names that rows give."""

    def __init__(self):
        self.files: dict[Path, set[str]] = {}
        self.named: dict[Path, set[str]] = {}

    def listing(self, folder: Path) -> set[str]:
        key = folder.resolve()
        if key not in self.files:
            with os.scandir(folder) as entries:
                self.files[key] = {entry.name for entry in entries if entry.is_file()}
            self.named[key] = set()
        return self.files[key]

    def exists(self, folder: Path, name: str) -> bool:
        return name in self.listing(folder) or ("/" in name and (folder / name).is_file())

    def name(self, folder: Path, name: str) -> None:
        self.named[folder.resolve()].add(name)


def _source_problems(labels: Path, header: list[str], folder: Path, source: dict,
                     where: str) -> list[str]:
    layout = LAYOUTS[source["layout"]]
    needed = [layout.name_column, layout.grade_column] + (
        [layout.label_column] if layout.label_column else [])
    if source["shifted"] is None:
        needed.append("shifted")
    problems = [] if set(needed) <= set(header) else [
        f"{labels}: header has columns {', '.join(header) or '(none)'}; the "
        f"{source['layout']} layout needs {', '.join(needed)}"
        + (" (or the source's \"shifted\" key)" if "shifted" in needed else "")]
    if source["shifted"] is not None and source["layout"] == "csv" and "shifted" in header:
        problems.append(f"{labels}: has a shifted column and {where} a \"shifted\" key: "
                        "give one of them")
    if not folder.is_dir():
        problems.append(f"{folder}: image folder does not exist ({where}.folder)")
    return problems


def _row(values: dict, place: str, source: dict, settings: dict,
         folder: Path, folders: Folders) -> tuple[tuple | None, list[str]]:
    """(file name, label, grade, shifted) of a row its source keeps (None for one that its
    ``grades`` leave out or that has problems), and the row's problems."""
    layout = LAYOUTS[source["layout"]]
    image = values[layout.name_column].strip()
    file_name = image + (layout.suffix or "")
    folders.name(folder, file_name)
    targets, wrong = _row_targets(layout, values, settings, source["shifted"])
    problems = [f"{place}: image {image}: {what}" for what in wrong]
    if targets is None or targets[1] not in source["grades"] or not _in_share(image, source):
        return None, problems
    if not folders.exists(folder, file_name):
        return None, [f"{place}: image {image}: {folder / file_name} does not exist"]
    return (file_name, *targets), problems


def _in_share(image: str, source: dict) -> bool:
    """Whether the row of ``image`` falls in its source's ``share``: its patient (the name
    without ``_left``/``_right`` and extension, so that both eyes fall together) hashed to a
    point of [0, 1). The point depends on the name alone, not on the file's order or its other
    rows, so that sources that read one label file with shares that do not overlap never
    share a patient."""
    start, stop = source.get("share", (0, 1))
    if (start, stop) == (0, 1):
        return True
    stem = Path(image).name.split(".")[0]
    eye = EYE.fullmatch(stem)
    patient = str(Path(image).parent / (eye["patient"] if eye else stem))
    point = int.from_bytes(hashlib.sha256(patient.encode("utf-8")).digest()[:8], "big") / 2 ** 64
    return start <= point < stop


def _source_rows(task: Path, source: dict, where: str, settings: dict,
                 folders: Folders) -> tuple[list[Row], list[str]]:
    """The rows of one source that its ``grades`` keep, and every problem of its label file
    and folder; tells ``folders`` every file name that a row gives."""
    labels, folder = task / source["labels"], task / source["folder"]
    if labels.resolve() in {(task / name).resolve() for name in OUTPUTS + (CONVERTED,)}:
        return [], [f"{where}.labels: {labels} is a file that convert writes: move the label "
                    "file into a folder of its own"]
    try:
        header, lines = _read_csv(labels)
    except ConvertError as error:
        return [], error.problems
    problems = _source_problems(labels, header, folder, source, where)
    if problems:
        return [], problems
    try:
        folders.listing(folder)
    except OSError as error:
        return [], [f"{folder}: cannot list the image folder ({error.strerror or error})"]
    seen: dict[str, int] = {}
    rows = []
    for line, fields in lines:
        place = f"{labels}, line {line}"
        values = dict(zip(header, fields))
        image = values.get(LAYOUTS[source["layout"]].name_column, "").strip()
        if len(fields) != len(header):
            problems.append(f"{place}: {len(fields)} fields, the header has {len(header)}")
        elif image in seen:
            problems.append(f"{place}: image {image} also on line {seen[image]}")
        else:
            seen[image] = line
            kept, wrong = _row(values, place, source, settings, folder, folders)
            problems += wrong
            if kept:
                rows.append(Row(folder / kept[0], *kept, labels, line,
                                where.removeprefix("images."), source["folder"]))
    return rows, problems


def _unnamed_files(task: Path, settings: dict, folders: Folders) -> list[str]:
    """A line for each image file in a source's folder that no row of the label files
    pointing at that folder names."""
    sources: dict[Path, list[dict]] = {}
    for source in settings["train"] + settings["test"]:
        sources.setdefault((task / source["folder"]).resolve(), []).append(source)
    problems = []
    for key, group in sources.items():
        if key not in folders.files:
            continue
        extensions = {ext for source in group for ext in LAYOUTS[source["layout"]].extensions}
        label_files = " or ".join(sorted({str(task / source["labels"]) for source in group}))
        stray = sorted(name for name in folders.files[key] - folders.named[key]
                       if Path(name).suffix.lower() in extensions)
        folder = task / group[0]["folder"]
        problems += [f"{folder / name}: no row of {label_files} names it" for name in stray]
    return problems


def _balance_problems(train: list[Row], test: list[Row]) -> list[str]:
    problems = []
    for what, rows in (("training rows", train),
                       ("in-domain test rows", [row for row in test if not row.shifted])):
        labels = {row.label for row in rows}
        if labels != {0, 1}:
            problems.append(f"images: the {what} need both labels 0 and 1, they have "
                            + (f"label {labels.pop()} only" if labels else "none"))
    if not any(row.shifted for row in test):
        problems.append("images.test: no shifted test row")
    return problems


def list_sources(task: Path, settings: dict) -> Listing:
    """Every row to convert, train in the label files' order and test pooled then shuffled
    with ``default_rng(seed).permutation``; raises ConvertError with every problem of the
    label files and folders (no image is opened here)."""
    folders = Folders()
    found, problems = {}, []
    for split in ("train", "test"):
        found[split] = []
        for index, source in enumerate(settings[split]):
            rows, wrong = _source_rows(task, source, f"images.{split}[{index}]", settings,
                                       folders)
            found[split] += rows
            problems += wrong
    problems += _unnamed_files(task, settings, folders)
    if not problems:
        problems += _balance_problems(found["train"], found["test"])
    if problems:
        raise ConvertError(problems)
    order = np.random.default_rng(settings["seed"]).permutation(len(found["test"]))
    return Listing(found["train"], [found["test"][index] for index in order])


def header_problems(listing: Listing, channels: int) -> list[str]:
    """A line for each image whose header shows it cannot be converted (``header_problem``),
    the first HEADERS_SHOWN of them, then one line with the count of the rest: read before
    any image is decoded, so that a folder of RGBA PNGs is refused in seconds."""
    bad = []
    for row in listing.train + listing.test:
        why = header_problem(row.path, channels)
        if why:
            bad.append(f"{row.path} ({row.where}): {why}")
    if len(bad) <= HEADERS_SHOWN:
        return bad
    return bad[:HEADERS_SHOWN] + [
        f"... and {len(bad) - HEADERS_SHOWN:,} more images like these ({len(bad):,} in all): "
        f"channels {channels} needs mode {MODES[channels]} images that Pillow can read; "
        "convert them first, or leave them out with \"unreadable\": \"skip\""]


# --- the two eyes of a patient -------------------------------------------------------------

def _patient(row: Row) -> tuple[Path, str] | None:
    """(folder, patient) of an image named ``<patient>_left`` or ``<patient>_right`` (any
    extension), as EyePACS names its photographs; None for other names. The folder is part
    of the patient: another folder may be another dataset numbering its patients anew."""
    eye = EYE.fullmatch(Path(row.image).name.split(".")[0])
    return (row.path.parent, eye["patient"]) if eye else None


def _split_part(row: Row, training: bool) -> str:
    return "training" if training else ("shifted test" if row.shifted else "in-domain test")


def eye_pair_warning(listing: Listing) -> str:
    """One line naming the patients whose two eyes fall on both sides of a split (training and
    test, or in-domain and shifted test), "" when none do: the eyes of one patient look
    alike and share the patient's disease, so the test would score a model partly on
    patients it trained on."""
    parts: dict[tuple[Path, str], set[str]] = {}
    for training, rows in ((True, listing.train), (False, listing.test)):
        for row in rows:
            patient = _patient(row)
            if patient:
                parts.setdefault(patient, set()).add(_split_part(row, training))
    split = sorted(((folder, name), found) for (folder, name), found in parts.items()
                   if len(found) > 1)
    if not split:
        return ""
    named = [f"{name} in {folder} ({', '.join(sorted(found))})"
             for (folder, name), found in split[:HEADERS_SHOWN]]
    more = f" and {len(split) - HEADERS_SHOWN:,} more" if len(split) > HEADERS_SHOWN else ""
    return (f"warning: {len(split):,} patients have one eye on each side of a split, so the "
            f"test partly scores a model on patients it trained on: {'; '.join(named)}{more}. "
            "Split by patient to avoid it (a source's \"share\" does).")


# --- decoding ------------------------------------------------------------------------------

class Decoding(NamedTuple):
    size: int
    channels: int
    crop_border: bool
    border_threshold: int


UNIDENTIFIED = "cannot decode: Pillow cannot identify it as an image"


class Decoded(NamedTuple):
    sha256: str               # "" when the file could not be read
    pixels: np.ndarray | None  # (size, size, channels) uint8, None on failure
    why: str                  # "" on success


def _brightness(image, factor: int) -> np.ndarray:
    """The brightest channel of ``image`` box-reduced by ``factor``, lightly blurred: pixel
    noise averages out, the disc's edge stays within a reduced pixel."""
    from scipy.ndimage import gaussian_filter
    small = np.asarray(image.reduce(factor) if factor > 1 else image, dtype=np.float32)
    return gaussian_filter(small.max(axis=2) if small.ndim == 3 else small, sigma=1.0)


def _levels(brightness: np.ndarray, border_threshold: int) -> tuple[float, float]:
    """(background, disc edge) levels: the background is the median of the outermost rows and
    columns, the disc the median of the middle half each way, and its edge lies DISC_LEVEL of
    the way between, never below ``border_threshold``. A frame as bright as half the disc is
    no background (the disc fills the picture): it counts as black."""
    height, width = brightness.shape
    disc = float(np.median(brightness[height // 4:height - height // 4,
                                      width // 4:width - width // 4]))
    frame = np.concatenate([brightness[0], brightness[-1], brightness[:, 0], brightness[:, -1]])
    background = float(np.median(frame))
    if background >= 0.5 * disc:
        background = 0.0
    return background, max(float(border_threshold),
                           background + DISC_LEVEL * (disc - background))


def _largest_region(mask: np.ndarray) -> tuple[np.ndarray, int, int] | None:
    """The largest connected region of ``mask`` once opened by a square (which cuts a notch or
    a thin stroke off the disc): its own mask within its bounding box, and the box's top row
    and left column; None when the mask is empty."""
    from scipy.ndimage import find_objects, label, maximum_filter, minimum_filter
    side = round(DISC_OPENING * min(mask.shape))
    if side >= 2:
        opened = maximum_filter(minimum_filter(mask.astype(np.uint8), size=side), size=side)
        mask = opened.astype(bool) if opened.any() else mask
    regions, count = label(mask, structure=np.ones((3, 3)))
    if count == 0:
        return None
    largest = int(np.argmax(np.bincount(regions.ravel())[1:])) + 1
    rows, columns = find_objects(regions)[largest - 1]
    return regions[rows, columns] == largest, rows.start, columns.start


def _box_above(image, box: tuple[int, int, int, int], threshold: float):
    """The box of the pixels in ``box`` with a channel above ``threshold`` (None if none)."""
    level = min(255, int(threshold))
    table = [0] * (level + 1) + [255] * (255 - level)
    inside = image.crop(box).point(table * len(image.getbands())).getbbox()
    return inside and (box[0] + inside[0], box[1] + inside[1], box[0] + inside[2],
                       box[1] + inside[3])


def _edge_strips(region: np.ndarray, top: int, left: int, band: int):
    """Per side of the region (left, top, right, bottom), the strip of the reduced copy, as a
    (left, top, right, bottom) box, that holds the disc's edge there: ``band`` pixels either
    side of the region's edge, along the stretch where the region comes within ``band`` of
    it. A label in a corner of the region's box lies outside every strip."""
    height, width = region.shape
    near_left, near_right = region[:, :band].any(axis=1), region[:, -band:].any(axis=1)
    near_top, near_bottom = region[:band].any(axis=0), region[-band:].any(axis=0)

    def span(near):
        found = np.flatnonzero(near)
        return found[0] - band, found[-1] + 1 + band

    return [(left - band, top + span(near_left)[0], left + band, top + span(near_left)[1]),
            (left + span(near_top)[0], top - band, left + span(near_top)[1], top + band),
            (left + width - band, top + span(near_right)[0], left + width + band,
             top + span(near_right)[1]),
            (left + span(near_bottom)[0], top + height - band, left + span(near_bottom)[1],
             top + height + band)]


def disc_box(image, threshold: int) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of the retina's disc in a decoded picture: the largest bright
    region of a reduced, blurred copy, thresholded relative to the disc's own brightness (so
    that faint noise, a grey frame, a corner label or a notch do not count), its edges then
    found at full resolution in a strip along each side: the outermost pixel with a channel
    above ``threshold`` on a black background (on a clean disc, the box of every such pixel,
    as the crop always was), above the disc's relative level on a brighter one. The whole
    picture when nothing is bright."""
    width, height = image.size
    factor = max(1, math.ceil(max(width, height) / DISC_SEARCH_SIDE))
    brightness = _brightness(image, factor)
    background, level = _levels(brightness, threshold)
    found = _largest_region(brightness > level)
    if found is None:
        return 0, 0, width, height
    region, top, left = found
    edge_level = threshold if background < threshold else level
    band = max(DISC_MARGIN, math.ceil(EDGE_PIXELS / factor))
    box = [left * factor, top * factor, (left + region.shape[1]) * factor,
           (top + region.shape[0]) * factor]
    for side, strip in enumerate(_edge_strips(region, top, left, band)):
        strip = (max(0, strip[0] * factor), max(0, strip[1] * factor),
                 min(width, strip[2] * factor), min(height, strip[3] * factor))
        edge = _box_above(image, strip, edge_level)
        if edge:
            box[side] = edge[side]
    return box[0], box[1], min(box[2], width), min(box[3], height)


def _crop_border(image, threshold: int):
    """The picture cropped to its retina's disc (``disc_box``)."""
    box = disc_box(image, threshold)
    return image if box == (0, 0, *image.size) else image.crop(box)


def _square(image):
    width, height = image.size
    if width == height:
        return image
    from PIL import Image
    side = max(width, height)
    canvas = Image.new(image.mode, (side, side), 0)
    canvas.paste(image, ((side - width) // 2, (side - height) // 2))
    return canvas


def pixels(stream, decoding: Decoding) -> np.ndarray:
    """The image in ``stream`` as a (size, size, channels) uint8 array: border cropped (if
    asked), padded to a centred square with black, resized bilinearly. Raises ValueError for
    an image of another mode than the channels ask, and Pillow's errors for a bad file."""
    from PIL import Image
    mode = MODES[decoding.channels]
    with Image.open(stream) as image:
        if image.mode != mode:
            raise ValueError(_mode_problem(image.mode, decoding.channels))
        if image.format == "JPEG":
            image.draft(mode, (DRAFT_MARGIN * decoding.size,) * 2)
        image.load()
        if decoding.crop_border:
            image = _crop_border(image, decoding.border_threshold)
        image = _square(image).resize((decoding.size, decoding.size),
                                      Image.Resampling.BILINEAR, reducing_gap=REDUCING_GAP)
    return np.asarray(image, dtype=np.uint8).reshape(decoding.size, decoding.size,
                                                     decoding.channels)


def _mode_problem(mode: str, channels: int) -> str:
    return "" if mode == MODES[channels] else \
        f"mode {mode}, channels {channels} needs mode {MODES[channels]}"


def header_problem(path: Path, channels: int) -> str:
    """What is wrong with an image file that its header shows ("" when nothing): a file that
    cannot be read, that Pillow cannot identify, or of another mode than ``channels`` asks.
    Pillow's ``open`` reads the header only, never the pixels."""
    from PIL import Image, UnidentifiedImageError
    try:
        handle = open(path, "rb")
    except OSError as error:
        return f"cannot read: {error.strerror or error}"
    with handle:
        try:
            with Image.open(handle) as image:
                return _mode_problem(image.mode, channels)
        except UnidentifiedImageError:
            return UNIDENTIFIED
        except Exception as error:  # Pillow raises OSError, SyntaxError, its own errors...
            return f"cannot decode: {error}"


def decode_file(path: str, decoding: Decoding) -> Decoded:
    """The file's sha256 and pixels, read once; never raises for a bad file, the reason
    is in ``why`` instead."""
    from PIL import ImageFile, UnidentifiedImageError
    ImageFile.LOAD_TRUNCATED_IMAGES = False
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        return Decoded("", None, f"cannot read: {error.strerror or error}")
    digest = hashlib.sha256(data).hexdigest()
    try:
        return Decoded(digest, pixels(io.BytesIO(data), decoding), "")
    except UnidentifiedImageError:
        return Decoded(digest, None, UNIDENTIFIED)
    except ValueError as error:
        if str(error).startswith("mode "):
            return Decoded(digest, None, str(error))
        return Decoded(digest, None, f"cannot decode: {error}")
    except Exception as error:  # Pillow raises OSError, SyntaxError, its own errors...
        return Decoded(digest, None, f"cannot decode: {error}")


def _decode_chunk(paths: list[str], decoding: Decoding) -> list[Decoded]:
    return [decode_file(path, decoding) for path in paths]


def decoding_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` processes started by a fork server: forking a process that
    runs threads (a test runner, a build) may deadlock."""
    return ProcessPoolExecutor(max_workers=workers,
                               mp_context=multiprocessing.get_context("forkserver"))


def decode_all(paths: list[str], decoding: Decoding, workers: int,
               take: Callable[[int, Decoded], None],
               pool: ProcessPoolExecutor | None = None) -> None:
    """Calls ``take(index, decoded)`` exactly once for each path, in completion order, with
    at most workers x CHUNK x IN_FLIGHT decoded images alive at once; in this process for
    one worker, else in ``pool`` (one of its own when not given). Raises BrokenProcessPool
    when a worker dies (killed for memory, say)."""
    if workers <= 1:
        for index, path in enumerate(paths):
            take(index, decode_file(path, decoding))
    elif pool is None:
        with decoding_pool(workers) as pool:
            decode_all(paths, decoding, workers, take, pool)
    else:
        _decode_in(pool, paths, decoding, workers, take)


def _decode_in(pool: ProcessPoolExecutor, paths: list[str], decoding: Decoding, workers: int,
               take: Callable[[int, Decoded], None]) -> None:
    starts = iter(range(0, len(paths), CHUNK))
    pending = {}
    while True:
        for start in starts:
            pending[pool.submit(_decode_chunk, paths[start:start + CHUNK], decoding)] = start
            if len(pending) >= workers * IN_FLIGHT:
                break
        if not pending:
            return
        done, _ = wait(pending, return_when=FIRST_COMPLETED)
        for future in done:
            start = pending.pop(future)
            for offset, decoded in enumerate(future.result()):
                take(start + offset, decoded)


# --- writing -------------------------------------------------------------------------------

class Progress:
    """Prints a line on stderr each time another tenth of the images is done; on a terminal
    also a bar with the rate and an ETA between them."""

    def __init__(self, total: int, log):
        self.total, self.log, self.done, self.shown = total, log, 0, 0
        self.started = time.perf_counter()
        from bundle.progress import Progress as Bar
        self.bar = Bar(total, "decoding", "images", stream=log)

    def step(self) -> None:
        self.done += 1
        self.bar.advance()
        tenth = 10 * self.done // max(self.total, 1)
        if tenth > self.shown:
            self.shown = tenth
            seconds = time.perf_counter() - self.started
            self.bar.clear()
            print(f"decoded {self.done:,} of {self.total:,} images ({10 * tenth}%) in "
                  f"{seconds:.0f} s",
                  file=self.log, flush=True)


def _array_shape(count: int, settings: dict) -> tuple[int, int, int, int]:
    return count, settings["size"], settings["size"], settings["channels"]


def _room_problems(task: Path, settings: dict, listing: Listing) -> list[str]:
    needed = sum(int(np.prod(_array_shape(len(rows), settings))) + 4096
                 for rows in (listing.train, listing.test))
    free = shutil.disk_usage(task).free
    if needed <= free:
        return []
    return [f"{task}: the arrays need {needed / 1e9:.1f} GB and only {free / 1e9:.1f} GB "
            "are free there"]


def _decode_into(tmp: Path, settings: dict, listing: Listing, workers: int, log) -> dict:
    """Decodes every row into memmapped arrays in ``tmp``; returns the arrays and, per
    split, each row's Decoded without its pixels."""
    rows = listing.train + listing.test
    arrays = {split: np.lib.format.open_memmap(tmp / name, mode="w+", dtype=np.uint8,
                                               shape=_array_shape(len(found), settings))
              for split, name, found in (("train", TRAIN_IMAGES, listing.train),
                                         ("test", TEST_IMAGES, listing.test))}
    results: list[Decoded | None] = [None] * len(rows)
    progress = Progress(len(rows), log)
    n_train = len(listing.train)

    def take(index: int, decoded: Decoded) -> None:
        if decoded.pixels is not None:
            split, slot = ("train", index) if index < n_train else ("test", index - n_train)
            arrays[split][slot] = decoded.pixels
        results[index] = decoded._replace(pixels=None)
        progress.step()

    decoding = Decoding(settings["size"], settings["channels"], settings["crop_border"],
                        settings["border_threshold"])
    decode_all([str(row.path) for row in rows], decoding, workers, take)
    for array in arrays.values():
        array.flush()
    return {"arrays": arrays, "train": results[:n_train], "test": results[n_train:]}


def _duplicate_problems(listing: Listing, decoded: dict) -> list[str]:
    trained = {}
    for row, result in zip(listing.train, decoded["train"]):
        if not result.why:
            trained.setdefault(result.sha256, row)
    return [f"{row.path} ({row.where}): the same bytes as the training image "
            f"{trained[result.sha256].path} ({trained[result.sha256].where})"
            for row, result in zip(listing.test, decoded["test"])
            if not result.why and result.sha256 in trained]


def _compact(path: Path, array: np.memmap, keep: np.ndarray) -> np.memmap:
    """The array without the rows that ``keep`` drops, rewritten block by block."""
    kept_path = path.with_name(path.stem + ".kept.npy")
    kept = np.lib.format.open_memmap(kept_path, mode="w+", dtype=np.uint8,
                                     shape=(int(keep.sum()),) + array.shape[1:])
    indices = np.flatnonzero(keep)
    for start in range(0, indices.size, COPY_BLOCK):
        block = indices[start:start + COPY_BLOCK]
        kept[start:start + block.size] = array[block]
    kept.flush()
    del array
    os.replace(kept_path, path)
    return kept


def _write_csv(path: Path, header: list[str], rows) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def _write_tables(tmp: Path, train: list[tuple[Row, Decoded]],
                  test: list[tuple[Row, Decoded]]) -> None:
    _write_csv(tmp / TRAIN_TABLE, ["image", "label", "grade"],
               ([row.image, row.label, row.grade] for row, _ in train))
    _write_csv(tmp / REFERENCE_TABLE, ["label", "grade", "shifted"],
               ([row.label, row.grade, int(row.shifted)] for row, _ in test))
    _write_csv(tmp / SOURCES_TABLE, ["image", "source", "sha256"],
               ([row.image, row.folder, result.sha256] for row, result in test))


def _per_source(kept: list[tuple[Row, Decoded]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row, _ in kept:
        counts[row.source] = counts.get(row.source, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (
        item[0].startswith("test"), int(item[0].split("[")[1].rstrip("]")))))


def _split(listing: Listing, decoded: dict, split: str, failed: bool):
    return [(row, result) for row, result in zip(getattr(listing, split), decoded[split])
            if bool(result.why) == failed]


def _check(settings: dict, listing: Listing, decoded: dict) -> None:
    """Raises ConvertError with every problem of the decoded images: each failure unless
    skipped, each test image with a training image's bytes, and, once failures are left
    out, a split without both labels."""
    failures = _split(listing, decoded, "train", True) + _split(listing, decoded, "test", True)
    problems = _duplicate_problems(listing, decoded)
    if settings["unreadable"] == "stop":
        problems = [f"{row.path} ({row.where}): {result.why}"
                    for row, result in failures] + problems
    elif not problems and failures:
        problems = _balance_problems(
            [row for row, _ in _split(listing, decoded, "train", False)],
            [row for row, _ in _split(listing, decoded, "test", False)])
    if problems:
        raise ConvertError(problems)


def _finish(tmp: Path, settings: dict, listing: Listing, decoded: dict) -> dict:
    """Checks the decoded images, drops the skipped ones from the arrays, writes the tables
    and the record in ``tmp``; returns the record."""
    _check(settings, listing, decoded)
    kept = {split: _split(listing, decoded, split, False) for split in ("train", "test")}
    arrays = {}
    for split, name in (("train", TRAIN_IMAGES), ("test", TEST_IMAGES)):
        arrays[name] = decoded["arrays"][split]
        if len(kept[split]) < len(decoded[split]):
            keep = np.array([not result.why for result in decoded[split]])
            arrays[name] = _compact(tmp / name, arrays[name], keep)
    _write_tables(tmp, kept["train"], kept["test"])
    record = {
        "format": FORMAT, "settings": settings, "train": len(kept["train"]),
        "test": len(kept["test"]), "shifted": sum(row.shifted for row, _ in kept["test"]),
        "sources": _per_source(kept["train"] + kept["test"]),
        "skipped": [{"file": str(row.path), "labels": str(row.labels), "row": row.line,
                     "why": result.why} for split in ("train", "test")
                    for row, result in _split(listing, decoded, split, True)],
        "arrays": {name: {"shape": list(array.shape), "bytes": (tmp / name).stat().st_size}
                   for name, array in arrays.items()}}
    (tmp / CONVERTED).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return record


def _move_into_place(tmp: Path, task: Path) -> None:
    # The old record goes first and the new one comes last: a convert killed half-way through
    # the moves leaves no record, which the build refuses, never an old record vouching for
    # a mix of old and new files.
    (task / CONVERTED).unlink(missing_ok=True)
    for name in OUTPUTS + (CONVERTED,):
        os.replace(tmp / name, task / name)


def _read_declaration(task: Path) -> dict:
    path = task / f"{task.name}_task.json"
    if not task.is_dir():
        raise ConvertError([f"{task}: not a folder"])
    try:
        declaration = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConvertError([f"{path}: does not exist (the task's declaration)"]) from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ConvertError([f"{path}: cannot be read as JSON ({error})"]) from None
    return declaration


def convert(task: Path, workers: int | None = None, log=sys.stderr) -> dict:
    """Converts the task folder's images and returns the record written to
    images_converted.json. On any problem raises ConvertError listing them all, and the
    task folder is exactly as it was (the temporary folder is removed)."""
    task = Path(task)
    settings, problems = images_settings(_read_declaration(task))
    if problems:
        raise ConvertError(problems)
    listing = list_sources(task, settings)
    if settings["unreadable"] == "stop":
        problems = header_problems(listing, settings["channels"])
        if problems:
            raise ConvertError(problems)
    warning = eye_pair_warning(listing)
    if warning:
        print(warning, file=log, flush=True)
    problems = _room_problems(task, settings, listing)
    if problems:
        raise ConvertError(problems)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=".convert-tmp-", dir=task))
    except OSError as error:
        raise ConvertError([f"{task}: cannot write there ({error})"]) from None
    try:
        decoded = _decode_into(tmp, settings, listing, workers or os.cpu_count() or 1, log)
        record = _finish(tmp, settings, listing, decoded)
        del decoded
        _move_into_place(tmp, task)
    except BrokenProcessPool as error:
        raise ConvertError([f"{task}: a decoding worker died ({error}); try fewer --workers"]) \
            from None
    except OSError as error:  # the worker's reading errors come back as results, not here
        raise ConvertError([f"{task}: cannot write the converted files ({error})"]) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return record


def _summary(task: Path, record: dict, seconds: float, workers: int) -> str:
    total = record["train"] + record["test"] + len(record["skipped"])
    lines = [f"converted {task}: {record['train']:,} training and {record['test']:,} test "
             f"images ({record['shifted']:,} shifted), {len(record['skipped'])} skipped, "
             f"in {seconds:.1f} s ({total / max(seconds, 1e-9):.1f} images/s, "
             f"{workers} worker{'s' * (workers != 1)})"]
    lines += [f"  {source}: {count:,} images" for source, count in record["sources"].items()]
    lines += [f"  skipped {entry['file']} ({entry['labels']}, line {entry['row']}): "
              f"{entry['why']}" for entry in record["skipped"]]
    return "\n".join(lines)


def run_convert(task: Path, workers: int | None = None) -> int:
    """The ``convert`` command: 0 when the task was converted, 1 (each problem on stderr,
    then a count line) when nothing was written."""
    workers = workers or os.cpu_count() or 1
    started = time.perf_counter()
    try:
        record = convert(task, workers)
    except ConvertError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        print(f"{len(error.problems)} problem{'s' * (len(error.problems) != 1)} in {task}: "
              "nothing written", file=sys.stderr)
        return 1
    print(_summary(Path(task), record, time.perf_counter() - started, workers))
    return 0


# --- reading back (the build) --------------------------------------------------------------

def array_layout(path: Path) -> tuple[tuple[int, ...], np.dtype, bool, int]:
    """(shape, dtype, Fortran order, byte offset of the data) of a .npy file, from its
    header alone."""
    with open(path, "rb") as handle:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(handle)
        else:
            raise ValueError(f".npy format version {version[0]}.{version[1]} is not read")
        return tuple(shape), dtype, fortran, handle.tell()


def read_header(path: Path) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) from a .npy file's header, without reading its data; raises OSError
    for a file that cannot be read and ValueError for one that is not a .npy file."""
    shape, dtype, _, _ = array_layout(Path(path))
    return shape, dtype


def _table_rows(path: Path) -> int | None:
    """Data rows of a csv table (its lines but the header, blank ones left out)."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            return max(sum(1 for row in csv.reader(handle) if row) - 1, 0)
    except (OSError, UnicodeDecodeError, csv.Error):
        return None


def _array_problems(task: Path, name: str, table: str, settings: dict) -> list[str]:
    path, expected = task / name, ("N",) + _array_shape(0, settings)[1:]
    try:
        shape, dtype, fortran, offset = array_layout(path)
    except FileNotFoundError:
        return [f"{path}: does not exist: {_rerun(task)}"]
    except (OSError, ValueError) as error:
        return [f"{path}: not a readable .npy file ({error}): {_rerun(task)}"]
    if dtype != np.uint8 or fortran or len(shape) != 4 or shape[1:] != expected[1:]:
        return [f"{path}: holds {dtype} {'Fortran-order ' * fortran}{shape}, expected uint8 "
                f"(N, {', '.join(map(str, expected[1:]))}): {_rerun(task)}"]
    rows = _table_rows(task / table)
    if rows is None:
        return [f"{task / table}: missing or unreadable: {_rerun(task)}"]
    if rows != shape[0]:
        return [f"{path}: {shape[0]} images but {task / table} has {rows} rows: {_rerun(task)}"]
    if path.stat().st_size != offset + int(np.prod(shape)):
        return [f"{path}: {path.stat().st_size} bytes, its header says "
                f"{offset + int(np.prod(shape))}: {_rerun(task)}"]
    return []


def converted_problems(task: Path, declaration: dict) -> list[str]:
    """What stops the build from staging the task folder's converted images, one line each
    (empty when nothing does): the declaration's ``images`` problems, a missing or stale
    images_converted.json, an array missing, of another dtype or shape than the settings
    ask, or with another number of images than its table's rows. Reads headers, never pixels."""
    task = Path(task)
    settings, problems = images_settings(declaration)
    if problems:
        return problems
    try:
        record = json.loads((task / CONVERTED).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return [f"{task / CONVERTED}: does not exist: {_rerun(task)}"]
    except (OSError, UnicodeDecodeError, ValueError) as error:
        return [f"{task / CONVERTED}: cannot be read as JSON ({error}): {_rerun(task)}"]
    made = record.get("settings") if isinstance(record, dict) else None
    if made != settings:
        changed = sorted(key for key in set(settings) | set(made or {})
                         if (made or {}).get(key) != settings.get(key))
        return [f"{task / CONVERTED}: converted with other images settings (changed since: "
                f"{', '.join(changed)}): {_rerun(task)}"]
    return [problem for name, table in ((TRAIN_IMAGES, TRAIN_TABLE),
                                        (TEST_IMAGES, REFERENCE_TABLE))
            for problem in _array_problems(task, name, table, settings)]

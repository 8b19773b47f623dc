"""kinds/retina/reference/images.py: the convert's checks before decoding (image modes from
the headers), its warning on a patient's two eyes split between training and test, and a
source's ``share``, which holds out an in-domain test set from one label file."""
import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from kinds.retina.reference import images

REPO = Path(__file__).resolve().parents[3]


def picture(rng, mode="RGB"):
    """A 24 x 24 noisy disc on black; the noise makes every picture's bytes distinct."""
    yy, xx = np.mgrid[:24, :24]
    disc = ((yy - 11.5) ** 2 + (xx - 11.5) ** 2 <= 100)[..., None]
    pixels = (rng.integers(60, 220, (24, 24, 3)) * disc).astype(np.uint8)
    return Image.fromarray(pixels).convert(mode)


def write_csv(path: Path, rows: list[list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)


def csv_task(root: Path, train_modes: list[str], seed: int = 0) -> Path:
    """A csv-layout task: a training image of each of ``train_modes`` (PNG), grades cycling
    0-4, and 6 test images, 2 of them shifted."""
    rng = np.random.default_rng(seed)
    task = root / "modes"
    (task / "pictures").mkdir(parents=True)
    train = [["image", "label", "grade"]]
    for index, mode in enumerate(train_modes):
        picture(rng, mode).save(task / "pictures" / f"train_{index:02d}.png")
        train.append([f"train_{index:02d}.png", int(index % 5 >= 2), index % 5])
    test = [["image", "label", "grade", "shifted"]]
    for index in range(6):
        picture(rng).save(task / "pictures" / f"test_{index}.png")
        test.append([f"test_{index}.png", index % 2, 2 * (index % 2), int(index >= 4)])
    write_csv(task / "labels" / "train.csv", train)
    write_csv(task / "labels" / "test.csv", test)
    declare(task, train=[{"layout": "csv", "labels": "labels/train.csv", "folder": "pictures"}],
            test=[{"layout": "csv", "labels": "labels/test.csv", "folder": "pictures"}])
    return task


def declare(task: Path, **section) -> None:
    declaration = {"task_type": "diagnosis", "shift": "a test", "summary": "tiny",
                   "images": {"size": 16, **section}}
    (task / f"{task.name}_task.json").write_text(json.dumps(declaration))


def truncated_jpeg(rng, path: Path) -> Path:
    """An RGB JPEG whose header is whole and whose pixels stop half-way: its mode reads
    fine, decoding it fails."""
    buffer = io.BytesIO()
    picture(rng).resize((96, 96)).save(buffer, "JPEG", quality=95)
    path.write_bytes(buffer.getvalue()[:len(buffer.getvalue()) // 2])
    return path


# --- modes, from the headers, before decoding ----------------------------------------------

def test_images_of_another_mode_are_refused_before_any_image_is_decoded(tmp_path):
    task = csv_task(tmp_path, ["RGB", "RGBA", "RGB", "P", "RGB", "RGBA"])
    rng = np.random.default_rng(9)
    # decoded, this file would be refused as truncated: its absence from the refusal shows
    # that no image was decoded
    truncated = truncated_jpeg(rng, task / "pictures" / "train_02.png")
    assert "truncated" in images.decode_file(str(truncated), images.Decoding(16, 3, True, 10)).why
    done = subprocess.run([sys.executable, "-m", "reference_data", "--kind", "retina",
                           "convert", str(task), "--workers", "1"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    labels = task / "labels" / "train.csv"
    assert done.stderr.splitlines() == [
        f"{task / 'pictures' / 'train_01.png'} ({labels}, line 3): mode RGBA, channels 3 needs "
        "mode RGB",
        f"{task / 'pictures' / 'train_03.png'} ({labels}, line 5): mode P, channels 3 needs "
        "mode RGB",
        f"{task / 'pictures' / 'train_05.png'} ({labels}, line 7): mode RGBA, channels 3 needs "
        "mode RGB",
        f"3 problems in {task}: nothing written"]
    assert not list(task.glob("*.npy"))


def test_many_images_of_another_mode_are_named_first_then_counted(tmp_path):
    task = csv_task(tmp_path, ["RGB", "RGB", "RGB"] + ["RGBA"] * 23)
    with pytest.raises(images.ConvertError) as refused:
        images.convert(task, workers=1, log=io.StringIO())
    *named, rest = refused.value.problems
    assert len(named) == 20
    assert all(line.endswith("mode RGBA, channels 3 needs mode RGB") for line in named)
    assert rest.startswith("... and 3 more images like these (23 in all): channels 3 needs "
                           "mode RGB images")


def test_skip_mode_still_leaves_out_images_of_another_mode(tmp_path):
    task = csv_task(tmp_path, ["RGB", "RGB", "RGBA", "RGB", "RGB"])
    declaration = json.loads((task / "modes_task.json").read_text())
    declaration["images"]["unreadable"] = "skip"
    (task / "modes_task.json").write_text(json.dumps(declaration))
    record = images.convert(task, workers=1, log=io.StringIO())
    assert record["train"] == 4
    assert [entry["why"] for entry in record["skipped"]] == [
        "mode RGBA, channels 3 needs mode RGB"]


# --- the two eyes of a patient ---------------------------------------------------------------

def eyepacs_task(root: Path, grades: dict[str, int], seed: int = 0) -> Path:
    """An EyePACS-layout task: ``grades`` of the training photographs (trainLabels.csv), and
    a test folder of 6 other patients, both eyes of each of grade 0, 1 or 2."""
    rng = np.random.default_rng(seed)
    task = root / "eyes"
    for folder, rows in (("train", grades),
                         ("test", {f"{100 + i // 2}_{('left', 'right')[i % 2]}": (i // 2) % 3
                                   for i in range(12)})):
        (task / folder).mkdir(parents=True)
        for name in rows:
            picture(rng).save(task / folder / f"{name}.jpeg", quality=95)
        write_csv(task / f"{folder}Labels.csv",
                  [["image", "level"]] + [[name, grade] for name, grade in rows.items()])
    return task


def test_eyes_of_one_patient_on_both_sides_of_a_split_are_warned(tmp_path):
    # a severity split of one label file: patient 10 has a mild and a severe eye
    grades = {"10_left": 0, "10_right": 3, "11_left": 1, "11_right": 2, "12_left": 2,
              "12_right": 0, "13_left": 4, "13_right": 3, "14_left": 3, "14_right": 1}
    task = eyepacs_task(tmp_path, grades)
    declare(task, train=[{"layout": "eyepacs", "labels": "trainLabels.csv", "folder": "train",
                          "grades": [0, 1, 2]}],
            test=[{"layout": "eyepacs", "labels": "testLabels.csv", "folder": "test",
                   "shifted": False},
                  {"layout": "eyepacs", "labels": "trainLabels.csv", "folder": "train",
                   "grades": [3, 4], "shifted": True}])
    log = io.StringIO()
    images.convert(task, workers=1, log=log)
    [warning] = [line for line in log.getvalue().splitlines() if line.startswith("warning")]
    assert warning.startswith("warning: 2 patients have one eye on each side of a split")
    assert f"10 in {task / 'train'} (shifted test, training); 14 in {task / 'train'} " \
           "(shifted test, training)." in warning
    assert " 11 in" not in warning and " 13 in" not in warning


def test_a_split_that_keeps_each_patient_on_one_side_is_not_warned(tmp_path):
    grades = {f"{10 + i // 2}_{('left', 'right')[i % 2]}": (i // 2) % 3 for i in range(12)}
    task = eyepacs_task(tmp_path, grades)
    declare(task, train=[{"layout": "eyepacs", "labels": "trainLabels.csv", "folder": "train"}],
            test=[{"layout": "eyepacs", "labels": "testLabels.csv", "folder": "test",
                   "grades": [0, 2], "shifted": False},
                  {"layout": "eyepacs", "labels": "testLabels.csv", "folder": "test",
                   "grades": [1], "shifted": True}])
    log = io.StringIO()
    images.convert(task, workers=1, log=log)
    assert "warning" not in log.getvalue()


# --- share: an in-domain test set held out of one label file --------------------------------

def aptos_task(root: Path, count: int = 40, seed: int = 0) -> Path:
    """APTOS 2019's single labelled folder (train.csv, train_images/*.png), and a shifted
    EyePACS-layout folder of 6 photographs."""
    rng = np.random.default_rng(seed)
    task = root / "aptos_only"
    rows = [[f"{index:08x}c0de", index % 5] for index in range(count)]
    write_csv(task / "aptos" / "train.csv", [["id_code", "diagnosis"]] + rows)
    (task / "aptos" / "train_images").mkdir()
    for name, _ in rows:
        picture(rng).save(task / "aptos" / "train_images" / f"{name}.png")
    (task / "shifted").mkdir()
    shifted = [[f"{index}_left", index % 5] for index in range(6)]
    for name, _ in shifted:
        picture(rng).save(task / "shifted" / f"{name}.jpeg", quality=95)
    write_csv(task / "shiftedLabels.csv", [["image", "level"]] + shifted)
    return task


def test_a_share_holds_out_an_in_domain_test_set_from_aptos_single_folder(tmp_path):
    task = aptos_task(tmp_path)
    aptos = {"layout": "aptos", "labels": "aptos/train.csv", "folder": "aptos/train_images"}
    declare(task, train=[{**aptos, "share": [0, 0.75]}],
            test=[{**aptos, "share": [0.75, 1], "shifted": False},
                  {"layout": "eyepacs", "labels": "shiftedLabels.csv", "folder": "shifted",
                   "shifted": True}])
    record = images.convert(task, workers=1, log=io.StringIO())
    with open(task / "train.csv", newline="") as handle:
        trained = {row["image"] for row in csv.DictReader(handle)}
    with open(task / "test_sources.csv", newline="") as handle:
        held_out = {row["image"] for row in csv.DictReader(handle)
                    if row["source"] == "aptos/train_images"}
    assert not trained & held_out
    assert len(trained | held_out) == 40
    # a hash of each name splits them: about three quarters train (binomial sd 2.7 of 40)
    assert 20 <= len(trained) <= 38
    assert record["sources"] == {"train[0]": len(trained), "test[0]": len(held_out),
                                 "test[1]": 6}


def test_a_share_keeps_both_eyes_of_a_patient_together(tmp_path):
    grades = {f"{10 + i // 2}_{('left', 'right')[i % 2]}": i % 5 for i in range(60)}
    task = eyepacs_task(tmp_path, grades)
    source = {"layout": "eyepacs", "labels": "trainLabels.csv", "folder": "train"}
    declare(task, train=[{**source, "share": [0, 0.6]}],
            test=[{**source, "share": [0.6, 1], "shifted": False},
                  {"layout": "eyepacs", "labels": "testLabels.csv", "folder": "test",
                   "shifted": True}])
    settings, problems = images.images_settings(json.loads((task / "eyes_task.json").read_text()))
    assert not problems
    listing = images.list_sources(task, settings)
    patients = {side: {row.image.split("_")[0] for row in rows} for side, rows in (
        ("train", listing.train), ("test", [row for row in listing.test if not row.shifted]))}
    assert patients["train"] and patients["test"] and not patients["train"] & patients["test"]
    assert len(listing.train) + sum(not row.shifted for row in listing.test) == 60
    assert images.eye_pair_warning(listing) == ""


def test_share_settings_are_checked_and_the_whole_file_is_the_default():
    def settings(**source):
        base = {"layout": "csv", "labels": "l.csv", "folder": "f"}
        return images.images_settings({"images": {"size": 16, "train": [{**base, **source}],
                                                  "test": [base]}})
    assert settings(share=[0, 1]) == settings() == settings(share=[0.0, 1.0])
    assert settings(share=[0, 0.5])[0]["train"][0]["share"] == [0, 0.5]
    for wrong in ([0.5, 0.2], [0, 1.5], [0.3], "half", [True, 1]):
        assert settings(share=wrong)[1] == [
            f"images.train[0].share: {wrong!r} is not [from, to] with 0 <= from < to <= 1"]

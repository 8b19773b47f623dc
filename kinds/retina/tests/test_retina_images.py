"""kinds/retina/reference/images.py: converting an image task's sources (EyePACS, APTOS, csv
layouts) into the arrays and tables the build stages, every refusal, and the read-back."""
import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageFilter

from kinds.retina.reference import images
from kinds.retina.reference.images import converted_problems, convert, read_header

REPO = Path(__file__).resolve().parents[3]
SIZE = 16
PROGRESS = re.compile(r"decoded [\d,]+ of [\d,]+ images \(\d+%\) in \d+ s")
RERUN = "run `python -m reference_data --kind retina convert"


# --- making sources ------------------------------------------------------------------------

def fundus(rng, width=40, height=30, border=2, mode="RGB"):
    """A black picture with a noisy coloured disc, ``border`` pixels clear of its shorter
    side; the noise makes every picture's bytes distinct."""
    yy, xx = np.mgrid[:height, :width]
    radius = min(width, height) / 2 - border
    disc = (yy - height / 2 + 0.5) ** 2 + (xx - width / 2 + 0.5) ** 2 <= radius ** 2
    colour = rng.integers(80, 200, 3)
    pixels = np.clip(colour + rng.integers(-40, 40, (height, width, 3)), 0, 255)
    picture = Image.fromarray((pixels * disc[..., None]).astype(np.uint8))
    return picture.convert("L") if mode == "L" else picture


def save(picture, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    picture.save(path, quality=92) if path.suffix == ".jpeg" else picture.save(path)
    return path


def write_csv(path: Path, rows: list[list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)


def declare(task: Path, **images_section) -> None:
    declaration = {"task_type": "diagnosis", "shift": "country, real", "summary": "tiny",
                   "images": {"size": SIZE, **images_section}}
    (task / f"{task.name}_task.json").write_text(json.dumps(declaration, indent=1))


def eyepacs_and_aptos(tmp_path: Path, seed: int = 0) -> Path:
    """A task as Kaggle and APTOS shipped theirs: 20 training JPEGs (trainLabels.csv), 12
    in-domain test JPEGs (retinopathy_solution.csv with its Usage column) and 12 shifted
    APTOS PNGs (train.csv)."""
    rng = np.random.default_rng(seed)
    task = tmp_path / "eyes"
    task.mkdir(parents=True)
    train = [[f"{i // 2 + 10}_{'left' if i % 2 == 0 else 'right'}", i % 5] for i in range(20)]
    test = [[f"{i + 1}_left", i % 5, "Public" if i % 3 else "Private"] for i in range(12)]
    aptos = [[f"{i:04x}a9c{i}", (i * 3) % 5] for i in range(12)]
    write_csv(task / "trainLabels.csv", [["image", "level"]] + train)
    write_csv(task / "retinopathy_solution.csv", [["image", "level", "Usage"]] + test)
    write_csv(task / "aptos" / "train.csv", [["id_code", "diagnosis"]] + aptos)
    for name, _ in train:
        save(fundus(rng), task / "train" / f"{name}.jpeg")
    for name, *_ in test:
        save(fundus(rng), task / "test" / f"{name}.jpeg")
    for name, _ in aptos:
        save(fundus(rng, 36, 36), task / "aptos" / "train_images" / f"{name}.png")
    declare(task, train=[{"layout": "eyepacs", "labels": "trainLabels.csv", "folder": "train"}],
            test=[{"layout": "eyepacs", "labels": "retinopathy_solution.csv", "folder": "test",
                   "shifted": False},
                  {"layout": "aptos", "labels": "aptos/train.csv",
                   "folder": "aptos/train_images", "shifted": True}])
    return task


def quiet_convert(task: Path, workers: int = 1) -> dict:
    return convert(task, workers, log=io.StringIO())


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def expected(path: Path, size: int = SIZE, threshold: int = 10) -> np.ndarray:
    """Pillow's decode, border crop, centred square padding and bilinear resize of a small
    file, written out here with numpy (no JPEG draft: the test pictures are small)."""
    with Image.open(path) as picture:
        pixels = np.asarray(picture.convert("RGB"))
    inside = pixels.max(axis=2) > threshold
    rows, columns = np.flatnonzero(inside.any(axis=1)), np.flatnonzero(inside.any(axis=0))
    pixels = pixels[rows[0]:rows[-1] + 1, columns[0]:columns[-1] + 1]
    height, width = pixels.shape[:2]
    side = max(height, width)
    square = np.zeros((side, side, 3), np.uint8)
    top, left = (side - height) // 2, (side - width) // 2
    square[top:top + height, left:left + width] = pixels
    return np.asarray(Image.fromarray(square).resize(
        (size, size), Image.Resampling.BILINEAR, reducing_gap=images.REDUCING_GAP))


# --- converting ----------------------------------------------------------------------------

def test_eyepacs_and_aptos_sources_convert(tmp_path):
    task = eyepacs_and_aptos(tmp_path)
    record = quiet_convert(task)
    train = np.load(task / "train_images.npy", mmap_mode="r")
    test = np.load(task / "test_images.npy", mmap_mode="r")
    assert train.dtype == test.dtype == np.uint8
    assert train.shape == (20, SIZE, SIZE, 3) and test.shape == (24, SIZE, SIZE, 3)
    rows = read_rows(task / "train.csv")
    assert [row["image"] for row in rows[:3]] == ["10_left.jpeg", "10_right.jpeg", "11_left.jpeg"]
    assert all(int(row["label"]) == (int(row["grade"]) >= 2) for row in rows)
    reference = read_rows(task / "test_reference.csv")
    sources = read_rows(task / "test_sources.csv")
    assert len(reference) == len(sources) == 24
    assert sum(int(row["shifted"]) for row in reference) == 12 == record["shifted"]
    assert all((row["source"] == "aptos/train_images") == (ref["shifted"] == "1")
               for row, ref in zip(sources, reference))
    in_source_order = [f"{i + 1}_left.jpeg" for i in range(12)]
    assert [row["image"] for row in sources if row["source"] == "test"] != in_source_order
    for index, row in enumerate(sources):
        np.testing.assert_array_equal(test[index], expected(task / row["source"] / row["image"]))
    np.testing.assert_array_equal(train[5], expected(task / "train" / rows[5]["image"]))
    written = json.loads((task / "images_converted.json").read_text())
    assert written["train"] == 20 and written["test"] == 24 and written["skipped"] == []
    assert written["settings"]["channels"] == 3 and written["settings"]["seed"] == 0
    assert written["arrays"]["test_images.npy"]["shape"] == [24, SIZE, SIZE, 3]
    assert written["sources"] == {"train[0]": 20, "test[0]": 12, "test[1]": 12}
    assert not list(task.glob(".convert-tmp-*"))


def test_workers_give_the_same_files_as_one_process(tmp_path):
    one, two = eyepacs_and_aptos(tmp_path / "a"), eyepacs_and_aptos(tmp_path / "b")
    quiet_convert(one, workers=1)
    quiet_convert(two, workers=3)
    for name in images.OUTPUTS:
        assert (one / name).read_bytes() == (two / name).read_bytes(), name


def test_the_border_crop_gives_the_same_disc_with_or_without_a_wide_border(tmp_path):
    task = tmp_path / "crop"
    rng = np.random.default_rng(1)
    plain = fundus(rng, 40, 40, border=0)
    framed = Image.new("RGB", (100, 70))
    framed.paste(plain, (35, 15))
    save(plain, task / "pictures" / "plain.png")
    save(framed, task / "pictures" / "framed.png")
    for name in ("a", "b", "c"):
        save(fundus(rng), task / "pictures" / f"{name}.png")
    write_csv(task / "train.src.csv", [["image", "label", "grade"], ["plain.png", 0, 0],
                                       ["framed.png", 1, 2]])
    write_csv(task / "test.src.csv", [["image", "label", "grade", "shifted"], ["a.png", 0, 1, 0],
                                      ["b.png", 1, 2, 0], ["c.png", 1, 4, 1]])
    declare(task, size=32, train=[{"layout": "csv", "labels": "train.src.csv",
                                   "folder": "pictures"}],
            test=[{"layout": "csv", "labels": "test.src.csv", "folder": "pictures"}])
    quiet_convert(task)
    disc = [int((pixels.max(axis=2) > 10).sum()) for pixels in np.load(task / "train_images.npy")]
    assert abs(disc[0] - disc[1]) <= 0.02 * disc[0] and disc[0] > 0.6 * 32 * 32
    uncropped = images.decode_file(str(task / "pictures" / "framed.png"),
                                   images.Decoding(32, 3, False, 10)).pixels
    assert (uncropped.max(axis=2) > 10).sum() < disc[1] / 3


def test_a_large_jpeg_decoded_in_draft_stays_close(tmp_path):
    # a retina photograph is smooth: JPEG's DCT scaling and a full decode differ on
    # pixel-sized noise, not on it (1 grey level on average here, 3-5 on pure noise)
    smooth = fundus(np.random.default_rng(2), 800, 600, border=20).filter(
        ImageFilter.GaussianBlur(3))
    path = save(smooth, tmp_path / "big.jpeg")
    drafted = images.decode_file(str(path), images.Decoding(64, 3, True, 10)).pixels
    assert np.abs(drafted.astype(int) - expected(path, 64)).mean() < 1.5


def test_a_grades_filter_makes_a_severity_split(tmp_path):
    task = eyepacs_and_aptos(tmp_path)
    low, high = [0, 1, 2], [3, 4]
    declare(task, train=[{"layout": "eyepacs", "labels": "trainLabels.csv", "folder": "train",
                          "grades": low}],
            test=[{"layout": "eyepacs", "labels": "retinopathy_solution.csv", "folder": "test",
                   "grades": low, "shifted": False},
                  {"layout": "eyepacs", "labels": "trainLabels.csv", "folder": "train",
                   "grades": high, "shifted": True}])
    record = quiet_convert(task)
    assert {int(row["grade"]) for row in read_rows(task / "train.csv")} == set(low)
    reference = read_rows(task / "test_reference.csv")
    assert {int(row["grade"]) for row in reference if row["shifted"] == "1"} == set(high)
    assert {int(row["grade"]) for row in reference if row["shifted"] == "0"} == set(low)
    assert record["train"] == 12 and record["shifted"] == 8 and record["test"] == 8 + 8


def test_the_csv_layout_carries_shifted_per_row(tmp_path):
    task = tmp_path / "plain"
    rng = np.random.default_rng(3)
    rows = [[f"p{i}.{'png' if i % 2 else 'jpeg'}", int(i % 5 >= 2), i % 5, int(i % 3 == 0)]
            for i in range(24)]
    for name, *_ in rows:
        save(fundus(rng, mode="L"), task / "all" / name)
    write_csv(task / "train.csv.src", [["image", "label", "grade"]] + [row[:3] for row in
                                                                       rows[:12]])
    write_csv(task / "test.csv.src", [["image", "label", "grade", "shifted"]] + rows[12:])
    (task / "all" / "notes.txt").write_text("not an image: no row needs to name it")
    declare(task, channels=1, crop_border=False,
            train=[{"layout": "csv", "labels": "train.csv.src", "folder": "all"}],
            test=[{"layout": "csv", "labels": "test.csv.src", "folder": "all"}])
    record = quiet_convert(task)
    assert np.load(task / "test_images.npy").shape == (12, SIZE, SIZE, 1)
    assert record["shifted"] == sum(row[3] for row in rows[12:]) == 4
    by_image = {row[0]: row for row in rows}
    for source, ref in zip(read_rows(task / "test_sources.csv"),
                           read_rows(task / "test_reference.csv")):
        assert int(ref["shifted"]) == by_image[source["image"]][3]
        assert int(ref["label"]) == by_image[source["image"]][1]


# --- refusals: one line naming the file and row, nothing written -------------------------

def snapshot(folder: Path) -> dict:
    return {str(path.relative_to(folder)): path.read_bytes() if path.is_file() else None
            for path in sorted(folder.rglob("*"))}


def refused(task: Path) -> list[str]:
    """The problem lines of a convert run as the organizer runs it, which must fail and
    leave every file of the task folder as it was."""
    before = snapshot(task)
    done = subprocess.run([sys.executable, "-m", "reference_data", "--kind", "retina",
                           "convert", str(task), "--workers", "2"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert snapshot(task) == before
    *problems, count = [line for line in done.stderr.strip().splitlines()
                        if not PROGRESS.fullmatch(line)]
    assert count == f"{len(problems)} problem{'s' * (len(problems) != 1)} in {task}: " \
                    "nothing written"
    return problems


@pytest.fixture
def converted(tmp_path):
    """A task converted once: its good arrays must survive every refused convert."""
    task = eyepacs_and_aptos(tmp_path)
    quiet_convert(task)
    return task


def test_a_corrupt_jpeg_is_refused(converted):
    (converted / "train" / "12_left.jpeg").write_bytes(np.random.default_rng(4).bytes(3000))
    [problem] = refused(converted)
    assert problem.startswith(f"{converted / 'train' / '12_left.jpeg'} "
                              f"({converted / 'trainLabels.csv'}, line 6): cannot decode")


def test_a_truncated_jpeg_is_refused(converted):
    path = converted / "test" / "3_left.jpeg"
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])
    [problem] = refused(converted)
    assert problem.startswith(f"{path} ({converted / 'retinopathy_solution.csv'}, line 4): "
                              "cannot decode")
    assert "truncated" in problem


@pytest.mark.parametrize("mode", ["RGBA", "P"])
def test_a_png_of_another_mode_is_refused(converted, mode):
    path = next((converted / "aptos" / "train_images").iterdir())
    Image.open(path).convert(mode).save(path)
    [problem] = refused(converted)
    assert problem.startswith(f"{path} ({converted / 'aptos' / 'train.csv'}, line ")
    assert problem.endswith(f"mode {mode}, channels 3 needs mode RGB")


def test_a_labels_row_without_its_file_is_refused(converted):
    (converted / "train" / "13_right.jpeg").unlink()
    [problem] = refused(converted)
    assert problem == (f"{converted / 'trainLabels.csv'}, line 9: image 13_right: "
                       f"{converted / 'train' / '13_right.jpeg'} does not exist")


def test_a_file_without_a_labels_row_is_refused(converted):
    save(fundus(np.random.default_rng(5)), converted / "test" / "99_right.jpeg")
    [problem] = refused(converted)
    assert problem == (f"{converted / 'test' / '99_right.jpeg'}: no row of "
                       f"{converted / 'retinopathy_solution.csv'} names it")


@pytest.mark.parametrize("grade, why", [("5", "grade 5 is outside 0-4"),
                                        ("-1", "grade -1 is outside 0-4"),
                                        ("2.5", "grade '2.5' is not an integer")])
def test_a_grade_outside_0_to_4_is_refused(converted, grade, why):
    labels = converted / "aptos" / "train.csv"
    lines = labels.read_text().splitlines()
    name = lines[4].split(",")[0]
    lines[4] = f"{name},{grade}"
    labels.write_text("\n".join(lines) + "\n")
    [problem] = refused(converted)
    assert problem == f"{labels}, line 5: image {name}: {why}"


def test_the_same_file_in_train_and_test_is_refused(converted):
    copied = converted / "test" / "7_left.jpeg"
    copied.write_bytes((converted / "train" / "15_left.jpeg").read_bytes())
    [problem] = refused(converted)
    assert problem == (f"{copied} ({converted / 'retinopathy_solution.csv'}, line 8): the same "
                       f"bytes as the training image {converted / 'train' / '15_left.jpeg'} "
                       f"({converted / 'trainLabels.csv'}, line 12)")


def test_an_unknown_layout_is_refused_naming_the_key(converted):
    declaration = json.loads((converted / "eyes_task.json").read_text())
    declaration["images"]["test"][1]["layout"] = "eyepacs2"
    (converted / "eyes_task.json").write_text(json.dumps(declaration))
    [problem] = refused(converted)
    assert problem == "images.test[1].layout: 'eyepacs2' is not one of eyepacs, aptos, csv"


def test_a_label_file_where_convert_writes_is_refused(converted):
    (converted / "aptos" / "train.csv").rename(converted / "train.csv")
    declaration = declaration_of(converted)
    declaration["images"]["test"][1]["labels"] = "train.csv"
    (converted / "eyes_task.json").write_text(json.dumps(declaration))
    [problem] = refused(converted)
    assert problem.startswith(f"images.test[1].labels: {converted / 'train.csv'} is a file "
                              "that convert writes")


def test_every_problem_is_listed(converted):
    (converted / "train" / "13_right.jpeg").unlink()
    save(fundus(np.random.default_rng(5)), converted / "test" / "99_right.jpeg")
    (converted / "aptos" / "train.csv").write_text("id,diagnosis\n")
    problems = refused(converted)
    assert len(problems) == 3 and "header has columns id, diagnosis" in problems[1]


def test_skip_leaves_out_an_unreadable_image_and_records_it(converted):
    declaration = json.loads((converted / "eyes_task.json").read_text())
    declaration["images"]["unreadable"] = "skip"
    (converted / "eyes_task.json").write_text(json.dumps(declaration))
    bad = converted / "test" / "5_left.jpeg"
    bad.write_bytes(b"not a picture at all")
    record = quiet_convert(converted)
    assert record["test"] == 23 and record["train"] == 20
    [skipped] = json.loads((converted / "images_converted.json").read_text())["skipped"]
    assert skipped["file"] == str(bad) and skipped["row"] == 6
    assert skipped["why"].startswith("cannot decode")
    sources = read_rows(converted / "test_sources.csv")
    test = np.load(converted / "test_images.npy")
    assert test.shape[0] == len(sources) == 23 and "5_left.jpeg" not in {
        row["image"] for row in sources}
    for index, row in enumerate(sources):
        np.testing.assert_array_equal(test[index],
                                      expected(converted / row["source"] / row["image"]))
    assert converted_problems(converted, declaration) == []


def test_the_command_prints_a_summary(converted):
    done = subprocess.run([sys.executable, "-m", "reference_data", "--kind", "retina",
                           "convert", str(converted), "--workers", "1"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"converted {converted}: 20 training and 24 test images (12 shifted)" in done.stdout
    assert "test[1]: 12 images" in done.stdout and "100%" in done.stderr


# --- reading back -------------------------------------------------------------------------

def declaration_of(task: Path) -> dict:
    return json.loads((task / f"{task.name}_task.json").read_text())


def test_a_fresh_convert_has_no_problems_and_headers_read_without_pixels(converted):
    assert converted_problems(converted, declaration_of(converted)) == []
    shape, dtype = read_header(converted / "test_images.npy")
    assert shape == (24, SIZE, SIZE, 3) and dtype == np.uint8


def test_changed_settings_ask_for_a_new_convert(converted):
    declaration = declaration_of(converted)
    declaration["images"]["size"] = SIZE * 2
    [problem] = converted_problems(converted, declaration)
    assert "size" in problem and f"{RERUN} {converted}`" in problem
    (converted / "images_converted.json").unlink()
    [problem] = converted_problems(converted, declaration_of(converted))
    assert RERUN in problem


def test_defaults_written_or_left_out_are_the_same_settings(converted):
    declaration = declaration_of(converted)
    declaration["images"].update(images.DEFAULTS)
    declaration["images"]["train"][0]["grades"] = [4, 3, 2, 1, 0]
    assert converted_problems(converted, declaration) == []


def test_a_tampered_array_is_named(converted):
    np.save(converted / "train_images.npy", np.zeros((20, SIZE, SIZE, 1), np.uint8))
    [problem] = converted_problems(converted, declaration_of(converted))
    assert problem.startswith(f"{converted / 'train_images.npy'}: holds uint8 (20, {SIZE}, "
                              f"{SIZE}, 1)")
    np.save(converted / "train_images.npy", np.zeros((19, SIZE, SIZE, 3), np.uint8))
    [problem] = converted_problems(converted, declaration_of(converted))
    assert "19 images but" in problem and "train.csv has 20 rows" in problem
    (converted / "test_images.npy").unlink()
    assert any("test_images.npy: does not exist" in problem
               for problem in converted_problems(converted, declaration_of(converted)))


def test_section_problems_name_their_keys():
    _, problems = images.images_settings({"images": {
        "size": 4, "channels": 2, "colour": True, "unreadable": "ignore",
        "train": [{"layout": "csv", "labels": "a.csv", "folder": "a", "shifted": True}],
        "test": [{"layout": "aptos", "labels": "b.csv", "folder": "b", "grades": [5]}]}})
    assert problems == [
        "images.colour: unknown key (known: size, channels, crop_border, border_threshold, "
        "unreadable, referable_from_grade, seed, train, test)",
        "images.size: 4 is outside 8..1024",
        "images.channels: 2 is not one of 3, 1",
        "images.unreadable: 'ignore' is not one of stop, skip",
        "images.train[0].shifted: training sources are never shifted, got True",
        "images.test[0].grades: [5] is not a list of grades 0-4",
        "images.test[0].shifted: required (true or false) for the aptos layout"]


PLATFORMS = ("codabench", "codalab")


@pytest.mark.slow
@pytest.mark.parametrize("platform", PLATFORMS)
def test_an_eyepacs_and_aptos_task_builds_and_dry_runs_with_a_skipped_image_on_the_pages(
        tmp_path, platform):
    """The real label files' layouts through convert (one unreadable photograph skipped),
    then the build and its dry run on the platform; the pages say what was left out."""
    import yaml
    import zipfile
    task = eyepacs_and_aptos(tmp_path / "tasks")
    declaration = json.loads((task / "eyes_task.json").read_text())
    declaration["images"]["unreadable"] = "skip"
    (task / "eyes_task.json").write_text(json.dumps(declaration))
    (task / "test" / "5_left.jpeg").write_bytes(b"not a picture at all")
    quiet_convert(task)
    spec_file = REPO / "kinds" / "retina" / "default_spec.yaml"
    spec = yaml.safe_load(spec_file.read_text())
    spec.update(data_root=str(tmp_path / "tasks"), tasks={"eyes": {"budget_seconds": 20}},
                phases={"images": {**spec["phases"]["images"], "tasks": ["eyes"]}})
    (tmp_path / "logo.png").write_bytes((spec_file.parent / "logo.png").read_bytes())
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    # build_bundle.py's main in this process (in_process_commands.py): the build and its dry
    # run are the claim, not a new interpreter's start
    import build_bundle
    from in_process_commands import run_main
    done = run_main(build_bundle.main, "--config", tmp_path / "spec.yaml", "--platform",
                    platform, "--phase", "images", "--check", "--out", tmp_path / "out")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "dry run FAILED" not in done.stdout
    [bundle] = (tmp_path / "out").glob("*.zip")
    with zipfile.ZipFile(bundle) as archive:
        pages = "".join(archive.read(name).decode() for name in archive.namelist()
                        if name.endswith(".html"))
    assert "images 16 x 16 x 3; 1 unreadable image(s) left out" in pages

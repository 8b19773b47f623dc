"""The label_accuracy kind's detailed results name no hidden label (issue 46, item 1).

Its confusion matrix has one column per predicted class: a column is a group of test points the
submission chose. A submission that gives one point a class it gives no other point read that
point's true label off the column, one label per class and submission. The attack below runs
the real scoring program of a built bundle, once per targeted point, and reads the page."""
import json
import re
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

from scoring_harness import image_python

REPO = Path(__file__).resolve().parents[3]
SPEC = REPO / "kinds" / "label_accuracy" / "default_spec.yaml"
TARGETS = (0, 7, 19, 30)


@pytest.fixture(scope="module")
def scorer(tmp_path_factory, built_bundles):
    """The evaluation phase's scoring program and references, taking prediction files."""
    out = tmp_path_factory.mktemp("label-accuracy")
    (bundle,) = built_bundles(SPEC, phase="evaluation").glob("*.zip")     # read only
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(out / "bundle")
    for part, folder in (("scoring_program", "program"), ("reference_data", "ref")):
        with zipfile.ZipFile(out / "bundle" / f"{part}.zip") as archive:
            archive.extractall(out / folder)
    config = out / "program" / "scoring_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "record": "optional"}))
    return out


def _page(scorer: Path, run: Path, iris: np.ndarray) -> str:
    res = run / "input" / "res"
    res.mkdir(parents=True)
    (run / "input" / "ref").symlink_to(scorer / "ref")
    np.save(res / "iris_labels.npy", iris.reshape(-1, 1))
    np.save(res / "wine_labels.npy", np.zeros((53, 1), dtype=np.int64))
    (run / "output").mkdir()
    subprocess.run([image_python(), "-I", str(scorer / "program" / "score.py"),
                    str(run / "input"), str(run / "output")], cwd=run, check=True,
                   capture_output=True, timeout=300)
    return (run / "output" / "detailed_results.html").read_text()


def _iris_confusion(page: str) -> list[list[str]]:
    section = page[page.index("Confusion matrix"):]
    table = section[:section.index("</table>")]
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row)[1:] for row in rows]


def test_a_class_given_to_one_point_does_not_name_its_label(scorer, tmp_path):
    labels = np.load(scorer / "ref" / "iris_test_labels.npy").ravel()
    recovered = {}
    for target in TARGETS:
        predicted = np.zeros(labels.size, dtype=np.int64)
        predicted[target] = 1                       # the only point predicted as class 1
        cells = _iris_confusion(_page(scorer, tmp_path / str(target), predicted))
        column = [row[1] for row in cells]
        if column.count("1") == 1:
            recovered[target] = column.index("1")
    assert recovered == {}, f"labels read off the page: {recovered}"
    # and the attack was real: these points' labels are not all one class
    assert len({int(labels[t]) for t in TARGETS}) > 1


def test_a_well_populated_column_still_shows(scorer, tmp_path):
    labels = np.load(scorer / "ref" / "iris_test_labels.npy").ravel()
    cells = _iris_confusion(_page(scorer, tmp_path, np.zeros(labels.size, dtype=np.int64)))
    assert [row[0] for row in cells] == [str(int((labels == k).sum())) for k in range(3)]

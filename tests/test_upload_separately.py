"""Data uploaded apart from the bundle (spec keys upload_separately, dataset_keys): the build
writes each such zip next to the bundle with its upload steps, waits for its key (exit 3),
then names it by key in competition.yaml; --check reads the local copies. A bundle past the
safe size is refused with a pointer to this option."""
import hashlib
import json
import re
import shutil
import uuid
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml

import build_bundle
from bundle.datasets import SAFE_BUNDLE_BYTES
from bundle.spec import load_spec
from in_process_commands import run_main

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "kinds" / "label_accuracy" / "default_spec.yaml"
WAITING = 3


def write_spec(folder: Path, **changes) -> Path:
    raw = yaml.safe_load(SPEC.read_text())
    raw.update(changes)
    shutil.copyfile(SPEC.parent / raw["logo"], folder / raw["logo"])
    (folder / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return folder / "spec.yaml"


# The command's main in this process (in_process_commands.py): what is tested is what it
# builds, refuses, prints and exits with, not a new interpreter's start (half a CPU second a
# call, and the first scan of the installed packages for a kit's requirements, which this
# process keeps); other tests run build_bundle.py as a script (tests/test_layouts.py).
def build(spec: Path, out: Path, platform: str = "codalab", *extra: str):
    return run_main(build_bundle.main, "--config", spec, "--phase", "all", "--platform",
                    platform, "--out", out, *extra)


def keys_from(output: str) -> dict:
    """The dataset_keys block the build printed, each key filled in as the site would."""
    block = output.split("dataset_keys:\n", 1)[1].split("\nnot written yet", 1)[0]
    return yaml.safe_load(re.sub("PASTE-ITS-KEY", lambda _: str(uuid.uuid4()), block))


def with_keys(spec: Path, keys: dict) -> Path:
    raw = yaml.safe_load(spec.read_text())
    raw["dataset_keys"] = keys
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    return spec


@pytest.mark.parametrize("platform", ["codalab", "codabench"])
def test_data_apart_is_written_next_to_a_small_bundle_and_the_check_runs_on_it(
        platform, tmp_path):
    spec = write_spec(tmp_path, upload_separately=["input_data", "reference_data"])
    out = tmp_path / "out"
    first = build(spec, out, platform, "--check")
    assert first.returncode == WAITING, first.stdout[-3000:] + first.stderr[-3000:]
    assert "dry run passed" in first.stdout and "not written yet" in first.stdout
    datasets = sorted(path.name for path in out.glob("*.zip"))
    assert datasets and all("_data.zip" in name for name in datasets)   # no bundle yet
    assert ("My Datasets > Create Dataset" if platform == "codalab"
            else "Resources > Datasets/Programs") in first.stdout
    keys = keys_from(first.stdout)
    assert sorted(f"{name}.zip" for name in keys) == datasets
    for name, entry in keys.items():
        assert entry["sha256"] == hashlib.sha256((out / f"{name}.zip").read_bytes()).hexdigest()

    # built with the keys, then dry-run once: checked on its own, the bundle finds the local
    # copies of its data (the build's own --check has run above, on the bundle waiting for
    # its keys); without one it fails, saying so
    second = build(with_keys(spec, keys), out, platform)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    bundle = next(path for path in out.glob("*.zip") if path.name not in datasets)
    checked = build_check(bundle)
    assert "dry run passed" in checked.stdout
    with zipfile.ZipFile(bundle) as archive:
        names, text = archive.namelist(), archive.read("competition.yaml").decode()
    assert not [name for name in names if name.endswith(("input_data.zip", "reference_data.zip"))]
    for entry in keys.values():
        assert f'{entry["key"]}' in text            # the yaml names the data by its key
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    missing = out / datasets[0]
    missing.rename(tmp_path / "moved.zip")
    result = build_check(bundle)
    assert result.returncode == 1 and "its local copy" in result.stderr
    assert "Traceback" not in result.stderr


def build_check(bundle: Path):
    return run_main(build_bundle.main, "--check", bundle)


def test_data_changed_since_its_upload_is_refused(tmp_path):
    data = tmp_path / "tasks"
    shutil.copytree(SPEC.parent / "tasks", data)
    spec = write_spec(tmp_path, upload_separately=["reference_data"], data_root=str(data))
    first = build(spec, tmp_path / "out")
    assert first.returncode == WAITING, first.stdout[-3000:] + first.stderr[-3000:]
    with_keys(spec, keys_from(first.stdout))
    labels = data / "iris" / "iris_test_labels.csv"
    values = labels.read_text().splitlines()
    values[0] = "2" if values[0].strip() != "2" else "1"
    labels.write_text("\n".join(values) + "\n")
    second = build(spec, tmp_path / "out")
    assert second.returncode == 1 and "Traceback" not in second.stderr
    assert re.search(r"dataset_keys\.label-accuracy\.\w+_reference_data: the key was entered for "
                     r"a zip of sha256 \w+\.\.\., but the data built now is", second.stderr)
    assert "changed since that upload" in second.stderr


@pytest.mark.parametrize("entry,message", [
    ({"key": "not-a-uuid", "sha256": "0" * 64}, "dataset_keys.x.key"),
    ({"key": str(uuid.uuid4())}, "dataset_keys.x"),
])
def test_a_malformed_key_entry_is_refused_naming_it(entry, message, tmp_path):
    spec = write_spec(tmp_path, upload_separately=["reference_data"], dataset_keys={"x": entry})
    result = build(spec, tmp_path / "out")
    assert result.returncode == 1 and message in result.stderr and "Traceback" not in result.stderr


# ---- data large enough to cross the safe size (written here, never committed) --------------

# 50 k x 4 features: about 0.8 MiB a copy once zipped, five copies past a limit of 3 MiB. The
# crossing is the same at the default 200 MiB (SAFE_BUNDLE_BYTES, asserted below) with many
# times the rows, or at 20 MiB with four times as many (this test's size until the suite's
# run time had to halve: each of its three builds zips and scans every copy).
BIG_ROWS = 50_000
LIMIT_MIB = 3


def big_task(root: Path) -> None:
    """One label-accuracy task in the organizer's format with a training set of BIG_ROWS rows
    of incompressible values: its inputs appear in five zips (input and public data of two
    phases, and both starting kits), past the LIMIT_MIB a bundle of this test may hold."""
    rng = np.random.default_rng(0)
    folder = root / "big"
    folder.mkdir(parents=True)
    centres = rng.normal(size=(3, 4)) * 3
    y_train = rng.integers(0, 3, BIG_ROWS)
    x_train = centres[y_train] + rng.random((BIG_ROWS, 4))
    np.savetxt(folder / "big_train.csv", np.column_stack([x_train, y_train]), delimiter=",",
               fmt=["%.6f"] * 4 + ["%d"])
    y_test = rng.integers(0, 3, 300)
    np.savetxt(folder / "big_test.csv", centres[y_test] + rng.random((300, 4)), delimiter=",",
               fmt="%.6f")
    np.savetxt(folder / "big_test_labels.csv", y_test, fmt="%d")
    declaration = json.loads((SPEC.parent / "tasks" / "iris" / "iris_task.json").read_text())
    declaration.update(name="big", n_train=BIG_ROWS, n_test=300, num_classes=3, num_features=4,
                       summary="a large synthetic task")
    (folder / "big_task.json").write_text(json.dumps(declaration))


@pytest.mark.slow
def test_a_bundle_past_the_safe_size_is_refused_and_data_apart_makes_it_small(tmp_path):
    big_task(tmp_path / "tasks")
    phases = yaml.safe_load(SPEC.read_text())["phases"]
    for phase in phases.values():
        phase["tasks"] = ["big"]
    spec = write_spec(tmp_path, data_root=str(tmp_path / "tasks"), phases=phases,
                      tasks={"big": {"budget_seconds": 30}}, max_bundle_mib=LIMIT_MIB)
    assert load_spec(SPEC).max_bundle_bytes == SAFE_BUNDLE_BYTES == 200 * 2**20
    refused = build(spec, tmp_path / "refused")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert f"more than the {LIMIT_MIB} MiB a site can safely unpack" in refused.stderr
    assert "add upload_separately: [" in refused.stderr
    assert not (tmp_path / "refused").exists() or not list((tmp_path / "refused").iterdir())

    raw = yaml.safe_load(spec.read_text())
    raw["upload_separately"] = ["input_data", "public_data", "starting_kit"]
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    out = tmp_path / "out"
    waiting = build(spec, out)
    assert waiting.returncode == WAITING, waiting.stdout[-3000:] + waiting.stderr[-3000:]
    apart = sum(path.stat().st_size for path in out.glob("*.zip"))
    assert apart > LIMIT_MIB * 2**20
    passed = build(with_keys(spec, keys_from(waiting.stdout)), out, "codalab", "--check")
    assert passed.returncode == 0, passed.stdout[-3000:] + passed.stderr[-3000:]
    assert "dry run passed" in passed.stdout and "big_accuracy=" in passed.stdout
    bundle = out / "label-accuracy.zip"
    assert bundle.stat().st_size < 2 * 2**20

"""The worker recipe: a Codabench competition on a queue of the organizer's own or on a GPU image
gets, next to its bundle, a compute worker `.env` (`<bundle>.worker.env`) whose keys are the
ones docs/platform/codabench_v2.md §3.12 says the recipe sets, with the hardware the pages
promise in its comments; the build's summary names the file and what no key of the worker sets.
A default-queue CPU competition gets none, and neither does CodaLab."""
from __future__ import annotations

import html
import re
import zipfile
from pathlib import Path

import pytest
import yaml

import build_bundle
from bundle.record_key import secret_path
from test_custom_queue import QUEUE, long_spec
from test_gpu_image import write_spec

REPO = Path(__file__).resolve().parents[1]
PLATFORM_NOTES = REPO / "docs" / "platform" / "codabench_v2.md"
GPU_IMAGE = "codalab/codalab-legacy:gpu310"
CPU_IMAGE = "codalab/codalab-legacy:py312"


def documented_keys() -> dict[str, str]:
    """Key -> the table's "in the recipe" cell, for each key of §3.12's table."""
    text = PLATFORM_NOTES.read_text(encoding="utf-8")
    section = text.split("### 3.12 ", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
    keys = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        for name in re.findall(r"`([A-Z_]+)`", cells[0]):
            keys[name] = cells[-1]
    return keys


def recipe_keys(gpu: bool) -> set[str]:
    keys = documented_keys()
    return ({key for key, cell in keys.items() if cell.startswith("always")}
            | ({key for key, cell in keys.items() if cell == "with a GPU image"} if gpu else set()))


def parse_env(text: str) -> dict[str, str]:
    """As Docker's env_file reads it: a comment or blank line is skipped, any other line is
    KEY=VALUE, the value taken as it stands (so no value may carry a comment of its own)."""
    values = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep and re.fullmatch(r"[A-Z][A-Z0-9_]*", key), f"line {number}: {line!r}"
        assert "#" not in value and value == value.strip(), f"line {number}: {line!r}"
        assert key not in values, f"line {number}: {key} twice"
        values[key] = value
    return values


def build(spec: Path, out: Path, capsys, platform: str = "codabench") -> str:
    code = build_bundle.main(["--config", str(spec), "--phase", "all", "--platform", platform,
                              "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.out[-3000:] + printed.err[-3000:]
    assert "Traceback" not in printed.err
    return printed.out


def page_items(bundle: Path) -> list[str]:
    """The evaluation page's list items under "Budgets, sandbox and hardware", as text."""
    with zipfile.ZipFile(bundle) as archive:
        page = archive.read("pages/evaluation.html").decode("utf-8")
    part = page.split("Budgets, sandbox and hardware", 1)[1].split("<h3>", 1)[0]
    return [html.unescape(re.sub(r"<[^>]+>", "", item)).strip()
            for item in re.findall(r"<li>(.*?)</li>", part, re.S)]


def promised_lines(recipe: str) -> list[str]:
    return [line[len("#  * "):] for line in recipe.splitlines() if line.startswith("#  * ")]


def with_queue(spec: Path, queue: str) -> Path:
    raw = yaml.safe_load(spec.read_text())
    raw["codabench_queue"] = queue
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    return spec


@pytest.mark.parametrize("queue", [None, QUEUE])
def test_a_gpu_image_gets_a_recipe_with_the_gpu_on_and_the_network_off(queue, tmp_path, capsys):
    spec = write_spec(tmp_path, GPU_IMAGE)
    if queue:
        with_queue(spec, queue)
    out = build(spec, tmp_path / "out", capsys)
    [bundle] = (tmp_path / "out").glob("*.zip")
    recipe = bundle.with_name(bundle.name[:-len(".zip")] + ".worker.env")
    assert recipe.is_file(), out[-2000:]
    text = recipe.read_text(encoding="utf-8")
    env = parse_env(text)
    assert set(env) == recipe_keys(gpu=True)
    assert env["USE_GPU"] == "True" and env["COMPETITION_CONTAINER_NETWORK_DISABLED"] == "True"
    assert env["GPU_DEVICE"] == "nvidia.com/gpu=all"
    assert env["BROKER_URL"].startswith("<") and env["BROKER_URL"].endswith(">")
    assert "My Resources > Queues" in text and GPU_IMAGE in text
    if queue:
        assert queue in text
    else:
        assert "codabench_queue" in text       # the queue to make and name first
    # the hardware the pages promise, word for word from the rendered page
    items = page_items(bundle)
    promised = promised_lines(text)
    assert promised and all(line in items for line in promised)
    assert any(line.startswith("memory:") for line in promised)
    assert any("GPU" in line for line in promised)
    # the summary names the file and what the worker leaves to the organizer
    assert f"worker recipe: {recipe.name}" in out
    assert "not set by the worker:" in out and "pulls" in out


def test_a_custom_queue_on_a_cpu_image_gets_a_recipe_without_the_gpu(tmp_path, capsys):
    spec = long_spec(tmp_path, QUEUE)
    raw = yaml.safe_load(spec.read_text())
    raw["docker_image"] = CPU_IMAGE
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    out = build(spec, tmp_path / "out", capsys)
    [recipe] = (tmp_path / "out").glob("*.worker.env")
    text = recipe.read_text(encoding="utf-8")
    env = parse_env(text)
    assert set(env) == recipe_keys(gpu=False)
    assert env["USE_GPU"] == "False" and env["COMPETITION_CONTAINER_NETWORK_DISABLED"] == "True"
    assert QUEUE in text and CPU_IMAGE in text
    [bundle] = (tmp_path / "out").glob("*.zip")
    promised = promised_lines(text)
    assert promised and all(line in page_items(bundle) for line in promised)
    assert "worker recipe:" in out
    # never the key that signs the run record, nor a path to it
    secret = secret_path()
    assert secret.read_text().strip() not in text and str(secret) not in text


def test_a_default_queue_cpu_competition_gets_none(tmp_path, capsys):
    spec = write_spec(tmp_path, CPU_IMAGE)
    out = build(spec, tmp_path / "out", capsys)
    assert list((tmp_path / "out").glob("*.worker.env")) == []
    assert "worker recipe" not in out and "not set by the worker" not in out


def test_codalab_gets_none_and_a_rebuild_without_the_queue_removes_the_old_one(tmp_path, capsys):
    spec = with_queue(write_spec(tmp_path, GPU_IMAGE), QUEUE)
    out = build(spec, tmp_path / "codalab", capsys, platform="codalab")
    assert list((tmp_path / "codalab").glob("*.worker.env")) == [] and "worker recipe" not in out
    build(spec, tmp_path / "out", capsys)
    assert len(list((tmp_path / "out").glob("*.worker.env"))) == 1
    build(write_spec(tmp_path, CPU_IMAGE), tmp_path / "out", capsys)
    assert list((tmp_path / "out").glob("*.worker.env")) == []


def test_the_documented_table_names_the_recipes_keys():
    keys = documented_keys()
    assert {"BROKER_URL", "USE_GPU", "GPU_DEVICE",
            "COMPETITION_CONTAINER_NETWORK_DISABLED"} <= recipe_keys(gpu=True)
    assert "CODALAB_IGNORE_CLEANUP_STEP" in keys and "GPU_DEVICE" not in recipe_keys(gpu=False)

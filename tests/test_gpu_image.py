"""A GPU image's spec: sandbox.memory_limit defaults to the resident rule there (RLIMIT_AS stops
a CUDA context), the ingestion config carries the rule, and the log and pages say what it
limits."""
import shutil
from pathlib import Path

import pytest
import yaml

from bundle.build import ingestion_limits
from bundle.phase_plan import phase_plan
from bundle.programs import ingestion_config
from bundle.render import budget_lines
from bundle.spec import SpecError, load_spec
from bundle.spec_schema import default_memory_rule, is_gpu_image
from ingestion_program.ingest.config import Limits
from ingestion_program.ingest.sandbox import Protections, describe

REPO = Path(__file__).resolve().parents[1]
LABELS_SPEC = REPO / "kinds" / "label_accuracy" / "default_spec.yaml"


@pytest.mark.parametrize("image, gpu", [
    ("codalab/codalab-legacy:gpu310", True),
    ("codalab/codalab-legacy:gpu", True),
    ("tensorflow/tensorflow:2.16.1-GPU", True),
    ("codalab/codalab-legacy:py312", False),
    ("codalab/codalab-legacy", False),
    ("registry.example.org:5000/gpu-team/image", False),      # a port, a folder: no tag
    ("registry.example.org:5000/team/image:gpu", True),
])
def test_a_gpu_image_is_told_by_its_tag(image, gpu):
    assert is_gpu_image(image) is gpu
    assert default_memory_rule(image) == ("resident" if gpu else "address_space")


def write_spec(tmp_path: Path, image: str, sandbox: dict | None = None) -> Path:
    raw = yaml.safe_load(LABELS_SPEC.read_text())
    raw["docker_image"] = image
    if sandbox is not None:
        raw["sandbox"] = sandbox
    shutil.copyfile(LABELS_SPEC.parent / raw["logo"], tmp_path / raw["logo"])
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return tmp_path / "spec.yaml"


@pytest.mark.parametrize("image, sandbox, rule", [
    ("codalab/codalab-legacy:py312", None, "address_space"),
    ("codalab/codalab-legacy:gpu310", None, "resident"),
    ("codalab/codalab-legacy:gpu310", {"memory_limit": "address_space"}, "address_space"),
    ("codalab/codalab-legacy:py312", {"memory_limit": "resident", "memory_gib": 8}, "resident"),
])
def test_the_rule_follows_the_image_unless_the_spec_names_one(tmp_path, image, sandbox, rule):
    spec = load_spec(write_spec(tmp_path, image, sandbox))
    assert spec.sandbox["memory_limit"] == rule and spec.gpu_image == is_gpu_image(image)
    limits = ingestion_limits(spec)
    assert limits["memory_rule"] == rule
    config = ingestion_config(phase_plan(spec, "evaluation", code_submission=True), limits)
    assert config["limits"]["memory_rule"] == rule


def test_an_unknown_rule_is_refused_with_its_key(tmp_path):
    with pytest.raises(SpecError) as error:
        load_spec(write_spec(tmp_path, "codalab/codalab-legacy:gpu310", {"memory_limit": "rss"}))
    assert "sandbox.memory_limit: found \"rss\", expected one of ['address_space', 'resident']" \
        in str(error.value)


def test_the_pages_say_what_each_rule_limits(tmp_path):
    resident = budget_lines(load_spec(write_spec(tmp_path, "codalab/codalab-legacy:gpu310")),
                             True)
    line = next(line for line in resident if line.startswith("memory: 4 GiB of resident"))
    assert "host RAM actually used" in line and "sampled every 100 ms" in line
    assert "a brief spike between samples is not caught" in line
    assert "GPU memory is not limited by the ingestion (the device's own memory is the bound)" \
        in line
    address = budget_lines(load_spec(write_spec(tmp_path, "codalab/codalab-legacy:py312")), True)
    line = next(line for line in address if line.startswith("memory: 4 GiB of address space"))
    assert "counts what a process reserves, not only what it uses" in line
    assert "CUDA, JAX or PyTorch" in line


@pytest.mark.parametrize("rule, words", [
    ("address_space", "limits: memory 4.0 GiB (address space, per process"),
    ("resident", "limits: memory 4.0 GiB (resident memory, summed over all your processes"),
])
def test_the_log_states_the_rule(rule, words):
    limits = Limits(4 * 2**30, 2**28, 2**30, 256, 128, 2.0, 2**17, None, memory_rule=rule)
    lines = describe(Protections(None, None, False, True), limits, [])
    line = next(line for line in lines if line.startswith("limits:"))
    assert line.startswith(words) and f"rule: {rule})" in line


@pytest.mark.parametrize("platform, queue", [("codalab", None), ("codabench", None),
                                             ("codabench", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")])
def test_a_gpu_competition_builds_and_dry_runs_and_says_the_gpu_is_the_queues(
        platform, queue, tmp_path):
    """Built and dry-run on the gpu310 image: the python-version rule passes the shipped
    programs, the dry run names what it cannot check about the image, and the summary warns
    that only a queue of GPU workers gives the container a GPU (unless a queue is named)."""
    import subprocess
    import sys
    spec = write_spec(tmp_path, "codalab/codalab-legacy:gpu310")
    if queue:
        raw = yaml.safe_load(spec.read_text())
        raw["codabench_queue"] = queue
        spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    result = subprocess.run([sys.executable, str(REPO / "build_bundle.py"), "--config", str(spec),
                             "--phase", "all", "--platform", platform, "--check", "--out",
                             str(tmp_path / "out")], cwd=REPO, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "dry run passed" in result.stdout
    assert "not inside codalab/codalab-legacy:gpu310 (its own Python and packages" in result.stdout
    warned = "is a GPU image, but a container gets the GPU only on workers started with USE_GPU"
    assert (warned in result.stdout) is (queue is None)

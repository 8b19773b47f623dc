"""The kind seam: a second kind builds and dry-runs on both platforms through the same core,
and the core holds no kind's vocabulary."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kinds import KINDS

REPO = Path(__file__).resolve().parents[1]
TEST_KIND_SPEC = REPO / "kinds" / "label_accuracy" / "default_spec.yaml"
# The core: everything a kind plugs into. Docs, tests and benchmarks may name a kind.
CORE = ("build_bundle.py", "bundle", "ingestion_program", "scoring_program", "starting_kit",
        "competition_formats", "reference_data", "scripts", "kinds/__init__.py",
        "kinds/scoring.py", "kinds/report.py", "kinds/svg_charts.py")
BDL_WORDS = re.compile(r"agreement|total.variation|wasserstein|\bhmc\b|posterior", re.IGNORECASE)
# "" : files without a suffix (a program's metadata) are read too
SOURCE_SUFFIXES = {".py", ".j2", ".yaml", ".json", ".md", ".sh", ""}


def core_files():
    for entry in CORE:
        path = REPO / entry
        files = [path] if path.is_file() else sorted(path.rglob("*"))
        yield from (f for f in files if f.is_file() and f.suffix in SOURCE_SUFFIXES
                    and "__pycache__" not in f.parts)


def test_core_files_include_those_without_a_suffix():
    assert {REPO / "scoring_program" / "metadata",
            REPO / "ingestion_program" / "metadata"} <= set(core_files())


def test_the_core_has_no_bdl_vocabulary():
    hits = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
            for path in core_files()
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if BDL_WORDS.search(line)]
    assert not hits, "\n".join(hits)


def test_the_core_imports_no_kind_package():
    names = "|".join(re.escape(name) for name in KINDS)
    pattern = re.compile(rf"kinds\.({names})\b|kinds/({names})/")
    hits = [f"{path.relative_to(REPO)}:{number}" for path in core_files()
            if path.suffix == ".py" and path != REPO / "kinds" / "__init__.py"
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if pattern.search(line)]
    assert not hits, hits


def test_the_test_kind_is_its_package_and_one_registration_line():
    assert KINDS["label_accuracy"] == "kinds.label_accuracy"
    package = REPO / "kinds" / "label_accuracy"
    assert {p.name for p in package.iterdir()} >= {"kind.py", "runtime", "templates",
                                                    "default_spec.yaml"}


@pytest.mark.slow
@pytest.mark.parametrize("platform", ["codalab", "codabench"])
def test_the_test_kind_builds_and_dry_runs(platform, tmp_path):
    result = subprocess.run(
        [sys.executable, str(REPO / "build_bundle.py"), "--config", str(TEST_KIND_SPEC),
         "--platform", platform, "--phase", "all", "--check", "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # its spec takes the default layout: one competition holding both phases
    assert result.stdout.count("dry run passed") == 1
    assert [p.name for p in tmp_path.glob("*.zip")] == [
        f"label-accuracy{'-codabench' if platform == 'codabench' else ''}.zip"]
    table = result.stdout.split("dry run of", 1)[1]
    assert re.search(r"^Development +scoring .* ok$", table, re.MULTILINE)
    assert re.search(r"^Evaluation +ingestion .* ok$", table, re.MULTILINE)
    # the nearest-centroid sample submission really learns: accuracy well above chance
    accuracy = [float(v) for v in re.findall(r"wine_accuracy=([0-9.]+)", result.stdout)]
    assert accuracy[-1] > 0.8


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_program_metadata_is_the_kinds(kind, tmp_path):
    """The description a platform shows for each program: the kind's words and entry file,
    never another kind's."""
    import yaml
    from bundle.kinds import entry_file, kind_definition
    from bundle.phase_plan import code_variant, phase_plan
    from bundle.programs import assemble_ingestion_program, assemble_scoring_program
    from bundle.spec import load_spec
    definition = kind_definition(kind)
    spec = load_spec(definition.DEFAULT_SPEC)
    plan = phase_plan(spec, spec.phases[0].key, None)
    scoring = assemble_scoring_program(plan, tmp_path / "scoring")
    ingestion = assemble_ingestion_program(code_variant(spec, plan), tmp_path / "ingestion")
    for folder in (scoring, ingestion):
        for name in ("metadata", "metadata.yaml"):
            metadata = yaml.safe_load((folder / name).read_text())
            assert set(metadata) == {"command", "description"}, (folder, name)
    scoring_text = yaml.safe_load((scoring / "metadata").read_text())["description"]
    ingestion_text = yaml.safe_load((ingestion / "metadata").read_text())["description"]
    assert entry_file(definition) in ingestion_text, ingestion_text
    others = {entry_file(kind_definition(k)) for k in KINDS} - {entry_file(definition)}
    assert not any(other in ingestion_text for other in others), ingestion_text
    if kind != "bdl2021":
        assert not BDL_WORDS.search(scoring_text + ingestion_text), scoring_text
    assert scoring_text == definition.SCORING_DESCRIPTION

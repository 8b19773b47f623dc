"""bundle/cli.py: one command routing to the existing command lines; usage errors in one
line, never a traceback."""
from __future__ import annotations

import pytest

import build_bundle
from bundle import cli
from kinds import KINDS


def test_help_lists_every_subcommand(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("new", "build", "check", "convert", "references", "baselines", "local-run",
                    "ranks"):
        assert f"  {command} " in out


@pytest.mark.parametrize("argv, expected", [
    (["bogus"], "unknown command 'bogus'"),
    (["references", "verify", "--kind", "nope"], "expected one of " + ", ".join(sorted(KINDS))),
    (["references", "frobnicate"], "expected generate, verify or export"),
    (["convert", "x"], "expected --kind KIND"),
    (["baselines", "--kind", "label_accuracy"], "has no baseline table"),
])
def test_usage_mistakes_are_one_line_with_status_2(capsys, argv, expected):
    assert cli.main(argv) == 2
    error = capsys.readouterr().err
    assert expected in error and error.count("\n") == 1 and "Traceback" not in error


def test_routes_hand_the_rest_of_the_line_to_the_existing_main(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr(build_bundle, "IMAGE_PYTHON", build_bundle.IMAGE_PYTHON)  # restored
    monkeypatch.setattr(build_bundle, "main", lambda argv: seen.setdefault("build", argv) and 0)
    monkeypatch.chdir(tmp_path)
    cli.main(["build", "--phase", "all"])
    assert seen["build"] == ["--phase", "all", "--out", str(tmp_path / "dist")]
    monkeypatch.setenv(cli.IMAGE_PYTHON_VARIABLE, "/opt/image/bin/python")
    seen.clear()
    cli.main(["check", "dist/x.zip"])
    assert seen["build"] == ["--check", "dist/x.zip"]
    assert str(build_bundle.IMAGE_PYTHON) == "/opt/image/bin/python"


def test_references_route_to_the_kinds_reference_command(monkeypatch):
    import reference_data.__main__ as reference_main
    seen = []
    monkeypatch.setattr(reference_main, "main", lambda argv: seen.append(argv) or 0)
    assert cli.main(["references", "verify", "--kind", "pgdl2020", "--root", "r"]) == 0
    assert cli.main(["convert", "--kind", "retina", "data/task"]) == 0
    assert seen == [["--kind", "pgdl2020", "verify", "--root", "r"],
                    ["--kind", "retina", "convert", "data/task"]]


def test_the_image_environment_is_the_clones_or_one_in_the_cache(monkeypatch, tmp_path):
    monkeypatch.delenv(cli.IMAGE_PYTHON_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cli.image_environment_folder() == tmp_path / "codabench-bundle" / "image-env"
    if (cli.REPO / ".venv-image" / "bin" / "python").exists():
        assert cli.image_python() == cli.REPO / ".venv-image" / "bin" / "python"

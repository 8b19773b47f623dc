"""The acceptance of issue 53 item 1-2: the built wheel installed into a clean virtual
environment, then `new`, `build` and `check` for every kind, with no other set-up (the
dry run's image environment is made in the cache folder on first use). Needs the package
index (pip installs the build backend, the dependencies and the image's packages)."""
from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from kinds import KINDS

REPO = Path(__file__).resolve().parents[1]


def _run(argv, cwd, env, timeout=900):
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, f"{argv}: {result.returncode}\n{result.stdout[-3000:]}\n" \
                                   f"{result.stderr[-3000:]}"
    return result


@pytest.mark.slow
@pytest.mark.extended
def test_the_wheel_installs_and_every_kind_starts_builds_and_dry_runs(tmp_path):
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir",
          str(tmp_path / "wheel"), str(REPO)], tmp_path, env)
    wheel = next((tmp_path / "wheel").glob("codabench_bundle-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "requirements-image.txt" in names and "build_bundle.py" in names
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(
        ".dist-info/METADATA"))).decode()
    # what an index and `pip show` give: the tool's name, its own summary and its licence
    assert "Name: codabench-bundle" in metadata and "License-Expression: Apache-2.0" in metadata
    assert "Summary: Turns one competition spec" in metadata
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    for name in KINDS:
        folder = f"kinds/{name}/"
        assert any(n.startswith(folder) and n.endswith("default_spec.yaml") for n in names)
    venv.EnvBuilder(with_pip=True).create(tmp_path / "env")
    tool = tmp_path / "env" / "bin" / "codabench-bundle"
    _run([str(tmp_path / "env" / "bin" / "python"), "-m", "pip", "install", "--quiet",
          str(wheel)], tmp_path, env)
    for name in KINDS:
        _run([str(tool), "new", name, "--kind", name, "--yes"], tmp_path, env)
        _run([str(tool), "build", "--config", f"{name}/spec.yaml", "--phase", "all",
              "--out", f"{name}/dist"], tmp_path, env)
        checked = _run([str(tool), "check", "--config", f"{name}/spec.yaml", "--phase", "all",
                        "--out", f"{name}/dist"], tmp_path, env)
        assert "dry run passed" in checked.stdout
        assert str(tmp_path / "cache" / "codabench-bundle" / "image-env") in checked.stdout

"""A starting kit's guide starts with the one command that installs what the kit needs
(issue 48, item 7), and that command is enough ("That is all the commands of this guide
need"): from a bare virtual environment (pip and nothing else), the guide's install line, then
every other command of the guide, run as written and checked as test_guide_commands checks
them (scores printed, predictions zipped), for every phase's Codabench kit of every kind's
default competition. A framework only some baselines use (PyTorch: several GB) has an
optional line of its own, which the basic line does not pull in."""
import re
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml

from kinds.kind import KINDS
from kit_environments import on_one_core, shared_bare_environment  # noqa: F401  (fixtures)
from test_guide_commands import (INSTALL_PREFIX, guide_commands, phase_kits,
                                 run_as_written, run_guide_commands)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_the_record_names_what_the_kit_imports(tmp_path):
    """The basic line: the image's packages that any kit file imports (yaml as pyyaml), and
    all the guide's baseline needs; the standard library and the kit's own modules are left
    out. A framework outside the image that other baselines need, directly or through a
    baseline they import, is an optional line naming those baselines; one the programs import
    (tried where the image has it) is neither."""
    from bundle.kit_requirements import kit_requirements, write_requirements
    image = tmp_path / "requirements-image.txt"
    image.write_text("# the image\nnumpy==1.26.4\npyyaml==6.0.2\nscikit-learn==1.5.1\n")
    kit = tmp_path / "kit"
    write(kit / "worker.py", "import json\nimport yaml\n")
    write(kit / "programs" / "ingestion_program" / "ingest" / "main.py", """\
        import numpy as np
        from ingest import supervisor
        from . import config
        def to_torch():
            import torch
        """)
    write(kit / "programs" / "ingestion_program" / "ingest" / "supervisor.py", "import os\n")
    write(kit / "baselines" / "shared_network.py", "import torch\nimport numpy\n")
    write(kit / "baselines" / "torch_net.py", "from shared_network import Net\n")
    write(kit / "baselines" / "forest.py", "from sklearn.ensemble import RandomForestClassifier\n")
    write(kit / "baselines" / "jax_model.py", "import jax.numpy as jnp\n")
    write(kit / "baselines" / "example.py", "import scipy.stats\nfrom forest import fit\n")
    record = kit_requirements(kit, "example.py", image)
    # torch is an import of the programs too, but only the baselines make it a line of its own
    assert record["packages"] == ["numpy", "pyyaml", "scikit-learn", "scipy"]
    assert record["optional"] == [
        {"package": "jax", "files": ["baselines/jax_model.py"]},
        {"package": "torch", "files": ["baselines/shared_network.py", "baselines/torch_net.py"]}]
    assert record["command"] == "python -m pip install -r requirements.txt"
    assert record["image_versions"] == ""          # the kit has no copy of the image's versions
    write_requirements(kit, record)
    lines = (kit / record["file"]).read_text().splitlines()
    assert [line for line in lines if not line.startswith("#")] == record["packages"]


def importable(module: str, env: dict[str, str]) -> bool:
    return subprocess.run(["python", "-c", f"import {module}"], env=env,
                          capture_output=True).returncode == 0


def reader_install_lines(commands: list[str]) -> list[str]:
    """The install lines a reader runs first (not the optional framework lines)."""
    return [command for command in commands
            if command.startswith(INSTALL_PREFIX) and "-r " in command]


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_bare_environment_runs_each_kit_after_its_install_line(kind, tmp_path, built_bundles,
                                                                 shared_bare_environment,
                                                                 on_one_core):
    """Kits whose install lines and requirement files are the same (a kind's phases, and
    kinds alike) share one bare environment (kit_environments.py): their install lines would
    leave the same packages in it. Each kit's install lines still run as written, in it. On
    one core (kit_environments.one_core: the newest numpy, which the bare environment gets,
    spent up to twice the CPU on the BDL kit's sgld with a BLAS thread per core)."""
    spec = KINDS[kind].DEFAULT_SPEC
    bundles = sorted(built_bundles(spec, "codabench").glob("*.zip"))
    assert bundles, f"{kind}'s default spec built no bundle"
    phases = []
    for phase, kit in phase_kits(bundles, tmp_path / "kits"):
        phases.append(phase)
        guide = (kit / "README.md").read_text()
        commands = guide_commands(guide)
        installs = [command for command in commands if command.startswith(INSTALL_PREFIX)]
        install_lines = reader_install_lines(commands)
        requirements = b"".join((kit / name).read_bytes() for name in sorted(
            set(re.findall(r"-r (\S+)", " ".join(install_lines)))) if (kit / name).is_file())
        with shared_bare_environment(tuple(install_lines), requirements) as shared:
            env = shared.env
            if shared.created:
                assert not importable("yaml", env) and not importable("numpy", env), \
                    "the environment is not bare"
            else:       # what this kit's install lines would leave in a bare one, no more
                assert shared.installed_before == shared.installed_by_install_lines, (
                    phase, shared.installed_before, shared.installed_by_install_lines)
            for command in install_lines:
                result = run_as_written(command, kit, env)
                log = result.stdout + result.stderr
                assert result.returncode == 0 and "Traceback" not in log, (phase, command,
                                                                          log[-3000:])
        run_guide_commands(phase, kit, env)
        # the guide starts with its install line, and the heavy frameworks stay out of it
        assert commands[0].startswith(INSTALL_PREFIX), (phase, commands[0])
        optional = [command.split()[-1] for command in installs[1:]]
        for package in optional:
            assert not importable(package, env), (phase, package)
        for command in installs[1:]:
            assert re.fullmatch(rf"{INSTALL_PREFIX} [\w.-]+", command), (phase, command)
    assert len(phases) == len(yaml.safe_load(spec.read_text())["phases"]), phases

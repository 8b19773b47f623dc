"""Every command a starting kit's guide shows runs as written, from the extracted kit (issue
25, item 1), in every phase's kit. A local run prints every key of its scores with a number: on
the phase's public references, or, where they are hidden, on the kit's public stand-in, which
the output names (item 2).

Where each kit runs: the Codabench kits of every kind's default competition run in a bare
environment after their guide's install line (test_kit_install_line, the environment a reader
has), through ``run_guide_commands`` below; CodaLab's default kits and an organizer's kits
(test_guide_commands_more) run with the docker image's Python as ``python``, the environment
of a reader who tests in the competition's image. So the kit's tools run under both the
newest packages and the image's pinned ones, and each kit's commands once, not twice."""
import io
import json
import math
import os
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from kinds.kind import KINDS

REPO = Path(__file__).resolve().parents[1]
IMAGE_BIN = REPO / ".venv-image" / "bin"
pytestmark = pytest.mark.slow
STAND_IN_HEADING = "scores on the public stand-in, not on this phase's hidden test data"
# A guide's install lines run in a bare environment of their own (test_kit_install_line): here
# the image's environment, shared by the whole run, already has the image's packages and must
# not get others (an optional line installs PyTorch). The install line's requirements.txt names
# packages without versions (a bare environment gets the newest numpy, not the image's), so a
# run there does not stand in for a run here: both run.
INSTALL_PREFIX = "python -m pip install"


def guide_commands(guide: str) -> list[str]:
    """The commands of a guide, in the order a reader meets them: the lines of its ``bash``
    blocks and the ``python ...`` spans of its text."""
    found = [(m.start(), line) for m in re.finditer(r"```bash\n(.*?)```", guide, re.DOTALL)
             for line in m.group(1).splitlines() if line.strip() and not line.startswith("#")]
    found += [(m.start(), m.group(1)) for m in re.finditer(r"`(python [^`]+)`", guide)]
    return list(dict.fromkeys(command for _, command in sorted(found)))


def phase_kits(bundles: list[Path], destination: Path):
    """(phase, extracted kit folder), one per phase (a track's kit is its phase's)."""
    seen = set()
    for bundle in bundles:
        with zipfile.ZipFile(bundle) as outer:
            for name in sorted(n for n in outer.namelist() if n.endswith("starting_kit.zip")):
                with zipfile.ZipFile(io.BytesIO(outer.read(name))) as kit_zip:
                    config = next(n for n in kit_zip.namelist() if n.endswith("kit.json"))
                    phase = json.loads(kit_zip.read(config))["phase"]
                    if phase in seen:
                        continue
                    seen.add(phase)
                    kit_zip.extractall(destination / phase)
                kit = next(path.parent for path in (destination / phase).rglob("kit.json"))
                yield phase, kit


def printed_scores(stdout: str, heading: str) -> dict:
    block = stdout.split(f"\n{heading}:\n")[1].split("\n\n")[0].splitlines()
    return {key: float(value) for key, value in (line.split(": ") for line in block)}


def image_environment() -> dict[str, str]:
    """The test run's environment with the docker image's Python first on PATH."""
    return {**os.environ, "PATH": f"{IMAGE_BIN}{os.pathsep}{os.environ['PATH']}"}


def run_as_written(command: str, kit: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=kit, env=env, capture_output=True,
                          text=True, timeout=900)


def check_scores(phase: str, kit: Path, stdout: str) -> None:
    """A local run printed every key it scores with a finite number, and said on what."""
    config = json.loads((kit / "kit.json").read_text())
    if "\nscores:\n" in stdout:
        keys, scores = config["leaderboard_keys"], printed_scores(stdout, "scores")
    else:
        stand_in = config["stand_in"]
        keys, scores = stand_in["leaderboard_keys"], printed_scores(stdout, STAND_IN_HEADING)
        assert all(line in stdout for line in stand_in["about"]), phase
        # the phase's metrics (and a code run's seconds), on the stand-in's tasks; where the
        # stand-in keeps the phase's task names, every key of its leaderboard
        metrics = {key.rsplit("_", 1)[-1] for key in config["leaderboard_keys"]}
        assert {key.rsplit("_", 1)[-1] for key in keys} <= metrics | {"seconds"}, phase
        if set(config["tasks"]) <= {about.split(":")[0] for about in stand_in["about"]}:
            assert set(config["leaderboard_keys"]) <= set(keys), phase
    assert list(scores) == keys, (phase, list(scores), keys)
    assert all(math.isfinite(value) for value in scores.values()), (phase, scores)


def check_predictions_zip(archive: Path, kit: Path) -> None:
    """One file per task, each what the ingestion wrote (its logs and record stay out)."""
    with zipfile.ZipFile(archive) as opened:
        names = sorted(opened.namelist())
    tasks = json.loads((kit / "kit.json").read_text())["tasks"]
    assert len(names) == len(tasks) and all(name.endswith(".npy") for name in names), names


def run_guide_commands(phase: str, kit: Path, env: dict[str, str]) -> None:
    """Runs every command of a kit's guide but its install lines, in order, in ``env``, and
    checks what each printed or wrote."""
    commands = guide_commands((kit / "README.md").read_text())
    assert any("run_local.py" in command for command in commands), phase
    config = json.loads((kit / "kit.json").read_text())
    public = (kit / "data" / "reference").is_dir()
    for command in (command for command in commands if not command.startswith(INSTALL_PREFIX)):
        result = run_as_written(command, kit, env)
        log = result.stdout + result.stderr
        assert result.returncode == 0 and "Traceback" not in log, (phase, command, log[-3000:])
        if command.startswith("python run_local.py") and not public and (
                "--results" in command or "stand_in" not in config):
            # hidden references: files are checked; code too where there is no stand-in
            assert "predictions were checked, not scored" in result.stdout, phase
        elif command.startswith("python run_local.py"):
            check_scores(phase, kit, result.stdout)
        if command.startswith("python predictions_zip.py"):
            check_predictions_zip(kit / command.split()[-1], kit)


def run_every_guide_command(bundles: list[Path], work: Path) -> list[str]:
    """Runs each kit's commands with the image's Python; returns the phases whose kits ran."""
    phases = []
    for phase, kit in phase_kits(bundles, work):
        run_guide_commands(phase, kit, image_environment())
        phases.append(phase)
    return phases


def test_guide_commands_are_found_in_order():
    guide = ("Zip it: `python submission_zip.py a/ b.zip`, then\n```bash\npython run_local.py "
             "--code b.zip\n```\nand `python run_local.py --code b.zip` again; `run_local.py`.")
    assert guide_commands(guide) == ["python submission_zip.py a/ b.zip",
                                     "python run_local.py --code b.zip"]


def every_command_of_a_default_kit_runs_as_written(kind, platform, tmp_path, built_bundles):
    """``built_bundles`` (conftest.py) builds the kind's default competition once a test run;
    its kits are extracted here, and run in their copies with the image's Python."""
    spec = KINDS[kind].DEFAULT_SPEC
    bundles = sorted(built_bundles(spec, platform).glob("*.zip"))
    assert bundles, f"{kind}'s default spec built no bundle"
    phases = run_every_guide_command(bundles, tmp_path / "kits")
    assert len(phases) == len(__import__("yaml").safe_load(spec.read_text())["phases"])

"""Every phase's starting kit scores a local run, with the phase's own scoring program: on its
public references, or, where they are hidden, on a public stand-in that the output names."""
import io
import json
import math
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
# A quick code submission of each kind (the kit's own files): none trains to its budget.
QUICK_CODE = {"bdl2021": "baselines/trivial.py", "pgdl2020": "sample_code_submission.zip",
              "retina": "baselines/map.py"}


def phase_kits(bundles: list[Path]):
    """(phase, kit zip bytes), one kit per phase (a track's kit is its phase's)."""
    seen = set()
    for bundle in bundles:
        with zipfile.ZipFile(bundle) as outer:
            for name in sorted(n for n in outer.namelist() if n.endswith("starting_kit.zip")):
                kit = outer.read(name)
                phase = json.loads(zipfile.ZipFile(io.BytesIO(kit)).read(
                    next(n for n in zipfile.ZipFile(io.BytesIO(kit)).namelist()
                         if n.endswith("kit.json"))))["phase"]
                if phase not in seen:
                    seen.add(phase)
                    yield phase, kit


def printed_scores(stdout: str, heading: str) -> dict:
    block = stdout.split(f"\n{heading}:\n")[1].split("\n\n")[0].splitlines()
    return {key: float(value) for key, value in (line.split(": ") for line in block)}


@pytest.mark.parametrize("kind", sorted(QUICK_CODE))
def test_every_phases_kit_prints_every_leaderboard_key_with_a_number(kind, tmp_path):
    out = tmp_path / "dist"
    build = subprocess.run([sys.executable, "build_bundle.py", "--config",
                            f"kinds/{kind}/default_spec.yaml", "--phase", "all", "--out", str(out)],
                           cwd=REPO, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    phases = 0
    for phase, kit_zip in phase_kits(sorted(out.glob("*.zip"))):
        kit = tmp_path / phase
        zipfile.ZipFile(io.BytesIO(kit_zip)).extractall(kit)
        kit = next(path.parent for path in kit.rglob("kit.json"))
        config = json.loads((kit / "kit.json").read_text())
        public = (kit / "data" / "reference").is_dir()
        args = (["--results", "sample_result_submission.zip"] if public
                else ["--code", QUICK_CODE[kind]])
        run = subprocess.run([sys.executable, "run_local.py", *args, "--out", "run"], cwd=kit,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, (phase, run.stdout[-3000:] + run.stderr[-3000:])
        if public:
            keys, scores = config["leaderboard_keys"], printed_scores(run.stdout, "scores")
        else:
            stand_in = config["stand_in"]
            keys = stand_in["leaderboard_keys"]
            scores = printed_scores(run.stdout, "scores on the public stand-in, not on this "
                                                "phase's hidden test data")
            assert all(line in run.stdout for line in stand_in["about"])
            # the phase's metrics (and a code run's seconds), on the stand-in's tasks; where
            # the stand-in keeps the phase's task names, every key of its leaderboard
            metrics = {key.rsplit("_", 1)[-1] for key in config["leaderboard_keys"]}
            assert {key.rsplit("_", 1)[-1] for key in keys} <= metrics | {"seconds"}, phase
            if set(config["tasks"]) <= {about.split(":")[0] for about in stand_in["about"]}:
                assert set(config["leaderboard_keys"]) <= set(keys), phase
        assert list(scores) == keys, phase
        assert all(math.isfinite(value) for value in scores.values()), (phase, scores)
        phases += 1
    assert phases == len(__import__("yaml").safe_load(
        (REPO / "kinds" / kind / "default_spec.yaml").read_text())["phases"])

"""BDL's baselines command (kit/baseline_results.py) when a baseline fails a task: it fails
unless told to keep going, and then writes the row as failed, with its category, never the
scorer's worst figures as a result. How every reader of a table shows such a row is tested on
every kind's table in tests/test_failed_baselines.py."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from runtime import failures
from test_custom_kit import write_task

REPO = Path(__file__).resolve().parents[3]
TITLES = "|".join(re.escape(failure.title) for failure in failures.FAILURES)


def one_task_spec(root: Path, sandbox: dict | None = None) -> tuple[Path, Path]:
    """(spec file, data root): one code phase on one small task of the organizer's own;
    ``sandbox``: spec keys of the phase's sandbox to change."""
    import shutil

    import numpy as np
    import yaml
    data = root / "data"
    write_task(data, "moons", np.random.default_rng(1))
    default_spec = REPO / "kinds" / "bdl2021" / "default_spec.yaml"
    spec = yaml.safe_load(default_spec.read_text())
    spec.update(slug="failing-baseline", title="Moons", description="One task.",
                tasks={"moons": {"budget_seconds": 5}}, tracks={},
                phases={"final": {"label": "Final", "start": "2027-04-01 00:00:00",
                                  "submission": "code", "tasks": ["moons"],
                                  "execution_time_limit": 300}})
    spec["sandbox"] = {**spec.get("sandbox", {}), **(sandbox or {})}
    (root / "spec").mkdir()
    shutil.copyfile(default_spec.parent / spec["logo"], root / "spec" / spec["logo"])
    spec_file = root / "spec" / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    return spec_file, data


@pytest.mark.slow
def test_a_baseline_that_fails_fails_the_command_unless_told_to_keep_going(tmp_path):
    """10 MiB of address space: the baseline's process cannot even load numpy, at any speed
    of the machine (a tiny budget was not enough: a fast run delivered a checkpoint in it),
    and the scorer penalises the task."""
    spec_file, data = one_task_spec(tmp_path, {"memory_gib": 0.01,
                                               "memory_limit": "address_space"})
    table_file = spec_file.parent / "baseline_results.json"
    command = [sys.executable, str(REPO / "kinds" / "bdl2021" / "kit" / "baseline_results.py"),
               "--config", str(spec_file), "--data-root", str(data), "--methods", "sgld",
               "--budget", "0.001"]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    assert re.search(rf"^error: sgld on moons: ({TITLES}): ", run.stderr,
                     re.MULTILINE), run.stderr
    assert "--keep-going" in run.stderr and not table_file.exists()

    kept = subprocess.run(command + ["--keep-going"], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert kept.returncode == 0, kept.stdout[-3000:] + kept.stderr[-3000:]
    assert "warning: written as failed: sgld on moons" in kept.stderr
    row = json.loads(table_file.read_text())["tasks"]["moons"]["methods"]["sgld"]
    assert row["penalty"] and failures.known(row["failure"]) and "metrics" not in row
    markdown = [line for line in kept.stdout.splitlines() if line.startswith("| moons")]
    assert markdown and all(re.search(rf"\| failed: ({TITLES}) \|", line) for line in markdown)
    assert "± 1.000" not in kept.stdout

"""The build's check of a code phase's starting kit: the kit's own sample submission, run by
the kit's own ``run_local.py`` as a participant's first local run does
(``python run_local.py --code sample_code_submission/``, in the kit), so that a kit whose
sample crashes fails the build instead of the participant.

That run trains the sample on the phase's public inputs, then, where the phase's references
are hidden, on the kit's public stand-in (``stand_in/``), which it scores. The check runs it
in a copy of the kit whose ingestion configs give every task at most
``CHECK_BUDGET_SECONDS``: the kit itself, and what is zipped, keep the spec's budgets.

A task that only ran out of that cut budget is no defect of the kit (a network too large to
train in it, on this machine): the check then says it could not see that task to its end and
lets the build go on. A task that failed or returned invalid predictions, or a local run that
failed for any other reason, fails the build with run_local's own words.

``BUNDLE_KIT_CHECK=off`` skips the check. The test suite sets it, outside the tests about it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from ingestion_program.ingest.config import CONFIG_NAME as INGESTION_CONFIG_NAME, load_config

from .render import SAMPLE_FOLDERS

CHECK_BUDGET_SECONDS = 2.0
# "off" skips the check: the test suite builds code phases hundreds of times, and the tests
# that are about the kit's sample run it themselves (conftest.py, test_bdl_image_inputs_kit)
SWITCH = "BUNDLE_KIT_CHECK"
KIT_CONFIG = "kit.json"
RUN_LOCAL = "run_local.py"
RECORD_NAME = "ingestion_record.json"
TIMED_OUT = "timed_out"
# Files this large are linked into the check's copy, not copied: the run copies the inputs
# it ingests anyway, and a CIFAR-sized kit holds a gigabyte of them.
LINK_BYTES = 2**20
# Beyond the ingestion runs' own worst case: starting run_local, zipping, scoring.
RUN_MARGIN_SECONDS = 300.0


class KitCheckError(ValueError):
    """The kit's sample does not run through the kit's own local run; the message says why."""


def check_kit_sample(kit: Path, say: Callable[[str], None] = lambda message: None) -> Path:
    """Run the sample of a code phase's kit through the kit's run_local.py with cut budgets;
    raises KitCheckError when it fails. A results phase's kit is returned unchecked (its
    sample is prediction files, which the build's rules check)."""
    config = json.loads((kit / KIT_CONFIG).read_text(encoding="utf-8"))
    if not config["code_submission"]:
        return kit
    if os.environ.get(SWITCH) == "off":
        say(f"  kit check: skipped ({SWITCH}=off)")
        return kit
    command = f"python {RUN_LOCAL} --code {SAMPLE_FOLDERS[True]}/"
    where = "the phase's inputs" + (" and the public stand-in" if config.get("stand_in") else "")
    say(f"  kit check: {command} in the starting kit, on {where}, "
        f"every budget cut to {CHECK_BUDGET_SECONDS:g} s ...")
    started = time.monotonic()
    # Beside the kit, in the build's work folder: the run copies the inputs it ingests.
    with tempfile.TemporaryDirectory(prefix=".kit-check-", dir=kit.parent) as work:
        copy = copy_with_cut_budgets(kit, Path(work) / "kit")
        result = run_sample(copy, Path(work) / "run", command)
        statuses = task_statuses(Path(work) / "run")
    verdict = judge(result, statuses, command)
    say(f"  kit check: {verdict} ({time.monotonic() - started:.1f} s)")
    return kit


def copy_with_cut_budgets(kit: Path, destination: Path) -> Path:
    shutil.copytree(kit, destination, copy_function=_copy_or_link)
    for config in destination.rglob(INGESTION_CONFIG_NAME):
        raw = json.loads(config.read_text(encoding="utf-8"))
        config.write_text(json.dumps(_cut_budgets(raw)), encoding="utf-8")
    return destination


def _copy_or_link(source: str, destination: str) -> None:
    if os.path.getsize(source) >= LINK_BYTES:
        os.symlink(os.path.abspath(source), destination)
    else:
        shutil.copy2(source, destination)


def _cut_budgets(value):
    """Every ``budget_seconds`` of an ingestion config, wherever it is (a task's, or one a
    competition rule runs besides the phase's), at most CHECK_BUDGET_SECONDS. A budget in
    epochs is capped by its task's budget_seconds, so it is cut too."""
    if isinstance(value, dict):
        return {key: (min(item, CHECK_BUDGET_SECONDS) if key == "budget_seconds"
                      and isinstance(item, (int, float)) else _cut_budgets(item))
                for key, item in value.items()}
    if isinstance(value, list):
        return [_cut_budgets(item) for item in value]
    return value


def run_sample(kit: Path, work: Path, command: str) -> subprocess.CompletedProcess:
    """The kit's run_local.py on its sample folder, in the kit's folder, as typed there."""
    limit = RUN_MARGIN_SECONDS + sum(load_config(config).total_seconds()
                                     for config in kit.rglob(INGESTION_CONFIG_NAME))
    argv = [sys.executable, *command.split()[1:], "--out", str(work)]
    try:
        return subprocess.run(argv, cwd=kit, capture_output=True, text=True, errors="replace",
                              timeout=limit)
    except subprocess.TimeoutExpired:
        raise KitCheckError(f"the kit's own sample did not finish `{command}` within "
                            f"{limit:.0f} s (every budget cut to {CHECK_BUDGET_SECONDS:g} s for "
                            "this check)") from None


def task_statuses(run: Path) -> dict[str, tuple[str, str]]:
    """Each task the local run ingested (the phase's, then the stand-in's, which are named
    ``stand-in <task>``): (status, message), from the ingestion records."""
    statuses = {}
    for record in sorted(run.rglob(RECORD_NAME)):
        stand_in = "stand_in" in record.relative_to(run).parts
        for name, task in json.loads(record.read_text(encoding="utf-8")).get("tasks", {}).items():
            statuses[f"stand-in {name}" if stand_in else name] = (task.get("status", "?"),
                                                                  task.get("message", ""))
    return statuses


def judge(result: subprocess.CompletedProcess, statuses: dict[str, tuple[str, str]],
          command: str) -> str:
    """What the check says of a run that passed; KitCheckError for one that did not."""
    timed_out = sorted(name for name, (status, _) in statuses.items() if status == TIMED_OUT)
    broken = {name: f"{status}: {message}" for name, (status, message) in statuses.items()
              if status not in ("ok", TIMED_OUT)}
    if result.returncode == 0:
        return f"passed: the sample returned predictions on all {len(statuses)} task(s)"
    if timed_out and not broken:
        return (f"passed, not seen to the end: the sample ran out of the cut budget on "
                f"{', '.join(timed_out)}, without failing; "
                "the dry run (--check) runs it with the spec's budgets")
    errors = [line.removeprefix("error: ") for line in result.stderr.splitlines()
              if line.startswith("error: ")]
    reasons = [f"{name}: {text}" for name, text in broken.items()] or errors or \
        result.stderr.strip().splitlines()[-15:] or [f"exit status {result.returncode}"]
    raise KitCheckError(
        f"the starting kit's own sample fails a participant's first local run (`{command}` "
        f"in the kit, exit {result.returncode}; every budget cut to {CHECK_BUDGET_SECONDS:g} s "
        "for this check):\n    " + "\n    ".join(reasons))

"""Every embedded task regenerates to the byte on the machine that made it.

``python -m reference_data generate --tasks <task> --out DIR`` is run and every file it writes
is compared with the committed one. On the machine that made the committed files (the CPU
model is in ``generation_log.json``) the bytes are equal. On another CPU, XLA and BLAS may
compile other instructions whose rounding differs in the last bit; NUTS trajectories then
part ways and the chains take other, equally valid paths, so elsewhere the bar is agreement
within Monte Carlo error (``crosscheck.agreement_p_value``), as for any independent run.

iris is checked in every run, by ``test_bdl_generate.py``'s regeneration into a folder that
holds other references (through ``assert_regenerated_as_committed``). The other tasks take
minutes each on 2 cores (digits_cnn about half an hour), so they run where ``BDL_REGENERATE=1``
is set: ``BDL_REGENERATE=1 .venv/bin/python -m pytest kinds/bdl2021/tests/test_bdl_regeneration.py`` checks
every task.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kinds.bdl2021.reference.crosscheck import agreement_p_value, chain_summaries
from kinds.bdl2021.reference.generate import machine_cpu
from kinds.bdl2021.reference.task_files import DEFAULT_ROOT, GENERATION_LOG_NAME, task_files
from kinds.bdl2021.reference.tasks import TASKS

REPO = Path(__file__).resolve().parents[3]
MINUTES = {"iris": 1, "breast_cancer": 1, "wine": 1, "diabetes_gap": 4, "digits": 8, "digits_shift": 6,
           "digits_cnn": 30}


def _cases():
    for task in TASKS:
        marks = [pytest.mark.slow, pytest.mark.skipif(
            os.environ.get("BDL_REGENERATE") != "1",
            reason=f"regenerating {task.name} takes about {MINUTES[task.name]} min on 2 "
                   "cores; BDL_REGENERATE=1 runs it")]
        yield pytest.param(task, marks=marks, id=task.name)


@pytest.mark.parametrize("task", _cases())
def test_a_task_regenerates_as_committed(task, tmp_path):
    result = subprocess.run([sys.executable, "-m", "reference_data", "generate", "--tasks",
                             task.name, "--out", str(tmp_path)], cwd=REPO, capture_output=True,
                            text=True, timeout=3600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert_regenerated_as_committed(task, tmp_path)


def assert_regenerated_as_committed(task, root: Path) -> None:
    """Every file of ``task`` under ``root`` is the committed one to the byte on the CPU that
    made those; elsewhere the two runs agree within Monte Carlo error."""
    committed, fresh = task_files(DEFAULT_ROOT, task.name, task.kind), \
        task_files(root, task.name, task.kind)
    differing = [role for role, path in committed.all().items()
                 if path.read_bytes() != getattr(fresh, role).read_bytes()]
    log = json.loads((DEFAULT_ROOT / GENERATION_LOG_NAME).read_text())
    if log.get("cpu") == machine_cpu():
        assert differing == [], differing
    elif differing:          # another CPU: the same posterior, within Monte Carlo error
        ours, theirs = (chain_summaries(folder, task.name, task.kind)
                        for folder in (DEFAULT_ROOT, root))
        if task.kind != "classification":
            ours, theirs = ours[..., 0], theirs[..., 0]        # the means of y
        ratio, p_value = agreement_p_value(ours, theirs)
        assert p_value > 0.001 and np.isfinite(ratio), (differing, ratio, p_value)

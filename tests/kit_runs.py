"""An organizer's local run with its first half in the test's process: what
``python -m bundle.local_run --config C --phase P [--budget B] [--score-hidden] --code X
--out O`` does, the phase's kit built by local_run's own ``build_kit``, then that kit's
``run_local.py`` started as local_run starts it (``run_kit``'s command, in the kit's folder),
its output captured as local_runs.run_local captures the command's.

For tests whose claims are the kit run's (the ingestion's limits on hostile code, a
baseline's scores), not local_run's command line (tests/test_run_local_stop.py and the
guide's tests run that): a Python start, local_run's imports and its first scan of the
installed packages for the kit's requirements cost about 0.7 CPU seconds a run, which this
process pays once. The local_run command prints one line of its own before the kit's output
("built the ... kit of phase ..."); nothing else differs."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bundle.local_run import KIT_RUN_LOCAL, build_kit, organizer_spec
from bundle.platforms import DEFAULT_PLATFORM


def run_kit_locally(config: Path, phase: str, out: Path, *, code: Path | None = None,
                    baseline: str | None = None, budget: float | None = None,
                    score_hidden: bool = False, platform: str = DEFAULT_PLATFORM,
                    timeout: float = 600) -> subprocess.CompletedProcess:
    """``code``: a submission (folder, zip or .py); ``baseline``: the kit's
    baselines/<baseline>.py instead."""
    out = Path(out).absolute()
    kit = build_kit(organizer_spec(config), phase, out / "kit", platform, budget, score_hidden)
    source = f"baselines/{baseline}.py" if baseline else str(Path(code).absolute())
    return subprocess.run([sys.executable, KIT_RUN_LOCAL, "--code", source, "--out", str(out)],
                          cwd=kit, capture_output=True, text=True, timeout=timeout)

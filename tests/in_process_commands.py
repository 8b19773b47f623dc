"""A command's ``main(argv)`` run in the test's own process, for tests of what the command
refuses and says (its exit status, its stdout and stderr) where a new process is not the
claim: a Python start and the imports of the builder or a converter cost about half a CPU
second a run, more than most refusals take, and the test process has them imported already.

It returns what ``subprocess.run(..., capture_output=True, text=True)`` would. What the
process itself adds stays tested where it is the claim, as a subprocess: the script's exit
through the interpreter, its import path, its signals (each command keeps tests of its own
that run it so). An exception that escapes ``main`` (a traceback on the organizer's
terminal) is raised here and fails the test, as those tests' "no Traceback" checks would."""
from __future__ import annotations

import contextlib
import io
import subprocess
import sys


def run_main(main, *args) -> subprocess.CompletedProcess:
    argv = [str(arg) for arg in args]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit:          # argparse's usage errors, a sys.exit(...)
            code = exit.code
            if code is None:
                code = 0
            elif not isinstance(code, int):     # sys.exit("message"): printed, status 1
                print(code, file=sys.stderr)
                code = 1
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())

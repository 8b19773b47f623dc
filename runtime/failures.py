"""Why a task failed, in one of a few named categories that participants can act on.

Every task that ends without a usable prediction, in every kind, is put in exactly one of
``FAILURES``: the ingestion decides for a training run (``ingest/supervisor.py``, and the
child's own report, ``ingest/child_main.py``) and writes the code into the run record; the
scorer decides for a file it cannot use (``runtime/scoring.py``: ``SubmissionError``) or a
submission of the wrong form for its phase (``scorer/main.py``). The log, the detailed results
and the Evaluation page all read the records here, so each sentence is written once.

Which situation is which (the order of the checks, first match wins):

- refused by the sandbox: the supervisor stopped the run for breaking a limit of the sandbox
  (disk, file count, folder depth, a result frame too large or forged), or their code stopped
  on an operation the sandbox forbids: ``PermissionError`` (network, reading outside its
  folders, a new session) or an ``OSError`` in ``SANDBOX_ERRNOS`` (file size, disk, open
  files, processes, a refused system call), raised in their own frames; a submission that
  carries a command of its own, which would run outside the sandbox;
- exceeded memory: killed by the resident-memory rule, a ``MemoryError``, or a death that
  only the memory limit explains (an unrequested SIGKILL, a native allocation failure);
- timed out with no checkpoint: the task's budget or a unit's limit ran out, and no anytime
  checkpoint was usable (with one, the task is scored, not failed);
- did not start: the task's process could not be started, it overran its start-up allowance,
  died before their function was called, or their entry file or function is missing (also a
  worker the organizers must fix);
- import error: their module fails to import: ``ImportError`` (``ModuleNotFoundError``
  included) or ``SyntaxError`` from their files;
- raised an exception: any other exception, or a crash or exit before returning;
- wrote invalid output: a returned value or a prediction file that fails validation, or
  malformed result frames;
- wrote nothing: their function returned None or the process ended cleanly without
  predictions; no prediction file for the task;
- wrong phase's files: prediction files (no signed training run) in a phase that runs code,
  or code in a phase that takes prediction files.

Standard library only: shipped in both programs, and staged for the sandboxed child.
"""
from __future__ import annotations

import errno
from dataclasses import dataclass


@dataclass(frozen=True)
class Failure:
    code: str         # stable: the run record, detailed_results.json and scripts use it
    title: str        # what the log and the report show first
    meaning: str      # one sentence: what happened
    remedy: str       # what the participant can do about it


DID_NOT_START = "did_not_start"
IMPORT_ERROR = "import_error"
RAISED = "raised_exception"
TIMED_OUT = "timed_out"
MEMORY = "exceeded_memory"
INVALID_OUTPUT = "invalid_output"
NOTHING = "wrote_nothing"
SANDBOX = "refused_by_sandbox"
WRONG_PHASE = "wrong_phase_files"

FAILURES = (
    Failure(DID_NOT_START, "Did not start",
            "The task's process could not start, your entry file or function is missing, or "
            "it did not reach your function within the start-up allowance.",
            "Put the entry file at the root of the zip with the function the competition "
            "names, and keep imports and module-level work short."),
    Failure(IMPORT_ERROR, "Import error",
            "Your module could not be imported: a package missing from the image, a wrong "
            "import, or a syntax error in your files.",
            "Check the image's packages (versions.py in the starting kit) and run your code "
            "with the starting kit's run_local.py before submitting."),
    Failure(RAISED, "Raised an exception",
            "Your code raised an exception, crashed or exited before returning predictions.",
            "Read the traceback of your own code in the detailed results and the log, and "
            "reproduce it with run_local.py."),
    Failure(TIMED_OUT, "Timed out with no checkpoint",
            "The task's budget (or a unit's limit) ran out before your code returned, and no "
            "usable intermediate prediction had been sent.",
            "Train for less time; where your function is given a checkpoint, send intermediate "
            "predictions with it, so that a timeout still scores the last one."),
    Failure(MEMORY, "Exceeded memory",
            "Your code used more memory than the sandbox allows and was stopped.",
            "Use smaller batches or arrays; the Evaluation page states the memory limit and "
            "how it is counted."),
    Failure(INVALID_OUTPUT, "Wrote invalid output",
            "What your code returned, or the prediction file you uploaded, has the wrong "
            "shape, type or values.",
            "Check the expected shape and value range on the Evaluation page; the message "
            "names the file, row or value at fault."),
    Failure(NOTHING, "Wrote nothing",
            "There were no predictions for the task: your function returned None, the "
            "process ended without any, or the zip holds no file for the task.",
            "Return the predictions array, and put one prediction file per task at the root "
            "of the zip, named as the Evaluation page says."),
    Failure(SANDBOX, "Refused by the sandbox",
            "Your code broke a sandbox limit (disk, file size or count, processes, result "
            "size) or tried something it forbids (network, files outside its folders, a "
            "command of its own).",
            "Write only in the working folder, stay within the limits on the Evaluation page, "
            "and use no network."),
    Failure(WRONG_PHASE, "Wrong phase's files",
            "The submission was of the wrong form for this phase: prediction files where the "
            "phase runs code, or code where it takes prediction files.",
            "Check which form the phase takes (Evaluation page) and make the zip with the "
            "starting kit's submission_zip.py."),
)
BY_CODE = {failure.code: failure for failure in FAILURES}
CODES = tuple(BY_CODE)
# What an upload of prediction files can get: no code of theirs runs in such a phase.
RESULTS_FAILURES = (INVALID_OUTPUT, NOTHING, WRONG_PHASE)

# An OSError with one of these, raised in their code, is a sandbox limit saying no: a file
# over the size limit, the disk limit, open files, processes (RLIMIT_NPROC), a system call
# seccomp answers as absent (memfd_create, shmget).
SANDBOX_ERRNOS = frozenset({errno.EFBIG, errno.EDQUOT, errno.ENOSPC, errno.EMFILE,
                            errno.ENFILE, errno.EAGAIN, errno.ENOSYS})


def title(code: str) -> str:
    return BY_CODE[code].title


def headline(code: str, reason: str) -> str:
    """A failure as the log and the report state it: the category first, then the detail."""
    return f"{title(code)}: {reason}" if reason else title(code)


def known(code) -> str | None:
    """``code`` if it names a category, else None (a child's report is not trusted)."""
    return code if isinstance(code, str) and code in BY_CODE else None


# A run record written before the categories existed has only a status: the nearest one.
STATUS_FAILURES = {"timed_out": TIMED_OUT, "invalid": INVALID_OUTPUT, "failed": RAISED}


def of_run(status: str, code: str | None) -> str:
    """The category of a recorded run that delivered nothing."""
    return known(code) or STATUS_FAILURES.get(status, RAISED)

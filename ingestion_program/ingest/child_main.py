"""Runs inside the sandboxed child: confine itself, import the participant's module, hand its
function to the kind's contract (``participant.py``, staged next to this file), and send what
it returns to the parent as frames. Standard library and numpy only.

The order is the protection: the interpreter starts isolated (``-I``: no PYTHONPATH, no
working folder on the path), so until ``install`` has confined this process every import
comes from the standard library or the image's packages. Only then are numpy and the kind's
contract imported (their threads inherit the confinement) and the submission's folder put on
the path, so no file of the participant's can run unconfined or shadow the code that reports
the protections.
"""
import importlib
import io
import json
import os
import sys
import time
import traceback

from . import failures
from .confine import install
from .frames import BEGIN, CHECKPOINT, ERROR, FINAL, PROTECTIONS, write_frame

RUNTIME = os.path.dirname(os.path.abspath(__file__))
HANDSHAKE_FD = 0      # the parent answers on stdin once it has read the kernel's view


def _send_array(fd, frame_type, predictions, numpy):
    buffer = io.BytesIO()
    numpy.save(buffer, numpy.asarray(predictions, dtype=numpy.float64), allow_pickle=False)
    write_frame(fd, frame_type, buffer.getvalue())


def _theirs(frame):
    """Frames of the participant's code or its libraries, not of this runtime or importlib."""
    return not (frame.filename.startswith(RUNTIME) or frame.filename.startswith("<frozen "))


def _trim(exception, seen):
    if exception is None or id(exception) in seen:
        return
    seen.add(id(exception))
    exception.stack = traceback.StackSummary.from_list(
        [frame for frame in exception.stack if _theirs(frame)])
    _trim(exception.__cause__, seen)
    _trim(exception.__context__, seen)


def _fail(fd, failure, message, code, error=None):
    """Reports a failure, its category first (``failures``, one line); the traceback, if
    any, shows the participant's frames only."""
    if error is not None:
        summary = traceback.TracebackException.from_exception(error)
        _trim(summary, set())
        sys.stderr.write("".join(summary.format()))
    write_frame(fd, ERROR, f"{failure}\n{message}".encode("utf-8", "replace")[:4000])
    return code


def _raised_in_their_code(error):
    """Whether the innermost Python frame is theirs (or a library's they called), not this
    runtime's or the kind's contract: a sandbox refusal meets their code, never ours."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and _theirs(frames[-1])


def _raised_failure(error):
    """The category of what their function (or their module's import) raised."""
    if isinstance(error, MemoryError):
        return failures.MEMORY
    if isinstance(error, OSError) and _raised_in_their_code(error) and (
            isinstance(error, PermissionError) or error.errno in failures.SANDBOX_ERRNOS):
        return failures.SANDBOX
    return failures.RAISED


def _import_failure(error, module_name):
    """Their entry file missing is a start that never happened, not a broken import."""
    if isinstance(error, ModuleNotFoundError) and error.name == module_name:
        return failures.DID_NOT_START
    if isinstance(error, (ImportError, SyntaxError)):
        return failures.IMPORT_ERROR
    return _raised_failure(error)


def _finish(code):
    """Leaves at once: a thread the participant left running must not keep the task alive."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _begin(fd):
    """Called by the kind's contract just before it calls the participant's function: the
    parent starts the budget's clock when this frame arrives; returns this side's start."""
    write_frame(fd, BEGIN, b"")
    return time.monotonic()


def _call(spec, fd, contract, numpy):
    SIGNATURE, call = contract.SIGNATURE, contract.call
    module_name, function_name = spec["entry_module"], spec["entry_function"]
    try:
        module = importlib.import_module(module_name)
    except BaseException as error:      # noqa: BLE001 - anything the import raises is theirs
        return _fail(fd, _import_failure(error, module_name),
                     f"importing {module_name}.py failed: {type(error).__name__}: {error}", 3,
                     error)
    function = getattr(module, function_name, None)
    if not callable(function):
        return _fail(fd, failures.DID_NOT_START,
                     f"{module_name}.py defines no function {function_name}{SIGNATURE}", 3)
    checkpoint = lambda predictions: _send_array(fd, CHECKPOINT, predictions, numpy)  # noqa: E731
    try:
        result = call(function, spec, lambda: _begin(fd), checkpoint)
    except BaseException as error:      # noqa: BLE001 - SystemExit too: it returned nothing
        return _fail(fd, _raised_failure(error),
                     f"{function_name}() raised {type(error).__name__}: {error}", 1, error)
    if result is None:
        return _fail(fd, failures.NOTHING,
                     f"{function_name}() returned None; expected the predictions array", 1)
    try:
        _send_array(fd, FINAL, result, numpy)
    except (TypeError, ValueError) as error:
        return _fail(fd, failures.INVALID_OUTPUT,
                     f"{function_name}() returned something that is not a numeric array "
                     f"({type(error).__name__}: {error})", 1)
    return 0


def _wait_for_parent():
    """Blocks until the parent has checked the protections with the kernel (one byte, or EOF
    when it closed stdin), so the check sees this process before any code of theirs runs."""
    try:
        os.read(HANDSHAKE_FD, 1)
    except OSError:
        pass


def _shadowed_names(submission):
    """Their top-level modules that ``import`` cannot reach: a module of that name is already
    loaded (the runtime's own imports), so Python's one is used, not theirs."""
    try:
        names = os.listdir(submission)
    except OSError:
        return []
    modules = {name[:-3] for name in names if name.endswith(".py")} | {
        name for name in names if os.path.isfile(os.path.join(submission, name, "__init__.py"))}
    return sorted(name for name in modules if name in sys.modules)


def _enter_submission(submission):
    sys.path.insert(0, submission)
    shadowed = _shadowed_names(submission)
    if shadowed:
        sys.stderr.write(
            "note: your " + ", ".join(shadowed) + " cannot be imported under that name: Python's "
            "own module of the same name was already loaded before your code started (rename "
            "yours)\n")


def main(argv=None):
    spec = json.loads((argv or sys.argv)[1])
    fd = spec["result_fd"]
    write_frame(fd, PROTECTIONS, json.dumps(install(spec["confine"])).encode())
    _wait_for_parent()
    import numpy
    contract = importlib.import_module(__package__ + ".participant")
    _enter_submission(spec["submission"])
    _finish(_call(spec, fd, contract, numpy))


if __name__ == "__main__":
    main()

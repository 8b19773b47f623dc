"""The BDL participant contract, on the child's side: what ``predict`` receives.

Copied alone into each task's sandbox (standard library and numpy only, no imports from the
programs). The participant's module (``submission.py``) defines::

    def predict(task, x_train, y_train, x_test, checkpoint):
        ...                      # train within task.time_left() seconds
        checkpoint(predictions)  # optional, any number of times: the last one is used
        return predictions       # if the budget runs out before this line

x_train, y_train and x_test are read-only: memory maps of the staged file where its member is
stored uncompressed (as the ingestion writes it), so that a task of a GiB costs no GiB of memory
until it is read; copy one (``numpy.array(x_train)``) to change it in place.
"""
import struct
import time
# Imported here, before the submission's folder joins sys.path, so that a file of theirs named
# zipfile.py cannot stand in for it (child_main.py then notes the name as shadowed).
import zipfile

import numpy

SIGNATURE = "(task, x_train, y_train, x_test, checkpoint)"


class Task:
    """What the participant's function learns about its task."""

    def __init__(self, spec, started):
        contract = spec["contract"]
        declaration = contract["declaration"]
        self.name = spec["name"]
        self.task_type = spec["task_type"]       # "classification" or "regression"
        self.kind = self.task_type               # its older name: submissions still read it
        self.n_test = contract["n_test"]
        self.num_classes = contract["width"] if self.task_type == "classification" else None
        self.num_samples = contract["width"] if self.task_type == "regression" else None
        self.seconds = spec["budget_seconds"]
        # A budget stated in epochs of plain SGD on the declared model: the epochs, and the
        # seconds one took on this machine just before your code started (None otherwise).
        calibration = spec.get("rules", {}).get("calibration") or {}
        self.epochs = calibration.get("epochs")
        self.seconds_per_epoch = calibration.get("seconds_per_epoch")
        self.model = declaration.get("model", {})
        self.likelihood = declaration.get("likelihood", {})
        self.prior = declaration.get("prior", {})
        self.declaration = declaration
        self._deadline = started + self.seconds

    def time_left(self):
        """Seconds until the budget ends (the process is stopped then)."""
        return max(0.0, self._deadline - time.monotonic())

    def __repr__(self):
        return f"Task({self.name!r}, {self.task_type}, {self.seconds:g} s)"


def call(function, spec, begin, checkpoint):
    """Maps the staged arrays and calls the participant's function; returns what it returns.
    ``begin()`` ends the start-up: the budget's clock starts there."""
    arrays = open_npz(spec["data"], ("x_train", "y_train", "x_test"))
    # Plain read-only ndarray views: a numpy.memmap subclass would leak into their results.
    x_train, y_train, x_test = (numpy.asarray(arrays[key]) for key in ("x_train", "y_train",
                                                                        "x_test"))
    return function(Task(spec, begin()), x_train, y_train, x_test, checkpoint)


# ---- reading an .npz without loading it ----------------------------------------------------
# The ingestion's runtime/formats.py reads organizer and staged files with these too: this file
# is the one the child gets, so the parsing lives here once.

LOCAL_HEADER = struct.Struct("<4s22xHH")     # signature, then name and extra field lengths
READ_ERRORS = (ValueError, OSError, EOFError, struct.error, zipfile.BadZipFile)


class ArchiveError(ValueError):
    """An .npz or one of its members that cannot be read; the message names both."""


class Member:
    """One .npy member: its header, and where its data start in the .npz when it is stored."""

    def __init__(self, info, shape, fortran, dtype, data_offset):
        self.info, self.shape, self.fortran, self.dtype = info, shape, fortran, dtype
        self.data_offset = data_offset            # None: compressed, so it cannot be mapped


def npz_members(path):
    """name (without .npy) -> Member for each .npy member, from the headers only."""
    try:
        with open(path, "rb") as raw, zipfile.ZipFile(raw) as archive:
            return {info.filename[:-4]: _member(path, raw, archive, info)
                    for info in archive.infolist() if info.filename.endswith(".npy")}
    except READ_ERRORS as error:
        raise ArchiveError(f"{path}: not a valid .npz archive ({error})") from None


def open_npz(path, names=None):
    """name -> array of each member in ``names`` (default all): a read-only memory map where the
    member is stored, else (compressed) the loaded array."""
    members = npz_members(path)
    missing = [name for name in names or () if name not in members]
    if missing:
        raise ArchiveError(f"{path}: no member {', '.join(missing)}")
    return {name: _array(path, name, members[name])
            for name in (names if names is not None else members)}


def _member(path, raw, archive, info):
    try:
        if info.compress_type == zipfile.ZIP_STORED:
            raw.seek(info.header_offset)
            signature, name_length, extra_length = LOCAL_HEADER.unpack(raw.read(30))
            if signature != b"PK\x03\x04":
                raise ValueError("no local file header where the directory says")
            start = info.header_offset + 30 + name_length + extra_length
            raw.seek(start)
            shape, fortran, dtype = _npy_header(raw)
            if raw.tell() - start + _nbytes(shape, dtype) > info.file_size:
                raise ValueError(f"the data of shape {shape} run past the member's end "
                                 "(truncated?)")
            return Member(info, shape, fortran, dtype, raw.tell())
        with archive.open(info) as stream:
            return Member(info, *_npy_header(stream), None)
    except READ_ERRORS + (NotImplementedError, RuntimeError) as error:
        raise ArchiveError(f"{path}: member {info.filename} cannot be read ({error})") from None


def _npy_header(stream):
    version = numpy.lib.format.read_magic(stream)
    read = (numpy.lib.format.read_array_header_1_0 if version == (1, 0)
            else numpy.lib.format.read_array_header_2_0)
    shape, fortran, dtype = read(stream)
    if dtype.hasobject:
        raise ValueError(f"dtype {dtype} holds Python objects, which are not read (no pickles)")
    return shape, fortran, dtype


def _nbytes(shape, dtype):
    count = 1
    for length in shape:
        count *= length
    return count * dtype.itemsize


def _array(path, name, member):
    try:
        if member.data_offset is None or _nbytes(member.shape, member.dtype) == 0:
            with zipfile.ZipFile(path) as archive, archive.open(member.info) as stream:
                array = numpy.lib.format.read_array(stream, allow_pickle=False)
            array.flags.writeable = False
            return array
        return numpy.memmap(path, dtype=member.dtype, mode="r", offset=member.data_offset,
                            shape=member.shape, order="F" if member.fortran else "C")
    except READ_ERRORS + (NotImplementedError, RuntimeError) as error:
        raise ArchiveError(f"{path}: member {member.info.filename} cannot be read "
                           f"({error})") from None

"""The BDL file layouts: class probabilities, regression samples, per-chain references and
task inputs. Readers return arrays indexed by test point first, whatever the on-disk layout.
"""

from __future__ import annotations

import mmap
import shutil
import zipfile
import zlib
from pathlib import Path
from typing import NamedTuple

import numpy as np

from runtime.formats.matrix_files import (NPY_EXTENSION, NUMPY_LOAD_ERRORS, FormatError, PathLike,
                           check_numeric_array, load_npy, read_matrix, require_file, write_matrix)

# The child's own reader (participant.py is staged alone, so the parsing lives there once).
from .participant import ArchiveError, npz_members, open_npz

POINTS_BY_SAMPLES = "points_by_samples"  # submissions: one row per test point
SAMPLES_BY_POINTS = "samples_by_points"  # HMC reference csv: one row per sample (transposed)
LAYOUTS = (POINTS_BY_SAMPLES, SAMPLES_BY_POINTS)
TASK_INPUT_KEYS = ("x_train", "y_train", "x_test", "y_test")
BLOCK_BYTES = 1 << 24      # what a scan or a copy of a large array holds in memory at once
FIXED_DATE = (1980, 1, 1, 0, 0, 0)   # members' timestamp: equal arrays, equal bytes


class TaskInputs(NamedTuple):
    """A task's arrays; y_test is all zeros in anything participants receive."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def read_classification_probs(path: PathLike, *, n_points: int | None = None,
                              n_classes: int | None = None) -> np.ndarray:
    """N x C class probabilities, one row per test point (row sums are the scorer's business)."""
    return read_matrix(path, n_rows=n_points, n_cols=n_classes,
                       row_label="test points", col_label="classes")


def write_classification_probs(path: PathLike, probs: np.ndarray) -> None:
    """Write N x C probabilities in the canonical np.savetxt format."""
    write_matrix(path, probs)


def read_regression_samples(path: PathLike, *, layout: str, n_points: int | None = None,
                            n_samples: int | None = None) -> np.ndarray:
    """N x S samples of y per test point from a file stored in `layout` (references are S x N)."""
    _check_layout(layout)
    if layout == POINTS_BY_SAMPLES:
        return read_matrix(path, n_rows=n_points, n_cols=n_samples,
                           row_label="test points", col_label="samples")
    matrix = read_matrix(path, n_rows=n_samples, n_cols=n_points,
                         row_label="samples", col_label="test points")
    return np.ascontiguousarray(matrix.T)


def write_regression_samples(path: PathLike, samples: np.ndarray, *, layout: str) -> None:
    """Write N x S samples in `layout` (transposed on disk for SAMPLES_BY_POINTS)."""
    _check_layout(layout)
    samples = np.asarray(samples, dtype=np.float64)
    if samples.ndim != 2:
        raise ValueError(f"{path}: expected N x S samples to write, got shape {samples.shape}")
    write_matrix(path, samples if layout == POINTS_BY_SAMPLES else samples.T)


def write_regression_reference(path: PathLike, samples: np.ndarray) -> None:
    """Write N x S reference samples as the S x N text the 2021 `uci_samples.csv` uses."""
    write_regression_samples(path, samples, layout=SAMPLES_BY_POINTS)


def read_chain_probs(path: PathLike, *, n_points: int | None = None,
                     n_classes: int | None = None) -> np.ndarray:
    """(K, N, C) per-chain class probabilities from an .npy file."""
    return _read_chains(path, (None, n_points, n_classes), ("chains", "test points", "classes"))


def read_chain_samples(path: PathLike, *, n_points: int | None = None,
                       n_samples: int | None = None) -> np.ndarray:
    """(K, N, S) per-chain samples from an .npy file stored (K, S, N) like the reference csv."""
    chains = _read_chains(path, (None, n_samples, n_points), ("chains", "samples", "test points"))
    return np.ascontiguousarray(chains.transpose(0, 2, 1))


def write_chain_probs(path: PathLike, chains: np.ndarray) -> None:
    """Write (K, N, C) per-chain probabilities as a float64 .npy."""
    _write_chains(path, chains)


def write_chain_samples(path: PathLike, chains: np.ndarray) -> None:
    """Write (K, N, S) per-chain samples as a float64 .npy stored (K, S, N)."""
    chains = np.asarray(chains, dtype=np.float64)
    if chains.ndim != 3:
        raise ValueError(f"{path}: expected a 3-D (chains, N, S) array, got shape {chains.shape}")
    _write_chains(path, chains.transpose(0, 2, 1))


def read_task_inputs(path: PathLike, *, mapped: bool = False,
                     check_values: bool = True, opened: bool = False) -> TaskInputs:
    """Load and check a task's .npz: exactly the TaskInputs keys; N x 1 targets are flattened.

    ``mapped``: read-only memory maps of the stored members (``map_npz``), so that memory does
    not grow with the data; their values are then scanned from the file a block at a time.
    ``check_values=False`` checks keys, dtypes and shapes only (the headers): for files the
    build has checked already. ``opened``: ``path`` is an open file's ``/proc/self/fd/<n>``
    (``runtime/beneath.py``), a regular file without the name's extension.
    """
    path = Path(path) if opened else require_file(path, (".npz",))
    arrays = map_npz(path, TASK_INPUT_KEYS) if mapped else _load_npz(path)
    return _check_task_arrays(path, arrays, check_values)


def map_npz(path: PathLike, keys: tuple[str, ...] | None = None, *,
            exact: bool = True) -> dict[str, np.ndarray]:
    """name -> array of an .npz's members ``keys`` (default all; ``exact``: no other member): a
    read-only memory map of each stored member (np.savez stores), the loaded compressed one."""
    path = Path(path)
    try:
        members = npz_members(path)
    except ArchiveError as error:
        raise FormatError(_archive_problem(path) or str(error)) from None
    if keys is not None:
        _require_keys(path, list(members) if exact else [k for k in members if k in keys], keys)
    try:
        return open_npz(path, keys)
    except ArchiveError as error:
        raise FormatError(str(error)) from None


def npz_headers(path: PathLike) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """name -> (shape, dtype) of each .npy member, read from the headers alone."""
    path = Path(path)
    try:
        return {name: (m.shape, m.dtype) for name, m in npz_members(path).items()}
    except ArchiveError as error:
        raise FormatError(_archive_problem(path) or str(error)) from None


def array_blocks(array: np.ndarray, block_bytes: int = BLOCK_BYTES):
    """(flat index of the first element, 1-D block) over the array in its storage order (C, or
    F for a Fortran array). A fresh memory map is read from its file instead: pages touched
    through the map would stay resident, and the process would grow to the data's size."""
    step = max(1, block_bytes // max(array.itemsize, 1))
    if isinstance(array, np.memmap) and isinstance(array.base, mmap.mmap):
        with open(array.filename, "rb") as stream:
            stream.seek(array.offset)
            for start in range(0, array.size, step):
                yield start, np.fromfile(stream, array.dtype, min(step, array.size - start))
        return
    flat = np.ravel(array, order="A")
    for start in range(0, array.size, step):
        yield start, flat[start:start + step]


def storage_order(array: np.ndarray) -> str:
    """The order ``array_blocks`` walks: what np.unravel_index needs to name an element."""
    return "F" if array.flags.f_contiguous and not array.flags.c_contiguous else "C"


def copy_npz_members(source: PathLike, destination: PathLike, keys: tuple[str, ...],
                     replacements: dict[str, np.ndarray] | None = None) -> None:
    """Write an uncompressed .npz holding ``keys`` in that order: each member's .npy bytes copied
    from ``source`` a block at a time (decompressed where need be, its CRC checked on the way),
    or, for a key of ``replacements``, that array. Memory stays at one block, whatever the size;
    the members stay stored, so the copy can be memory-mapped in turn."""
    replacements = replacements or {}
    key = keys[0]
    try:
        with zipfile.ZipFile(source) as original, zipfile.ZipFile(
                destination, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
            for key in keys:
                info = zipfile.ZipInfo(f"{key}.npy", date_time=FIXED_DATE)
                with archive.open(info, "w", force_zip64=True) as member:
                    if key in replacements:
                        np.lib.format.write_array(member, np.ascontiguousarray(replacements[key]),
                                                  allow_pickle=False)
                    else:
                        with original.open(f"{key}.npy") as stream:
                            shutil.copyfileobj(stream, member, BLOCK_BYTES)
    except (OSError, KeyError, EOFError, zipfile.BadZipFile, zlib.error) as error:
        raise FormatError(f"{source}: member {key}.npy cannot be copied ({error})") from None


def write_task_inputs(path: PathLike, inputs: TaskInputs) -> None:
    """Write an uncompressed .npz in np.savez's format, keys in fixed order.

    Members get a fixed timestamp (np.savez stamps the current time), so equal arrays give
    byte-identical files and bundle checksums stay stable.
    """
    path = Path(path)
    if path.suffix.lower() != ".npz":
        raise ValueError(f"{path}: task inputs must be written to an .npz file")
    checked = _check_task_arrays(path, {k: np.asarray(a) for k, a in zip(TASK_INPUT_KEYS, inputs)})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for key, array in zip(TASK_INPUT_KEYS, checked):
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)


def check_array_values(path: Path, array: np.ndarray, what: str, *, values: bool = True) -> None:
    """check_numeric_array's checks (real numeric dtype, not empty, finite), the finiteness
    scan a block at a time so that a memory map is never read whole; ``values=False``: the
    dtype and size only."""
    if array.dtype.kind not in "iuf" or array.size == 0:
        check_numeric_array(path, array, what)   # its messages, before any value is read
    if not values or array.dtype.kind != "f":
        return
    for start, block in array_blocks(array):
        bad = np.flatnonzero(~np.isfinite(block))
        if len(bad):
            index = tuple(int(i) for i in np.unravel_index(start + int(bad[0]), array.shape,
                                                            order=storage_order(array)))
            raise FormatError(f"{path}: {what} element at index {index} (0-based): "
                              f"expected a finite number, found {block[bad[0]]}")


def _check_layout(layout: str) -> None:
    """Reject a layout name that is not one of LAYOUTS (a caller bug, not a file problem)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


def read_batch_means(path: PathLike, *, n_points: int | None = None,
                     n_classes: int | None = None) -> np.ndarray:
    """(K, B, N, C) batch means of each chain's class probabilities from an .npy file."""
    return _read_chains(path, (None, None, n_points, n_classes),
                        ("chains", "batches", "test points", "classes"))


def write_batch_means(path: PathLike, batches: np.ndarray) -> None:
    """Write (K, B, N, C) batch means as a float32 .npy (their rounding is far below the
    Monte Carlo error they measure)."""
    _write_array(path, np.asarray(batches, dtype=np.float32), 4, "batch means")


def read_reference_mcse(path: PathLike, *, n_points: int | None = None,
                        n_columns: int | None = None) -> np.ndarray:
    """(N, C) Monte Carlo standard errors of the reference (classification: of each
    probability; regression: of each point's mean and standard deviation of y)."""
    return _read_chains(path, (n_points, n_columns), ("test points", "quantities"))


def write_reference_mcse(path: PathLike, mcse: np.ndarray) -> None:
    _write_array(path, np.asarray(mcse, dtype=np.float64), 2, "Monte Carlo standard errors")


def _read_chains(path: PathLike, expected: tuple[int | None, ...],
                 axes: tuple[str, ...]) -> np.ndarray:
    """Load a numeric .npy of len(axes) dimensions and check the axes whose length is given,
    in on-disk order."""
    path = require_file(path, (NPY_EXTENSION,))
    array = load_npy(path)
    described = f"({', '.join(axes)})"
    if array.ndim != len(axes):
        raise FormatError(f"{path}: expected a {len(axes)}-D array {described}, found shape "
                          f"{array.shape}")
    check_numeric_array(path, array)
    for axis, (want, found, name) in enumerate(zip(expected, array.shape, axes)):
        if want is not None and want != found:
            raise FormatError(f"{path}: expected {want} {name} along axis {axis} of {described}, "
                              f"found {found} (array shape {array.shape})")
    return array.astype(np.float64)


def _write_chains(path: PathLike, chains: np.ndarray) -> None:
    """np.save a 3-D float64 array, refusing names np.save would silently extend."""
    _write_array(path, np.asarray(chains, dtype=np.float64), 3, "chains")


def _write_array(path: PathLike, array: np.ndarray, ndim: int, what: str) -> None:
    array = np.ascontiguousarray(array)
    if array.ndim != ndim:
        raise ValueError(f"{path}: expected a {ndim}-D {what} array to write, got shape "
                         f"{array.shape}")
    if Path(path).suffix.lower() != NPY_EXTENSION:
        raise ValueError(f"{path}: {what} must be written to an .npy file")
    np.save(path, array)


def _archive_problem(path: Path) -> str | None:
    """The message np.load's path gives for a single .npy saved under an .npz name."""
    with open(path, "rb") as stream:
        if stream.read(6) == b"\x93NUMPY":
            return (f"{path}: is a single .npy array, expected an .npz archive with keys "
                    f"{', '.join(TASK_INPUT_KEYS)}")
    return None


def _require_keys(path: Path, found: list[str], keys: tuple[str, ...]) -> None:
    """Exactly ``keys``, or one FormatError naming what is missing and what is extra."""
    missing = [key for key in keys if key not in found]
    extra = [key for key in found if key not in keys]
    if missing:
        with zipfile.ZipFile(path) as archive:     # np.load's message for a non-.npy member
            bare = [key for key in missing if key in archive.namelist()]
        if bare:
            raise FormatError(f"{path}: member {bare[0]} is not a .npy array")
    if missing or extra:
        problems = ([f"missing keys {', '.join(missing)}"] if missing else []) + (
            [f"unexpected keys {', '.join(extra)}"] if extra else [])
        raise FormatError(f"{path}: {'; '.join(problems)} (expected exactly "
                          f"{', '.join(keys)})")


def _load_npz(path: Path) -> dict[str, np.ndarray]:
    """Read every member of an .npz without pickles, requiring exactly TASK_INPUT_KEYS."""
    try:
        archive = np.load(path, allow_pickle=False)
    except NUMPY_LOAD_ERRORS as error:
        raise FormatError(f"{path}: not a valid .npz archive ({error})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise FormatError(f"{path}: is a single .npy array, expected an .npz archive with keys "
                          f"{', '.join(TASK_INPUT_KEYS)}")
    with archive:
        _require_keys(path, archive.files, TASK_INPUT_KEYS)
        arrays = {}
        for key in TASK_INPUT_KEYS:
            try:
                arrays[key] = archive[key]
            except NUMPY_LOAD_ERRORS as error:
                raise FormatError(f"{path}: array {key} cannot be read ({error})") from None
            if not isinstance(arrays[key], np.ndarray):  # a member named without ".npy"
                raise FormatError(f"{path}: member {key} is not a .npy array")
    return arrays


def _check_task_arrays(path: Path, arrays: dict[str, np.ndarray],
                       check_values: bool = True) -> TaskInputs:
    """Check dtypes, ndim and that row counts and feature shapes agree; flatten N x 1 targets."""
    for key, array in arrays.items():
        check_array_values(path, array, key, values=check_values)
    for key in ("x_train", "x_test"):
        if arrays[key].ndim < 2:
            raise FormatError(f"{path}: {key} must have ndim >= 2 (one row per point), "
                              f"found shape {arrays[key].shape}")
    for key in ("y_train", "y_test"):
        y = arrays[key]
        if y.ndim == 2 and y.shape[1] == 1:
            arrays[key] = y = y[:, 0]
        if y.ndim != 1:
            raise FormatError(f"{path}: {key} must be 1-D (or N x 1), found shape {y.shape}")
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if len(x) != len(y):
            raise FormatError(f"{path}: x_{split} has {len(x)} rows but y_{split} has {len(y)}")
    if arrays["x_train"].shape[1:] != arrays["x_test"].shape[1:]:
        raise FormatError(f"{path}: x_train has feature shape {arrays['x_train'].shape[1:]} but "
                          f"x_test has {arrays['x_test'].shape[1:]}")
    return TaskInputs(**{key: arrays[key] for key in TASK_INPUT_KEYS})

"""Open a phase's references sealed on the worker (spec key ``references_on_worker``).

The scoring command names the worker's data mount (Codabench: ``/app/data``, read-only in
every container); the config names the phase's folder in it, each sealed file's sha256 and
the key. The files are checked against the build's checksums first, so a folder copied
incompletely or from another build is named file by file, then opened into a private folder
of the scoring container, which the scorer reads as it reads ``$input/ref``.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from runtime.formats.sealed_files import SEALED_SUFFIX, SealError, unseal
from runtime.scoring import ReferenceDataError

from .config import WorkerReferences

COPY_HINT = ("copy the build's {top} folder into the data folder of every worker of the "
             "competition's queue (HOST_DIRECTORY/data) and check it there with "
             "'sha256sum -c SHA256SUMS'")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_worker_copy(references: WorkerReferences, mount: Path) -> list[str]:
    """Every file of the phase that is missing on the worker or differs from the build."""
    folder = mount / references.folder
    if not folder.is_dir():
        return [f"{folder}: missing (no copy of the build's folder for this phase)"]
    problems = []
    for name, expected in sorted(references.files.items()):
        path = folder / (name + SEALED_SUFFIX)
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif _sha256(path) != expected:
            problems.append(f"{path}: differs from the build (sha256 {expected[:16]}... "
                            "expected)")
    return problems


def open_worker_references(references: WorkerReferences, mount: Path | None,
                           destination: Path) -> Path:
    """The phase's references, opened into ``destination``; ReferenceDataError (the
    organizer's to fix) names what is wrong on the worker."""
    top = references.folder.split("/")[0]
    if mount is None:
        raise ReferenceDataError("this phase's references are kept on the worker, but the "
                                 "scoring command names no data mount (rebuild the bundle)")
    if not mount.is_dir():
        raise ReferenceDataError(f"{mount}: no data mount on this worker; this phase is "
                                 "scored only on the competition's own queue, whose workers "
                                 "hold its references: " + COPY_HINT.format(top=top))
    problems = check_worker_copy(references, mount)
    if problems:
        raise ReferenceDataError("the references on this worker are not the build's: "
                                 + "; ".join(problems[:5])
                                 + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
                                 + ". " + COPY_HINT.format(top=top))
    for name in references.files:
        sealed = (mount / references.folder / (name + SEALED_SUFFIX)).read_bytes()
        try:
            data = unseal(references.key, name, sealed)
        except SealError as error:
            raise ReferenceDataError(f"{mount / references.folder}: {error}") from None
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return destination

"""Open a phase's references sealed on the worker (spec key ``on_worker: [reference_data]``).

The scoring command names the worker's data mount (Codabench: ``/app/data``, read-only in
every container); the config names the phase's folder in it, each sealed file's sha256 and
the key (``runtime/worker_data.py``). The files are checked against the build's checksums
first, so a folder copied incompletely or from another build is named file by file, then
opened into a private folder of the scoring container, which the scorer reads as it reads
``$input/ref``.
"""
from __future__ import annotations

from pathlib import Path

from runtime.formats.sealed_files import SEALED_SUFFIX, SealError, unseal
from runtime.scoring import ReferenceDataError
from runtime.worker_data import WorkerFolder, copy_problem_text, copy_problems


def open_worker_references(references: WorkerFolder, mount: Path | None,
                           destination: Path) -> Path:
    """The phase's references, opened into ``destination``; ReferenceDataError (the
    organizer's to fix) names what is wrong on the worker."""
    problems = copy_problems(references, mount)
    if problems:
        raise ReferenceDataError(copy_problem_text(references, problems))
    for stored in references.files:
        name = stored.removesuffix(SEALED_SUFFIX)
        try:
            data = unseal(references.key, name, (mount / references.folder / stored).read_bytes())
        except SealError as error:
            raise ReferenceDataError(f"{mount / references.folder}: {error}") from None
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return destination

"""Hidden references kept on the organizer's own Codabench workers (spec key
``references_on_worker``), never uploaded to the site.

A worker of a queue of one's own mounts its ``HOST_DIRECTORY/data`` read-only at ``/app/data``
in every container (codabench_v2.md §3.4), a submission's own container included; the build
therefore seals each reference file (``runtime/formats/sealed_files.py``) with a key only the
scoring program carries, writes the sealed files to ``<bundle stem>.worker_data/<phase>/``
next to the bundle with a ``SHA256SUMS`` file and the copy steps, and gives the scoring
program the folder, the checksums and the key. The bundle then holds no reference data: its
tasks have no ``reference_data`` and the leakage check compares every reference file with
every file of every zip of the bundle and of the worker folder.
"""
from __future__ import annotations

import hashlib
import hmac
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from runtime.formats.sealed_files import SEALED_SUFFIX, seal

from .record_key import build_secret

FOLDER_SUFFIX = ".worker_data"
CHECKSUMS = "SHA256SUMS"
README = "README.txt"


def folder_name(bundle_name: str) -> str:
    """The folder an organizer copies onto the workers, named after the bundle."""
    return bundle_name.removesuffix(".zip") + FOLDER_SUFFIX


def sealing_key(plan, folder: str) -> bytes:
    """HMAC of the phase and its folder under the build secret (record_key.py): rebuilds on
    the same machine seal the same bytes; nobody without the secret can open them."""
    phase = "\0".join(("worker-references/1", folder, plan.kind, plan.name,
                       *sorted(task.name for task in plan.tasks)))
    return hmac.new(build_secret(), phase.encode("utf-8"), hashlib.sha256).digest()


@dataclass(frozen=True)
class SealedReferences:
    """One phase's references as the worker holds them."""
    folder: str                                   # <stem>.worker_data/<phase>
    key: bytes = field(repr=False)
    sealed: dict[str, bytes] = field(repr=False)  # file name (relative, no suffix) -> sealed bytes

    def config_entry(self) -> dict:
        """What the scoring config says of them (scoring_program/scorer/config.py)."""
        return {"folder": self.folder, "key": self.key.hex(),
                "files": {name: hashlib.sha256(data).hexdigest()
                          for name, data in sorted(self.sealed.items())}}


def seal_references(reference_folder: Path, plan, bundle_name: str) -> SealedReferences:
    folder = f"{folder_name(bundle_name)}/{plan.name}"
    key = sealing_key(plan, folder)
    sealed = {}
    for path in sorted(p for p in Path(reference_folder).rglob("*") if p.is_file()):
        name = path.relative_to(reference_folder).as_posix()
        sealed[name] = seal(key, name, path.read_bytes())
    return SealedReferences(folder, key, sealed)


def worker_files(phases: list[SealedReferences]) -> dict[str, bytes]:
    """Every file of the worker folder, by its path inside it."""
    files = {f"{sealed.folder.split('/', 1)[1]}/{name}{SEALED_SUFFIX}": data
             for sealed in phases for name, data in sealed.sealed.items()}
    sums = "".join(f"{hashlib.sha256(data).hexdigest()}  {name}\n"
                   for name, data in sorted(files.items()))
    return files | {CHECKSUMS: sums.encode("ascii")}


def copy_steps(folder: str, queue: str | None) -> list[str]:
    """What the organizer does with the folder, in the build's summary and its README."""
    return [f"copy the folder {folder} into the data folder of every worker of queue "
            f"{queue} (the HOST_DIRECTORY/data that worker mounts at /app/data), keeping its "
            "name; a worker without it fails every submission's scoring with the organizer's "
            "error, naming the missing file",
            f"check each copy on its worker: cd HOST_DIRECTORY/data/{folder} && "
            f"sha256sum -c {CHECKSUMS}",
            "rebuilt bundles come with a new folder: copy it before uploading them (the "
            "scorer refuses a copy that is not its build's)"]


def write_worker_folder(out_dir: Path, folder: str, phases: list[SealedReferences],
                        queue: str | None) -> Path:
    """``out_dir/folder``, holding the sealed files, their checksums and the steps."""
    target = Path(out_dir) / folder
    if target.exists():
        shutil.rmtree(target)
    for name, data in worker_files(phases).items():
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        (target / name).write_bytes(data)
    (target / README).write_text(
        "Hidden reference data of the bundle of the same name, sealed: only its scoring "
        "program opens these files.\n\n" + "".join(f"- {step}\n" for step in
                                                    copy_steps(folder, queue)),
        encoding="utf-8")
    return target

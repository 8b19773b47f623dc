"""Data kept on the organizer's own Codabench workers (spec key ``on_worker``), never uploaded
to the site: each phase's hidden references, its input data, or both.

A worker of a queue of one's own mounts its ``HOST_DIRECTORY/data`` read-only at ``/app/data``
in every container (codabench_v2.md §3.4), a submission's own container included. The build
writes ``<bundle stem>.worker_data/<phase>/<data>/`` next to the bundle, with a ``SHA256SUMS``
file and the copy steps, and names the folder and each file's sha256 in the program that reads
it (``runtime/worker_data.py``), whose command then ends in the mount:

- ``reference_data``: each file sealed (``runtime/formats/sealed_files.py``) with a key only
  the scoring program carries; the leakage check compares every reference file with every file
  of the bundle, nested zips opened, and of the worker folder;
- ``input_data``: as it is, read by the ingestion program. Participant code reads it anyway, as
  it reads the input data of a bundle; keeping it on the worker keeps large data off the site.

The bundle then has no ``reference_data`` or ``input_data`` for those phases. The Codabench
dry run mounts the folder next to the bundle, as that worker would.
"""
from __future__ import annotations

import hashlib
import hmac
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from runtime.formats.sealed_files import SEALED_SUFFIX, seal, unseal

from .record_key import build_secret
from .zips import Content, content_sha256, content_size

KEPT = ("reference_data", "input_data")      # what a spec may keep on the worker
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
class WorkerPart:
    """One phase's data of one kind as the worker holds it."""
    folder: str                                  # <stem>.worker_data/<phase>/<data>
    # path inside the folder -> its content as stored: sealed references in memory (they are
    # small), input data as the staged file (it may be larger than memory)
    files: dict[str, Content] = field(repr=False)
    key: bytes | None = field(default=None, repr=False)    # the sealing key (references)
    sums: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        # each file's sha256 is named three times (program, SHA256SUMS, leakage check): one read
        if not self.sums:
            self.sums.update({name: content_sha256(content)
                              for name, content in sorted(self.files.items())})

    @property
    def size(self) -> int:
        return sum(map(content_size, self.files.values()))

    def config_entry(self) -> dict:
        """What the program that reads it is told (runtime/worker_data.py)."""
        entry = {"folder": self.folder, "files": dict(sorted(self.sums.items()))}
        return entry | ({"key": self.key.hex()} if self.key else {})

    def opened(self) -> dict[str, Content]:
        """Its files as the program reads them (sealed ones opened)."""
        if self.key is None:
            return dict(self.files)
        return {name.removesuffix(SEALED_SUFFIX):
                unseal(self.key, name.removesuffix(SEALED_SUFFIX), data)
                for name, data in self.files.items()}


def _files(folder: Path) -> dict[str, Path]:
    return {path.relative_to(folder).as_posix(): path
            for path in sorted(p for p in Path(folder).rglob("*") if p.is_file())}


def worker_part(staged: Path, plan, bundle_name: str, data: str) -> WorkerPart:
    """The phase's ``data`` (one of KEPT) staged in ``staged``, as the worker holds it."""
    folder = f"{folder_name(bundle_name)}/{plan.name}/{data}"
    if data != "reference_data":
        return WorkerPart(folder, _files(staged))
    key = sealing_key(plan, folder)
    return WorkerPart(folder, {name + SEALED_SUFFIX: seal(key, name, path.read_bytes())
                               for name, path in _files(staged).items()}, key)


def worker_files(parts: list[WorkerPart]) -> dict[str, Content]:
    """Every file of the worker folder, by its path inside it, SHA256SUMS included."""
    def inside(part: WorkerPart, name: str) -> str:
        return f"{part.folder.split('/', 1)[1]}/{name}"
    files = {inside(part, name): content for part in parts
             for name, content in part.files.items()}
    digests = {inside(part, name): digest for part in parts
               for name, digest in part.sums.items()}
    sums = "".join(f"{digests[name]}  {name}\n" for name in sorted(files))
    return files | {CHECKSUMS: sums.encode("ascii")}


def copy_steps(folder: str, queue: str | None) -> list[str]:
    """What the organizer does with the folder, in the build's summary and its README."""
    return [f"copy the folder {folder} into the data folder of every worker of queue "
            f"{queue} (the HOST_DIRECTORY/data that worker mounts at /app/data), keeping its "
            "name; on a worker without it every submission fails, and the log names the "
            "missing file",
            f"check each copy on its worker: cd HOST_DIRECTORY/data/{folder} && "
            f"sha256sum -c {CHECKSUMS}",
            "rebuilt bundles come with a new folder: copy it before uploading them (the "
            "programs refuse a copy that is not their build's)"]


def write_worker_folder(out_dir: Path, folder: str, parts: list[WorkerPart],
                        queue: str | None) -> Path:
    """``out_dir/folder``, holding the files, their checksums and the steps."""
    target = Path(out_dir) / folder
    if target.exists():
        shutil.rmtree(target)
    for name, content in worker_files(parts).items():
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copyfile(content, target / name)
        else:
            (target / name).write_bytes(content)
    (target / README).write_text(
        "Data of the bundle of the same name, kept on the competition's workers: its "
        "references sealed (only its scoring program opens them), its input data as it is.\n\n"
        + "".join(f"- {step}\n" for step in copy_steps(folder, queue)), encoding="utf-8")
    return target

"""A phase's data kept in the organizer's folder on Codabench workers (spec key ``on_worker``):
what the generated configs say of it, and the check of a worker's copy against the build.

A worker of the competition's own queue mounts its ``HOST_DIRECTORY/data`` read-only at
``/app/data`` in every container (codabench_v2.md §3.4); the command names the mount, the
config the phase's folder in it and each file's sha256 as the build wrote it (and, for sealed
references, the key: ``runtime/formats/sealed_files.py``). Standard library only: shipped in
both programs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from runtime.formats import file_digest

COPY_HINT = ("copy the build's {top} folder into the data folder of every worker of the "
             "competition's queue (HOST_DIRECTORY/data) and check it there with "
             "'sha256sum -c SHA256SUMS'")


@dataclass(frozen=True)
class WorkerFolder:
    folder: str                    # relative to the mount: <bundle>.worker_data/<phase>/<data>
    files: dict[str, str]          # path inside the folder -> sha256 of the file
    key: bytes | None = field(default=None, repr=False)    # sealed files' key, if sealed

    @property
    def top(self) -> str:
        return self.folder.split("/")[0]


def _inside(name) -> bool:
    return isinstance(name, str) and bool(name) and not name.startswith("/") \
        and ".." not in name.split("/")


def parse_worker_folder(entry, where: str, error=ValueError) -> WorkerFolder | None:
    """A config's entry (None where the phase keeps nothing on the worker)."""
    if entry is None:
        return None
    if not isinstance(entry, dict) or not _inside(entry.get("folder")) \
            or not isinstance(entry.get("files"), dict):
        raise error(f"{where}: expected an object with a relative 'folder' and 'files'")
    files = entry["files"]
    if not all(_inside(name) and isinstance(digest, str) and len(digest) == 64
               for name, digest in files.items()):
        raise error(f"{where}.files: expected relative paths inside the folder, each with a "
                    "sha256")
    key = entry.get("key")
    try:
        return WorkerFolder(entry["folder"], dict(files),
                            bytes.fromhex(key) if key is not None else None)
    except (TypeError, ValueError):
        raise error(f"{where}.key: expected hex") from None


def copy_problems(part: WorkerFolder, mount: Path | None) -> list[str]:
    """Why the worker's copy of ``part`` is not the build's: the mount, the folder, or each
    missing or changed file; [] when it is."""
    if mount is None:
        return ["the command names no data mount (rebuild the bundle)"]
    if not mount.is_dir():
        return [f"{mount}: no data mount on this worker: the phase runs only on the "
                "competition's own queue, whose workers hold its data"]
    folder = mount / part.folder
    if not folder.is_dir():
        return [f"{folder}: missing (no copy of the build's folder for this phase)"]
    problems = []
    for name, expected in sorted(part.files.items()):
        path = folder / name
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif file_digest(path) != expected:
            problems.append(f"{path}: differs from the build (sha256 {expected[:16]}... "
                            "expected)")
    return problems


def copy_problem_text(part: WorkerFolder, problems: list[str]) -> str:
    shown = "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5
                                        else "")
    return (f"the data on this worker is not the build's: {shown}. "
            + COPY_HINT.format(top=part.top))

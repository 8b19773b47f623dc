"""Data uploaded apart from the bundle, and referred to from competition.yaml by its key.

Both sites read a bundle whole (CodaLab into memory, codalab_v1.md G24; Codabench stalls on
large ones, codabench_v2.md §4), and both let a phase (Codabench: a task) name data uploaded
on its own by the key the site gave it. The spec lists which data zips go apart
(``upload_separately``) and, once uploaded, their keys (``dataset_keys``): each with the
sha256 of the zip uploaded under it, so data changed since the upload is caught instead of
the old upload silently serving. The dataset zips are built like the bundle's (same bytes on
every build), written next to the bundle, and the dry run reads those local copies by key.
"""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from . import platforms
from .zips import Content, content_sha256, content_size

SEPARABLE = ("input_data", "reference_data", "public_data", "starting_kit")
# Larger bundles are refused: CodaLab reads the whole bundle into memory at unpack (G24), and
# Codabench unpacking stalled on 344 MB of reference data (its issue #2322).
SAFE_BUNDLE_BYTES = 200 * 2**20
UUID_PATTERN = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                          r"[0-9a-fA-F]{12}$")
# competition.yaml names each local copy in a comment, so `--check bundle.zip` finds them
COMMENT = "# dataset {key} is {file} (sha256 {sha256})"
COMMENT_PATTERN = re.compile(r"^# dataset (\S+) is (\S+) \(sha256 ([0-9a-f]{64})\)$", re.M)

def is_key(value) -> bool:
    """A dataset key as both sites write it: a UUID (CodaLab takes any non-.zip value as one)."""
    return isinstance(value, str) and bool(UUID_PATTERN.match(value))


@dataclass(frozen=True)
class Dataset:
    name: str              # <bundle stem>.<member stem>: its file (+ .zip) and its dataset_keys entry
    member: str            # the zip as the bundle would otherwise hold it
    file_type: str         # one of SEPARABLE
    sha256: str
    size: int
    key: str | None        # the site's key from the spec; None until it is uploaded
    # The zip on disk (data may be larger than memory): as built, then next to the bundle
    path: Path | None = field(default=None, repr=False, compare=False)

    @property
    def file(self) -> str:
        return f"{self.name}.zip"

    @property
    def reference(self) -> str:
        """What competition.yaml names: the key, or until then a stand-in derived from the
        content (a UUID no site has), so the checks and the dry run can run before upload."""
        return self.key or str(uuid.UUID(self.sha256[:32]))

    def upload_step(self, platform: str) -> str:
        """How to upload it apart on ``platform`` and find its key there."""
        return platforms.platform(platform).dataset_upload_step(self)


class DatasetKeyError(ValueError):
    pass


def separate(files: list[dict], members: dict[str, Content], stem: str, kinds: tuple[str, ...],
             keys: dict[str, dict]) -> list[Dataset]:
    """Take the zips of ``kinds`` out of ``members`` and name them in ``files`` by key (or the
    stand-in): the bundle's own member map and file map, changed in place. A key whose sha256
    is not the zip's is refused: the data changed since that upload."""
    datasets: dict[str, Dataset] = {}
    for part in files:
        for kind in kinds:
            member = part.get(kind)
            if member is None:
                continue
            if member not in datasets:
                name = f"{stem}.{member.removesuffix('.zip')}"
                entry = keys.get(name)
                built = members.pop(member)
                datasets[member] = Dataset(name, member, kind, content_sha256(built),
                                           content_size(built), entry["key"] if entry else None,
                                           built)
                if entry and entry["sha256"] != datasets[member].sha256:
                    raise DatasetKeyError(
                        f"dataset_keys.{name}: the key was entered for a zip of sha256 "
                        f"{entry['sha256'][:16]}..., but the data built now is "
                        f"{datasets[member].sha256[:16]}...: it changed since that upload; upload "
                        f"the new {datasets[member].file} and enter its key and sha256")
            part[kind] = datasets[member].reference
    return list(datasets.values())


def keys_block(datasets: list[Dataset]) -> str:
    """The spec entries to fill in after uploading (YAML, to paste under dataset_keys:)."""
    return "\n".join(f"  {d.name}: {{key: {d.key or 'PASTE-ITS-KEY'}, sha256: {d.sha256}}}"
                     for d in datasets)


def yaml_comments(datasets: list[Dataset]) -> str:
    return "".join(COMMENT.format(key=d.reference, file=d.file, sha256=d.sha256) + "\n"
                   for d in datasets)


def local_copies(yaml_text: str) -> dict[str, tuple[str, str]]:
    """key -> (file name, sha256) of each local copy a bundle's competition.yaml names."""
    return {key: (file, sha) for key, file, sha in COMMENT_PATTERN.findall(yaml_text)}


def oversize_problem(members: dict[str, Content], separable: dict[str, str],
                     limit: int = SAFE_BUNDLE_BYTES) -> str | None:
    """Why the bundle is too large to upload, naming the zips that could go apart
    (``separable``: member -> its file kind)."""
    sizes = {name: content_size(content) for name, content in members.items()}
    total = sum(sizes.values())
    if total <= limit:
        return None
    largest = sorted(separable, key=lambda member: -sizes[member])[:4]
    kinds = sorted({separable[member] for member in largest})
    return (f"the bundle would hold {total / 2**20:.0f} MiB, more than the {limit / 2**20:.0f} "
            "MiB a site can safely unpack (CodaLab reads it whole into memory, G24; Codabench "
            "stalls on large bundles); its largest data: "
            + ", ".join(f"{m} {sizes[m] / 2**20:.0f} MiB" for m in largest)
            + f". Upload those apart: add upload_separately: [{', '.join(kinds)}] to the spec; "
            "the build then writes them as zips of their own with the upload steps")

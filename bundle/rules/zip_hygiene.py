"""Zip hygiene, both platforms: members read from the zip root, no junk, no odd paths.

CodaLab (codalab_v1.md G1, G2, G4) and Codabench (codabench_v2.md §0: competition.yaml must be
at the zip root) both unzip the bundle and its nested zips as they are, so one check serves
both, under the rule name each platform's checker has always used.
"""
from __future__ import annotations

import re
import zipfile
from io import BytesIO
from pathlib import Path
from typing import Iterator

from ..zips import nested_zip
from .framework import CODABENCH, CODALAB, REZIP, Bundle, Problem, rule

JUNK = frozenset({"__MACOSX", ".DS_Store", "__pycache__"})
DESCRIPTION = ("no wrapping folder; no junk, './', absolute or '..' members, nested zips included "
               "(G1, G2, G4)")


def wrapping_folder(archive: zipfile.ZipFile) -> str | None:
    """The one folder every member is inside, if any (the zip of a folder, not its contents)."""
    names = archive.namelist()
    tops = {name.split("/")[0] for name in names}
    return tops.pop() + "/" if len(tops) == 1 and all("/" in n for n in names) else None


def walk(archive: zipfile.ZipFile, where: str, depth: int) -> Iterator[str]:
    """Bad member names of ``archive`` and of the zips inside it, two levels deep."""
    for name in archive.namelist():
        parts, shown = name.split("/"), repr(where + name)
        if name.startswith("/") or "\\" in name or re.match(r"[A-Za-z]:", name):
            yield f"member {shown} is an absolute or Windows-style path (G4)"
        if "." in parts or ".." in parts:
            yield f"member {shown} has a './' or '..' component; names must match the YAML (G4)"
        if any(p in JUNK or p.startswith("._") for p in parts) or name.endswith(".pyc"):
            yield f"member {shown} is junk (__MACOSX, ._*, .DS_Store, __pycache__, *.pyc) (G2)"
        if name.lower().endswith(".zip") and depth < 2:
            try:
                with nested_zip(archive, name) as inner:
                    problems = list(walk(inner, f"{where}{name}::", depth + 1))
            except zipfile.BadZipFile as error:
                problems = [f"member {shown} is not a valid zip ({error})"]
            yield from problems


@rule("v2-zip", DESCRIPTION, REZIP, CODABENCH)
@rule("zip-structure", DESCRIPTION, REZIP, CODALAB)
def check_zip_structure(bundle: Bundle) -> Iterator[Problem]:
    """G1, G2, G4: the site reads every path from the zip root; junk lands in ref/, res/."""
    folder = wrapping_folder(bundle.archive)
    if not bundle.names:
        yield "the bundle zip has no members"
    elif folder:
        yield f"every member is inside {folder!r}: the site reads every path from the zip root"
    yield from walk(bundle.archive, "", 0)
    for key, local in sorted(bundle.datasets.items()):     # data uploaded apart, by its key
        try:
            dataset = zipfile.ZipFile(local if isinstance(local, Path) else BytesIO(local))
        except zipfile.BadZipFile as error:
            yield f"the local copy of dataset {key} is not a valid zip ({error})"
            continue
        with dataset:
            yield from walk(dataset, f"dataset {key}::", 1)

"""Build a submission zip the platform will treat as you intend.

  python submission_zip.py my_submission/ submission.zip      # code (has submission.py)
  python submission_zip.py my_predictions/ predictions.zip    # prediction files
  python submission_zip.py my_submission/ smoke.zip --smoke   # code, as a smoke test

The platform reads files at the root of the zip: zipping a folder from a file manager puts
everything one level down (my_submission/submission.py), and nothing is found.

Code and prediction files are told apart by the platform from one file at the zip's root,
`metadata`: CodaLab runs your code only when it is there, and takes a zip without it for
prediction files; Codabench reads it no more. So a code zip gets a `metadata` holding only
`description: ...` (added to the zip if your folder has none; any other key, `command` above
all, is refused, and so is YAML that could hide one: tags, anchors, aliases, merge keys).
Codabench copies your submission over the ingestion's output before scoring: a code zip
holding a file named like one the ingestion writes there (a prediction file, its run record,
a task's log; kit.json lists them) is refused.
With --smoke, a code zip also gets an empty file `SMOKE_TEST` at its root: in a phase with a
smoke test (the Evaluation page says), such a submission runs only on a small public slice
shaped like the phase's tasks, is scored but not ranked, and counts toward no limit; a phase
without one refuses it. On an error nothing is written.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
import zipfile
from pathlib import Path

import worker       # the worker model, next to this file in the kit (bundle/platforms/worker.py)

KIT = Path(__file__).resolve().parent
SKIPPED = ("__pycache__", ".DS_Store", "__MACOSX", ".ipynb_checkpoints", ".git")
KIT_CONFIG = KIT / "kit.json"
# The ingestion's own check of a submission's metadata file, so this tool refuses exactly what
# the ingestion would: in the kit, its copy of the phase's ingestion program; in the
# organizers' repository, the program's source.
METADATA_CHECKS = (KIT / "programs" / "ingestion_program" / "ingest" / "submission_metadata.py",
                   KIT.parent / "ingestion_program" / "ingest" / "submission_metadata.py")
# What asks for a smoke test; the ingestion reads the same name (runtime/rules/smoke_test.py,
# which the kit does not ship; tests/test_smoke_test.py holds the two equal).
SMOKE_MARKER = "SMOKE_TEST"


def entry_file() -> str:
    """The file a code submission must hold at its root: the competition kind's entry module
    (kit.json in a downloaded kit; BDL's submission.py in the organizers' repository)."""
    try:
        return json.loads(KIT_CONFIG.read_text(encoding="utf-8")).get("entry_file",
                                                                        "submission.py")
    except (OSError, ValueError):
        return "submission.py"


ENTRY_FILE = entry_file()


def ingestion_outputs() -> tuple[str, ...]:
    """The names the phase's ingestion writes at the root of its output (kit.json, written
    by the builder from the ingestion's own code), which a code zip must not hold: Codabench
    copies the submission over that output before scoring. None outside a kit."""
    try:
        return tuple(json.loads(KIT_CONFIG.read_text(encoding="utf-8")).get(
            "ingestion_outputs", ()))
    except (OSError, ValueError):
        return ()


class SubmissionLayoutError(ValueError):
    pass


def check_submission_folder(folder: Path, required: tuple[str, ...] = ()) -> None:
    """Raise if a required file is missing at the root, saying where it was found instead."""
    if not folder.is_dir():
        raise SubmissionLayoutError(f"{folder} is not a folder")
    for name in required:
        if (folder / name).is_file():
            continue
        nested = sorted(p.relative_to(folder) for p in folder.rglob(name))
        if nested:
            raise SubmissionLayoutError(
                f"{name} is at {nested[0].as_posix()}, not at the root of the submission: zip "
                f"the files inside {nested[0].parent.as_posix()}/, not the folder itself")
        raise SubmissionLayoutError(f"no {name} at the root of {folder}")


def ingestion_refusal(folder: Path) -> str | None:
    """Why the phase's ingestion would refuse the code in ``folder`` for its metadata file
    (a command of its own, or one it cannot prove absent), or None. Where this tool was
    copied without the kit's programs, the worker model's check alone stays (``worker``)."""
    path = next((path for path in METADATA_CHECKS if path.is_file()), None)
    if path is None:
        return None
    spec = importlib.util.spec_from_file_location("ingestion_submission_metadata", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.own_command_problem(folder)


def check_zip(path: Path, required: tuple[str, ...] = ()) -> list[str]:
    try:
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if not n.endswith("/")]
    except (OSError, zipfile.BadZipFile) as error:
        raise SubmissionLayoutError(f"{path}: not a readable zip ({error})") from None
    if not names:
        raise SubmissionLayoutError(f"{path}: the zip is empty")
    roots = {name.split("/")[0] for name in names if "/" in name}
    files_at_root = [n for n in names if "/" not in n]
    if not files_at_root and len(roots) == 1:
        raise SubmissionLayoutError(f"{path}: every file is inside {roots.pop()}/; the platform "
                                    "reads files at the root of the zip: zip the folder's contents")
    missing = [name for name in required if name not in names]
    if missing:
        raise SubmissionLayoutError(f"{path}: no {', '.join(missing)} at the root of the zip")
    return names


def is_code_folder(folder: Path, entry: str | None = None) -> bool:
    entry = entry or ENTRY_FILE
    return (folder / entry).is_file() or any(folder.glob(f"*/{entry}"))


# The downloaded kit's baselines and their support modules (none in the organizers' repository).
KIT_BASELINES = Path(__file__).resolve().parent / "baselines"


def kit_modules() -> dict[str, str]:
    """Modules of the kit's baselines folder that a submission may import; the platform
    provides none of them (module name -> path in the kit)."""
    return {path.stem: f"baselines/{path.name}" for path in sorted(KIT_BASELINES.glob("*.py"))}


def missing_modules(folder: Path) -> list[str]:
    """Kit modules a file of the folder imports but the folder does not contain."""
    problems = []
    sources = "\n".join(path.read_text(encoding="utf-8", errors="replace")
                        for path in folder.rglob("*.py"))
    for module, origin in kit_modules().items():
        imported = re.search(rf"^\s*(from\s+{module}\s+import|import\s+{module}\b)", sources,
                             re.MULTILINE)
        if imported and not (folder / f"{module}.py").is_file():
            problems.append(f"your code imports {module}, but {module}.py is not in the folder; "
                            f"the platform does not provide it: copy the kit's {origin} into it")
    return problems


def _members(folder: Path) -> list[Path]:
    return [path for path in sorted(folder.rglob("*"))
            if path.is_file() and not any(part in SKIPPED for part in path.relative_to(folder).parts)]


def _entry(name: str) -> zipfile.ZipInfo:
    """A fixed date and mode: the same files always give the same zip."""
    entry = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    entry.compress_type, entry.external_attr = zipfile.ZIP_DEFLATED, 0o644 << 16
    return entry


def make_zip(folder: Path, destination: Path, code: bool | None = None,
             entry: str | None = None, smoke: bool = False) -> list[str]:
    """Write the zip (code: with a description-only ``metadata``); returns the names written.
    ``entry``: the file code must hold at its root (default: this kit's); ``smoke``: code
    asking for a smoke test (an empty ``SMOKE_MARKER`` at the root).

    Raises SubmissionLayoutError before anything is left at ``destination``.
    """
    folder = Path(folder)
    entry = entry or ENTRY_FILE
    code = is_code_folder(folder, entry) if code is None else code
    if smoke and not code:
        raise SubmissionLayoutError(f"{folder}: --smoke is for code (a folder with {entry}); "
                                    "a smoke test runs code, prediction files have none")
    if code:
        check_submission_folder(folder, required=(entry,))
        refusal = ingestion_refusal(folder)
        if refusal:
            raise SubmissionLayoutError(f"{folder}: the ingestion program would refuse it: "
                                        f"{refusal}")
    elif not folder.is_dir():
        raise SubmissionLayoutError(f"{folder} is not a folder")
    problems = worker.zip_problems(folder, code, ingestion_outputs() if code else ()) + (
        missing_modules(folder) if code else [])
    if problems:
        raise SubmissionLayoutError(f"{folder}: " + "; ".join(problems))
    members = _members(folder)
    if not members:
        raise SubmissionLayoutError(f"{folder} holds no file to submit")
    names = [path.relative_to(folder).as_posix() for path in members]
    partial = destination.with_name(destination.name + ".partial")
    try:
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for path, name in zip(members, names):
                archive.writestr(_entry(name), path.read_bytes())
            if code and "metadata" not in names:
                archive.writestr(_entry("metadata"), worker.CODE_METADATA)
                names.append("metadata")
            if smoke and SMOKE_MARKER not in names:
                archive.writestr(_entry(SMOKE_MARKER), b"")
                names.append(SMOKE_MARKER)
        check_zip(partial, required=(entry,) if code else ())
        os.replace(partial, destination)
    finally:
        partial.unlink(missing_ok=True)
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    parser.add_argument("destination", type=Path)
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--code", dest="code", action="store_true", default=None,
                      help=f"training code (default when the folder has {ENTRY_FILE})")
    kind.add_argument("--results", dest="code", action="store_false",
                      help="prediction files (default otherwise)")
    parser.add_argument("--smoke", action="store_true",
                        help=f"code as a smoke test: adds an empty {SMOKE_MARKER} at the root")
    args = parser.parse_args(argv)
    try:
        written = make_zip(args.folder, args.destination, args.code, smoke=args.smoke)
    except SubmissionLayoutError as error:
        print(f"error: {error}\nnothing was written", file=sys.stderr)
        return 1
    print(f"wrote {args.destination}: {len(written)} file(s) at the root: {', '.join(written[:8])}"
          + (" ..." if len(written) > 8 else ""))
    if "metadata" in written and not (args.folder / "metadata").exists():
        print("added 'metadata' (description only): it tells the platform this is code to run")
    if args.smoke:
        print(f"{SMOKE_MARKER} at the root: a smoke test, scored but not ranked, in a phase "
              "that has one (the Evaluation page says); other phases refuse it")
    return 0


if __name__ == "__main__":
    sys.exit(main())

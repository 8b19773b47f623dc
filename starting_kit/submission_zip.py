"""Build a correct submission zip, and catch the classic mistake of zipping the folder.

  python starting_kit/submission_zip.py my_submission/ submission.zip      # code
  python starting_kit/submission_zip.py my_predictions/ predictions.zip    # result files

The platform reads files at the root of the zip. Zipping a folder from a file manager
puts everything one level down (my_submission/submission.py), and nothing is found.
"""
from __future__ import annotations

import sys
import zipfile
from pathlib import Path

SKIPPED = ("__pycache__", ".DS_Store", "__MACOSX", ".ipynb_checkpoints")


class SubmissionLayoutError(ValueError):
    pass


def check_submission_folder(folder: Path, required: tuple[str, ...] = ()) -> None:
    """Raise if a required file is missing at the root, saying where it was found instead."""
    for name in required:
        if (folder / name).is_file():
            continue
        nested = sorted(p.relative_to(folder) for p in folder.rglob(name))
        if nested:
            raise SubmissionLayoutError(
                f"{name} is at {nested[0].as_posix()}, not at the root of the submission: zip "
                f"the files inside {nested[0].parent.as_posix()}/, not the folder itself")
        raise SubmissionLayoutError(f"no {name} at the root of {folder}")


def check_zip(path: Path, required: tuple[str, ...] = ()) -> list[str]:
    with zipfile.ZipFile(path) as archive:
        names = [n for n in archive.namelist() if not n.endswith("/")]
    roots = {name.split("/")[0] for name in names if "/" in name}
    files_at_root = [n for n in names if "/" not in n]
    if not files_at_root and len(roots) == 1:
        raise SubmissionLayoutError(f"{path}: every file is inside {roots.pop()}/; the platform "
                                    "reads files at the root of the zip: zip the folder's contents")
    missing = [name for name in required if name not in names]
    if missing:
        raise SubmissionLayoutError(f"{path}: no {', '.join(missing)} at the root of the zip")
    return names


def make_zip(folder: Path, destination: Path) -> list[str]:
    if (folder / "submission.py").is_file() or not any(folder.glob("*/submission.py")):
        written = []
        with zipfile.ZipFile(destination, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(folder.rglob("*")):
                if path.is_file() and not any(part in SKIPPED for part in path.parts):
                    archive.write(path, path.relative_to(folder).as_posix())
                    written.append(path.relative_to(folder).as_posix())
        return written
    check_submission_folder(folder, required=("submission.py",))
    return []


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    folder, destination = Path(argv[0]), Path(argv[1])
    try:
        written = make_zip(folder, destination)
        check_zip(destination)
    except SubmissionLayoutError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"wrote {destination}: {len(written)} file(s) at the root: {', '.join(written[:8])}"
          + (" ..." if len(written) > 8 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

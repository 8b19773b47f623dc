"""The embedded Retina competition, made from real patients that ship inside scikit-learn.

    python -m reference_data --kind retina generate [--out DIR]
    python -m reference_data --kind retina verify
    python -m reference_data --kind retina convert <task folder> [--workers N]   (image tasks)

Data: scikit-learn's diabetes study (Efron et al. 2004): 442 real patients, ten baseline
measurements each (age, sex, body mass index, blood pressure, six blood serum values), and a
quantitative measure of disease progression one year later. We grade that progression 0-4 by
its quintiles, as RETINA's images carry a clinical grade 0-4, and call a patient *referable*
when the grade is above 1, as RETINA binarises at grade > 1.

Two shifts, both real subsets of the real patients (nothing is simulated):

* **severity shift** (RETINA's Severity Shift): training and in-domain data are the patients
  of grades 0-2; the shifted set is grades 3-4, all referable;
* **population shift** (RETINA's Country Shift, a different population): training and
  in-domain data are patients under 50 years old, the shifted set those aged 50 and over.

Each shift gives two tasks with the same training data: ``<shift>_val`` (validation sets, for
the results phase) and ``<shift>_test`` (the final evaluation sets). A task's test file pools
its in-domain and shifted rows in a fixed random order; which row is which stays in the hidden
reference with its label and grade.
"""
from __future__ import annotations

import argparse
import filecmp
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from ..runtime.tables import FEATURES_FILE, REFERENCE_COLUMNS, REFERENCE_FILE, TRAIN_FILE

EMBEDDED = Path(__file__).resolve().parent / "embedded"
SEED = 2021
GRADE_QUANTILES = (20, 40, 60, 80)
REFERABLE_FROM_GRADE = 2
AGE_CUT = 50
# (in-domain train, validation, test sizes; shifted validation size; the rest is shifted test)
SIZES = {"severity": (150, 50, 64, 60), "population": (124, 40, 50, 76)}
SHIFTS = {
    "severity": "Severity shift (real): trained on grades 0-2, evaluated in-domain on grades 0-2 "
                "and shifted on grades 3-4, which are all referable",
    "population": "Population shift (real): trained on patients under 50 years old, evaluated "
                  "in-domain on patients under 50 and shifted on patients aged 50 and over",
}


def _patients():
    from sklearn.datasets import load_diabetes
    data = load_diabetes(scaled=False)
    cuts = np.percentile(data.target, GRADE_QUANTILES)
    grades = np.searchsorted(cuts, data.target, side="right")
    return data.data, grades, list(data.feature_names)


def _domains(shift: str, x: np.ndarray, grades: np.ndarray) -> np.ndarray:
    """True where a patient belongs to the shifted set."""
    if shift == "severity":
        return grades > REFERABLE_FROM_GRADE
    return x[:, 0] >= AGE_CUT


def _write_csv(path: Path, header: list[str], rows: np.ndarray, fmt) -> None:
    np.savetxt(path, rows, fmt=fmt, delimiter=",", header=",".join(header), comments="")


def write_shift(shift: str, root: Path) -> list[str]:
    x, grades, names = _patients()
    labels = (grades >= REFERABLE_FROM_GRADE).astype(int)
    shifted = _domains(shift, x, grades)
    rng = np.random.default_rng(SEED)
    in_domain, out = rng.permutation(np.flatnonzero(~shifted)), rng.permutation(
        np.flatnonzero(shifted))
    n_train, n_val, n_test, n_shift_val = SIZES[shift]
    if n_train + n_val + n_test != in_domain.size:
        raise AssertionError(f"{shift}: {in_domain.size} in-domain patients, sizes say "
                             f"{n_train + n_val + n_test}")
    train = in_domain[:n_train]
    splits = {"val": (in_domain[n_train:n_train + n_val], out[:n_shift_val]),
              "test": (in_domain[n_train + n_val:], out[n_shift_val:])}
    written = []
    for split, (rows_in, rows_out) in splits.items():
        name = f"{shift}_{split}"
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        pooled = rng.permutation(np.r_[rows_in, rows_out])
        _write_csv(folder / TRAIN_FILE, names + ["label", "grade"],
                   np.column_stack([x[train], labels[train], grades[train]]), "%.6g")
        _write_csv(folder / FEATURES_FILE, names, x[pooled], "%.6g")
        _write_csv(folder / REFERENCE_FILE, list(REFERENCE_COLUMNS),
                   np.column_stack([labels[pooled], grades[pooled], shifted[pooled]]), "%d")
        declaration = {
            "task_type": "diagnosis", "shift": SHIFTS[shift],
            "dataset": "scikit-learn diabetes study (Efron et al. 2004), 442 real patients",
            "summary": f"{'Validation' if split == 'val' else 'Test'} sets of the {shift} "
                       f"shift: {rows_in.size} in-domain and {rows_out.size} shifted "
                       f"patients, pooled in a random order.",
            "label": "referable: disease progression grade above 1 (grades 2-4 of 0-4, the "
                     "quintiles of the progression measure one year later)"}
        (folder / f"{name}_task.json").write_text(json.dumps(declaration, indent=1) + "\n")
        written.append(name)
    return written


def generate(root: Path) -> list[str]:
    """Every embedded task: the diabetes study's tables, then the digit images (converted as
    an organizer's images are: digit_images.py)."""
    from . import digit_images
    return [name for shift in SIZES for name in write_shift(shift, root)] \
        + digit_images.generate(root)


def verify(root: Path = EMBEDDED) -> list[str]:
    """Files of the committed tasks that differ from a fresh generation."""
    with tempfile.TemporaryDirectory() as fresh:
        names = generate(Path(fresh))
        return [f"{root / name / path.name}" for name in names
                for path in sorted((Path(fresh) / name).iterdir())
                if not (root / name / path.name).is_file()
                or not filecmp.cmp(path, root / name / path.name, shallow=False)]


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m reference_data --kind retina",
                                     description="The embedded Retina tasks, from scikit-learn's "
                                                 "diabetes study and digit scans; convert an "
                                                 "image task's sources.")
    commands = parser.add_subparsers(dest="command", required=True)
    made = commands.add_parser("generate", help="write the embedded tasks")
    made.add_argument("--out", type=Path, default=EMBEDDED)
    commands.add_parser("verify", help="check the committed tasks equal a fresh generation")
    converting = commands.add_parser(
        "convert", help="decode an image task's sources (its images section) into arrays")
    converting.add_argument("folder", type=Path, help="the task folder, holding <task>_task.json")
    converting.add_argument("--workers", type=_positive, default=None,
                            help="decoding processes (default: one per CPU)")
    args = parser.parse_args(argv)
    if args.command == "convert":
        from .images import run_convert
        return run_convert(args.folder, args.workers)
    if args.command == "generate":
        for name in generate(args.out):
            print(f"wrote {args.out / name}")
        return 0
    wrong = verify()
    for path in wrong:
        print(f"differs from a fresh generation: {path}", file=sys.stderr)
    print("retina tasks: " + ("ok" if not wrong else f"{len(wrong)} files differ"))
    return 1 if wrong else 0

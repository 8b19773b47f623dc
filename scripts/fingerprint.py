"""Fingerprint every default kind's bundles and dry-run results, to prove a refactoring changed
nothing a participant or organizer can see.

    python scripts/fingerprint.py OUT.json            bundles only (sha256 of every zip written)
    python scripts/fingerprint.py OUT.json --dry-run  also the dry run's scores and reports
    python scripts/fingerprint.py --compare A.json B.json

The builds run through the command line (``build_bundle.py``), as an organizer runs them, so the
script outlives any reorganisation of the builder. For the dry run the temporary folders are
kept, and every ``scores.txt``, ``scores.json``, ``private/full_scores.txt`` and
``detailed_results.html`` it wrote is hashed after the run-to-run noise (seconds measured,
temporary paths) is masked.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLATFORMS = ("codalab", "codabench")
OUTPUTS = ("scores.txt", "scores.json", "full_scores.txt", "detailed_results.html")
# Run-to-run noise: measured seconds, temporary folder names, the moment of the run.
NOISE = [
    (re.compile(r"(seconds?|duration|_time|elapsed|time)([\"']?\s*[:=]\s*)[0-9.eE+-]+"), r"\1\2#"),
    (re.compile(r"[0-9]+(\.[0-9]+)?\s*(s|seconds)\b"), "# s"),
    (re.compile(r"/[^\s\"'<>]*?(dry-run|tmp|bundle-tests)[^\s\"'<>]*"), "<tmp>"),
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?"), "<when>"),
]


def kinds() -> list[str]:
    sys.path.insert(0, str(ROOT))
    from kinds import KINDS
    return sorted(KINDS)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(kind: str, platform: str, out: Path) -> dict[str, str]:
    spec = ROOT / "kinds" / kind / "default_spec.yaml"
    command = [sys.executable, str(ROOT / "build_bundle.py"), "--config", str(spec),
               "--platform", platform, "--phase", "all", "--out", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"build of {kind} on {platform} failed:\n{done.stdout}\n{done.stderr}")
    return {path.name: sha256(path) for path in sorted(out.glob("*.zip"))}


TIMED_HEADER = re.compile(r"train s|seconds", re.IGNORECASE)


def _mask_timed_columns(table: str) -> str:
    """Blanks the cells of a report table's measured-seconds column."""
    headers = re.findall(r"<th[^>]*>(.*?)</th>", table, re.DOTALL)
    timed = [i for i, header in enumerate(headers) if TIMED_HEADER.search(header)]
    if not timed:
        return table

    def row(match: re.Match) -> str:
        cells = re.split(r"(?=<td)", match.group(0))
        for index in timed:
            if index + 1 < len(cells):
                cells[index + 1] = re.sub(r">[^<]*<", ">#<", cells[index + 1], count=1)
        return "".join(cells)
    return re.sub(r"<tr>.*?</tr>", row, table, flags=re.DOTALL)


def masked(text: str) -> str:
    text = re.sub(r"<table.*?</table>", lambda m: _mask_timed_columns(m.group(0)), text,
                  flags=re.DOTALL)
    for pattern, replacement in NOISE:
        text = pattern.sub(replacement, text)
    return text


def dry_run(bundle_zip: Path, work: Path) -> dict[str, str]:
    """Runs ``build_bundle.py --check`` with its temporary folders kept under ``work``."""
    keep = ("import runpy, sys, tempfile\n"
            "class Kept(tempfile.TemporaryDirectory):\n"
            "    def __init__(self, *a, **k):\n"
            f"        k['dir'] = {str(work)!r}\n"
            "        super().__init__(*a, **k)\n"
            "        self._finalizer.detach()\n"
            "    def cleanup(self): pass\n"
            "    def __exit__(self, *a): pass\n"
            "tempfile.TemporaryDirectory = Kept\n"
            f"sys.argv = ['build_bundle.py', '--check', {str(bundle_zip)!r}]\n"
            f"runpy.run_path({str(ROOT / 'build_bundle.py')!r}, run_name='__main__')\n")
    work.mkdir(parents=True)
    done = subprocess.run([sys.executable, "-c", keep], cwd=ROOT, capture_output=True, text=True)
    found = {"(exit)": str(done.returncode)}
    for path in sorted(work.rglob("*")):
        if path.is_file() and path.name in OUTPUTS and "dry-run" in str(path):
            relative = path.relative_to(work).as_posix()
            relative = re.sub(r"dry-run-(v2-)?[^/]+", r"dry-run-\1*", relative)
            text = masked(path.read_text(encoding="utf-8", errors="replace"))
            found[relative] = hashlib.sha256(text.encode()).hexdigest()
    return found


def fingerprint(with_dry_run: bool) -> dict:
    result = {}
    with tempfile.TemporaryDirectory(prefix="fingerprint-") as scratch:
        for kind in kinds():
            for platform in PLATFORMS:
                out = Path(scratch) / kind / platform
                zips = build(kind, platform, out)
                result[f"{kind}/{platform}/bundles"] = zips
                print(f"{kind} {platform}: {len(zips)} zip(s)", file=sys.stderr)
                if not with_dry_run:
                    continue
                for name in zips:
                    if name.endswith(("-data.zip",)) or "dataset" in name:
                        continue
                    key = f"{kind}/{platform}/dry-run/{name}"
                    result[key] = dry_run(out / name, Path(scratch) / "work" / kind / platform
                                          / name)
    return result


def compare(a: dict, b: dict) -> list[str]:
    differences = []
    for key in sorted(set(a) | set(b)):
        left, right = a.get(key, {}), b.get(key, {})
        for name in sorted(set(left) | set(right)):
            if left.get(name) != right.get(name):
                differences.append(f"{key}: {name}: {left.get(name)} != {right.get(name)}")
    return differences


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--compare", action="store_true")
    args = parser.parse_args(argv)
    if args.compare:
        a, b = (json.loads(path.read_text()) for path in args.paths)
        differences = compare(a, b)
        print("\n".join(differences) or "identical")
        return 1 if differences else 0
    result = fingerprint(args.dry_run)
    args.paths[0].write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

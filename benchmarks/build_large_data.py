"""The build's time and peak memory with input data far larger than its programs: N GiB of
incompressible images (random uint8, as the Retina image sets are to deflate) uploaded apart.

A label_accuracy competition's code phase is built twice, each build in a child process: once
as it is (the baseline), once with ``train_images.npy`` of N GiB added to its input data by
the input staging (linked, so the kind's staging costs nothing and the build is what is
measured). The spec uploads the input data, public data and starting kit apart, as a spec
with such data must (``upload_separately``). Printed per build: wall time and the peak
resident memory of the child (``ru_maxrss`` from ``os.wait4``), then the ratios. Compare
ratios, not absolute figures, across machines.

Usage: .venv/bin/python benchmarks/build_large_data.py [GiB, default 2] [--work DIR] [--keep]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
KIND = REPO / "kinds" / "label_accuracy"
PHASE = "evaluation"
APART = ["input_data", "public_data", "starting_kit"]
IMAGES = "train_images.npy"
ROW = 2**20                                  # bytes per row of the image array


def write_images(path: Path, size: int, seed: int = 0) -> Path:
    """A uint8 .npy of about ``size`` bytes of random values, written a row at a time."""
    rows = max(1, size // ROW)
    rng = np.random.default_rng(seed)
    with open(path, "wb") as handle:
        np.lib.format.write_array_header_1_0(
            handle, {"descr": "|u1", "fortran_order": False, "shape": (rows, ROW)})
        for _ in range(rows):
            handle.write(rng.bytes(ROW))
    return path


def write_spec(folder: Path) -> Path:
    raw = yaml.safe_load((KIND / "default_spec.yaml").read_text())
    raw.update(data_root=str(KIND / "tasks"), upload_separately=APART)
    shutil.copyfile(KIND / raw["logo"], folder / raw["logo"])
    (folder / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return folder / "spec.yaml"


def child(spec: Path, out: Path, images: Path | None) -> None:
    """The build, in this process: the input staging adds ``images`` when given."""
    sys.path.insert(0, str(REPO))
    from bundle import build
    from bundle.spec import load_spec

    staged = build.stage_input_data

    def with_images(plan, destination):
        folder = staged(plan, destination)
        try:
            os.link(images, folder / IMAGES)
        except OSError:
            shutil.copyfile(images, folder / IMAGES)
        return folder
    if images is not None:
        build.stage_input_data = with_images
    built = build.build_competition(load_spec(spec), [PHASE], None, out)
    assert built.datasets, "the input data should be written apart"


def measure(spec: Path, out: Path, images: Path | None) -> tuple[float, int]:
    """Wall seconds and peak resident bytes of one build in a child process."""
    argv = [sys.executable, __file__, "--child", str(spec), str(out)]
    argv += [str(images)] if images is not None else []
    started = time.perf_counter()
    process = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise RuntimeError(f"the build failed:\n{output.decode(errors='replace')[-3000:]}")
    return time.perf_counter() - started, usage.ru_maxrss * 1024


def run(work: Path, size: int) -> dict[str, tuple[float, int]]:
    spec = write_spec(work)
    images = write_images(work / IMAGES, size)
    return {"baseline": measure(spec, work / "baseline", None),
            "large": measure(spec, work / "large", images)}


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["--child"]:
        child(Path(sys.argv[2]), Path(sys.argv[3]),
              Path(sys.argv[4]) if len(sys.argv) > 4 else None)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gib", nargs="?", type=float, default=2.0)
    parser.add_argument("--work", type=Path, help="folder for the data and builds, on disk "
                        "(default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="build-large-data-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        figures = run(work, int(args.gib * 2**30))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    for name, (seconds, peak) in figures.items():
        print(f"{name:<9} {seconds:8.1f} s  peak RSS {peak / 2**20:8.0f} MiB")
    (base_s, base_peak), (large_s, large_peak) = figures["baseline"], figures["large"]
    print(f"with {args.gib:g} GiB of input data: {large_s / base_s:.1f}x the time, "
          f"{large_peak / base_peak:.2f}x the peak memory of the baseline "
          f"(+{(large_peak - base_peak) / 2**20:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

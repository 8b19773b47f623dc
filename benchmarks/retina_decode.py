"""How long the Retina convert takes to decode, crop and resize fundus photographs.

    .venv/bin/python benchmarks/retina_decode.py [--images 64] [--source-size 2048x1536]
                                                 [--workers N]

Synthetic fundus-like JPEGs (a bright disc with smooth shading, blotches and fine grain on
black, as EyePACS's camera photographs look to a decoder) are written at the source size
and at 512x512, then put through the convert's own decoder (``images.decode_all``: read the
bytes, sha256, Pillow decode with JPEG draft, border crop, square padding, bilinear resize,
the result copied as into the memmap) to 512 and to 128 pixels, with one worker and with N.
Each line gives seconds per 1,000 images and images per second, the CPU time of the
one-worker case (what a loaded machine's wall time hides), and N workers' speed-up over
one worker measured in the same run. Starting the pool
(a fraction of a second, printed apart) is left out of the times, as a real convert of tens
of thousands of images amortises it.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kinds.retina.reference import images  # noqa: E402

TARGETS = (512, 128)


def background(width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """(shading, grain) shared by the photographs of one size: a disc filling 90% of the
    shorter side, brightest at its centre, and a field of fine camera grain."""
    yy, xx = np.ogrid[:height, :width]
    radius = 0.45 * min(width, height)
    distance = np.sqrt((yy - height / 2) ** 2 + (xx - width / 2) ** 2) / radius
    shade = (np.clip(1.1 - 0.5 * distance ** 2, 0, None) * (distance <= 1)).astype(np.float32)
    grain = np.random.default_rng(0).normal(0, 4, (height, width, 1)).astype(np.float32)
    return shade[..., None], grain


def fundus(rng: np.random.Generator, shade: np.ndarray, grain: np.ndarray) -> Image.Image:
    """A fundus-like photograph: the shaded disc tinted orange with smooth blotches of its
    own, the grain shifted by a random offset, on a black that is not pure 0 (JPEG's ringing
    and the camera leave a few units, which the border threshold ignores)."""
    height, width = shade.shape[:2]
    coarse = Image.fromarray(rng.integers(0, 255, (24, 32, 3), dtype=np.uint8)).resize(
        (width, height), Image.Resampling.BICUBIC)
    colour = np.asarray(coarse, np.float32)
    colour *= 0.3
    colour += np.array([160, 50, 0], np.float32)
    colour *= shade
    colour += np.roll(grain, int(rng.integers(0, width)), axis=1)
    colour += 3
    return Image.fromarray(np.clip(colour, 0, 255).astype(np.uint8))


def write_sources(folder: Path, count: int, width: int, height: int) -> list[str]:
    rng = np.random.default_rng(width * height)
    shade, grain = background(width, height)
    paths = []
    for index in range(count):
        path = folder / f"{width}x{height}_{index}.jpeg"
        fundus(rng, shade, grain).save(path, quality=90)
        paths.append(str(path))
    return paths


def time_decoding(paths: list[str], size: int, workers: int, pool=None) -> tuple[float, float]:
    """(wall seconds, this process's CPU seconds) to decode every path with the convert's
    own machinery (in ``pool``, already started, for several workers)."""
    decoding = images.Decoding(size, 3, True, 10)
    ring = np.zeros((64, size, size, 3), np.uint8)

    def take(index: int, decoded: images.Decoded) -> None:
        if decoded.why:
            raise RuntimeError(f"{paths[index]}: {decoded.why}")
        ring[index % len(ring)] = decoded.pixels

    started, cpu = time.perf_counter(), time.process_time()
    images.decode_all(paths, decoding, workers, take, pool)
    return time.perf_counter() - started, time.process_time() - cpu


def started_pool(workers: int):
    """The convert's pool with every worker started and its modules imported."""
    pool = images.decoding_pool(workers)
    list(pool.map(time.sleep, [0.2] * workers))
    return pool


def report(name: str, paths: list[str], workers: int, pool) -> None:
    for size in TARGETS:
        one, cpu = time_decoding(paths, size, 1)
        many, _ = time_decoding(paths, size, workers, pool)
        print(f"{name} -> {size}x{size}: 1 worker {1000 * one / len(paths):6.1f} s per 1,000 "
              f"({1000 * cpu / len(paths):.1f} s of CPU, {len(paths) / one:6.1f} images/s); "
              f"{workers} workers "
              f"{1000 * many / len(paths):7.1f} s per 1,000 ({len(paths) / many:6.1f} "
              f"images/s); x{one / many:.2f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=64, help="images per case (default 64)")
    parser.add_argument("--source-size", default="2048x1536",
                        help="the large photographs' WIDTHxHEIGHT (default 2048x1536)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="the parallel case's workers (default: one per CPU)")
    args = parser.parse_args(argv)
    width, height = (int(side) for side in args.source_size.lower().split("x"))
    print(f"{args.images} images per case, {os.cpu_count()} CPUs, Pillow "
          f"{Image.__version__}", flush=True)
    started = time.perf_counter()
    pool = started_pool(args.workers)
    print(f"started {args.workers} workers in {time.perf_counter() - started:.1f} s "
          "(not counted below)", flush=True)
    with pool, tempfile.TemporaryDirectory() as folder:
        for size in ((width, height), (512, 512)):
            started = time.perf_counter()
            paths = write_sources(Path(folder), args.images, *size)
            megabytes = sum(os.path.getsize(path) for path in paths) / len(paths) / 1e6
            print(f"wrote {len(paths)} JPEGs of {size[0]}x{size[1]} ({megabytes:.2f} MB each) "
                  f"in {time.perf_counter() - started:.1f} s", flush=True)
            report(f"{size[0]}x{size[1]} JPEG", paths, args.workers, pool)
    return 0


if __name__ == "__main__":
    sys.exit(main())

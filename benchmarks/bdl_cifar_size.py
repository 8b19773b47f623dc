"""BDL's CIFAR-10 task at the 2021 size, read by the build and the programs on this machine.

Writes an organizer task shaped like the 2021 CIFAR-10 task (synthetic float32 pixels):
50,000 training images 32x32x3, 50,000 test images in 5 blocks of 10,000 (clean,
gaussian_noise_2, brightness_3, pixelate_4, zoom_blur_5), the true test labels in the .npz
(the public copy must zero them), a 50,000 x 10 reference of class probabilities, and a
declaration of ResNet-20-FRN (swish) with a N(0, 0.05) prior. The .npz is about 1.2 GB, as the
2021 one (1.1 GiB) was; it is written a block of images at a time.

Each step then runs in its own subprocess, which prints its wall time and the growth of its
peak resident memory (``ru_maxrss``: the process's peak, and its growth from before the step,
after the imports; a step below the imports' own peak shows no growth):

  maps      the inputs through read-only memory maps, headers checked (``read_task_inputs``
            with ``mapped=True, check_values=False``)
  scan      the same with every value checked finite, a block at a time
  checks    the organizer checks of the whole task (``task_problems``: inputs, network,
            reference)
  public    the public copy (``copy_public_inputs``: y_test zeroed, member by member)
  staging   the ingestion's staging of the child's data.npz (``stage_inputs``)
  load      for comparison: ``np.load`` of every array (what these steps did before)

Then the organizer's build, as two runs of ``build_bundle.py`` in a subprocess each, on
Codabench, of a results phase of the task (the 2021 competition took predictions) with its
public data, reference data and starting kit uploaded apart (``upload_separately``; the kit
holds the public data for its local runs): the first writes the data zips and stops for their
keys; the second, with the keys filled in, writes the bundle and
dry-runs it (``--check``) on the local copies of the data: the sample predictions scored
against the 50,000-row reference. Each prints its wall time, its peak resident memory (the
largest of the builder and the programs it ran) and the zips' sizes.

Usage: .venv/bin/python benchmarks/bdl_cifar_size.py [--scale 1.0] [--work DIR] [--keep]
(``--scale 0.1`` writes a tenth of the images, for a quick trial).

``--slice N [--baseline sgld] [--budget 300]`` runs instead a kit baseline on a code phase of
N training and N test images of the task's shapes (ResNet-20-FRN in numpy: the CPU image's
framework), through the local run, the phase's own ingestion and scoring programs.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
import zipfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BLOCKS = ("clean", "gaussian_noise_2", "brightness_3", "pixelate_4", "zoom_blur_5")
IMAGE = (32, 32, 3)
CHUNK = 2_000            # images written at once


def write_images(archive: zipfile.ZipFile, key: str, rows: int, rng) -> None:
    """One float32 member of (rows, 32, 32, 3), written a chunk at a time."""
    with archive.open(f"{key}.npy", "w", force_zip64=True) as member:
        np.lib.format.write_array_header_1_0(
            member, {"descr": "<f4", "fortran_order": False, "shape": (rows, *IMAGE)})
        for start in range(0, rows, CHUNK):
            count = min(CHUNK, rows - start)
            member.write(rng.random((count, *IMAGE), dtype=np.float32).tobytes())


def write_array(archive: zipfile.ZipFile, key: str, array: np.ndarray) -> None:
    with archive.open(f"{key}.npy", "w", force_zip64=True) as member:
        np.lib.format.write_array(member, array)


def write_task(root: Path, n_train: int, n_test: int) -> Path:
    """The organizer's files of task ``cifar`` under ``root``; returns its folder."""
    rng = np.random.default_rng(0)
    folder = root / "cifar"
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / "cifar.npz", "w", zipfile.ZIP_STORED,
                         allowZip64=True) as archive:
        write_images(archive, "x_train", n_train, rng)
        write_array(archive, "y_train", rng.integers(0, 10, n_train))
        write_images(archive, "x_test", n_test, rng)
        write_array(archive, "y_test", rng.integers(0, 10, n_test))     # true labels
    block = n_test // len(BLOCKS)
    declaration = {
        "name": "cifar", "phase": "evaluation", "kind": "classification", "num_classes": 10,
        "n_train": n_train, "n_test": n_test, "input_shape": list(IMAGE),
        "test_blocks": [{"name": name, "start": i * block, "stop": (i + 1) * block}
                        for i, name in enumerate(BLOCKS)],
        "model": {"type": "resnet20_frn", "activation": "swish", "input_shape": list(IMAGE),
                  "outputs": 10},
        "likelihood": {"name": "softmax"},
        "prior": {"distribution": "normal", "variance": 0.05},
        "summary": "CIFAR-10 and four CIFAR-10-C corruptions (synthetic pixels)"}
    (folder / "cifar_task.json").write_text(json.dumps(declaration, indent=1) + "\n")
    np.savetxt(folder / "cifar_probs.csv", rng.dirichlet(np.ones(10), size=n_test), fmt="%.6g")
    return folder


PRELUDE = """
import json, resource, sys, time
from pathlib import Path
from types import SimpleNamespace
sys.path.insert(0, {repo!r})
import numpy as np
from bundle.phase_plan import task_data_problems
from kinds.bdl2021.kind import copy_public_inputs
from kinds.bdl2021.runtime import ingestion
from kinds.bdl2021.runtime.formats import read_task_inputs
folder, out = Path({folder!r}), Path({out!r})
source = folder / "cifar.npz"
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
began = time.perf_counter()
"""
STEPS = {
    "maps": "inputs = read_task_inputs(source, mapped=True, check_values=False)\n"
            "result = [list(a.shape) for a in inputs]",
    "scan": "inputs = read_task_inputs(source, mapped=True)\n"
            "result = [list(a.shape) for a in inputs]",
    "checks": "result = task_data_problems('bdl2021', 'cifar', folder.parent)",
    "public": "copy_public_inputs(source, out / 'public.npz')\n"
              "result = (out / 'public.npz').stat().st_size",
    "staging": "data = ingestion.stage_inputs(SimpleNamespace(inputs=source.name), folder, out)\n"
               "result = data.stat().st_size",
    "load": "with np.load(source) as archive:\n"
            "    arrays = {k: archive[k] for k in archive.files}\n"
            "result = sum(a.nbytes for a in arrays.values())",
}
EPILOGUE = """
seconds = time.perf_counter() - began
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"seconds": seconds, "growth_bytes": (after - before) * 1024,
                   "peak_bytes": after * 1024, "result": result}}))
"""


def measure(step: str, folder: Path, out: Path) -> dict:
    script = (PRELUDE.format(repo=str(REPO), folder=str(folder), out=str(out))
              + STEPS[step] + textwrap.dedent(EPILOGUE).format())
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=1800)
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0,
                        help="fraction of the 2021 image counts (default 1: 50,000 + 50,000)")
    parser.add_argument("--work", type=Path, help="folder for the task (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the files written")
    parser.add_argument("--slice", type=int, default=0, metavar="IMAGES",
                        help="only run --baseline on a code phase of this many training and "
                             "test images")
    parser.add_argument("--baseline", default="sgld", help="the kit's baseline for --slice")
    parser.add_argument("--budget", type=float, default=300.0,
                        help="seconds for --baseline on the slice")
    args = parser.parse_args(argv)
    n_train = n_test = max(len(BLOCKS), int(50_000 * args.scale) // len(BLOCKS) * len(BLOCKS))
    work = Path(tempfile.mkdtemp(prefix="bdl_cifar_", dir=args.work))
    try:
        if args.slice:
            return 0 if baseline_on_a_slice(work, args.slice, args.baseline, args.budget) else 1
        return run(work, n_train, n_test)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")


def run(work: Path, n_train: int, n_test: int) -> int:
    folder = write_task(work / "data", n_train, n_test)
    size = (folder / "cifar.npz").stat().st_size
    print(f"task: {n_train:,} training and {n_test:,} test images 32x32x3 float32; "
          f"cifar.npz {size / 1e9:.2f} GB")
    print(f"{'step':<9} {'seconds':>8} {'peak RSS':>9} {'growth':>8} {'of the data':>12}  result")
    failed = False
    for step in STEPS:
        out = work / f"out_{step}"
        out.mkdir()
        figures = measure(step, folder, out)
        if "error" in figures:
            failed = True
            print(f"{step:<9} failed: {figures['error']}")
            continue
        growth = figures["growth_bytes"]
        print(f"{step:<9} {figures['seconds']:>8.2f} {figures['peak_bytes'] / 1e6:>6.0f} MB "
              f"{growth / 1e6:>5.0f} MB "
              f"{growth / size:>11.1%}  {json.dumps(figures['result'])[:70]}")
        shutil.rmtree(out)
    return 1 if failed or not organizer_build(work) else 0


def _spec(work: Path, keys: dict | None, submission: str = "results",
          budget_seconds: float = 600) -> Path:
    import yaml
    default_spec = REPO / "kinds" / "bdl2021" / "default_spec.yaml"
    spec = yaml.safe_load(default_spec.read_text())
    shutil.copyfile(default_spec.parent / spec["logo"], work / spec["logo"])
    spec.update(slug="bdl-cifar-size", tasks={"cifar": {"budget_seconds": budget_seconds}},
                tracks={}, phases={"evaluation": {
                    "label": "Evaluation", "start": "2027-04-01 00:00:00", "tasks": ["cifar"],
                    "submission": submission, "execution_time_limit": 3600}})
    if submission == "results":
        spec["upload_separately"] = ["public_data", "reference_data", "starting_kit"]
    if keys:
        spec["dataset_keys"] = keys
    path = work / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


# Runs a command and reports the peak resident memory of it and everything it waited for.
PEAK_OF = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
           "print('peak', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
           "file=sys.stderr); sys.exit(done.returncode)")


def _peak_of(command: list[str]) -> tuple[subprocess.CompletedProcess, dict]:
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PEAK_OF, *command], cwd=REPO,
                          capture_output=True, text=True, timeout=3600)
    peak_kib = int(done.stderr.strip().splitlines()[-1].split()[1])
    return done, {"seconds": time.perf_counter() - began, "peak": f"{peak_kib / 1e3:.0f} MB"}


def _build(work: Path, keys: dict | None, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    return _peak_of([sys.executable, str(REPO / "build_bundle.py"), "--config",
                     str(_spec(work, keys)), "--data-root", str(work / "data"), "--phase",
                     "evaluation", "--out", str(work / "dist"), *extra])


def baseline_on_a_slice(work: Path, images: int, baseline: str, budget: float) -> bool:
    """A code phase on ``images`` training and test images of the same shapes: the kit's
    ``baseline`` through the local run (bundle.local_run: the phase's own ingestion and
    scoring programs, as the dry run runs them) with ``budget`` seconds."""
    folder = work / "slice"
    folder.mkdir()
    write_task(folder / "data", images, images)
    done, figures = _peak_of([sys.executable, "-m", "bundle.local_run", "--config",
                              str(_spec(folder, None, "code", budget)), "--data-root",
                              str(folder / "data"), "--baseline", baseline, "--phase",
                              "evaluation", "--budget", str(budget), "--score-hidden",
                              "--out", str(folder / "run")])
    print(f"{baseline} on a slice of {images:,} + {images:,} images, {budget:g} s: "
          f"{figures['seconds']:.1f} s, peak RSS {figures['peak']}, status {done.returncode}")
    scores = done.stdout.split("\nscores:\n")[-1].split("\n\n")[0] if "scores:" in done.stdout \
        else done.stdout[-2000:] + done.stderr[-2000:]
    print(textwrap.indent(scores.strip(), "  "))
    return done.returncode == 0


def organizer_build(work: Path) -> bool:
    """The two builds of data uploaded apart; True when the second's dry run passed."""
    first, figures = _build(work, None)
    if first.returncode != 3 or "dataset_keys:\n" not in first.stdout:
        print(f"first build: status {first.returncode}\n{first.stdout[-2000:]}{first.stderr[-2000:]}")
        return False
    block = first.stdout.split("dataset_keys:\n", 1)[1].split("\nnot written yet", 1)[0]
    import yaml
    keys = yaml.safe_load(re.sub("PASTE-ITS-KEY", lambda _: str(uuid.uuid4()), block))
    _report("build 1 (data zips)", figures, work / "dist")
    second, figures = _build(work, keys, "--check")
    passed = second.returncode == 0 and "dry run passed" in second.stdout
    _report("build 2 (bundle, --check)", figures, work / "dist")
    if not passed:
        print(f"status {second.returncode}\n{second.stdout[-3000:]}{second.stderr[-3000:]}")
    return passed


def _report(step: str, figures: dict, dist: Path) -> None:
    sizes = ", ".join(f"{zip_file.name} {zip_file.stat().st_size / 1e6:,.1f} MB"
                      for zip_file in sorted(dist.glob("*.zip")))
    print(f"{step}: {figures['seconds']:.1f} s, peak RSS {figures['peak']}; {sizes}")


if __name__ == "__main__":
    sys.exit(main())

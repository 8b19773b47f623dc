"""PGDL 2020 at real size, rehearsed on this machine (issue 28, item 7).

A zoo shaped like PGDL's task 1 (VGG-like networks on 32x32x3 images, the complete grid of
2x2x2x2x2x3 = 96 networks, 50,000 training images; weights and images random) goes through

  0. writing it in PGDL's original formats (Keras 2 HDF5 weights, TFRecord shards of
     tf.train.Examples, model_configs.json apart, as PGDL's zips held them);
  1. ``python -m reference_data --kind pgdl2020 convert`` (which checks every record's
     CRC32C and recomputes each network's training accuracy on a sample of the images);
  2. ``build_bundle.py`` with the data uploaded apart (``upload_separately``): once without
     keys (the data zips are written, exit 3, no bundle), once with stand-in keys (the
     bundle), then ``--check`` of that bundle (its dry run reads the local data zips);
  3. ``python -m bundle.local_run`` of one kit baseline under the per-network limit.

Between 1 and 2 a probe times the baseline and one forward pass on one network of each
architecture, outside the sandbox: the ingestion prints no per-network times, the spec's
per-network limit is set from it (three times the slowest), and the estimates use it.

Each step is its own subprocess: its wall time and the peak resident memory of its largest
process (``ru_maxrss`` from ``os.wait4``, which covers the descendants it waited for) are
printed, with the sizes on disk, and at the end what would need a GPU.

Usage (defaults are the real size; smaller values give a quick trial):
  .venv/bin/python benchmarks/pgdl_real_size.py [--models 96] [--train 50000] [--test 10000]
      [--work DIR] [--keep] [--baseline margin] [--per-network SECONDS]

``--models`` takes a complete sub-grid: the architecture's hyperparameters come first, so 8
networks are the 8 distinct architectures and 96 / 8 times their cost is the full zoo's.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "kinds" / "pgdl2020" / "tests")]

from kinds.pgdl2020.reference.tfrecord import masked_crc32c  # noqa: E402
from protobuf_bytes import length_field, varint  # noqa: E402

PYTHON = sys.executable
TASK = "task1_like"
PHASE = "phase1"
SPEC_TEMPLATE = REPO / "kinds" / "pgdl2020" / "default_spec.yaml"
BASELINES = REPO / "kinds" / "pgdl2020" / "kit" / "baselines"

# Ordered so that a prefix of the grid varies the architecture first: a small --models run
# still pays for every kind of network the full zoo holds.
GRID = {"depth": [1, 3], "dense_layers": [1, 2], "filters": [32, 64], "dropout": [0.0, 0.5],
        "weight_decay": [0.0, 0.001], "learning_rate": [0.001, 0.01, 0.1]}
IMAGE = (32, 32, 3)
CLASSES = 10
DENSE_UNITS = 128
SHARD_EXAMPLES = 5000
FAKE_KEY = "00000000-0000-4000-8000-{:012x}"
# A code phase's public data and starting kit hold the zoo too (without its accuracies): with
# input_data alone apart the bundle still carries the zoo twice.
APART = ("input_data", "public_data", "starting_kit")


# --- the zoo's grid and architectures ---------------------------------------------------------

def grid_names(models: int) -> list[str]:
    """The hyperparameters varied for a zoo of ``models`` networks (a complete sub-grid)."""
    rest, names = models, []
    if rest % 3 == 0:
        rest //= 3
        names.append("learning_rate")
    binary = [name for name, values in GRID.items() if len(values) == 2]
    count = int(round(math.log2(rest))) if rest >= 1 else -1
    if count < 0 or 2 ** count != rest or count > len(binary):
        sizes = sorted({2 ** k * m for k in range(len(binary) + 1) for m in (1, 3)})
        raise SystemExit(f"--models {models}: not a complete sub-grid of "
                         f"{' x '.join(str(len(v)) for v in GRID.values())}; use one of {sizes}")
    return binary[:count] + names


def hyperparameters(models: int) -> list[dict]:
    """Each network's values, the grid's unvaried names at their first value."""
    names = grid_names(models)
    fixed = {name: values[0] for name, values in GRID.items()}
    return [fixed | dict(zip(names, combination))
            for combination in itertools.product(*(GRID[name] for name in names))]


def architecture(hp: dict) -> list[dict]:
    """Task 1's VGG shape: [conv, conv, pool] per block, filters doubling by block."""
    layers = []
    for block in range(hp["depth"]):
        conv = {"layer_name": "Conv2D", "filters": hp["filters"] * 2 ** block,
                "kernel_size": [3, 3], "padding": "same", "activation": "relu"}
        layers += [conv, dict(conv), {"layer_name": "MaxPooling2D", "pool_size": [2, 2]}]
    layers.append({"layer_name": "Flatten"})
    for _ in range(hp["dense_layers"]):
        layers += [{"layer_name": "Dense", "units": DENSE_UNITS, "activation": "relu"},
                   {"layer_name": "Dropout", "rate": hp["dropout"]}]
    return layers + [{"layer_name": "Dense", "units": CLASSES, "activation": "linear"}]


def keras_names(layers: list[dict]) -> list[str]:
    """Keras's automatic names: snake case of the class, ``_k`` from the second on."""
    counts: dict[str, int] = {}
    names = []
    for layer in layers:
        base = re.sub(r"(?<=[a-z0-9])(?=[A-Z][a-z])", "_", layer["layer_name"]).lower()
        k = counts.get(base, 0)
        counts[base] = k + 1
        names.append(base if k == 0 else f"{base}_{k}")
    return names


def weight_shapes(layers: list[dict]) -> list[tuple[int, tuple, tuple]]:
    """``(layer index, kernel shape, bias shape)`` in Keras's layouts, for layers with
    weights: Conv2D (kh, kw, in, out), Dense (in, out)."""
    side, channels, flat, shapes = IMAGE[0], IMAGE[2], None, []
    for index, layer in enumerate(layers):
        kind = layer["layer_name"]
        if kind == "Conv2D":
            shapes.append((index, (3, 3, channels, layer["filters"]), (layer["filters"],)))
            channels = layer["filters"]
        elif kind == "MaxPooling2D":
            side //= 2
        elif kind == "Flatten":
            flat = side * side * channels
        elif kind == "Dense":
            shapes.append((index, (flat, layer["units"]), (layer["units"],)))
            flat = layer["units"]
    return shapes


# --- step 0: PGDL's original formats ------------------------------------------------------------

def random_weights(layers: list[dict], rng) -> tuple[dict, dict]:
    """(trained, initial) ``{layer index: (kernel, bias)}``: He-normal at initialisation, the
    trained ones moved from there, so distances to initialisation are not zero."""
    trained, initial = {}, {}
    for index, kernel_shape, bias_shape in weight_shapes(layers):
        scale = np.sqrt(2.0 / math.prod(kernel_shape[:-1]))
        start = (rng.standard_normal(kernel_shape, np.float32) * scale).astype(np.float32)
        moved = start + (rng.standard_normal(kernel_shape, np.float32) * 0.3 * scale)
        initial[index] = (start, np.zeros(bias_shape, np.float32))
        trained[index] = (moved.astype(np.float32),
                          (rng.standard_normal(bias_shape, np.float32) * 0.01).astype(np.float32))
    return trained, initial


def write_keras_hdf5(path: Path, layers: list[dict], arrays: dict) -> None:
    """Keras 2's legacy ``save_weights`` HDF5: root ``layer_names`` (every layer), one group per
    layer with its ``weight_names``, each array at ``<layer>/<layer>/<weight>:0``."""
    import h5py
    names = keras_names(layers)
    with h5py.File(path, "w") as handle:
        handle.attrs["layer_names"] = np.array([name.encode() for name in names])
        handle.attrs["backend"] = b"tensorflow"
        for index, name in enumerate(names):
            group = handle.create_group(name)
            held = arrays.get(index)
            if held is None:
                group.attrs["weight_names"] = np.array([], dtype=np.float64)   # as Keras wrote
                continue
            weights = [f"{name}/kernel:0", f"{name}/bias:0"]
            group.attrs["weight_names"] = np.array([w.encode() for w in weights])
            for weight, array in zip(weights, held):
                group.create_dataset(weight, data=array)


# Field numbers as tensorflow's protos define them (and kinds/pgdl2020/reference/tfrecord.py
# reads them): TensorProto dtype 1, tensor_shape 2, tensor_content 4; TensorShapeProto dim 2,
# its size 1; Example features 1; Features feature 1 (map entries: key 1, value 2); Feature
# bytes_list 1, its value 1.
def _tensor_head(dtype: int, shape: tuple) -> bytes:
    """TensorProto's dtype and tensor_shape, the part every example's tensor shares."""
    dims = b"".join(length_field(2, varint(1 << 3) + varint(size)) for size in shape)
    return varint(1 << 3) + varint(dtype) + length_field(2, dims)


IMAGE_HEAD = _tensor_head(1, IMAGE)          # DT_FLOAT
LABEL_HEAD = _tensor_head(3, ())             # DT_INT32 scalar: an empty, present shape


def example(image: np.ndarray, label: int) -> bytes:
    """A tf.train.Example of two bytes features, each what tf.io.serialize_tensor writes
    (tensor_content: the raw little-endian values)."""
    tensors = (("inputs", IMAGE_HEAD + length_field(4, image.astype("<f4").tobytes())),
               ("output", LABEL_HEAD + length_field(4, struct.pack("<i", label))))
    entries = b"".join(length_field(1, length_field(1, key.encode())
                                    + length_field(2, length_field(1, length_field(1, value))))
                       for key, value in tensors)
    return length_field(1, entries)


def tfrecord(data: bytes) -> bytes:
    header = struct.pack("<Q", len(data))
    return (header + struct.pack("<I", masked_crc32c(header)) + data
            + struct.pack("<I", masked_crc32c(data)))


def write_split(folder: Path, count: int, shards: int, rng) -> None:
    """``shard_<k>.tfrecord`` files of CIFAR-like random images in [0, 1), generated a shard at
    a time so that memory stays one shard's."""
    folder.mkdir(parents=True)
    bounds = np.linspace(0, count, shards + 1).astype(int)
    for shard, (start, stop) in enumerate(zip(bounds[:-1], bounds[1:])):
        images = rng.random((stop - start, *IMAGE), np.float32)
        labels = rng.integers(0, CLASSES, stop - start)
        with open(folder / f"shard_{shard}.tfrecord", "wb") as out:
            for image, label in zip(images, labels):
                out.write(tfrecord(example(image, int(label))))


def model_configs(grid: list[dict], names: list[str], rng) -> dict:
    """PGDL's reference file: the grid, each network's values, accuracies (random here: the
    converter reports, and does not refuse, accuracies it cannot reproduce)."""
    return {str(i): {"hparams": {name: {"possible_values": GRID[name], "current_value": hp[name]}
                                 for name in names},
                     "metrics": {"train_acc": float(rng.uniform(0.9, 1.0)),
                                 "test_acc": float(rng.uniform(0.55, 0.85))}}
            for i, hp in enumerate(grid)}


def write_pgdl(root: Path, models: int, train: int, test: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    task = root / "input_data" / TASK
    grid = hyperparameters(models)
    for model_id, hp in enumerate(grid):
        folder = task / f"model_{model_id}"
        folder.mkdir(parents=True)
        layers = architecture(hp)
        (folder / "config.json").write_text(json.dumps(
            {"model_config": layers, "input_shape": list(IMAGE)}, indent=1))
        trained, initial = random_weights(layers, rng)
        write_keras_hdf5(folder / "weights.hdf5", layers, trained)
        write_keras_hdf5(folder / "weights_init.hdf5", layers, initial)
    write_split(task / "dataset_1" / "train", train, max(2, math.ceil(train / SHARD_EXAMPLES)), rng)
    write_split(task / "dataset_1" / "test", test, 1, rng)
    reference = root / "reference_data" / TASK
    reference.mkdir(parents=True)
    (reference / "model_configs.json").write_text(
        json.dumps(model_configs(grid, grid_names(models), rng), indent=1))


# --- running and measuring a step -------------------------------------------------------------

@dataclass
class Step:
    name: str
    seconds: float
    peak_bytes: int
    status: int
    log: Path

    def line(self) -> str:
        return (f"{self.name:<40} {self.seconds:9.1f} s   peak RSS {self.peak_bytes / 2**20:8.0f} "
                f"MiB   exit {self.status}")


def run_step(name: str, argv: list[str], log: Path) -> Step:
    """One step as a child process; wait4's rusage is that child's tree (largest process)."""
    print(f"\n== {name}: {' '.join(map(str, argv))}", flush=True)
    started = time.perf_counter()
    with open(log, "w") as out:
        process = subprocess.Popen(list(map(str, argv)), cwd=REPO, stdout=out,
                                   stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)      # reaped here, not by Popen
    step = Step(name, time.perf_counter() - started, usage.ru_maxrss * 1024,
                process.returncode, log)
    print(step.line(), flush=True)
    return step


def tail(log: Path, lines: int = 25) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


# --- sizes --------------------------------------------------------------------------------------

def size_of(path: Path, pattern: str = "*") -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob(pattern) if p.is_file())


def mb(size: int) -> str:
    return f"{size / 1e6:10.1f} MB"


def print_sizes(work: Path) -> None:
    original = work / "pgdl" / "input_data" / TASK
    converted = work / "data" / TASK
    print("\n== sizes on disk")
    rows = [("original: weights*.hdf5", size_of(original, "*.hdf5")),
            ("original: TFRecord shards", size_of(original, "*.tfrecord")),
            ("converted: weights*.npz", size_of(converted, "weights*.npz")),
            ("converted: train.npz + test.npz", size_of(converted / "dataset_1"))]
    rows += [(f"out/{path.name}", size_of(path)) for path in sorted((work / "out").glob("*.zip"))]
    rows += [("run/ (the dry run's kit and staging)", size_of(work / "run")),
             ("the whole work folder", size_of(work))]
    for label, size in rows:
        print(f"  {label:<56}{mb(size)}")


# --- step 2: the spec --------------------------------------------------------------------------

def write_spec(work: Path, per_network: float, models: int, keys: dict | None = None) -> Path:
    """The default spec cut to one code phase on the converted task, its input data apart
    (``keys``: the dataset_keys entries, once the zips exist)."""
    import yaml
    spec = yaml.safe_load(SPEC_TEMPLATE.read_text())
    budget = math.ceil(per_network * models)
    phase = dict(spec["phases"][PHASE], tasks=[TASK])
    phase.pop("gate", None)
    # The platform must allow the whole zoo's budget, start-up and scoring in one run.
    phase["execution_time_limit"] = budget + 600
    spec.update(data_root=str(work / "data"), tasks={TASK: {"budget_seconds": budget}},
                phases={PHASE: phase}, upload_separately=list(APART),
                codabench_queue=FAKE_KEY.format(0), slug="pgdl-real-size")
    return save_spec(work, spec, SPEC_TEMPLATE, keys)


def save_spec(work: Path, spec: dict, template: Path, keys: dict | None) -> Path:
    """``work/spec.yaml`` with the dataset keys (once the zips exist), and the template's logo
    beside it."""
    import yaml
    if keys:
        spec["dataset_keys"] = keys
    path = work / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    shutil.copyfile(template.parent / spec["logo"], work / spec["logo"])
    return path


def printed_keys(log: Path) -> dict:
    """The dataset_keys entries the first build prints, given stand-in keys (as a site would)."""
    names = re.findall(r"^\s*([\w.-]+):\s*\{?\s*key:", log.read_text(), re.M)
    hashes = re.findall(r"sha256:\s*([0-9a-f]{64})", log.read_text())
    return {name: {"key": FAKE_KEY.format(i + 1), "sha256": sha}
            for i, (name, sha) in enumerate(zip(names, hashes))}


# --- probing one network of each architecture --------------------------------------------------

def architectures(models: int) -> list[str]:
    """One model id per distinct architecture (the first in the grid)."""
    seen, chosen = set(), []
    for model_id, hp in enumerate(hyperparameters(models)):
        # A dropout rate is in the config but costs nothing at evaluation.
        shape = json.dumps(architecture(hp | {"dropout": 0.0}))
        if shape not in seen:
            seen.add(shape)
            chosen.append(f"model_{model_id}")
    return chosen


def probe(task: Path, baseline: str, ids: list[str]) -> list[dict]:
    """Per architecture: the baseline's own time on one network, and one forward pass over
    sharpness.py's subset. On a trained network sharpness makes 1 + DRAWS x (2 + STEPS) such
    passes; on these random ones, at chance accuracy, its search stops after 1 + DRAWS, so
    running it here would understate it: the estimate is the trained network's."""
    sys.path.insert(0, str(BASELINES))
    import importlib
    from kinds.pgdl2020.runtime.participant import Dataset, Model
    measure, sharpness = importlib.import_module(baseline), importlib.import_module("sharpness")
    dataset = Dataset(task / "dataset_1")
    x, y = sharpness._subset(dataset, sharpness.EXAMPLES, sharpness.SEED)
    rows = []
    for model_id in ids:
        model = Model(task / model_id)
        started = time.perf_counter()
        model.accuracy(x, y)
        forward = time.perf_counter() - started
        started = time.perf_counter()
        measure.complexity(model, dataset)
        rows.append({"model": model_id, "parameters": model.num_parameters,
                     "forward_per_image": forward / len(y),
                     "sharpness_passes": 1 + sharpness.DRAWS * (2 + sharpness.STEPS),
                     "sharpness_examples": len(y), "baseline_seconds":
                     time.perf_counter() - started})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def probe_step(work: Path, task: Path, baseline: str, models: int) -> tuple[Step, list[dict]]:
    step = run_step(f"probe: {baseline} per architecture", [
        PYTHON, __file__, "--probe-only", task, "--baseline", baseline,
        "--models", models], work / "probe.log")
    rows = [json.loads(line) for line in step.log.read_text().splitlines()
            if line.startswith("{")]
    for row in rows:
        print(f"  {row['model']:<9} {row['parameters']:>9,} parameters: {baseline} "
              f"{row['baseline_seconds']:6.1f} s; forward {row['forward_per_image'] * 1e3:.2f} "
              f"ms/image; sharpness about {sharpness_seconds(row):.0f} s per network")
    return step, rows


def sharpness_seconds(row: dict) -> float:
    return row["sharpness_passes"] * row["sharpness_examples"] * row["forward_per_image"]


def per_network_limit(rows: list[dict]) -> float:
    """Three times the slowest architecture's time, in whole tens of seconds: the margin
    that a shared 2-core machine, slower image loading and a busier worker need."""
    slowest = max(row["baseline_seconds"] for row in rows)
    return max(30.0, 10.0 * math.ceil(3 * slowest / 10))


# --- the steps ----------------------------------------------------------------------------------

def convert_step(work: Path) -> Step:
    source = work / "pgdl" / "input_data" / TASK
    step = run_step("1 convert", [PYTHON, "-m", "reference_data", "--kind", "pgdl2020",
                                  "convert", source, "--out", work / "data", "--phase", PHASE,
                                  "--model-configs", work / "pgdl" / "reference_data"],
                    work / "convert.log")
    print(tail(step.log, 10))
    return step


def build_steps(work: Path, per_network: float, models: int) -> list[Step]:
    """The build as an organizer meets it with data apart: zips and keys to fill in, then the
    bundle, then its dry run (``--check`` of the zip, on the local copies of the data)."""
    spec = write_spec(work, per_network, models)
    build = [PYTHON, "build_bundle.py", "--config", spec, "--phase", "all", "--out", work / "out"]
    first = run_step("2a build, data apart, no keys yet", build, work / "build1.log")
    print(tail(first.log, 30))
    keys = printed_keys(first.log)
    if not keys:
        print("(no dataset_keys entries found in the first build's output)")
        return [first]
    write_spec(work, per_network, models, keys)
    second = run_step("2b build with the keys", build, work / "build2.log")
    print(tail(second.log, 12))
    bundles = [p for p in (work / "out").glob("*.zip") if p.name.count(".") == 1]
    if second.status or not bundles:
        return [first, second]
    check = run_step("2c --check of the bundle", [PYTHON, "build_bundle.py", "--check",
                                                  bundles[0]], work / "check.log")
    print(tail(check.log, 16))
    return [first, second, check]


def dry_run_step(work: Path, baseline: str) -> Step:
    step = run_step(f"3 dry run of {baseline}", [
        PYTHON, "-m", "bundle.local_run", "--config", work / "spec.yaml", "--phase", PHASE,
        "--code", BASELINES / f"{baseline}.py", "--score-hidden", "--out", work / "run"],
        work / "run.log")
    print(tail(step.log, 60))
    return step


def write_step(args, work: Path) -> Step:
    return run_step("0 write PGDL's formats", [
        PYTHON, __file__, "--write-only", work / "pgdl", "--models", args.models,
        "--train", args.train, "--test", args.test], work / "write.log")


def estimates(args, rows: list[dict]) -> None:
    """The probe's per-architecture times, scaled to the whole zoo (each architecture is
    models / architectures of its networks)."""
    from kinds.pgdl2020.reference import convert
    checked = min(args.train, getattr(convert, "ACCURACY_SAMPLE", args.train))
    repeat = args.models / len(rows)
    forward = sum(row["forward_per_image"] for row in rows) * repeat
    baseline = sum(row["baseline_seconds"] for row in rows) * repeat
    sharp = sum(sharpness_seconds(row) for row in rows) * repeat
    print(f"\n== estimates for {args.models} networks, from the probe")
    print(f"  convert's accuracy check ({checked} examples per network): "
          f"{duration(forward * checked)}; on all {args.train}: {duration(forward * args.train)}")
    print(f"  {args.baseline} over the zoo: {duration(baseline)} "
          f"({baseline / args.models:.1f} s per network on average)")
    print(f"  sharpness over the zoo, its whole search (as on trained networks): about "
          f"{duration(sharp)} ({sharp / args.models:.0f} s per network on average)")


def duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{seconds / 60:.1f} min"


GPU_NOTE = """
== what would need a GPU (or many more cores)
- Nothing here fails without one: convert, the build and the ingestion run numpy on the CPU;
  time is what does not fit. Convert (the organizer's machine, numpy only) checks accuracy
  on a sample, so it fits; on every training image it would take the hours estimated above.
- A participant's measure: one pass over 2,000 images (margin) fits a CPU limit; measures
  of many forward or backward passes per network (sharpness and PAC-Bayes flatness, anything
  that trains) need the GPU image (docker_image gpu310, Model.to_torch) to fit PGDL's 300 s
  per network (the sharpness estimate above is the CPU's).
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=96)
    parser.add_argument("--train", type=int, default=50_000)
    parser.add_argument("--test", type=int, default=10_000)
    parser.add_argument("--work", type=Path, help="folder to work in (default: a new temporary "
                                                  "one); removed at the end unless --keep")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--baseline", default="margin", help="kit baseline for the dry run")
    parser.add_argument("--per-network", type=float,
                        help="seconds per network in the spec's budget (default: three times "
                             "the slowest architecture's time of the baseline, from the probe)")
    parser.add_argument("--write-only", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--probe-only", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.write_only:
        write_pgdl(args.write_only, args.models, args.train, args.test)
        return 0
    if args.probe_only:
        probe(args.probe_only, args.baseline, architectures(args.models))
        return 0
    grid_names(args.models)
    if args.work and args.work.exists() and any(args.work.iterdir()):
        # The folder is removed at the end: never one that held something before.
        raise SystemExit(f"--work {args.work}: not empty; name a new or empty folder")
    work = args.work or Path(tempfile.mkdtemp(prefix="pgdl_real_size_"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work folder {work}; {args.models} networks, {args.train} train / {args.test} test "
          f"images; {os.cpu_count()} CPUs")
    try:
        return rehearse(args, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def rehearse(args, work: Path) -> int:
    steps = [write_step(args, work), convert_step(work)]
    rows = []
    if all(step.status == 0 for step in steps):
        probed, rows = probe_step(work, work / "data" / TASK, args.baseline, args.models)
        steps.append(probed)
    if rows:
        limit = args.per_network or per_network_limit(rows)
        print(f"\nper-network limit {limit:g} s ({args.models} networks: budget "
              f"{math.ceil(limit * args.models)} s)")
        steps += build_steps(work, limit, args.models)
        steps.append(dry_run_step(work, args.baseline))
    print_sizes(work)
    print("\n== summary (wall time; peak RSS = the step's largest process)")
    for step in steps:
        print(step.line())
    if rows:
        estimates(args, rows)
    print(GPU_NOTE)
    # The first build's exit 3 is the expected "waiting for dataset keys".
    return max((step.status for step in steps if not step.name.startswith("2a")), default=0)


if __name__ == "__main__":
    sys.exit(main())

"""Convert PGDL task folders in their original formats into this kind's layout (organizer side).

PGDL shipped each task as::

    <task>/model_<id>/config.json, weights.hdf5 [, weights_init.hdf5]    (Keras HDF5)
    <task>/dataset_1/train/shard_*.tfrecord [, test/shard_*.tfrecord]    (tf.train.Example)
    reference_data/<task>/model_configs.json                             (elsewhere)

(a model folder may hold what current Keras writes instead: ``*.weights.h5``,
``model.keras``, ``model.h5``, Keras's model JSON; ``keras_model.py`` says which names), and
this kind reads (``docs/pgdl_data.md``)::

    <task>/model_<id>/config.json, weights.npz [, weights_init.npz]
    <task>/dataset_1/train.npz [, test.npz]        inputs float32 (n, *shape), outputs int32 (n,)
    <task>/model_configs.json, <task>/<task>_task.json

Every problem of a task is collected (one line each, naming the file) before anything is
written; a task is written into a temporary folder beside its target, checked with the
runtime's own readers, and only then renamed into place, so a failure never leaves a
half-written task.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bundle.progress import Progress
from runtime.formats import FormatError

from ..runtime.formats import read_model_configs
from .checks import data_problem, output_units, shared_problem
from .keras_hdf5 import ModelError
from .keras_model import read_network
from .npz import write_npz
from .tfrecord import ProtoError, TFRecordError, parse_example, parse_tensor, read_records

MODEL_CONFIGS = "model_configs.json"
UNKNOWN = "unknown (converted from PGDL's original files)"


class ConvertError(Exception):
    """The problems of one task, each a line naming a file."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


# --- finding the files ---------------------------------------------------------------------

def find_model_configs(source: Path, given: Path | None = None) -> Path:
    """The task's ``model_configs.json``: ``given`` (the file, or a reference_data folder
    holding ``<task>/model_configs.json``), else in the task folder, else in a
    ``reference_data/<task>/`` beside the task folder or beside its parent (PGDL's zips put
    ``input_data/<task>`` and ``reference_data/<task>`` side by side)."""
    if given is not None:
        candidates = [given / source.name / MODEL_CONFIGS, given / MODEL_CONFIGS] \
            if given.is_dir() else [given]
    else:
        candidates = [source / MODEL_CONFIGS,
                      source.parent / "reference_data" / source.name / MODEL_CONFIGS,
                      source.parent.parent / "reference_data" / source.name / MODEL_CONFIGS]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise ConvertError([f"{source}: no {MODEL_CONFIGS} found (looked at "
                        + ", ".join(str(c) for c in candidates)
                        + "); pass --model-configs"])


def shards(folder: Path) -> list[Path]:
    """The TFRecord shards of one split, in name order (PGDL listed them so)."""
    return sorted(p for p in folder.iterdir() if p.is_file() and ".tfrecord" in p.name)


# --- data ----------------------------------------------------------------------------------

def _example_arrays(path: Path, number: int, record: bytes) -> tuple[np.ndarray, int]:
    """(inputs float32, label) of one record; ValueError naming the file and record."""
    where = f"{path}: record {number}"
    try:
        features = parse_example(record)
        tensors = {}
        for key in ("inputs", "output"):
            if key not in features:
                raise ProtoError(f"no feature {key!r} (found {sorted(features)})")
            kind, values = features[key]
            if kind != "bytes" or len(values) != 1:
                raise ProtoError(f"feature {key!r} is {kind} with {len(values)} value(s); "
                                 "expected one serialized tensor (bytes)")
            tensors[key] = parse_tensor(values[0])
    except ProtoError as error:
        raise TFRecordError(f"{where}: {error}") from None
    except (TypeError, OverflowError, struct.error) as error:
        raise TFRecordError(f"{where}: not a tf.train.Example of serialized tensors "
                            f"({error})") from None
    inputs, output = tensors["inputs"], tensors["output"]
    if not np.issubdtype(inputs.dtype, np.floating):
        raise TFRecordError(f"{where}: inputs are {inputs.dtype}; expected float32")
    if not np.issubdtype(output.dtype, np.integer) or output.size != 1:
        raise TFRecordError(f"{where}: output is {output.dtype} of shape {output.shape}; "
                            "expected one integer class label")
    return inputs.astype(np.float32), int(output.reshape(-1)[0])


def read_split(folder: Path, input_shape: tuple | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every example of a split's shards: inputs (n, *shape) float32, outputs (n,) int32.
    Each example must have ``input_shape`` (the networks'), else the first one's shape."""
    files = shards(folder)
    if not files:
        raise TFRecordError(f"{folder}: no *.tfrecord shards")
    inputs, labels = [], []
    shape = None if input_shape is None else tuple(input_shape)
    reading = Progress(sum(path.stat().st_size for path in files), f"reading {folder}", "B")
    for path in files:
        for number, record in enumerate(read_records(path)):
            reading.advance(len(record) + 16)   # a TFRecord frames each record in 16 bytes
            x, y = _example_arrays(path, number, record)
            if shape is None:
                shape = x.shape
            elif x.shape != shape:
                whose = "the networks' input_shape is" if input_shape is not None \
                    else "the first example's was"
                raise TFRecordError(f"{path}: record {number}: an image of shape {x.shape}; "
                                    f"{whose} {shape}")
            inputs.append(x)
            labels.append(y)
    reading.close()
    if not inputs:
        raise TFRecordError(f"{folder}: the shards hold no examples")
    return np.stack(inputs), np.array(labels, dtype=np.int32)


# --- one task ------------------------------------------------------------------------------

@dataclass
class Converted:
    """What a task's conversion wrote, for its progress line and declaration."""
    name: str
    num_models: int
    input_shape: list[int]
    num_classes: int
    n_train: int
    n_test: int | None
    with_init: int
    bytes: int = 0
    matching_accuracy: int = 0


def _model_folders(source: Path) -> list[str]:
    return sorted(p.name for p in source.iterdir() if p.is_dir() and p.name.startswith("model_"))


def _convert_model(source: Path, target: Path) -> tuple[dict, int]:
    """Write one model's config.json and npz weights; (config, whether init weights exist)."""
    network = read_network(source)
    target.mkdir(parents=True)
    (target / "config.json").write_text(json.dumps(network.config, indent=1) + "\n")
    write_npz(target / "weights.npz", network.weights)
    if network.initial is not None:
        write_npz(target / "weights_init.npz", network.initial)
    return network.config, int(network.initial is not None)


def _convert_models(source: Path, target: Path, ids: tuple[str, ...],
                    problems: list[str]) -> list[dict]:
    configs = []
    present = _model_folders(source)
    for folder in sorted(set(present) - set(ids)):
        problems.append(f"{source / folder}: not listed in {MODEL_CONFIGS}")
    converting = Progress(len(ids), f"converting {source.name}'s networks", "networks")
    for model in ids:
        converting.advance()
        if model not in present:
            problems.append(f"{source / model}: missing ({MODEL_CONFIGS} lists it)")
            continue
        try:
            configs.append(_convert_model(source / model, target / model))
        except ModelError as error:
            problems.append(str(error))
    converting.close()
    return configs


def _shared(configs: list[dict], source: Path, problems: list[str]) -> tuple[list[int], int]:
    """The input shape and class count every model must share."""
    problem = shared_problem(str(source), [c for c, _ in configs])
    problems += [problem] if problem else []
    return (list(min(tuple(c["input_shape"]) for c, _ in configs)),
            min(output_units(c) for c, _ in configs))


def _convert_data(source: Path, target: Path, input_shape: list[int], num_classes: int,
                  problems: list[str]) -> dict[str, int]:
    counts = {}
    data = source / "dataset_1"
    (target / "dataset_1").mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        if not (data / split).is_dir():
            if split == "train":
                problems.append(f"{data / split}: missing (the training shards)")
            continue
        try:
            inputs, outputs = read_split(data / split, tuple(input_shape))
        except TFRecordError as error:
            problems.append(str(error))
            continue
        problem = data_problem(str(data / split), inputs, outputs, input_shape, num_classes)
        problems += [problem] if problem else []
        write_npz(target / "dataset_1" / f"{split}.npz", {"inputs": inputs, "outputs": outputs})
        counts[split] = len(outputs)
    return counts


def declaration(name: str, phase: str, zoo, converted: Converted) -> dict:
    """The ``<task>_task.json`` participants read, with the embedded zoos' keys."""
    grid = {key: json.loads(json.dumps(values)) for key, values in zoo.possible_values.items()}
    return {"name": name, "phase": phase, "task_type": "zoo", "dataset": UNKNOWN,
            "summary": f"PGDL task {name}: {converted.num_models} networks, converted from "
                       "its Keras HDF5 weights and TFRecord data.",
            "num_models": converted.num_models, "input_shape": converted.input_shape,
            "num_classes": converted.num_classes, "hyperparameters": grid,
            "n_train": converted.n_train, "n_test": converted.n_test,
            "stopping_rule": UNKNOWN}


# Recomputing every network's accuracy on all of a CIFAR-sized split would take hours on a
# CPU; a fixed sample of this many examples tells a wrong layout (chance accuracy) from a
# right one just as well.
ACCURACY_SAMPLE = 2048


def accuracy_agrees(accuracy: float, recorded: float, n: int, sampled: bool) -> bool:
    """Equal within one example on the whole split; within four binomial standard errors
    (and one example) on a sample of n."""
    tolerance = 1.0 / max(n, 1) + 1e-9
    if sampled:
        tolerance += 4 * (max(recorded * (1 - recorded), 1.0 / n) / n) ** 0.5
    return abs(accuracy - recorded) <= tolerance


def check_written(folder: Path, zoo) -> int:
    """Load what was written with the runtime's own readers (every Model, the Dataset);
    returns how many models' recomputed train accuracy agrees with model_configs.json's, on
    the whole split, or on a fixed random sample of ``ACCURACY_SAMPLE`` examples of a larger
    one."""
    from ..runtime.participant import Dataset, Model
    dataset = Dataset(folder / "dataset_1")
    sampled = dataset.size > ACCURACY_SAMPLE
    chosen = (np.sort(np.random.default_rng(0).choice(dataset.size, ACCURACY_SAMPLE,
                                                      replace=False))
              if sampled else slice(None))
    x, y = dataset.inputs[chosen], dataset.labels[chosen]
    return sum(accuracy_agrees(Model(folder / model_id).accuracy(x, y), recorded, len(y),
                               sampled)
               for model_id, recorded in zip(zoo.ids, zoo.train_acc))


def convert_task(source: Path, out: Path, phase: str, model_configs: Path | None = None,
                 force: bool = False) -> Converted:
    """Convert one PGDL task folder into ``out/<task>``; ConvertError lists every problem."""
    source = Path(source)
    name = source.name
    if not source.is_dir():
        raise ConvertError([f"{source}: not a folder"])
    target = out / name
    if target.exists() and not force:
        raise ConvertError([f"{target}: exists already (remove it or pass --force)"])
    configs_path = find_model_configs(source, model_configs)
    try:
        zoo = read_model_configs(configs_path)
    except FormatError as error:
        raise ConvertError([str(error)]) from None
    out.mkdir(parents=True, exist_ok=True)
    workspace = out / f".converting-{name}-{os.getpid()}"     # a data root of one task
    shutil.rmtree(workspace, ignore_errors=True)
    try:
        converted = _stage(source, workspace / name, name, phase, zoo, configs_path)
        _check_as_the_builder(workspace, name)
        _replace(workspace / name, target)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    converted.bytes = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    return converted


def _stage(source: Path, staging: Path, name: str, phase: str, zoo,
           configs_path: Path) -> Converted:
    problems: list[str] = []
    configs = _convert_models(source, staging, zoo.ids, problems)
    if problems or not configs:
        raise ConvertError(problems or [f"{source}: no models"])
    input_shape, num_classes = _shared(configs, source, problems)
    counts = _convert_data(source, staging, input_shape, num_classes, problems)
    if problems:
        raise ConvertError(problems)
    shutil.copyfile(configs_path, staging / MODEL_CONFIGS)
    converted = Converted(name, len(zoo.ids), input_shape, num_classes, counts["train"],
                          counts.get("test"), sum(init for _, init in configs))
    (staging / f"{name}_task.json").write_text(
        json.dumps(declaration(name, phase, zoo, converted), indent=1) + "\n")
    try:
        read_model_configs(staging / MODEL_CONFIGS)
        converted.matching_accuracy = check_written(staging, zoo)
    except (FormatError, ValueError, KeyError, OSError) as error:
        raise ConvertError([f"{source}: the converted task does not load with the runtime: "
                            f"{error}"]) from None
    return converted


def _check_as_the_builder(root: Path, name: str) -> None:
    """The checks ``build_bundle.py`` runs on a data root's task (the kind's task_problems)."""
    from bundle.phase_plan import task_data_problems
    problems = task_data_problems("pgdl2020", name, root)
    if problems:
        raise ConvertError([f"the converted {name} fails the builder's check: {problem}"
                            for problem in problems])


def _replace(staging: Path, target: Path) -> None:
    """Move the finished task into place; an older one is removed only after that."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        target.rename(old)
    staging.rename(target)
    if old is not None:
        shutil.rmtree(old)


def progress_line(converted: Converted, target: Path) -> str:
    test = f"{converted.n_test} test" if converted.n_test is not None else "no test"
    sample = (f" (on a sample of {ACCURACY_SAMPLE} examples)"
              if converted.n_train > ACCURACY_SAMPLE else "")
    return (f"{converted.name}: {converted.num_models} models "
            f"({converted.with_init} with initial weights), {converted.n_train} train / {test} "
            f"examples of shape {tuple(converted.input_shape)}, {converted.num_classes} classes "
            f"-> {target} ({converted.bytes / 1e6:.2f} MB); recomputed train accuracy"
            f"{sample} matches {MODEL_CONFIGS} for {converted.matching_accuracy} of "
            f"{converted.num_models} models")


def convert(sources: list[Path], out: Path, phase: str, model_configs: Path | None = None,
            force: bool = False, progress=print) -> list[str]:
    """Convert every task folder; returns the problems (empty: all written and loaded)."""
    names = [Path(s).name for s in sources]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        return [f"two sources are named {name} (a task folder's name is the task's)"
                for name in duplicates]
    if model_configs is not None and model_configs.is_file() and len(sources) > 1:
        return [f"{model_configs}: one model_configs.json given for {len(sources)} tasks; pass "
                "a reference_data folder holding <task>/model_configs.json instead"]
    problems = []
    for source in sources:
        try:
            converted = convert_task(Path(source), out, phase, model_configs, force)
        except ConvertError as error:
            problems += error.problems
            continue
        progress(progress_line(converted, out / converted.name))
    return problems

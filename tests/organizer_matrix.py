"""A generator of organizer tasks over each kind's declared space (issue 48, the lasting fix).

One ``Case`` per point of the space: its kind, its axes and a short id. ``write_case(case,
folder)`` writes what an organizer would hand the tool for it (the task's source files in the
kind's documented formats, and a spec naming the task), and ``prepare_case`` runs the kind's
own step that turns sources into a data root (BDL's ``reference_data generate --data-root``,
PGDL's and Retina's ``convert``). tests/test_organizer_matrix.py then takes each case along the
whole path an organizer and a participant take.

The space is read from the code's own registries, so a new entry joins the matrix (or fails it,
naming what the generator lacks) without an edit here:
- BDL: ``networks.ARCHITECTURES`` x flat and image-shaped inputs x classification and
  regression; a network that cannot read an input form is a refusal case;
- PGDL: every layer kind of ``layers.KINDS`` in every network file layout (Keras 2's and
  Keras 3's HDF5, written with h5py exactly as Keras lays them out: tests compare the layout
  with the committed files Keras itself wrote) x 1 and 3 channels, at odd image sizes;
- Retina: every layout of ``images.LAYOUTS`` x grey and colour, with grade filters and
  skipped (undecodable) photographs spread over the layouts.
"""
from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import zlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np
import yaml

from kinds.bdl2021.runtime.networks import ARCHITECTURES
from kinds.pgdl2020.runtime import layers as pgdl_layers
from kinds.retina.reference.images import LAYOUTS

REPO = Path(__file__).resolve().parents[1]
SEED = 0


@dataclass(frozen=True)
class Case:
    kind: str
    axes: dict = field(hash=False)
    id: str = ""
    refused: str | None = None      # the one line the docs promise for a refused case

    @property
    def task(self) -> str:
        """A short task name: Codabench's column keys and titles, which the task's name
        starts, hold at most 36 characters."""
        return f"{self.kind[:3]}_{zlib.crc32(self.id.encode()):08x}"


# ---- the cases ------------------------------------------------------------------------------

# The reduced size of each architecture: every entry of networks.ARCHITECTURES needs one (a
# new architecture fails test_every_registry_entry_has_a_generator until it has).
BDL_IMAGE = (7, 7, 1)
BDL_FLAT = 6
BDL_TOKENS = (9,)
BDL_VOCABULARY = 12
BDL_MODELS = {
    "mlp": lambda shape, outputs: {"type": "mlp", "activation": "tanh",
                                   "layer_sizes": [int(np.prod(shape)), 4, outputs]},
    "sequential": lambda shape, outputs: {
        "type": "sequential", "input_shape": list(shape), "outputs": outputs,
        "layers": ([{"type": "conv", "channels": 2, "kernel": 3, "stride": 2, "padding": "same"},
                    {"type": "activation", "name": "swish"}, {"type": "flatten"}]
                   if len(shape) == 3 else [{"type": "dense", "units": 4},
                                            {"type": "activation", "name": "tanh"}])
        + [{"type": "dense", "units": outputs}]},
    "resnet20_frn": lambda shape, outputs: {"type": "resnet20_frn", "input_shape": list(shape),
                                            "outputs": outputs, "width": 2,
                                            "activation": "relu"},
    "cnn_lstm": lambda shape, outputs: {"type": "cnn_lstm", "input_shape": list(shape),
                                        "outputs": outputs, "vocabulary": BDL_VOCABULARY,
                                        "embedding": 3, "filters": 3, "kernel": 3, "pool": 2,
                                        "cell": 3},
    # the presets at the smallest images their pools allow
    "medmnist_lenet": lambda shape, outputs: {"type": "medmnist_lenet",
                                              "input_shape": list(shape), "outputs": outputs},
    "cifar_alexnet": lambda shape, outputs: {"type": "cifar_alexnet", "input_shape": list(shape),
                                             "outputs": outputs},
    "retinopathy_cnn": lambda shape, outputs: {"type": "retinopathy_cnn",
                                               "input_shape": list(shape), "outputs": outputs},
}
# Image sizes the presets need (their pools halve the image 2 or 4 times).
BDL_PRESET_IMAGES = {"medmnist_lenet": (12, 12, 1), "cifar_alexnet": (4, 4, 3),
                     "retinopathy_cnn": (16, 16, 1)}
BDL_IMAGE_ONLY_MESSAGE = "model.input_shape is {shape}; expected [height, width, channels]"


def bdl_input_shape(architecture: str, inputs: str) -> tuple:
    if architecture == "cnn_lstm":
        return BDL_TOKENS if inputs == "flat" else BDL_IMAGE
    if inputs == "flat":
        return (BDL_FLAT,)
    return BDL_PRESET_IMAGES.get(architecture, BDL_IMAGE)


def bdl_refusal(architecture: str, inputs: str) -> str | None:
    """What the docs promise for a network that cannot read the input form, else None."""
    model = BDL_MODELS[architecture](bdl_input_shape(architecture, inputs), 2)
    try:
        from kinds.bdl2021.runtime.networks import Network
        Network(model)
    except ValueError as error:
        return str(error)
    return None


def bdl_cases() -> list[Case]:
    cases = []
    for architecture in ARCHITECTURES:
        for inputs in ("flat", "image"):
            for task_kind in ("classification", "regression"):
                refused = bdl_refusal(architecture, inputs)
                if refused and task_kind == "regression":
                    continue        # one refusal per architecture and input form
                cases.append(Case("bdl2021", {"architecture": architecture, "inputs": inputs,
                                              "task": task_kind},
                                  f"bdl-{architecture}-{inputs}-{task_kind[:5]}", refused))
    return cases


PGDL_FILE_LAYOUTS = ("keras2", "keras3")       # the two layouts keras_hdf5.py reads
PGDL_CHANNELS = (1, 3)
PGDL_SIZES = {1: 7, 3: 9}                      # odd, so that same and valid padding differ


def pgdl_cases() -> list[Case]:
    return [Case("pgdl2020", {"file_layout": layout, "channels": channels,
                              "size": PGDL_SIZES[channels]},
                 f"pgdl-{layout}-c{channels}")
            for layout in PGDL_FILE_LAYOUTS for channels in PGDL_CHANNELS]


RETINA_CHANNELS = (1, 3)


def retina_cases() -> list[Case]:
    """Every layout in grey and colour; grade filters and skipped photographs alternate so
    that each layout meets each of them once."""
    cases = []
    for index, layout in enumerate(LAYOUTS):
        for channels in RETINA_CHANNELS:
            flip = (index + channels // 3) % 2
            cases.append(Case("retina", {"layout": layout, "channels": channels,
                                         "grade_filter": bool(flip), "skipped": not flip},
                              f"retina-{layout}-{'grey' if channels == 1 else 'colour'}"))
    return cases


def all_cases() -> list[Case]:
    return bdl_cases() + pgdl_cases() + retina_cases()


# The cases that run in the default suite, each unlike its kind's defaults. No BDL case: its
# references and baselines take three minutes here, and the default suite already takes an
# organizer's CNN and image-shaped inputs through (test_bdl_organizer_cnn,
# test_bdl_image_inputs_kit); .ci/matrix runs every BDL case.
DEFAULT_SLICE = ("pgdl-keras3-c1", "retina-aptos-grey")


# ---- the spec -------------------------------------------------------------------------------

BUDGETS = {"bdl2021": 3, "pgdl2020": 20, "retina": 10}


def write_spec(case: Case, folder: Path, extra_task_keys: dict | None = None) -> Path:
    """One code phase on the case's task, as docs/building.md's walkthrough writes it; the
    slug is the case's id with hyphens for underscores (architectures such as cnn_lstm), as
    the spec's rule allows."""
    shutil.copyfile(REPO / "kinds" / case.kind / "logo.png", folder / "logo.png")
    task = {"budget_seconds": BUDGETS[case.kind], **(extra_task_keys or {})}
    spec = {"kind": case.kind, "slug": case.id.replace("_", "-")[:40], "title": f"Matrix case {case.id}",
            "description": "A generated organizer task.",
            "organizers": [{"name": "Matrix", "contact": "matrix@example.org"}],
            "logo": "logo.png", "docker_image": "codalab/codalab-legacy:py312",
            "end_date": "2027-09-30 23:59:59", "data_root": "data",
            "tasks": {case.task: task},
            "phases": {"evaluation": {"label": "Evaluation", "description": "Upload code.",
                                      "start": "2027-07-01 00:00:00", "submission": "code",
                                      "tasks": [case.task], "execution_time_limit": 600}},
            "pages": {"overview": "A generated case.", "terms": "Be fair."},
            "ignore_methodology_warnings": {
                "short-development-phase": "A generated test case with one phase only."}}
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


# ---- BDL ------------------------------------------------------------------------------------

BDL_ROWS = (24, 8)
BDL_CLASSES = 3
SHORT_CHAINS = ("--chains", "2", "--warmup", "20", "--samples", "20")
# The largest presets take BlackJAX's fixed-trajectory HMC, as docs/references.md advises for
# networks where NUTS's tree doubling costs too much: 20 warm-up transitions cannot adapt
# NUTS's step size to them, so its trees ran to their 1023-step cap and a classification
# case outlasted its 900 s. Five leapfrog steps a transition keep the case a test of the path
# (and put --sampler hmc on an organizer's task); NUTS on convolutional networks is the
# other architectures' cases and test_bdl_organizer_cnn's.
FIXED_HMC_ARCHITECTURES = ("cifar_alexnet", "retinopathy_cnn")
FIXED_HMC = ("--sampler", "hmc", "--trajectory-length", "0.05", "--step-size", "0.01")


def write_bdl_task(case: Case, data: Path) -> Path:
    rng = np.random.default_rng(SEED)
    architecture, regression = case.axes["architecture"], case.axes["task"] == "regression"
    shape = bdl_input_shape(architecture, case.axes["inputs"])
    outputs = 2 if regression else BDL_CLASSES
    n_train, n_test = BDL_ROWS

    def inputs(n):
        if architecture == "cnn_lstm" and case.axes["inputs"] == "flat":
            return rng.integers(0, BDL_VOCABULARY, (n, *shape))
        return rng.normal(size=(n, *shape)).astype(np.float32)

    def targets(n):
        return rng.normal(size=n) if regression else rng.integers(0, BDL_CLASSES, n)

    folder = data / case.task
    folder.mkdir(parents=True)
    np.savez(folder / f"{case.task}.npz", x_train=inputs(n_train), y_train=targets(n_train),
             x_test=inputs(n_test), y_test=targets(n_test))
    declaration = {"name": case.task, "phase": "evaluation",
                   "kind": case.axes["task"], "n_train": n_train, "n_test": n_test,
                   "input_shape": list(shape),
                   "test_blocks": [{"name": "clean", "start": 0, "stop": n_test}],
                   "model": BDL_MODELS[architecture](shape, outputs),
                   "likelihood": {"name": "gaussian" if regression else "softmax"},
                   "prior": {"distribution": "normal", "variance": 0.2}, "seed": 1,
                   "summary": f"generated: {architecture} on {case.axes['inputs']} inputs"}
    declaration |= {"num_samples": 100} if regression else {"num_classes": BDL_CLASSES}
    (folder / f"{case.task}_task.json").write_text(json.dumps(declaration, indent=1))
    return folder


def generate_bdl_references(case: Case, data: Path) -> subprocess.CompletedProcess:
    """``generate --data-root`` with short chains. They fail the convergence gate (ESS far
    under 400), which leaves the references in ``<task>.failed/`` and exits 1, as
    docs/references.md says; the organizer then accepts them in the spec, as here."""
    sampler = FIXED_HMC if case.axes["architecture"] in FIXED_HMC_ARCHITECTURES else ()
    result = run_module("reference_data", "generate", "--data-root", str(data), "--tasks",
                        case.task, *SHORT_CHAINS, *sampler)
    failed = data / f"{case.task}.failed"
    if result.returncode == 1 and failed.is_dir():
        for path in failed.iterdir():
            shutil.move(str(path), data / case.task / path.name)
        failed.rmdir()
    return result


# ---- PGDL: networks in Keras's own file layouts ---------------------------------------------

PGDL_CLASSES = 3
PGDL_ROWS = (30, 12)
# One example config of each layer kind; every kind of layers.KINDS needs one.
PGDL_LAYER_EXAMPLES = {
    "Conv2D": {"layer_name": "Conv2D", "filters": 3, "kernel_size": 3, "padding": "same",
               "activation": "relu"},
    "BatchNormalization": {"layer_name": "BatchNormalization", "epsilon": 0.01},
    "MaxPooling2D": {"layer_name": "MaxPooling2D", "pool_size": 2},
    "AveragePooling2D": {"layer_name": "AveragePooling2D", "pool_size": 2, "strides": 1,
                         "padding": "valid"},
    "Activation": {"layer_name": "Activation", "activation": "tanh"},
    "Dropout": {"layer_name": "Dropout", "rate": 0.25},
    "GlobalAveragePooling2D": {"layer_name": "GlobalAveragePooling2D"},
    "Flatten": {"layer_name": "Flatten"},
    "Dense": {"layer_name": "Dense", "units": 4, "activation": "sigmoid"},
}
PGDL_HEADS = ("Flatten", "GlobalAveragePooling2D")


def pgdl_network(head: str) -> list[dict]:
    """Every layer kind but the other head, in an order each can follow the one before."""
    body = [PGDL_LAYER_EXAMPLES[kind] for kind in pgdl_layers.KINDS
            if kind not in PGDL_HEADS + ("Dense",)]
    convolution_second = {"layer_name": "Conv2D", "filters": 2, "kernel_size": 2,
                          "padding": "valid", "use_bias": False}
    return (body + [convolution_second, PGDL_LAYER_EXAMPLES[head], PGDL_LAYER_EXAMPLES["Dense"],
                    {"layer_name": "Dense", "units": PGDL_CLASSES}])


def keras_weights(network: list[dict], input_shape: tuple, rng) -> list[tuple[str, dict]]:
    """Each layer's Keras name (its class's count, as Keras names it) and its arrays in
    Keras's order, random: He-scaled kernels, BatchNormalization statistics off 0 and 1."""
    built = pgdl_layers.network(network, input_shape)
    counts: dict[str, int] = {}
    named = []
    for layer in built:
        snake = pgdl_layers.SNAKE[layer.kind]
        count = counts.get(snake, 0)
        counts[snake] = count + 1
        arrays = {}
        for param, shape in layer.params.items():
            if param == "kernel":
                value = rng.normal(size=shape) * np.sqrt(2.0 / np.prod(shape[:-1]))
            elif param == "moving_variance":
                value = rng.uniform(0.5, 2.0, shape)
            else:
                value = rng.normal(scale=0.3, size=shape) + (param == "gamma")
            arrays[param] = value.astype(np.float32)
        named.append((snake if count == 0 else f"{snake}_{count}", arrays))
    return named


def write_keras2_weights(path: Path, weights: list[tuple[str, dict]]) -> None:
    """Keras 2's save_weights (tf_keras 2.21): root layer_names and keras_version, a group per
    layer with weight_names '<layer>/<array>:0', each array at <layer>/<layer>/<array>:0, and
    the empty top_level_model_weights group."""
    with h5py.File(path, "w") as handle:
        handle.attrs["backend"] = "tensorflow"
        handle.attrs["keras_version"] = "2.21.0"
        handle.attrs["layer_names"] = np.array([name for name, _ in weights], dtype=object)
        for name, arrays in weights + [("top_level_model_weights", {})]:
            group = handle.create_group(name)
            names = [f"{name}/{param}:0" for param in arrays]
            group.attrs["weight_names"] = (np.array(names, dtype=object) if names
                                           else np.array([], dtype=np.float64))
            for weight_name, value in zip(names, arrays.values()):
                group[weight_name] = value
        # h5py writes str attributes as variable-length utf-8, as Keras 2 does


def write_keras3_weights(path: Path, weights: list[tuple[str, dict]]) -> None:
    """Keras 3's save_weights: layers/<name>/vars/<i> in Keras's order, each vars group named,
    and the model's own empty vars (an uncompiled model: no optimizer group)."""
    with h5py.File(path, "w") as handle:
        for name, arrays in weights:
            group = handle.create_group(f"layers/{name}/vars")
            group.attrs["name"] = name
            for index, value in enumerate(arrays.values()):
                group[str(index)] = value
        handle.create_group("vars").attrs["name"] = "sequential"


PGDL_WRITERS = {"keras2": (write_keras2_weights, "weights.hdf5", "weights_init.hdf5"),
                "keras3": (write_keras3_weights, "weights.weights.h5",
                           "weights_init.weights.h5")}


def write_pgdl_task(case: Case, sources: Path) -> Path:
    """input_data/<task>/ and reference_data/<task>/ as PGDL's zips held them: a zoo over a
    grid of heads x widths, each network in the case's Keras layout, TFRecord data."""
    from test_pgdl_convert import example, tfrecord_bytes     # the tests' own encoder
    rng = np.random.default_rng(SEED)
    task = sources / "input_data" / case.task
    shape = (case.axes["size"], case.axes["size"], case.axes["channels"])
    writer, trained, initial = PGDL_WRITERS[case.axes["file_layout"]]
    configs = {}
    for index, (head, filters) in enumerate((h, f) for h in PGDL_HEADS for f in (2, 3)):
        network = [dict(layer) for layer in pgdl_network(head)]
        network[0]["filters"] = filters
        model = task / f"model_{index}"
        model.mkdir(parents=True)
        (model / "config.json").write_text(json.dumps({"model_config": network,
                                                       "input_shape": list(shape)}))
        writer(model / trained, keras_weights(network, shape, rng))
        writer(model / initial, keras_weights(network, shape, rng))
        configs[str(index)] = {"hparams": {
            "head": {"possible_values": list(PGDL_HEADS), "current_value": head},
            "filters": {"possible_values": [2, 3], "current_value": filters}},
            "metrics": {"train_acc": 0.5 + 0.1 * index, "test_acc": 0.3 + 0.05 * index}}
    for split, rows in zip(("train", "test"), PGDL_ROWS):
        folder = task / "dataset_1" / split
        folder.mkdir(parents=True)
        x = rng.normal(size=(rows, *shape)).astype(np.float32)
        y = rng.integers(0, PGDL_CLASSES, rows).astype(np.int32)
        records = [example(x[i], int(y[i])) for i in range(rows)]
        (folder / "shard_0.tfrecord").write_bytes(tfrecord_bytes(records))
    reference = sources / "reference_data" / case.task
    reference.mkdir(parents=True)
    (reference / "model_configs.json").write_text(json.dumps(configs, indent=1))
    return task


def convert_pgdl_task(case: Case, sources: Path, data: Path) -> subprocess.CompletedProcess:
    return run_module("reference_data", "--kind", "pgdl2020", "convert",
                      str(sources / "input_data" / case.task), "--out", str(data),
                      "--phase", "evaluation")


def hdf5_layout(path: Path, skip=("optimizer",)) -> dict:
    """What a reader of the file sees, values aside: each group's and dataset's path, each
    dataset's shape and dtype, each attribute's name, kind and (for names) value."""
    layout = {}

    def attributes(obj):
        return {key: (np.asarray(value).dtype.kind, [str(v) for v in np.ravel(value)]
                      if key in ("layer_names", "weight_names", "name") else None)
                for key, value in obj.attrs.items()}

    def visit(name, obj):
        if name.split("/")[0] in skip:
            return
        if isinstance(obj, h5py.Dataset):
            layout[name] = ("dataset", obj.shape, str(obj.dtype), attributes(obj))
        else:
            layout[name] = ("group", attributes(obj))
    with h5py.File(path, "r") as handle:
        layout["/"] = ("group", attributes(handle))
        handle.visititems(visit)
    return layout


# ---- Retina: photographs in each layout -----------------------------------------------------

RETINA_SIZE = 16
RETINA_PHOTO = (48, 40)         # width, height: a disc on black, not square
RETINA_ROWS = {"train": 24, "test_in": 12, "test_shift": 12}


def fundus_photograph(rng, channels: int, grade: int) -> np.ndarray:
    """A bright disc on black, a little brighter for a higher grade."""
    width, height = RETINA_PHOTO
    yy, xx = np.mgrid[:height, :width]
    disc = (xx - width / 2) ** 2 + (yy - height / 2) ** 2 < (0.45 * height) ** 2
    level = 90 + 25 * grade + rng.normal(0, 10, (height, width))
    tint = np.array([1.0, 0.6, 0.3])[:channels] if channels == 3 else np.array([1.0])
    image = disc[..., None] * level[..., None] * tint
    image = np.clip(image, 0, 255).astype(np.uint8)
    return image[..., 0] if channels == 1 else image


def image_bytes(array: np.ndarray, extension: str) -> bytes:
    from PIL import Image
    out = io.BytesIO()
    Image.fromarray(array).save(out, format="PNG" if extension == ".png" else "JPEG", quality=95)
    return out.getvalue()


def write_retina_source(folder: Path, layout: str, channels: int, part: str, rng,
                        broken: bool) -> tuple[str, str]:
    """A label file and image folder of ``part``; returns (labels, folder) relative to the task.
    Grades cycle 0-4 so both labels occur in any grade range; ``broken``: one file of the
    folder is not an image (skip mode leaves it out)."""
    spec = LAYOUTS[layout]
    extension = spec.suffix or (".png" if part == "test_in" else ".jpg")
    images = folder / "sources" / part
    images.mkdir(parents=True)
    header = [spec.name_column, spec.grade_column] + ([spec.label_column] if spec.label_column
                                                      else [])
    rows = []
    for row in range(RETINA_ROWS[part]):
        grade = row % 5
        stem = f"{part}{row // 2}_{'left' if row % 2 else 'right'}"
        name = stem if spec.suffix else stem + extension
        data = image_bytes(fundus_photograph(rng, channels, grade), extension)
        (images / f"{stem}{extension}").write_bytes(data[:20] if broken and row == 3 else data)
        rows.append([name, grade] + ([int(grade >= 2)] if spec.label_column else []))
    labels = folder / "sources" / f"{part}_labels.csv"
    with labels.open("w", newline="") as handle:
        csv.writer(handle).writerows([header] + rows)
    return f"sources/{part}_labels.csv", f"sources/{part}"


def write_retina_task(case: Case, data: Path) -> Path:
    rng = np.random.default_rng(SEED)
    layout, channels = case.axes["layout"], case.axes["channels"]
    folder = data / case.task
    folder.mkdir(parents=True)

    def source(part, **keys):
        labels, images = write_retina_source(folder, layout, channels, part, rng,
                                             broken=case.axes["skipped"] and part == "train")
        return {"layout": layout, "labels": labels, "folder": images, **keys}

    grades = case.axes["grade_filter"]
    section = {"size": RETINA_SIZE, "channels": channels,
               "unreadable": "skip" if case.axes["skipped"] else "stop",
               "train": [source("train", **({"grades": [0, 1, 2]} if grades else {}))],
               "test": [source("test_in", shifted=False),
                        source("test_shift", shifted=True,
                               **({"grades": [2, 3, 4]} if grades else {}))]}
    declaration = {"task_type": "diagnosis", "shift": "synthetic: another camera, simulated",
                   "summary": f"generated {layout} photographs", "images": section}
    (folder / f"{case.task}_task.json").write_text(json.dumps(declaration, indent=1))
    return folder


def convert_retina_task(case: Case, data: Path) -> subprocess.CompletedProcess:
    return run_module("reference_data", "--kind", "retina", "convert", str(data / case.task),
                      "--workers", "1")


# ---- the organizer's steps ------------------------------------------------------------------

def run_module(*args: str, env: dict | None = None, timeout: float = 900
               ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env=env)


def prepare_case(case: Case, folder: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """The case's sources written and turned into a data root (generate or convert);
    returns that step's process and the spec."""
    data = folder / "data"
    data.mkdir(parents=True)
    extra = {}
    if case.kind == "bdl2021":
        write_bdl_task(case, data)
        result = generate_bdl_references(case, data)
        extra = {"accept_unconverged_references": True}
    elif case.kind == "pgdl2020":
        write_pgdl_task(case, folder / "sources")
        result = convert_pgdl_task(case, folder / "sources", data)
    else:
        write_retina_task(case, data)
        result = convert_retina_task(case, data)
    return result, write_spec(case, folder, extra)

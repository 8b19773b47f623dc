"""The BDL kind in PyTorch on a GPU: how well the epoch calibration's short timing predicts a
whole epoch at CIFAR-10's shape, what an epoch costs on the GPU against the CPU, and the
PyTorch baselines' scores against the HMC references of the embedded CNN task (digits_cnn).

1. Calibration. ResNet-20-FRN (swish) on 50,000 random 32x32x3 float32 images, 10 classes:
   the figure the ingestion takes (``calibration.task_epoch_seconds``: PyTorch, on the GPU
   where there is one; a long epoch is timed in minibatch steps scaled to N / B) against whole
   epochs of the same SGD timed end to end; their ratio is the calibration's error. The same
   step timing on the CPU (PyTorch, every core) and in numpy gives the GPU's speed-up, which
   is how much more a budget in epochs buys on a GPU worker than on a CPU one.
2. Baselines. Each PyTorch baseline (kit/baselines/torch_*.py, imported from one folder as a
   submission holds them) runs on digits_cnn with ``--budget`` seconds, then numpy's
   full-batch HMC (hmc.py, on the CPU) as the measure of its twin torch_hmc. Each predictive
   is scored as the scoring program does for the primary metrics (top-1 agreement and total
   variation against the HMC model average), per test block, beside each HMC chain's own
   figures against the average of all four (how far one exact-sampler run is from it) and
   the uniform predictive (the floor).

Usage: python benchmarks/bdl_torch_gpu.py [--budget 60] [--images 50000] [--out results.json]
Needs torch (the GPU image's Python); ``--images 2000 --budget 4`` is a quick check on a CPU.
"""
from __future__ import annotations

import argparse
import gc
import importlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kinds.bdl2021.runtime import calibration  # noqa: E402
from kinds.bdl2021.runtime.declared_model import task_network  # noqa: E402
from kinds.bdl2021.runtime.metrics import top1_agreement, total_variation  # noqa: E402

BDL = REPO / "kinds" / "bdl2021"
TASK = BDL / "reference" / "embedded" / "digits_cnn"
BASELINES = ("torch_deep_ensemble", "torch_sghmc", "torch_mc_dropout", "torch_mfvi", "torch_hmc",
             "hmc")
SUPPORT = (BDL / "kit" / "baselines" / "torch_training.py",
           BDL / "runtime" / "declared_model.py", BDL / "runtime" / "declared_model_torch.py",
           BDL / "runtime" / "networks.py",
           # what both HMC baselines share, and what numpy's hmc.py imports besides
           BDL / "kit" / "baselines" / "hmc_adaptation.py",
           BDL / "kit" / "baselines" / "training.py", BDL / "kit" / "baselines" / "sgld.py")
SAMPLE_SECONDS = (0.05, 0.5, 2.0)     # the ingestion's, and longer
CIFAR = {"model": {"type": "resnet20_frn", "activation": "swish", "input_shape": [32, 32, 3],
                   "outputs": 10},
         "likelihood": {"name": "softmax"}, "prior": {"variance": 0.2}}


def _say(line: str) -> None:
    print(line, flush=True)


def calibration_figures(images: int, whole_epochs: int) -> dict:
    import torch
    from kinds.bdl2021.runtime.declared_model_torch import default_device
    rng = np.random.default_rng(0)
    x = rng.standard_normal((images, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, images)
    settings = ("softmax", CIFAR["prior"]["variance"], x, y)
    network = task_network(CIFAR["model"])
    ingestion = calibration.task_epoch_seconds(CIFAR, x, y)
    _say(f"ingestion's figure: {statistics.median(ingestion['samples']):.3f} s per epoch "
         f"({ingestion['timed_with']}; samples {[round(s, 3) for s in ingestion['samples']]})")
    device = default_device()
    whole = _torch_steps(network, settings, device, samples=whole_epochs, sample_seconds=0.0,
                         long_epoch_seconds=float("inf"))
    _say(f"whole epochs on {device.type}: {[round(s, 3) for s in whole]} s")
    gc.disable()        # the garbage collector's passes over autograd's objects, or not
    try:
        whole_without_gc = _torch_steps(network, settings, device, samples=whole_epochs,
                                        sample_seconds=0.0, long_epoch_seconds=float("inf"))
    finally:
        gc.enable()
    _say(f"whole epochs, garbage collector off: {[round(s, 3) for s in whole_without_gc]} s")
    longer = {seconds: _torch_steps(network, settings, device, sample_seconds=seconds)
              for seconds in SAMPLE_SECONDS}
    for seconds, figures in longer.items():
        _say(f"steps timed in samples of {seconds:g} s: {statistics.median(figures):.3f} s "
             f"per epoch ({[round(f, 3) for f in figures]})")
    figures = {"images": images, "ingestion": ingestion, "whole_epochs": whole,
               "whole_epochs_without_gc": whole_without_gc,
               "by_sample_seconds": {str(k): v for k, v in longer.items()},
               "device": device.type,
               "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None,
               "ingestion_over_whole": statistics.median(ingestion["samples"])
               / statistics.median(whole)}
    threads = torch.get_num_threads()
    cpu = {"samples": ingestion["samples"] if device.type == "cpu"
           else _torch_steps(network, settings, "cpu")}
    figures["torch_cpu"] = {"threads": threads, "samples": cpu["samples"]}
    _say(f"PyTorch on the CPU ({threads} threads): "
         f"{statistics.median(cpu['samples']):.2f} s per epoch")
    numpy_samples = calibration.sgd_epoch_seconds(network, *settings)
    figures["numpy"] = {"samples": numpy_samples}
    _say(f"numpy: {statistics.median(numpy_samples):.2f} s per epoch")
    return figures


def _torch_steps(network, settings, device, **overrides) -> list[float]:
    """declared_model_torch.sgd_epoch_seconds with the ingestion's constants, but those
    named in ``overrides``; whole epochs have no time cap."""
    from kinds.bdl2021.runtime.declared_model_torch import sgd_epoch_seconds
    keywords = {"batch": calibration.REFERENCE_BATCH, "step_size": calibration.STEP_SIZE,
                "samples": calibration.SAMPLES, "sample_seconds": calibration.SAMPLE_SECONDS,
                "time_cap_seconds": calibration.TIME_CAP_SECONDS,
                "long_epoch_seconds": calibration.LONG_EPOCH_SECONDS, **overrides}
    if keywords["long_epoch_seconds"] == float("inf"):
        keywords["time_cap_seconds"] = float("inf")
    return sgd_epoch_seconds(network, *settings, device=device, **keywords)


def _task(declaration: dict, n_test: int, budget: float):
    """The participant.Task the ingestion would give digits_cnn, its clock started now."""
    from kinds.bdl2021.runtime.participant import Task
    spec = {"name": "digits_cnn", "task_type": "classification", "budget_seconds": budget,
            "contract": {"n_test": n_test, "width": 10, "declaration": declaration}}
    return Task(spec, time.monotonic())


def _scores(p: np.ndarray, average: np.ndarray, labels: np.ndarray, blocks: list) -> dict:
    per_block = {block["name"]: {
        "agreement": top1_agreement(p[block["start"]:block["stop"]],
                                    average[block["start"]:block["stop"]]),
        "total_variation": total_variation(p[block["start"]:block["stop"]],
                                           average[block["start"]:block["stop"]])}
        for block in blocks}
    return {"agreement": top1_agreement(p, average), "total_variation": total_variation(p, average),
            "accuracy": float((p.argmax(axis=1) == labels).mean()), "blocks": per_block}


def baseline_scores(budget: float) -> dict:
    declaration = json.loads((TASK / "digits_cnn_task.json").read_text())
    with np.load(TASK / "digits_cnn.npz") as arrays:
        x_train, y_train, x_test = arrays["x_train"], arrays["y_train"], arrays["x_test"]
    average = np.loadtxt(TASK / "digits_cnn_probs.csv", ndmin=2)
    chains = np.load(TASK / "digits_cnn_chain_probs.npy")
    labels = np.loadtxt(TASK / "digits_cnn_test_labels.csv").astype(int)
    blocks = declaration["test_blocks"]
    contract = {key: declaration[key] for key in ("model", "likelihood", "prior")}
    table = {"budget_seconds": budget, "methods": {},
             "hmc_chains": [_scores(chain, average, labels, blocks) for chain in chains],
             "uniform": _scores(np.full_like(average, 0.1), average, labels, blocks)}
    with tempfile.TemporaryDirectory() as folder:
        for path in SUPPORT + tuple(BDL / "kit" / "baselines" / f"{n}.py" for n in BASELINES):
            shutil.copyfile(path, Path(folder) / path.name)
        sys.path.insert(0, folder)
        for name in BASELINES:
            module = importlib.import_module(name)
            checkpoints = []
            began = time.monotonic()
            p = module.predict(_task(contract, len(x_test), budget), x_train, y_train, x_test,
                               checkpoints.append)
            seconds = time.monotonic() - began
            table["methods"][name] = {**_scores(np.asarray(p), average, labels, blocks),
                                      "seconds": seconds, "checkpoints": len(checkpoints)}
            scores = table["methods"][name]
            _say(f"{name}: agreement {scores['agreement']:.3f}, total variation "
                 f"{scores['total_variation']:.3f}, accuracy {scores['accuracy']:.3f} "
                 f"({seconds:.1f} s of {budget:g} s, {len(checkpoints)} checkpoints)")
    chain = table["hmc_chains"]
    _say("one HMC chain against the average: agreement "
         + ", ".join(f"{c['agreement']:.3f}" for c in chain) + "; total variation "
         + ", ".join(f"{c['total_variation']:.3f}" for c in chain))
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=60.0,
                        help="seconds per baseline on digits_cnn (each aims at half of it, "
                             "the HMCs at 90%%)")
    parser.add_argument("--images", type=int, default=50_000,
                        help="training images of the CIFAR-shaped calibration")
    parser.add_argument("--whole-epochs", type=int, default=3)
    parser.add_argument("--skip", choices=("calibration", "baselines"), action="append",
                        default=[])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    results = {}
    if "calibration" not in args.skip:
        results["calibration"] = calibration_figures(args.images, args.whole_epochs)
    if "baselines" not in args.skip:
        results["baselines"] = baseline_scores(args.budget)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

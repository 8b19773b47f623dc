"""The Retina kit's PyTorch baselines timed on a synthetic fundus set (the test's: a reddish
disc, the referable ones with dark spots), through the test's fake task.

Prints each baseline's seconds, in-domain AUROC and how many predictions it saved, and on a
GPU the model's own speed (training step and forward pass on random images, no helpers),
which tells how much of a run the numpy helpers take.

Usage (torch must be importable; the project's venv has none):
  python benchmarks/retina_torch_baselines.py [--side 16] [--channels 3] [--train 1000]
      [--test 500] [--epochs 20] [--budget 600] [--threads N] [--flips-only] [--model-speed]

``--flips-only`` leaves out the fake task's rotation (a numpy loop per image, slow at 512
pixels): the staged helper's own cost is not what this measures. Larger sides are the
64-pixel images upsampled, so the set takes seconds to make.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "kinds" / "retina" / "tests"), str(REPO / "kinds" / "retina" / "kit" / "baselines")]

import torch  # noqa: E402
import torch_deep_ensemble  # noqa: E402
import torch_mc_dropout  # noqa: E402
import torch_resnet  # noqa: E402
from test_retina_torch_baselines import FakeTask, auroc, fundus  # noqa: E402


class Flips(FakeTask):
    def augment(self, batch, rng):
        return batch[:, ::-1] if rng.random() < 0.5 else batch


def images(n, side, channels, seed):
    x, y = fundus(n, min(side, 64), seed)
    k = max(1, side // 64)
    return x.repeat(k, 1).repeat(k, 2)[..., :channels].copy(), y


def memmaps(args, folder):
    """Read-only memory maps, as the staged task gives them."""
    (x_train, y_train), (x_test, y_test) = (images(args.train, args.side, args.channels, 1),
                                            images(args.test, args.side, args.channels, 2))
    np.save(folder / "train.npy", x_train)
    np.save(folder / "test.npy", x_test)
    return (np.load(folder / "train.npy", mmap_mode="r"), y_train,
            np.load(folder / "test.npy", mmap_mode="r"), y_test)


def run(module, data, args):
    x_train, y_train, x_test, y_test = data
    task = (Flips if args.flips_only else FakeTask)(x_train, 2 * y_train, args.budget)
    began = time.perf_counter()
    p, uncertainty = module.predict(task, x_train, y_train, x_test)
    print(f"{module.__name__}: {time.perf_counter() - began:.1f} s (budget {args.budget:g}), "
          f"AUROC {auroc(np.asarray(p), y_test):.3f}, {len(task.saved)} saved, "
          f"uncertainty finite: {bool(np.isfinite(uncertainty).all())}", flush=True)


def model_speed(side, channels, batch=64, steps=20):
    """Images per second of a training step and of a forward pass, on random images."""
    device = torch_resnet.device()
    model = torch_resnet.ResNet((side, side, channels), 0.1).to(
        device, memory_format=torch.channels_last)
    optimiser = torch.optim.AdamW(model.parameters())
    x = torch.randn(batch, channels, side, side, device=device).contiguous(
        memory_format=torch.channels_last)
    y = (torch.rand(batch, device=device) < 0.3).float()

    def step():
        with torch_resnet._autocast():
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x).float(), y)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()

    train = _rate(step, batch, steps)
    model.eval()
    with torch.inference_mode(), torch_resnet._autocast():
        forward = _rate(lambda: model(x), batch, steps)
    print(f"model alone, {side}x{side}x{channels}, batch {batch}: training {train:.0f} "
          f"images/s, forward {forward:.0f} images/s", flush=True)


def _rate(work, batch, steps):
    for _ in range(3):
        work()
    _synchronise()
    began = time.perf_counter()
    for _ in range(steps):
        work()
    _synchronise()
    return batch * steps / (time.perf_counter() - began)


def _synchronise():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", type=int, default=16)
    parser.add_argument("--channels", type=int, default=3, choices=(1, 3))
    parser.add_argument("--train", type=int, default=1000)
    parser.add_argument("--test", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=torch_resnet.EPOCHS)
    parser.add_argument("--budget", type=float, default=600.0)
    parser.add_argument("--threads", type=int, help="torch's CPU threads (default: its own)")
    parser.add_argument("--flips-only", action="store_true")
    parser.add_argument("--model-speed", action="store_true")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch_resnet.EPOCHS = args.epochs
    print(f"{args.side}x{args.side}x{args.channels}, {args.train} training and {args.test} "
          f"test images, {args.epochs} epochs at most, {torch.get_num_threads()} CPU threads")
    if args.model_speed:
        model_speed(args.side, args.channels)
    with tempfile.TemporaryDirectory() as folder:
        data = memmaps(args, Path(folder))
        for module in (torch_mc_dropout, torch_deep_ensemble):
            run(module, data, args)


if __name__ == "__main__":
    main()

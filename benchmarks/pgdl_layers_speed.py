"""Forward + gradient throughput of the PGDL layers (kinds/pgdl2020/runtime/layers.py) against
JAX, and PyTorch where installed, on the CPU, same run, same weights (issue 28, item 2).

Two networks of the 2020 shapes, at 32x32x3 (CIFAR-10, CINIC-10):

- task 1, VGG-like: [conv-relu-conv-relu-maxpool] x 3 (6 Conv2D 3x3 SAME, 32/64/128 filters by
  block), Flatten, two Dense of 128, Dense of 10;
- task 4, fully convolutional with batch normalisation before the ReLU: six 3x3 Conv2D without
  bias (64, 64 with stride 2, 128, 128 with stride 2, 128, 128), each followed by
  BatchNormalization and ReLU, a 1x1 Conv2D to 10 classes and GlobalAveragePooling2D.

For each: the loss and the gradient with respect to the inputs and every weight of a batch of
128 (what a measure such as sharpness or an input-gradient norm does per batch), timed as the
median of ``--repeat`` runs after one warm-up (JAX: a jitted ``value_and_grad``, compiled in
the warm-up; PyTorch: ``Model.to_torch``'s network, forward and backward). Prints each ratio
ours / framework and how closely the logits agree (float32); the goal is at most 3.

Usage: .venv/bin/python benchmarks/pgdl_layers_speed.py [--batch 128] [--repeat 5]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kinds.pgdl2020.runtime import layers as L  # noqa: E402


def _conv(filters, strides=1, bias=True, activation="linear"):
    return {"layer_name": "Conv2D", "filters": filters, "kernel_size": 3, "strides": strides,
            "padding": "same", "use_bias": bias, "activation": activation}


TASK1_VGG = [layer for filters in (32, 64, 128) for layer in (
    _conv(filters, activation="relu"), _conv(filters, activation="relu"),
    {"layer_name": "MaxPooling2D", "pool_size": 2})] + [
    {"layer_name": "Flatten"},
    {"layer_name": "Dense", "units": 128, "activation": "relu"},
    {"layer_name": "Dense", "units": 128, "activation": "relu"},
    {"layer_name": "Dense", "units": 10}]
TASK4_ALL_CONV = [layer for filters, strides in ((64, 1), (64, 2), (128, 1), (128, 2), (128, 1),
                                                  (128, 1)) for layer in (
    _conv(filters, strides, bias=False), {"layer_name": "BatchNormalization"},
    {"layer_name": "Activation", "activation": "relu"})] + [
    {"layer_name": "Conv2D", "filters": 10, "kernel_size": 1},
    {"layer_name": "GlobalAveragePooling2D"}]
NETWORKS = {"task 1 VGG-like": TASK1_VGG, "task 4 all-conv + BN": TASK4_ALL_CONV}
INPUT_SHAPE = (32, 32, 3)


def random_params(stack, rng) -> list[dict]:
    """He-scaled kernels, positive variances: activations that neither vanish nor blow up."""
    params = []
    for layer in stack:
        made = {}
        for name, shape in layer.params.items():
            if name == "kernel":
                made[name] = rng.normal(0, np.sqrt(2 / np.prod(shape[:-1])), shape)
            elif name in ("moving_variance", "gamma"):
                made[name] = rng.uniform(0.5, 1.5, shape)
            else:
                made[name] = rng.normal(0, 0.1, shape)
        params.append({key: value.astype(np.float32) for key, value in made.items()})
    return params


# ---- the same networks in JAX (also the tests' reference, kinds/pgdl2020/tests/test_pgdl_layers.py) -----

def jax_layer(layer, p, x):
    import jax
    import jax.numpy as jnp
    lax, kind, s = jax.lax, layer.kind, layer.settings
    act = {"relu": jax.nn.relu, "tanh": jnp.tanh, "sigmoid": jax.nn.sigmoid}
    activation = act.get(s.get("activation"), lambda v: v)
    if kind == "Conv2D":
        z = lax.conv_general_dilated(x, p["kernel"], s["strides"], s["padding"].upper(),
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return activation(z + p.get("bias", 0.0))
    if kind == "Dense":
        return activation(x @ p["kernel"] + p.get("bias", 0.0))
    if kind in ("MaxPooling2D", "AveragePooling2D"):
        (ph, pw), (sh, sw) = s["window"], s["strides"]
        window = ((1, ph, pw, 1), (1, sh, sw, 1), s["padding"].upper())
        if kind == "MaxPooling2D":
            return lax.reduce_window(x, -jnp.inf, lax.max, *window)
        count = lax.reduce_window(jnp.ones_like(x[:1, :, :, :1]), 0.0, lax.add, *window)
        return lax.reduce_window(x, 0.0, lax.add, *window) / count
    if kind == "GlobalAveragePooling2D":
        return x.mean(axis=(1, 2))
    if kind == "BatchNormalization":
        scale = p.get("gamma", 1.0) / jnp.sqrt(p["moving_variance"] + s["epsilon"])
        return (x - p["moving_mean"]) * scale + p.get("beta", 0.0)
    if kind == "Activation":
        return activation(x)
    if kind == "Flatten":
        return x.reshape(x.shape[0], -1)
    return x                                              # Dropout at inference


def jax_loss(params, x, labels, stack):
    """(mean softmax cross-entropy, logits) of the stack in JAX."""
    import jax
    import jax.numpy as jnp
    for layer, p in zip(stack, params):
        x = jax_layer(layer, p, x)
    log_p = jax.nn.log_softmax(x)
    return -log_p[jnp.arange(len(labels)), labels].mean(), x


def write_reference(configs: list[dict], input_shape: tuple, given: Path, out: Path) -> None:
    """JAX's loss, output and gradients for the params, inputs and labels in ``given`` (keys
    ``<layer>/<name>``, ``x``, ``labels``), written to ``out`` (``loss``, ``out``, ``dx``,
    ``<layer>/<name>``). The tests call it in a process of its own: JAX starts threads, and a
    test worker that later forks must not hold them."""
    import jax
    stack = L.network(configs, input_shape)
    with np.load(given) as stored:
        params = [{name: stored[f"{index}/{name}"] for name in layer.params}
                  for index, layer in enumerate(stack)]
        x, labels = stored["x"], stored["labels"]
    (loss, out_), (grads, dx) = jax.value_and_grad(jax_loss, argnums=(0, 1), has_aux=True)(
        params, x, labels, stack)
    np.savez(out, loss=np.asarray(loss), out=np.asarray(out_), dx=np.asarray(dx),
             **{f"{index}/{name}": np.asarray(value) for index, layer_grads in enumerate(grads)
                for name, value in layer_grads.items()})


def ours(stack, params, x, labels):
    out, caches = L.run(stack, params, x)
    loss, dlogits = L.cross_entropy_gradient(out, labels)
    dx, grads = L.run_backward(stack, params, caches, dlogits)
    return loss, out, dx, grads


def _median_seconds(step, repeat: int) -> float:
    step()                                                 # warm-up (JAX compiles here)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def jax_step(stack, params, x, labels):
    """A jitted loss and gradients of the same network; returns (step, its logits)."""
    import jax
    step = jax.jit(jax.value_and_grad(lambda p, xs: jax_loss(p, xs, labels, stack),
                                      argnums=(0, 1), has_aux=True))
    (_, logits), _ = step(params, x)
    return lambda: jax.block_until_ready(step(params, x)), np.asarray(logits)


def torch_step(stack, params, x, labels):
    """The same through ``Model.to_torch``'s network (runtime/frameworks.py)."""
    import torch
    from kinds.pgdl2020.runtime.frameworks import to_torch
    keys = L.weight_keys(stack)
    net = to_torch(stack, keys, [params[index][param] for index, param, _ in keys],
                   [True] * len(keys))             # every gradient, as JAX's step gives
    inputs, targets = torch.tensor(x, requires_grad=True), torch.tensor(labels)

    def step():
        net.zero_grad()
        inputs.grad = None
        logits = net(inputs)
        torch.nn.functional.cross_entropy(logits, targets).backward()
        return logits
    return step, step().detach().numpy()


FRAMEWORKS = {"JAX": ("jax", jax_step), "PyTorch": ("torch", torch_step)}


def installed() -> dict:
    """The frameworks present, found without importing them: importing torch starts OpenMP
    threads that slow numpy's BLAS 2-3x in the same process, so ours is timed first."""
    import importlib.util
    found = {}
    for name, (module, step) in FRAMEWORKS.items():
        if importlib.util.find_spec(module) is None:
            print(f"{name}: not installed in this Python, not measured")
            continue
        found[name] = step
    return found


def _case(configs: list[dict], batch: int):
    stack = L.network(configs, INPUT_SHAPE)
    rng = np.random.default_rng(0)
    params = random_params(stack, rng)
    x = rng.normal(0, 1, (batch, *INPUT_SHAPE)).astype(np.float32)
    return stack, params, x, rng.integers(0, 10, batch)


def measure(name: str, configs: list[dict], batch: int, repeat: int, frameworks) -> list:
    """Ours for every network first (see ``installed``), then each framework's."""
    stack, params, x, labels = _case(configs, batch)
    _, out, _, _ = ours(stack, params, x, labels)
    mine = _median_seconds(lambda: ours(stack, params, x, labels), repeat)
    count = sum(int(np.prod(shape)) for layer in stack for shape in layer.params.values())
    return {"name": name, "count": count, "mine": mine, "out": out, "case": (stack, params, x,
                                                                               labels)}


def compare(result: dict, batch: int, repeat: int, frameworks) -> list:
    print(f"{result['name']}: {result['count']:,} parameters, batch {batch}: ours "
          f"{result['mine']:.3f} s")
    ratios = []
    for framework, make in frameworks.items():
        step, logits = make(*result["case"])
        error = float(np.abs(result["out"] - logits).max() / np.abs(logits).max())
        theirs = _median_seconds(step, repeat)
        ratios.append(result["mine"] / theirs)
        print(f"  {framework} {theirs:.3f} s, ratio {ratios[-1]:.2f} (outputs agree to "
              f"{error:.1e} of their largest value)")
    return ratios


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"CPU: {os.cpu_count()} cores; numpy {np.__version__}")
    frameworks = installed()
    results = [measure(name, configs, args.batch, args.repeat, frameworks)
               for name, configs in NETWORKS.items()]
    ratios = [ratio for result in results
              for ratio in compare(result, args.batch, args.repeat, frameworks)]
    if ratios:
        print("goal: ratio <= 3 for each: " + ("met" if max(ratios) <= 3 else "NOT met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

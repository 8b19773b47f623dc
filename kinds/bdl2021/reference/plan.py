"""``python -m reference_data plan``: the cost of a reference run before it starts.

One full-batch gradient of the declared network, for every chain at once (as the sampler
computes it: chains vectorised, rows split over the devices), is timed on this machine; the
run costs (warm-up + kept draws) transitions x leapfrog steps per transition such gradients.
NUTS's steps per transition are not known before the run: the figure assumed is printed, and
the cost scales with it. Where the folder holds a sample of the rows (``--train-rows``), or
the run will have more devices than this machine (``--devices``), the measured time is scaled
linearly in rows per device, and the line says so.
"""
from __future__ import annotations

import sys
import time

import numpy as np

BYTES = 8                     # float64
STATE_VECTORS = 8             # position, gradient, momentum-free NUTS state and adaptation
TIMED_CALLS = 3


def _tasks(args):
    """[(declaration, prepared arrays)] of the embedded tasks or an organizer's folders."""
    from .datasets import prepare
    from .generate import with_overrides
    from .tasks import TASKS, chosen_names, task_by_name
    if args.data_root is not None:
        from .organizer import load_task, task_names
        overrides = {key: value for key, value in (("num_warmup", args.warmup),
                     ("num_samples", args.samples), ("num_chains", args.chains))
                     if value is not None}
        return [load_task(args.data_root, name, overrides)
                for name in chosen_names(args.tasks, task_names(args.data_root))]
    tasks = [with_overrides(task_by_name(name), args.warmup, args.samples, args.chains)
             for name in chosen_names(args.tasks, [t.name for t in TASKS])]
    return [(task, prepare(task)) for task in tasks]


def gradient_seconds(task, prepared, devices: int) -> float:
    """(seconds, parameters): the time of one full-batch gradient of every chain's log
    density, rows split over ``devices`` of this machine (the median of a few calls after
    compiling), and the network's parameter count."""
    from . import jax_model
    from .chains import _training_labels, initial_position, task_model
    from .sharded import pad_rows, place
    import jax
    model = task_model(task, prepared)
    density = jax_model.log_density_of_data(model, task.likelihood, task.prior_variance)
    data = place(*pad_rows(np.asarray(prepared.x_train), _training_labels(task, prepared),
                           devices), devices)
    starts = np.stack([initial_position(task, model, c) for c in range(task.hmc.num_chains)])
    gradient = jax.jit(jax.vmap(jax.grad(density), in_axes=(0, None, None, None)))
    gradient(starts, *data).block_until_ready()
    times = []
    for _ in range(TIMED_CALLS):
        started = time.perf_counter()
        gradient(starts, *data).block_until_ready()
        times.append(time.perf_counter() - started)
    return float(np.median(times)), model.num_parameters


def _duration(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _size(count: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count:.0f} B"


def cost_line(task, prepared, args) -> str:
    from . import jax_model  # noqa: F401  (the simulated host devices, before jax starts)
    import jax
    here = min(args.devices or jax.local_device_count(), jax.local_device_count())
    planned = args.devices or here
    seconds, parameters = gradient_seconds(task, prepared, here)
    rows = len(prepared.x_train)
    scale = (args.train_rows or rows) / rows * here / planned
    settings = task.hmc
    transitions = settings.num_warmup + settings.num_samples
    wall = transitions * args.leapfrog_steps * seconds * scale
    final = BYTES * settings.num_chains * parameters * (settings.num_samples + STATE_VECTORS)
    every = args.checkpoint_every
    count = f", {-(-transitions // every)} checkpoints" if every else ""
    scaled = (f" (measured on {rows} rows over {here} device(s) here, scaled to "
              f"{args.train_rows or rows} rows over {planned})" if scale != 1 else "")
    return (f"{task.name}: {parameters:,} parameters, {args.train_rows or rows:,} rows, "
            f"{settings.num_chains} chains x ({settings.num_warmup} + {settings.num_samples}); "
            f"one gradient of every chain {seconds * 1e3:.2f} ms{scaled}; at "
            f"{args.leapfrog_steps} leapfrog steps a transition: {_duration(wall)} wall, "
            f"{wall * planned / 3600:.2f} device-hours on {planned} device(s); checkpoint "
            f"{_size(BYTES * settings.num_chains * parameters * STATE_VECTORS)} at the start, "
            f"{_size(final)} at the end{count}")


def main(args) -> int:
    from runtime.formats import FormatError
    try:
        tasks = _tasks(args)
    except (FormatError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyError as error:
        print(f"error: {error.args[0]}", file=sys.stderr)
        return 2
    if (args.devices is not None and args.devices < 1) or (args.train_rows is not None
                                                         and args.train_rows < 1):
        print("error: --devices and --train-rows must be positive counts", file=sys.stderr)
        return 2
    for task, prepared in tasks:
        print(cost_line(task, prepared, args), flush=True)
    return 0

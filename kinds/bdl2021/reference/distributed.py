"""NUTS over every device of every host, resumable: ``generate --num-processes/--checkpoint``.

The hosts run JAX's own multi-controller runtime (``jax.distributed.initialize``): one
``generate`` per host, all running this same program. The devices of every host form a mesh
of chain groups times row shards (``Layout``). With one group (the default) the training rows
are split over every device of every host, so XLA's all-reduce of the full-batch gradient
crosses hosts, and the chains run vectorised in step on every device, their state replicated.
With C groups (``generate --chain-groups C``) each group runs chains/C of the chains,
vectorised, on its own devices, the rows split within the group, so the all-reduce spans one
group. Either way every process ends each chunk holding the whole run state (the groups' parts
gathered by XLA), and only process 0 writes the references. With one process the same code
runs on the local devices.

The run advances in chunks of a fixed number of transitions (warm-up, with Stan's window
adaptation as BlackJAX builds it, then sampling). After a chunk the whole state - chain
states, adaptation state, adapted step sizes and mass matrices, draws so far - can be written
to a checkpoint (npz, written to a temporary file, fsynced and renamed). Every random key is a
function of the task's seed and the transition's index, and a chunk's program is the same
whether or not the run was interrupted, so a resumed run gives the uninterrupted run's bits.
"""
from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from . import jax_model  # noqa: F401  (float64 and host devices first)
from .nuts import MAX_TREE_DEPTH, SampledChains
from .sharded import pad_rows

import blackjax  # noqa: E402
import jax  # noqa: E402
from blackjax.adaptation.window_adaptation import base, build_schedule  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

DEFAULT_CHUNK = 50           # transitions between progress lines (and possible checkpoints)
INITIAL_STEP_SIZE = 1.0      # window_adaptation's default, as the default engine uses
FORMAT_VERSION = 1


# Where one of these is set, jax.distributed.initialize() reads the run's layout from the
# cluster's environment (SLURM, Open MPI, MPICH's PMI).
CLUSTER_VARIABLES = ("SLURM_JOB_ID", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")


class RunError(ValueError):
    """Bad input to a distributed or resumed run: one line for the user."""


@dataclass(frozen=True)
class RunOptions:
    coordinator: str | None = None
    num_processes: int | None = None
    process_id: int | None = None
    checkpoint: Path | None = None
    checkpoint_every: int | None = None      # transitions
    checkpoint_minutes: float | None = None
    resume: bool = False
    chain_groups: int = 1                    # the chains split over this many device groups

    @property
    def chunk(self) -> int:
        return self.checkpoint_every or DEFAULT_CHUNK


def start_runtime(options: RunOptions) -> None:
    """Join the hosts' runtime; without a coordinator or process count, JAX reads the
    cluster's environment (SLURM, Open MPI, ...) if there is one, else this host runs alone."""
    unset = options.coordinator is None and options.process_id is None
    if unset and (options.num_processes == 1 or (
            options.num_processes is None and not any(map(os.environ.get, CLUSTER_VARIABLES)))):
        return
    if options.coordinator is not None and not re.fullmatch(r"[^\s:]+:\d{1,5}",
                                                             options.coordinator):
        raise RunError(f"--coordinator is {options.coordinator!r}; expected HOST:PORT of "
                       "process 0, e.g. node01:1234")
    # CPU devices exchange the all-reduce through gloo; accelerators ignore this setting.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    try:
        jax.distributed.initialize(options.coordinator, options.num_processes,
                                   options.process_id, initialization_timeout=120)
    except (RuntimeError, ValueError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise RunError(f"could not join the distributed runtime (coordinator "
                       f"{options.coordinator}, {options.num_processes} processes, this one "
                       f"{options.process_id}): {first}") from None


def is_primary() -> bool:
    return jax.process_index() == 0


def _kernels(log_density_of_data, target: float, depth: int):
    """Per-chain functions of (state, ..., x, y, weights): init, a warm-up chunk, a sampling
    chunk, the end of warm-up. The window adaptation is BlackJAX's own, step by step."""
    adapt_init, adapt_step, adapt_final = base(True, target_acceptance_rate=target)
    kernel = blackjax.nuts.build_kernel()

    def bound(x, y, w):
        return lambda theta: log_density_of_data(theta, x, y, w)  # noqa: E731

    def init(position, x, y, w):
        return (blackjax.nuts.init(position, bound(x, y, w)),
                adapt_init(position, INITIAL_STEP_SIZE))

    def warm(state, adaptation, keys, stages, x, y, w):
        def one(carry, xs):
            key, stage = xs
            chain, adapt = carry
            chain, info = kernel(key, chain, bound(x, y, w), adapt.step_size,
                                 adapt.inverse_mass_matrix, max_num_doublings=depth)
            adapt = adapt_step(adapt, stage, chain.position, info.acceptance_rate)
            return (chain, adapt), (info.is_divergent, info.num_integration_steps)
        (state, adaptation), (divergent, steps) = jax.lax.scan(one, (state, adaptation),
                                                               (keys, stages))
        return state, adaptation, divergent.sum(), steps.sum()

    def draw(state, step_size, inverse_mass, keys, x, y, w):
        def one(chain, key):
            chain, info = kernel(key, chain, bound(x, y, w), step_size, inverse_mass,
                                 max_num_doublings=depth)
            return chain, (chain.position, chain.logdensity, info.acceptance_rate,
                           info.num_integration_steps, info.is_divergent)
        return jax.lax.scan(one, state, keys)

    return init, warm, draw, adapt_final


def chain_groups_problem(groups: int, chains: dict[str, int], devices: int) -> str | None:
    """What is wrong with ``groups`` chain groups for these tasks' chain counts ({task:
    chains}) on ``devices`` devices, in one line, or None."""
    if groups >= 1 and not devices % groups and all(not n % groups for n in chains.values()):
        return None
    counts = ", ".join(f"{name} {n}" for name, n in chains.items())
    return (f"--chain-groups is {groups}; expected a count that divides both the devices "
            f"({devices}) and every task's chains ({counts})")


class Layout:
    """The global mesh, ``groups`` chain groups x row shards: the devices, each host's
    together, cut into ``groups`` consecutive groups, so that a group spans as few hosts as
    it can. The chains are split over the groups (axis ``chains``), the rows over the devices
    of a group (axis ``data``), so the gradient's all-reduce runs within a group. One group:
    the rows split over every device of every host in JAX's order, every chain on every
    device (the layout before groups existed, bit for bit)."""

    def __init__(self, groups: int = 1):
        devices = np.array(jax.devices() if groups == 1 else sorted(
            jax.devices(), key=lambda device: (device.process_index, device.id)))
        self.mesh = Mesh(devices.reshape(groups, devices.size // groups), ("chains", "data"))
        self.shards = devices.size // groups            # row shards in a group
        self.rows = NamedSharding(self.mesh, PartitionSpec("data"))
        self.chains = NamedSharding(self.mesh, PartitionSpec("chains"))
        self.replicated = NamedSharding(self.mesh, PartitionSpec())
        self._gather = jax.jit(lambda tree: tree, out_shardings=self.replicated)

    def put(self, tree, sharding):
        """Host numpy arrays as global arrays: each process places its own devices' parts."""
        return jax.tree.map(lambda a: jax.make_array_from_callback(
            np.shape(a), sharding, lambda index: np.asarray(a)[index]), tree)

    def compile(self, function, chained: int):
        """``function`` vmapped over the chains (its first ``chained`` arguments, split over
        the groups), the data's three arguments last, split by rows within a group; every
        output split over the groups as the chains are. With several groups, ``shard_map``
        over the ``chains`` axis (the ``data`` axis left to XLA's partitioner) runs each
        group's chains apart: no collective crosses groups, not even the vmapped NUTS loops'
        "any chain still going" test, so a group does not wait for another's trees."""
        vmapped = jax.vmap(function, in_axes=(0,) * chained + (None, None, None))
        if self.mesh.shape["chains"] > 1:
            vmapped = jax.shard_map(
                vmapped, mesh=self.mesh, axis_names={"chains"},
                in_specs=(PartitionSpec("chains"),) * chained + (PartitionSpec(),) * 3,
                out_specs=PartitionSpec("chains"), check_vma=False)
        return jax.jit(vmapped, in_shardings=(self.chains,) * chained + (self.rows,) * 3,
                       out_shardings=self.chains)

    def to_host(self, tree):
        """The chains' arrays of every group as numpy on every process: XLA gathers the
        groups' parts (an all-gather, the chunk's states and draws crossing once); with one
        group they are replicated already."""
        return to_host(tree if self.mesh.shape["chains"] == 1 else self._gather(tree))


def to_host(tree):
    """Replicated global arrays as numpy: this process's copy, no communication."""
    return jax.tree.map(lambda a: np.asarray(a.addressable_data(0)), tree)


def chain_keys(seed: int, chains: int, num_warmup: int, num_samples: int):
    """The keys of every transition, as the default engine splits them (``nuts._chain``)."""
    def per_chain(key):
        warm_key, sample_key = jax.random.split(key)
        return jax.random.split(warm_key, num_warmup), jax.random.split(sample_key, num_samples)
    keys = jax.random.split(jax.random.PRNGKey(seed), chains)
    return tuple(np.asarray(k) for k in jax.vmap(per_chain)(keys))


# --- checkpoints -------------------------------------------------------------------------

def checkpoint_path(folder: Path, task: str) -> Path:
    return Path(folder) / f"{task}.process{jax.process_index()}.npz"


def write_checkpoint(path: Path, fingerprint: dict, carry: dict) -> None:
    """The whole run state, atomically: a temporary file in the same folder, fsynced, then
    renamed over the previous checkpoint (a crash leaves the old one or the new one)."""
    leaves = jax.tree.leaves(carry)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "wb") as handle:
        np.savez(handle, fingerprint=np.array(json.dumps(fingerprint, sort_keys=True)),
                 **{f"leaf{i}": leaf for i, leaf in enumerate(leaves)})
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


# Fingerprint entries written only where they differ from these (a checkpoint of one chain
# group stays the file it was before groups existed), and read as these where absent.
FINGERPRINT_DEFAULTS = {"chain_groups": 1}


def read_checkpoint(path: Path, fingerprint: dict, template: dict) -> dict:
    """The carry saved at ``path``, refused unless it was written by the same declaration,
    seed, settings and device layout."""
    try:
        saved = np.load(path)
    except (OSError, ValueError) as error:
        raise RunError(f"cannot read the checkpoint {path}: {error}") from None
    found = {**FINGERPRINT_DEFAULTS, **json.loads(str(saved["fingerprint"]))}
    fingerprint = {**FINGERPRINT_DEFAULTS, **fingerprint}
    differing = sorted(key for key in set(found) | set(fingerprint)
                       if found.get(key) != fingerprint.get(key))
    if differing:
        shown = "; ".join(f"{key}: checkpoint {found.get(key)!r}, this run "
                          f"{fingerprint.get(key)!r}" for key in differing)
        raise RunError(f"{path} was written by another run ({shown}); resume with the "
                       "checkpoint's settings, or start afresh without --resume")
    leaves, tree = jax.tree.flatten(template)
    return jax.tree.unflatten(tree, [saved[f"leaf{i}"] for i in range(len(leaves))])


# --- the run -----------------------------------------------------------------------------

def _eta(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m{seconds % 60:02d}s"


class Progress:
    def __init__(self, name: str, total: int, stream=None):
        self.name, self.total, self.stream = name, total, stream
        self.started, self.first_step, self.gradients = time.perf_counter(), None, 0

    def line(self, step: int, num_warmup: int, gradients: int) -> None:
        self.first_step = step if self.first_step is None else self.first_step
        self.gradients += gradients
        elapsed = time.perf_counter() - self.started
        done = step - self.first_step
        eta = (self.total - step) * elapsed / done if done else float("nan")
        stage = "warm-up" if step <= num_warmup else "sampling"
        print(f"{self.name}: {stage}, transition {step}/{self.total}, draws "
              f"{max(0, step - num_warmup)}/{self.total - num_warmup}, "
              f"{self.gradients / max(elapsed, 1e-9):.0f} gradients/s, ETA "
              f"{_eta(eta) if done else '?'}", file=self.stream or sys.stderr, flush=True)

    def start(self, step: int) -> None:
        self.first_step, self.started = step, time.perf_counter()


def sample(name: str, log_density_of_data, x, y, starts: np.ndarray, seed: int,
           num_warmup: int, num_samples: int, target: float, options: RunOptions,
           fingerprint: dict, stream=None) -> SampledChains:
    """K chains of NUTS on the global mesh, in chunks, checkpointed and resumable."""
    devices, groups = jax.device_count(), options.chain_groups
    chains, dim = starts.shape
    problem = chain_groups_problem(groups, {name: chains}, devices)
    if problem:
        raise RunError(problem)
    layout = Layout(groups)
    data = layout.put(pad_rows(np.asarray(x), np.asarray(y), layout.shards), layout.rows)
    init, warm, draw, final = _kernels(log_density_of_data, target, MAX_TREE_DEPTH)
    warm_keys, sample_keys = chain_keys(seed, chains, num_warmup, num_samples)
    stages = np.asarray(build_schedule(num_warmup))
    fingerprint = {**fingerprint, "format": FORMAT_VERSION, "seed": seed,
                   "num_warmup": num_warmup, "num_samples": num_samples, "chains": chains,
                   "target_acceptance": target, "chunk": options.chunk, "devices": devices,
                   "processes": jax.process_count(),
                   **({"chain_groups": groups} if groups != 1 else {})}
    state, adaptation = layout.to_host(layout.compile(init, 1)(
        layout.put(np.asarray(starts, np.float64), layout.chains), *data))
    carry = {"step": np.array(0), "state": state, "adaptation": adaptation,
             "warmup_divergences": np.zeros(chains, np.int64),
             "step_size": np.zeros(chains), "inverse_mass": np.zeros((chains, dim)),
             "trace": (np.zeros((chains, num_samples, dim)), np.zeros((chains, num_samples)),
                       np.zeros((chains, num_samples)), np.zeros((chains, num_samples)),
                       np.zeros((chains, num_samples), bool))}
    path = checkpoint_path(options.checkpoint, name) if options.checkpoint else None
    if options.resume and path is not None and path.exists():
        carry = read_checkpoint(path, fingerprint, carry)
        print(f"{name}: resuming from {path} at transition {int(carry['step'])}",
              file=stream or sys.stderr, flush=True)
    run = _Chunks(layout, warm, draw, final, data, warm_keys, sample_keys, stages, options)
    carry = run.to_end(carry, Progress(name, num_warmup + num_samples, stream),
                       lambda c: write_checkpoint(path, fingerprint, c) if path else None)
    positions, log_densities, acceptance, steps, divergent = carry["trace"]
    return SampledChains(positions, log_densities, acceptance.mean(1), steps.mean(1),
                         divergent.sum(1), carry["warmup_divergences"], carry["step_size"],
                         carry["inverse_mass"], devices=devices)


class _Chunks:
    """The loop over fixed chunks of transitions, from a carry's step to the end."""

    def __init__(self, layout, warm, draw, final, data, warm_keys, sample_keys, stages,
                 options: RunOptions):
        self.layout, self.data, self.options = layout, data, options
        self.warm, self.draw = layout.compile(warm, 4), layout.compile(draw, 4)
        self.final = jax.jit(jax.vmap(final))
        self.warm_keys, self.sample_keys, self.stages = warm_keys, sample_keys, stages

    def to_end(self, carry: dict, progress: Progress, save) -> dict:
        num_warmup, num_samples = self.warm_keys.shape[1], self.sample_keys.shape[1]
        step, last_saved = int(carry["step"]), time.monotonic()
        progress.start(step)
        while step < num_warmup + num_samples:
            n = min(self.options.chunk, (num_warmup if step < num_warmup
                                         else num_warmup + num_samples) - step)
            carry, gradients = (self._warm(carry, step, n) if step < num_warmup
                                else self._draw(carry, step - num_warmup, n))
            step += n
            carry["step"] = np.array(step)
            progress.line(step, num_warmup, gradients)
            if self._due(step, last_saved, num_warmup + num_samples):
                save(carry)
                last_saved = time.monotonic()
        return carry

    def _due(self, step: int, last_saved: float, total: int) -> bool:
        every, minutes = self.options.checkpoint_every, self.options.checkpoint_minutes
        return (step == total or (every is not None) or
                (minutes is not None and time.monotonic() - last_saved >= 60 * minutes))

    def _put(self, tree):
        return self.layout.put(tree, self.layout.chains)

    def _warm(self, carry: dict, step: int, n: int):
        keys = self.warm_keys[:, step:step + n]
        stages = np.broadcast_to(self.stages[step:step + n], (len(keys), n, 2))
        state, adaptation, divergent, gradients = self.layout.to_host(self.warm(
            self._put(carry["state"]), self._put(carry["adaptation"]), self._put(keys),
            self._put(np.ascontiguousarray(stages)), *self.data))
        carry = {**carry, "state": state, "adaptation": adaptation,
                 "warmup_divergences": carry["warmup_divergences"] + divergent}
        if step + n == self.warm_keys.shape[1]:
            carry["step_size"], carry["inverse_mass"] = to_host(self.final(adaptation))
        return carry, int(gradients.sum())

    def _draw(self, carry: dict, kept: int, n: int):
        keys = self.sample_keys[:, kept:kept + n]
        state, trace = self.layout.to_host(self.draw(
            self._put(carry["state"]), self._put(carry["step_size"]),
            self._put(carry["inverse_mass"]), self._put(keys), *self.data))
        for whole, part in zip(carry["trace"], trace):
            whole[:, kept:kept + n] = part
        return {**carry, "state": state}, int(trace[3].sum())


def task_fingerprint(task) -> dict:
    """What a checkpoint must agree on besides the sampler's settings: the declaration (a
    digest, so that a refusal stays one readable line)."""
    import hashlib
    text = json.dumps(asdict(task), default=str, sort_keys=True)
    return {"task": task.name, "declaration": hashlib.sha256(text.encode()).hexdigest()[:16]}

"""References over several hosts on JAX's multi-controller runtime: two processes with two
CPU devices each on localhost (gloo collectives) give the chains of one process with four
devices, to rounding, with the chains on every device or split over two chain groups; a wrong
coordinator address is refused in one line. Chain groups in one process: two groups of two
row shards sample the chains of one group to rounding, and the compiled program's all-reduce
runs within a group; a group count that does not divide the devices is refused in one line.

With one chain group the rows are split over all four devices either way, so the all-reduce
of the gradient spans the two processes; the sums are the same but XLA may group them
differently across a process boundary, and NUTS carries a last-bit difference forward, so the
chains agree to a stated tolerance (1e-4 in each class probability; 6e-15 was seen over the
16 transitions run here, 1.4e-5 over 70), not bit for bit. With two groups each process's two
devices are a group, so no sum crosses a process (the chains were equal bit for bit here); the
same tolerance holds them. Every JAX computation runs in a child process."""
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from test_bdl_reference_engine import run_python

REPO = Path(__file__).resolve().parents[3]
# 6 warm-up + 10 kept transitions (10 kept draws a chain are the fewest the reference's 10
# batch means a chain take). Across processes every leapfrog step's gradient is a gloo
# all-reduce between the processes, and those dominate the test's CPU time: about 550 steps
# here against 1,100 with 20 warm-up transitions. The kept draws compared carry every
# transition before them, warm-up included, so a difference anywhere shows in them as it did
# over 30 (the step sizes adapt to 0.067, 31 leapfrog steps a transition, acceptance 0.94:
# the chains move; 6e-15 was the largest difference seen).
RUN = ("generate", "--tasks", "iris", "--warmup", "6", "--samples", "10", "--chains", "2")
TOLERANCE = 1e-4


def _env(devices: int):
    return {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
            "PYTHONPATH": str(REPO)}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


def _command(out: Path, *extra):
    return [sys.executable, "-m", "reference_data", *RUN, "--out", str(out), *extra]


# One chain group in the README's suite (the cross-host all-reduce, issue 52's test at a
# reduced size); two groups, whose only cross-host traffic is the gathered states, extended.
@pytest.mark.slow
@pytest.mark.parametrize("groups", [1, pytest.param(2, marks=pytest.mark.extended)])
def test_two_processes_of_two_devices_give_the_chains_of_one_process_of_four(tmp_path, groups):
    """``groups`` 2: one chain a group; the groups are the two processes' devices, so the
    gradient's all-reduce stays within a process and only the gathered states cross."""
    layout = ("--chain-groups", str(groups)) if groups > 1 else ()
    alone = subprocess.run(_command(tmp_path / "one", "--num-processes", "1", *layout),
                           cwd=REPO, env=_env(4), capture_output=True, text=True, timeout=600)
    assert alone.returncode == 1, alone.stderr[-2000:]       # the gate, at this length
    address = f"localhost:{_free_port()}"
    hosts = [subprocess.Popen(_command(tmp_path / "two", "--coordinator", address,
                                       "--num-processes", "2", "--process-id", str(index),
                                       *layout),
                              cwd=REPO, env=_env(2), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for index in (0, 1)]
    outputs = [host.communicate(timeout=600) for host in hosts]
    assert [host.returncode for host in hosts] == [1, 0], outputs[0][1][-2000:]
    assert not (tmp_path / "two" / "iris").exists()     # process 1 wrote nothing of its own
    one = np.load(tmp_path / "one.failed" / "iris" / "iris_chain_probs.npy")
    two = np.load(tmp_path / "two.failed" / "iris" / "iris_chain_probs.npy")
    assert one.shape == two.shape and one.shape[0] == 2
    assert np.abs(one - two).max() < TOLERANCE


def test_a_malformed_coordinator_address_is_refused_in_one_line(tmp_path):
    result = subprocess.run(_command(tmp_path / "x", "--coordinator", "node01",
                                     "--num-processes", "2", "--process-id", "0"), cwd=REPO,
                            env=_env(2), capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: --coordinator is 'node01'; expected HOST:PORT of process 0, e.g. node01:1234"]


def all_reduce_groups(hlo: str) -> set:
    """The device groups of every all-reduce in a compiled program's text, each as a tuple of
    tuples. XLA writes them as a list (``{{0,1},{2,3}}``) or as an iota (``[2,2]<=[4]``: the
    ids 0..3 in 2 groups of 2; ``[2,2]<=[2,2]T(1,0)``: the same ids transposed first)."""
    found = set()
    for match in re.finditer(r"all-reduce(?:-start)?\([^\n]*?replica_groups=(\{[{}\d,]*\}|"
                             r"\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?)", hlo):
        text = match.group(1)
        if text.startswith("{"):
            found.add(tuple(tuple(int(i) for i in group.split(","))
                            for group in re.findall(r"\{([\d,]+)\}", text)))
            continue
        shape, dims, order = re.fullmatch(r"\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?",
                                          text).groups()
        ids = np.arange(np.prod([int(d) for d in dims.split(",")])).reshape(
            [int(d) for d in dims.split(",")])
        if order:
            ids = ids.transpose([int(d) for d in order.split(",")])
        found.add(tuple(map(tuple, ids.reshape([int(d) for d in shape.split(",")]).tolist())))
    return found


CHAIN_GROUPS = """
import io, re
import numpy as np
from kinds.bdl2021.reference import distributed
from test_bdl_distributed import all_reduce_groups
from test_bdl_reference_engine import conjugate_data, conjugate_log_density_of_data as log_density
x, y, _, _ = conjugate_data()
starts = np.random.default_rng(1).normal(0, 2, (4, 3))

# every program the runs below compile, kept with the arguments of its last call
last_call, compile_program = {}, distributed.Layout.compile

def recording(layout, function, chained):
    program = compile_program(layout, function, chained)

    def run(*args):
        last_call[function.__name__] = (program, args)
        return program(*args)
    return run

distributed.Layout.compile = recording
positions, groups_of = {}, {}
for groups in (1, 2):
    positions[groups] = distributed.sample(
        "conjugate", log_density, x, y, starts, 0, 100, 50, 0.8,
        distributed.RunOptions(chain_groups=groups), {}, stream=io.StringIO()).positions
    # the program of the sampling chunk that ran above (50 draws of the 4 chains), lowered
    # again for the arguments it ran on: JAX's caches hold its trace and executable, so
    # nothing is compiled a second time
    program, arguments = last_call["draw"]
    text = program.lower(*arguments).compile().as_text()
    groups_of[groups] = sorted(all_reduce_groups(text))
    assert not re.search("all-gather|all-to-all|collective-permute|reduce-scatter", text)
print("all-reduce groups", groups_of[1], groups_of[2], "largest difference",
      np.abs(positions[1] - positions[2]).max())
"""


@pytest.mark.slow
def test_two_chain_groups_sample_the_chains_of_one_with_the_all_reduce_within_a_group():
    """4 devices, 4 chains of the conjugate posterior (40 rows), 100 warm-up + 50 draws: as
    one group (the rows over 4 devices, every chain on each) and as 2 groups of 2 chains (the
    rows over the group's 2 devices). The sampling chunk's program holds all-reduces over
    the 4 devices with one group, over each group's 2 with two, and no other collective:
    the groups build their trees apart (``shard_map`` over the chain axis).

    The gradient's sums group the rows differently (4 parts against 2), so the chains differ
    in the last bits, and the step-size adaptation carries that forward: 1.4e-8 in the
    adapted step sizes and 8.8e-8 in the positions were seen. A discrete difference (a U-turn
    or an acceptance going the other way) would move a draw by about a posterior standard
    deviation (0.07 to 0.1 here); 1e-5 tells the two apart with room for other CPUs'
    rounding."""
    out = run_python(CHAIN_GROUPS, 4)
    line = next(text for text in out.splitlines() if text.startswith("all-reduce groups"))
    assert line.startswith("all-reduce groups [((0, 1, 2, 3),)] [((0, 1), (2, 3))] largest "
                           "difference "), line
    assert float(line.rsplit(" ", 1)[1]) < 1e-5, line


def test_chain_groups_that_do_not_divide_the_devices_are_refused_in_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "reference_data", "generate", "--tasks", "iris", "--chains", "4",
         "--chain-groups", "3", "--out", str(tmp_path)], cwd=REPO, env=_env(4),
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: --chain-groups is 3; expected a count that divides both the devices (4) and "
        "every task's chains (iris 4)"]

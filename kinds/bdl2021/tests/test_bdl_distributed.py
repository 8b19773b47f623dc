"""References over several hosts on JAX's multi-controller runtime: two processes with two
CPU devices each on localhost (gloo collectives) give the chains of one process with four
devices, to rounding; a wrong coordinator address is refused in one line.

The rows are split over all four devices either way, so the all-reduce of the gradient spans
the two processes; the sums are the same but XLA may group them differently across a process
boundary, and NUTS carries a last-bit difference forward, so the chains agree to a stated
tolerance (1e-4 in each class probability over 30 transitions; 1.4e-5 was seen over 70),
not bit for bit. Every JAX computation runs in a child process."""
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]
RUN = ("generate", "--tasks", "iris", "--warmup", "20", "--samples", "10", "--chains", "2")
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


@pytest.mark.slow
@pytest.mark.extended
def test_two_processes_of_two_devices_give_the_chains_of_one_process_of_four(tmp_path):
    alone = subprocess.run(_command(tmp_path / "one", "--num-processes", "1"), cwd=REPO,
                           env=_env(4), capture_output=True, text=True, timeout=600)
    assert alone.returncode == 1, alone.stderr[-2000:]       # the gate, at this length
    address = f"localhost:{_free_port()}"
    hosts = [subprocess.Popen(_command(tmp_path / "two", "--coordinator", address,
                                       "--num-processes", "2", "--process-id", str(index)),
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

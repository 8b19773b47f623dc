"""A reference run killed after its first checkpoint (SIGKILL, a real subprocess) and resumed
with ``generate --resume`` gives the uninterrupted run's references bit for bit, with the
chains on every device or split over chain groups; a resume without a checkpoint, or from
another run's (another chain-group count included), is refused in one line.

Every JAX computation runs in a child process (the ingestion tests fork this one later)."""
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
# iris, 2 chains of 100 + 100 transitions in chunks of 5: long enough (tens of seconds) that
# the kill lands mid-run; the gate fails at this length, so the files go to <out>.failed/.
RUN = ("generate", "--tasks", "iris", "--warmup", "100", "--samples", "100", "--chains", "2",
       "--checkpoint-every", "5")
CHAIN_FILES = ("iris_chain_probs.npy", "iris_batch_means.npy", "iris_probs.csv")


@pytest.fixture(scope="module", autouse=True)
def shared_compile_cache(tmp_path_factory):
    """The runs that sample here (whole, killed, resumed) share RUN's task and settings, so
    compile the same program: JAX's persistent compilation cache, in a folder of this
    module's own, lets the later ones load it rather than compile it again (a quarter of
    this file's CPU time with the extended test). Only the time to the first transition
    changes; the draws, and the files written, do not: the bit-for-bit test below runs its
    first run cold and the other two from the cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path_factory.mktemp("jax_cache")))
        patch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
        yield


def _env():
    return {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
            "PYTHONPATH": str(REPO)}


def _generate(*args):
    return subprocess.run([sys.executable, "-m", "reference_data", *RUN, *args], cwd=REPO,
                          env=_env(), capture_output=True, text=True, timeout=600)


def _kill_after_first_checkpoint(out: Path, checkpoint: Path, *extra) -> None:
    process = subprocess.Popen([sys.executable, "-m", "reference_data", *RUN, "--out",
                                str(out), "--checkpoint", str(checkpoint), *extra], cwd=REPO,
                               env=_env(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    written = checkpoint / "iris.process0.npz"
    deadline = time.monotonic() + 300
    while not written.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.02)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert written.exists()


@pytest.fixture(scope="module")
def two_group_checkpoint(tmp_path_factory) -> Path:
    """The checkpoint folder of RUN in 2 chain groups, killed after its first checkpoint: the
    run to resume in the chain-group test, and another run's checkpoint to the refusal test's
    run of other settings. One killed run for both, not one each (a process start and a
    compilation, 2.5 s of CPU). Read only: a test copies it before resuming from it (a
    resumed run writes its own checkpoints there)."""
    folder = tmp_path_factory.mktemp("two_groups")
    _kill_after_first_checkpoint(folder / "killed", folder / "c", "--chain-groups", "2")
    return folder / "c"


@pytest.mark.slow
@pytest.mark.extended
def test_a_killed_run_resumed_gives_the_uninterrupted_references_bit_for_bit(tmp_path):
    whole = _generate("--out", str(tmp_path / "whole"), "--checkpoint", str(tmp_path / "c1"))
    assert whole.returncode == 1, whole.stderr[-2000:]     # the gate, at this length
    _kill_after_first_checkpoint(tmp_path / "killed", tmp_path / "c2")
    resumed = _generate("--out", str(tmp_path / "killed"), "--checkpoint", str(tmp_path / "c2"),
                        "--resume")
    assert resumed.returncode == 1, resumed.stderr[-2000:]
    line = next(text for text in resumed.stderr.splitlines() if "resuming from" in text)
    assert 0 < int(line.rsplit(" ", 1)[1]) < 200, line
    assert "gradients/s, ETA" in resumed.stderr
    for name in CHAIN_FILES:
        assert (tmp_path / "whole.failed" / "iris" / name).read_bytes() == \
            (tmp_path / "killed.failed" / "iris" / name).read_bytes(), name


def test_resume_without_a_checkpoint_or_from_another_run_is_refused(tmp_path,
                                                                     two_group_checkpoint):
    missing = _generate("--out", str(tmp_path / "r"), "--checkpoint", str(tmp_path / "none"),
                        "--resume")
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        f"error: --resume: no checkpoint in {tmp_path / 'none'} for iris; expected "
        f"<task>.process<id>.npz written by generate --checkpoint {tmp_path / 'none'}"]
    # a run killed after its first checkpoint, resumed with more kept draws (the chain
    # groups as the checkpoint's, so that the draws are all that differ)
    shutil.copytree(two_group_checkpoint, tmp_path / "c")
    other = _generate("--samples", "150", "--chain-groups", "2", "--out", str(tmp_path / "r"),
                      "--checkpoint", str(tmp_path / "c"), "--resume")
    assert other.returncode == 2
    errors = [line for line in other.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "was written by another run" in errors[0], other.stderr[-2000:]
    assert "num_samples: checkpoint 100, this run 150" in errors[0]
    assert "Traceback" not in other.stderr


@pytest.mark.slow
def test_a_checkpoint_of_two_chain_groups_resumes_with_two_and_is_refused_with_one(
        tmp_path, two_group_checkpoint):
    """On 2 devices, 2 chains in 2 groups (a chain and a device each): killed after its first
    checkpoint, the run resumes with 2 groups and gives the uninterrupted run's references bit
    for bit; resuming it with 1 group is refused in one line, the layout named."""
    groups = ("--chain-groups", "2")
    shutil.copytree(two_group_checkpoint, tmp_path / "c")        # killed after its first
    one = _generate("--out", str(tmp_path / "killed"), "--checkpoint", str(tmp_path / "c"),
                    "--resume")
    assert one.returncode == 2 and "Traceback" not in one.stderr
    assert [line for line in one.stderr.splitlines() if line.startswith("error:")] == [
        f"error: {tmp_path / 'c' / 'iris.process0.npz'} was written by another run "
        "(chain_groups: checkpoint 2, this run 1); resume with the checkpoint's settings, or "
        "start afresh without --resume"], one.stderr[-2000:]
    resumed = _generate("--out", str(tmp_path / "killed"), "--checkpoint", str(tmp_path / "c"),
                        "--resume", *groups)
    assert resumed.returncode == 1, resumed.stderr[-2000:]     # the gate, at this length
    line = next(text for text in resumed.stderr.splitlines() if "resuming from" in text)
    assert 0 < int(line.rsplit(" ", 1)[1]) < 200, line
    whole = _generate("--out", str(tmp_path / "whole"), "--checkpoint", str(tmp_path / "c1"),
                      *groups)
    assert whole.returncode == 1, whole.stderr[-2000:]
    for name in CHAIN_FILES:
        assert (tmp_path / "whole.failed" / "iris" / name).read_bytes() == \
            (tmp_path / "killed.failed" / "iris" / name).read_bytes(), name

"""The generation command: seeded, reproducible to the byte, verified, with clear CLI errors."""
import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from kinds.bdl2021.reference.generate import ProgressPrinter, generate, with_overrides
from kinds.bdl2021.reference.task_files import DEFAULT_ROOT, GENERATION_LOG_NAME
from kinds.bdl2021.reference.tasks import task_by_name
from kinds.bdl2021.reference.verify import verify

REPO = Path(__file__).resolve().parents[3]
SMOKE_TASKS = ("iris", "diabetes_gap")


def smoke_tasks():
    return [with_overrides(task_by_name(name), num_warmup=30, num_samples=20, num_chains=2)
            for name in SMOKE_TASKS]


def short_trajectory_smoke_tasks():
    """The smoke tasks with at most 8 leapfrog steps a draw. Over a 30-draw warm-up
    diabetes_gap's step size adapts to about 0.004, so its trajectory length (2.0) took
    about 500 steps a draw: 11 s a chain, three quarters of this file's time. What makes
    the bytes repeat (seeds from task and chain, nothing from the process or the job count)
    does not depend on how many steps a draw takes."""
    return [replace(task, hmc=replace(task.hmc, max_num_steps=8)) for task in smoke_tasks()]


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "reference_data", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_generation_is_reproducible_to_the_byte(tmp_path, capsys):
    # the numpy engine in this process (NUTS would start JAX's threads in the test process);
    # chains this short fail the gate, so the files are in the failed run's folder
    generate(short_trajectory_smoke_tasks(), tmp_path / "first", jobs=2, engine="numpy-hmc")
    generate(short_trajectory_smoke_tasks(), tmp_path / "second", jobs=1, engine="numpy-hmc")
    first, second = tmp_path / "first.failed", tmp_path / "second.failed"
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    from kinds.bdl2021.reference.task_files import task_files
    written = sum(len(task_files(first, t.name, t.kind).all()) for t in smoke_tasks())
    assert len(files) == written + 1 == 9 + 8 + 1
    for name in files:
        if name.name != GENERATION_LOG_NAME:
            assert (first / name).read_bytes() == (second / name).read_bytes(), name
    assert "diabetes_gap chain 1 done" in capsys.readouterr().err     # progress is shown


@pytest.mark.slow
def test_cli_generate_writes_and_verifies_what_is_committed(tmp_path):
    """Into a folder that already holds references: the task made replaces its own, the
    others stay, the manifest lists them all. The task is iris with its committed settings,
    so what it makes is also compared with what is committed.

    On the CPU that made them every file is equal to the byte; elsewhere the bar is Monte
    Carlo agreement (kinds/bdl2021/tests/test_bdl_regeneration.py, whose iris case this is in CI).
    """
    out = tmp_path / "refs"
    for name in ("iris", "wine"):
        shutil.copytree(DEFAULT_ROOT / name, out / name)
    committed_hmc = json.loads((DEFAULT_ROOT / "iris" / "iris_task.json").read_text())["hmc"]
    result = run_cli("generate", "--tasks", "iris", "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    assert (f"iris: NUTS, 4 chains x ({committed_hmc['num_warmup']} warm-up + "
            f"{committed_hmc['num_samples']} kept draws)") in result.stderr
    assert "iris chain 3 done" in result.stderr and "2 task(s) verified" in result.stdout
    assert "transitions of" not in result.stderr    # the bar is a terminal's only
    assert "iris: convergence gate passed: " in result.stdout and "ESS" in result.stdout
    tasks, problems = verify(out)
    assert problems == [] and tasks[0].declaration["hmc"] == committed_hmc
    assert tasks[0].diagnostics["energy"]["passed"]
    assert (out / "wine" / "wine_probs.csv").read_bytes() == \
        (DEFAULT_ROOT / "wine" / "wine_probs.csv").read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["refs"]       # nothing staged is left

    from test_bdl_regeneration import assert_regenerated_as_committed
    assert_regenerated_as_committed(task_by_name("iris"), out)


@pytest.mark.slow
def test_cli_generate_with_the_numpy_engine_reports_each_chains_progress(tmp_path, capsys):
    # The command line's entry point in this process, as the failed-gate test below runs it:
    # the numpy engine starts nothing of JAX (no backend, no thread; the cluster module is
    # imported for its error type only), and its chains run in worker processes of their own
    # either way; a child interpreter would only import again what this one holds (2.5 s of
    # CPU, most of this test's). The `python -m reference_data` entry is the other tests'
    # (test_cli_generate_writes_and_verifies_what_is_committed's among them).
    from reference_data.__main__ import main
    main(["generate", "--engine", "numpy-hmc", "--tasks", "iris", "--out", str(tmp_path),
          "--warmup", "30", "--samples", "30"])
    stderr = capsys.readouterr().err
    # a line every tenth of a stage: 3 of 30, then 6 ... 30 (the workers' queue is drained
    # every half second, so every line comes through whatever the speed)
    lines = [line for line in stderr.splitlines() if "iris chain 3: sampling" in line]
    assert [line.rsplit(" ", 1)[1] for line in lines] == [f"{k}/30" for k in range(3, 31, 3)]
    # so short a run may fail the convergence gate: its output is then kept apart
    written = next(folder / "iris" for folder in (tmp_path, tmp_path.with_name(
        f"{tmp_path.name}.failed")) if (folder / "iris").is_dir())
    assert json.loads((written / "iris_task.json").read_text())["hmc"]["engine"] \
        .startswith("numpy HMC")


def snapshot(root: Path) -> dict:
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_a_failed_gate_keeps_the_previous_references_and_the_failed_run_apart(tmp_path, capsys):
    """One chain of ten kept draws cannot reach the energy's ESS minimum (100 per chain): the
    committed references stay as they were, byte for byte, and the run's output is kept in a
    folder named for it; the hint names options that --help presents as real ones."""
    from kinds.bdl2021.reference.cli import _parser, main
    root = tmp_path / "refs"
    shutil.copytree(DEFAULT_ROOT, root)
    before = snapshot(root)
    code = main(["generate", "--tasks", "iris", "--out", str(root), "--engine", "numpy-hmc",
                 "--jobs", "1", "--chains", "1", "--warmup", "10", "--samples", "10"])
    err = capsys.readouterr().err
    assert code == 1 and "iris: bulk ESS of the potential energy is" in err
    assert snapshot(root) == before
    failed = tmp_path / "refs.failed" / "iris"
    assert str(tmp_path / "refs.failed") in err and "untouched" in err
    diagnostics = json.loads((failed / "iris_hmc_diagnostics.json").read_text())
    assert diagnostics["energy"]["passed"] is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["refs", "refs.failed"]
    generate_help = next(action for action in _parser()._actions
                         if action.dest == "command").choices["generate"].format_help()
    for option in ("--samples", "--warmup"):
        assert option in err.split("error:")[-1]
        assert "smoke test" not in " ".join(generate_help.split()), generate_help


# The next three run the command line's entry point in this process: an unknown task is
# refused before anything of JAX is imported, and verify imports none of it, so a child
# interpreter would only add its start (0.2 to 0.8 s of CPU each); the tests above run
# `python -m reference_data` itself.

def in_process_cli(capsys, *args) -> tuple[int, str]:
    """(exit code, stderr) of ``python -m reference_data ARGS``, run in this process."""
    from reference_data.__main__ import main
    code = main(list(args))
    return code, capsys.readouterr().err


def test_cli_rejects_unknown_task(capsys):
    code, stderr = in_process_cli(capsys, "generate", "--tasks", "iris,cifar10")
    assert code == 2
    assert "unknown task 'cifar10'; known tasks: breast_cancer" in stderr


def test_verify_reports_a_tampered_reference(tmp_path, capsys):
    copy = tmp_path / "refs"
    shutil.copytree(DEFAULT_ROOT, copy)
    target = copy / "wine" / "wine_probs.csv"
    target.write_text(target.read_text().replace("e-", "e+", 1))
    code, stderr = in_process_cli(capsys, "verify", "--root", str(copy))
    assert code == 1
    assert "wine/wine_probs.csv: sha256 is" in stderr


def test_verify_reports_missing_folder(tmp_path, capsys):
    code, stderr = in_process_cli(capsys, "verify", "--root", str(tmp_path / "nothing"))
    assert code == 1
    assert "manifest.json: missing" in stderr


def test_progress_printer_counts_chains(capsys):
    printer = ProgressPrinter(smoke_tasks())
    printer.report("iris", 0, "warmup", 3, 30)
    assert "iris chain 0: warmup 3/30" in capsys.readouterr().err
    assert printer.total == 4

"""The generated organizer tasks (tests/organizer_matrix.py) along the whole path an
organizer and a participant take: generate or convert, build on both platforms with the kit
check on and dry-run the bundle (--check), then the kit's sample and every baseline through
the kit's run_local on the stand-in. A case the docs say is refused must be refused in one
line. The default suite runs DEFAULT_SLICE; the rest carry the ``matrix`` marker (.ci/matrix
runs them all: ``ORGANIZER_MATRIX=all``)."""
from __future__ import annotations

import importlib
import json
import os
import re
import time
from pathlib import Path

import pytest

import organizer_matrix as matrix
from bundle.local_run import build_kit, organizer_spec, run_kit
from kinds.kind import kind
from local_runs import run_problems

PLATFORMS = ("codabench", "codalab")
BASELINE_BUDGET = 2


WHOLE_MATRIX = os.environ.get("ORGANIZER_MATRIX") == "all"


def _param(case):
    """The slice runs by default; ORGANIZER_MATRIX=all marks it too, so that ``-m matrix``
    selects every case."""
    in_slice = case.id in matrix.DEFAULT_SLICE and not WHOLE_MATRIX
    marks = [] if in_slice else [pytest.mark.matrix]
    return pytest.param(case, id=case.id, marks=[*marks, pytest.mark.slow])


CASES = [case for case in matrix.all_cases() if not case.refused]
REFUSED = [case for case in matrix.all_cases() if case.refused]


class Clock:
    """Each step's seconds, printed (``-s``, or the report of a failure)."""
    def __init__(self, what: str):
        self.what, self.last = what, time.monotonic()

    def step(self, name: str) -> None:
        now = time.monotonic()
        print(f"{self.what}: {name} {now - self.last:.0f} s", flush=True)
        self.last = now


def platforms_of(case) -> tuple[str, ...]:
    """Both platforms in the matrix; in the default slice one each, alternating, so that the
    slice stays short and still builds and dry-runs for both platforms."""
    if WHOLE_MATRIX or case.id not in matrix.DEFAULT_SLICE:
        return PLATFORMS
    return (PLATFORMS[matrix.DEFAULT_SLICE.index(case.id) % 2],)


def tail(result) -> str:
    return (result.stdout[-2000:] + "\n" + result.stderr[-4000:])


def baselines(case, spec) -> list[str]:
    """The kind's own list of baselines (its baseline_results.py), those this machine and
    the phase's inputs allow."""
    table = importlib.import_module(f"kinds.{case.kind}.kit.baseline_results")
    if case.kind == "retina":
        inputs = table.phase_inputs(spec, "evaluation")
        return [m for m in table.runnable_methods() if table.INPUTS[m] in inputs]
    return list(getattr(table, "METHODS", None) or table.MEASURES)


def build_and_check(spec_path: Path, platform: str, out: Path):
    env = {k: v for k, v in os.environ.items() if k != "BUNDLE_KIT_CHECK"}
    return matrix.run_module("build_bundle", "--config", str(spec_path), "--phase", "all",
                             "--platform", platform, "--check", "--out", str(out), env=env)


def assert_kit_runs(case, spec_path: Path, work: Path) -> None:
    """The sample and every baseline through the built kit's own run_local, each scored."""
    spec = organizer_spec(spec_path, None)
    kit = build_kit(spec, "evaluation", work / "kit", budget_seconds=BASELINE_BUDGET)
    sample = kind(case.kind).sample_code_submission(work / "sample")
    runs = {"sample": sample} | {name: f"baselines/{name}.py" for name in baselines(case, spec)}
    for name, code in runs.items():
        out, log = work / f"run-{name}", work / f"{name}.log"
        out.mkdir()
        status = run_kit(kit, out, code=code, log=log)
        assert_scored(f"{case.id}: {name} through run_local", status, log.read_text())


def assert_scored(what: str, status: int, log: str) -> None:
    """Exit 0, or 1 only for a task that ran past its cut budget and was scored from its last
    checkpoint, as the platform scores it (tests/local_runs.py); scores printed either way."""
    problems = run_problems(log)
    overran = status == 1 and problems and all("scored its last checkpoint" in problem
                                                for problem in problems)
    assert status == 0 or overran, f"{what} exited {status}:\n{log[-3000:]}"
    # "scores:", or "scores on the public stand-in, ..." where the references are hidden
    assert re.search(r"^scores( on the public stand-in[^\n]*)?:$", log, re.M), \
        f"{what} printed no scores:\n{log[-3000:]}"


@pytest.mark.parametrize("case", [_param(case) for case in CASES])
def test_a_generated_task_goes_the_whole_way(case, tmp_path):
    clock = Clock(case.id)
    prepared, spec_path = matrix.prepare_case(case, tmp_path)
    clock.step("generate/convert")
    assert "Traceback" not in prepared.stderr, tail(prepared)
    accepted = (0, 1) if case.kind == "bdl2021" else (0,)     # BDL: the gate's verdict
    assert prepared.returncode in accepted, tail(prepared)
    for platform in platforms_of(case):
        built = build_and_check(spec_path, platform, tmp_path / f"dist-{platform}")
        assert built.returncode == 0, f"{case.id} on {platform}:\n{tail(built)}"
        clock.step(f"build --check {platform}")
    assert_kit_runs(case, spec_path, tmp_path / "kit-runs")
    clock.step("sample and baselines")


@pytest.mark.matrix
@pytest.mark.parametrize("case", [pytest.param(case, id=case.id) for case in REFUSED])
def test_a_network_that_cannot_read_the_inputs_is_refused_in_one_line(case, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    matrix.write_bdl_task(case, data)
    result = matrix.generate_bdl_references(case, data)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, tail(result)
    lines = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert len(lines) == 1 and case.refused.split(": ", 1)[1] in lines[0], tail(result)
    assert f"{case.task}_task.json" in lines[0], tail(result)


def test_every_registry_entry_has_a_generator():
    from kinds.bdl2021.runtime.networks import ARCHITECTURES
    from kinds.pgdl2020.runtime.layers import KINDS
    from kinds.retina.reference.images import LAYOUTS
    assert set(ARCHITECTURES) <= set(matrix.BDL_MODELS), "give organizer_matrix.BDL_MODELS an entry"
    assert set(KINDS) <= set(matrix.PGDL_LAYER_EXAMPLES), "give PGDL_LAYER_EXAMPLES an entry"
    every_layer = {layer["layer_name"] for head in matrix.PGDL_HEADS
                   for layer in matrix.pgdl_network(head)}
    assert every_layer == set(KINDS)
    assert {c.axes["layout"] for c in matrix.retina_cases()} == set(LAYOUTS)
    assert {c.axes["architecture"] for c in matrix.bdl_cases()} == set(ARCHITECTURES)
    assert len(matrix.DEFAULT_SLICE) == 2
    assert set(matrix.DEFAULT_SLICE) <= {c.id for c in CASES}


KERAS2_FIXTURE = matrix.REPO / "kinds/pgdl2020/tests/fixtures/pgdl_keras/input_data/allconv_bn/model_0"
KERAS3_FIXTURE = matrix.REPO / "kinds/pgdl2020/tests/fixtures/pgdl_keras3/input_data/saved_weights/model_0"


def _fixture_network(folder: Path):
    config = json.loads((folder / "config.json").read_text())
    return config["model_config"], tuple(config["input_shape"])


@pytest.mark.parametrize("layout, folder, name", [
    ("keras2", KERAS2_FIXTURE, "weights.hdf5"),
    ("keras3", KERAS3_FIXTURE, "weights.weights.h5")])
def test_the_writers_lay_files_out_as_keras_does(layout, folder, name, tmp_path):
    """The same network written by our h5py writer and by Keras (the committed fixtures):
    the same groups, datasets, shapes, dtypes and attributes (values aside)."""
    import numpy as np
    network, shape = _fixture_network(folder)
    writer = matrix.PGDL_WRITERS[layout][0]
    writer(tmp_path / name, matrix.keras_weights(network, shape, np.random.default_rng(0)))
    ours, keras = matrix.hdf5_layout(tmp_path / name), matrix.hdf5_layout(folder / name)
    assert ours == keras

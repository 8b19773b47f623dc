"""Run the assembled scoring program exactly as the CodaLab v1.5 worker does.

Worker facts (codalab_v1.md §3.3, §4.4): the command comes from the program's `metadata`,
variables are replaced with plain str.replace, the line is split on single spaces (no
shell), the working directory is the run folder, and input/ and res/ hold platform files.
"""
import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

from plans import embedded_phase
from bundle.phase_data import stage_reference_data
from bundle.programs import assemble_scoring_program
from bundle.platforms.worker import program_command
from scoring_program.scorer.config import CONFIG_NAME

REPO = Path(__file__).resolve().parents[1]
IMAGE_PYTHON = REPO / ".venv-image" / "bin" / "python"


def image_python() -> str:
    """The docker image's package set; the main venv if .venv-image was not built."""
    return str(IMAGE_PYTHON if IMAGE_PYTHON.exists() else REPO / ".venv" / "bin" / "python")


def prepare_phase(root: Path, phase: str, budget_seconds=60.0, tasks=None, record="optional",
                  kind: str = "bdl2021"):
    """The phase of ``kind``'s default competition: its scoring program and references;
    ``tasks`` keeps only those (a track).

    ``record``: what the scorer requires besides predictions. Most scorer tests put prediction
    files straight into res/, so by default it requires nothing, as in a results phase; the
    builder's own rule for code phases is kept with ``record=None``. ``kind``: BDL unless
    given, since the tests that name no kind submit BDL's prediction files; a core test
    passes ``kind="label_accuracy"`` (plans.py)."""
    plan = embedded_phase(phase, budget_seconds=budget_seconds, kind=kind)
    if tasks is not None:
        plan = dataclasses.replace(plan, tasks=tuple(t for t in plan.tasks if t.name in tasks))
    assemble_scoring_program(plan, root / "program")
    if record is not None:
        config_file = root / "program" / CONFIG_NAME
        config = json.loads(config_file.read_text())
        config_file.write_text(json.dumps({**config, "record": record}))
    stage_reference_data(plan, root / "ref")
    return plan


def submit(run: Path, predictions: dict, skip=(), replace=None, suffixes=("_labels",)) -> Path:
    """Writes ``predictions`` ({file name: array}) into the run's ``input/res``, less the files
    of the tasks in ``skip`` (a file's task: its name cut at the first of ``suffixes``, e.g.
    ``wine_labels.csv`` -> ``wine``), then ``replace`` ({file name: text}) as written."""
    from runtime.formats import write_matrix
    res = run / "input" / "res"
    for name, array in predictions.items():
        task = name
        for suffix in suffixes:
            task = task.split(suffix)[0]
        if task in skip:
            continue
        write_matrix(res / name, array)
    for name, text in (replace or {}).items():
        (res / name).write_text(text)
    return res


def new_run(prepared: Path, run: Path) -> Path:
    """A run folder as the worker lays it out, with the platform's stray files."""
    shutil.copytree(prepared / "program", run / "program")
    shutil.copytree(prepared / "ref", run / "input" / "ref")
    res = run / "input" / "res"
    res.mkdir(parents=True)
    (res / "metadata").write_text("exitCode: 0\nelapsedTime: 12.5\n")
    (res / "detailed_results.html").write_text("")
    (run / "input" / "metadata").write_text("res: http://example/res.zip\n")
    for folder in ("history", "scores", "coopetition"):
        (run / "input" / folder).mkdir()
    (run / "input" / "tmp8a7b.zip").write_bytes(b"PK\x05\x06" + b"\0" * 18)
    (run / "output").mkdir()
    (run / "temp").mkdir()
    return run


def worker_command(run: Path) -> list[str]:
    return program_command(run / "program", {"$program": run / "program", "$input": run / "input",
                                              "$output": run / "output", "$tmp": run / "temp"},
                           image_python())


def run_scoring(run: Path) -> subprocess.CompletedProcess:
    return subprocess.run(worker_command(run), cwd=run, capture_output=True, text=True,
                          timeout=300)


def read_scores(run: Path) -> dict[str, float]:
    lines = (run / "output" / "scores.txt").read_text().splitlines()
    return {key.strip(): float(value) for key, value in (line.split(":") for line in lines)}


def read_unscored(run: Path) -> dict[str, float]:
    """A submission with no task scored has no scores file (the scorer exits NOTHING_SCORED):
    the values its report gives each task's metrics, keyed as the scores file's columns."""
    assert not (run / "output" / "scores.txt").exists()
    tasks = json.loads((run / "output" / "detailed_results.json").read_text())["tasks"]
    return {f"{task}_{name}": metric["value"] for task, entry in tasks.items()
            for name, metric in entry["metrics"].items()}

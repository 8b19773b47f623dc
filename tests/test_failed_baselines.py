"""A baseline that fails a task (it raised, timed out, wrote nothing) is never a figure.

The scorer gives a failed task the worst value of every metric, so that it ranks last; copied
into a baseline table, that value read as a result ("0.000 ± 1.000") on the overview page, and
the methodology check compared the baselines left as "the two best". Now the baselines command
fails unless told to keep going, and every reader of a table (pages, kit guide, Markdown,
methodology check) shows such a row as failed, with its category, and compares it with nothing.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from markupsafe import escape

from bundle.leaderboard import phase_columns
from bundle.phase_plan import phase_plan
from bundle.render import environment, guide_contexts, page_contexts, render_pages
from bundle.spec import load_spec
from kinds.kind import KINDS
from runtime import failures
from test_custom_kit import write_task
from test_methodology import default, report, written

REPO = Path(__file__).resolve().parents[1]
KINDS_WITH_TABLES = ("bdl2021", "pgdl2020", "retina")
REASON = "training run raised: ValueError: the baseline broke"
TITLES = "|".join(re.escape(failure.title) for failure in failures.FAILURES)


def one_task_spec(root: Path, sandbox: dict | None = None) -> tuple[Path, Path]:
    """(spec file, data root): one code phase on one small task of the organizer's own;
    ``sandbox``: spec keys of the phase's sandbox to change."""
    import shutil

    import numpy as np
    import yaml
    data = root / "data"
    write_task(data, "moons", np.random.default_rng(1))
    default_spec = REPO / "kinds" / "bdl2021" / "default_spec.yaml"
    spec = yaml.safe_load(default_spec.read_text())
    spec.update(slug="failing-baseline", title="Moons", description="One task.",
                tasks={"moons": {"budget_seconds": 5}}, tracks={},
                phases={"final": {"label": "Final", "start": "2027-04-01 00:00:00",
                                  "submission": "code", "tasks": ["moons"],
                                  "execution_time_limit": 300}})
    spec["sandbox"] = {**spec.get("sandbox", {}), **(sandbox or {})}
    (root / "spec").mkdir()
    shutil.copyfile(default_spec.parent / spec["logo"], root / "spec" / spec["logo"])
    spec_file = root / "spec" / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    return spec_file, data


@pytest.mark.slow
def test_a_baseline_that_fails_fails_the_command_unless_told_to_keep_going(tmp_path):
    """10 MiB of address space: the baseline's process cannot even load numpy, at any speed
    of the machine (a tiny budget was not enough: a fast run delivered a checkpoint in it),
    and the scorer penalises the task."""
    spec_file, data = one_task_spec(tmp_path, {"memory_gib": 0.01,
                                               "memory_limit": "address_space"})
    table_file = spec_file.parent / "baseline_results.json"
    command = [sys.executable, str(REPO / "kinds" / "bdl2021" / "kit" / "baseline_results.py"),
               "--config", str(spec_file), "--data-root", str(data), "--methods", "sgld",
               "--budget", "0.001"]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    assert re.search(rf"^error: sgld on moons: ({TITLES}): ", run.stderr,
                     re.MULTILINE), run.stderr
    assert "--keep-going" in run.stderr and not table_file.exists()

    kept = subprocess.run(command + ["--keep-going"], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert kept.returncode == 0, kept.stdout[-3000:] + kept.stderr[-3000:]
    assert "warning: written as failed: sgld on moons" in kept.stderr
    row = json.loads(table_file.read_text())["tasks"]["moons"]["methods"]["sgld"]
    assert row["penalty"] and failures.known(row["failure"]) and "metrics" not in row
    markdown = [line for line in kept.stdout.splitlines() if line.startswith("| moons")]
    assert markdown and all(re.search(rf"\| failed: ({TITLES}) \|", line) for line in markdown)
    assert "± 1.000" not in kept.stdout


def failed_table(name: str, legacy: bool = False) -> tuple[dict, str, str]:
    """The kind's committed table with its first task's first baseline failed, and (task,
    method). ``legacy``: as tables were written before: the scorer's worst figures kept beside
    the penalty, and no category."""
    table = json.loads(KINDS[name].BASELINE_RESULTS.read_text())
    task, entry = next(iter(table["tasks"].items()))
    rows = entry.get("methods", entry)
    method = next(iter(rows))
    if legacy:
        rows[method]["penalty"] = REASON
    else:
        rows[method] = {"penalty": REASON, "failure": failures.RAISED}
    return table, task, method


def pages_and_guide(name: str, table: dict, task: str) -> tuple[str, str]:
    """The overview page and the kit guide's baselines part, of the default spec's phase
    scoring ``task``."""
    definition = KINDS[name]
    spec = load_spec(definition.DEFAULT_SPEC)
    phase = next(p for p in spec.phases if task in p.tasks)
    plan = phase_plan(spec, phase.key, None)
    contexts = page_contexts(spec, [phase], [plan], phase_columns(plan), spec.title, table)
    overview = render_pages(contexts, definition.TEMPLATES)["overview.html"]
    # the guide's baselines part, as every kind's guide includes it
    guide = environment(definition.KIT).get_template("guide_baselines.md.j2")
    return overview, guide.render(guide_contexts(contexts)[0])


def overview_cells(overview: str, task: str, label: str) -> list[str]:
    """The cells of baseline ``label`` on ``task`` in the overview's table (BDL: a column per
    baseline; the others: a row per baseline, its figures after the task and the label)."""
    label = str(escape(label))
    overview = overview[overview.index("<h3>Baseline results</h3>"):]
    rows = [re.findall(r"<td>(.*?)</td>", part) for part in overview.split("<tr>")[1:]]
    rows = [row for row in rows if row and row[0] == task]
    if label in rows[0]:
        return [cell for row in rows if row[1] == label for cell in row[2:]]
    column = re.findall(r"<th>(.*?)</th>", overview).index(label)
    return [row[column] for row in rows]


@pytest.mark.parametrize("legacy", [False, True], ids=["new", "legacy"])
@pytest.mark.parametrize("name", KINDS_WITH_TABLES)
def test_pages_and_guide_show_a_failed_baseline_as_failed(name, legacy):
    table, task, method = failed_table(name, legacy)
    overview, guide = pages_and_guide(name, table, task)
    label = (table.get("methods") or table.get("measures"))[method]
    expected = "failed: penalised" if legacy else "failed: Raised an exception"
    for text in (overview, guide):
        assert expected in text
        assert "shown as failed delivered no prediction" in " ".join(text.split())
    cells = overview_cells(overview, task, label)
    assert cells and all(cell == expected for cell in cells), cells


def test_the_methodology_check_names_failed_baselines_and_compares_the_others(tmp_path):
    """Of three baselines the best one failed (its worst figures kept, as old tables did):
    the two compared are the other two, and the note says which one was left out, and why."""
    spec = default("bdl2021")
    spec.pop("ignore_methodology_warnings", None)
    row = {"metrics": {"agreement": {"value": 0.95, "std": 0.0, "se": 0.001},
                       "total_variation": {"value": 0.05, "std": 0.0, "se": 0.001}},
           "penalty": None}
    failed_row = {"metrics": {"agreement": {"value": 1.0, "std": 1.0, "se": 0.0},
                              "total_variation": {"value": 0.0, "std": 1.0, "se": 0.0}},
                  "penalty": REASON, "failure": failures.TIMED_OUT}
    second = json.loads(json.dumps(row))
    second["metrics"]["agreement"]["value"] = 0.5
    table = {"methods": {"a": "A", "b": "B", "c": "C"},
             "tasks": {"breast_cancer": {"phase": "evaluation", "methods": {
                 "a": row, "b": failed_row, "c": second}}}}
    notes = report(written(tmp_path, "bdl2021", spec, table)).notes
    (note,) = [n for n in notes if "task breast_cancer, agreement" in n]
    assert "the best scored baselines are a (0.95) and c (0.5)" in note, note
    assert "left out, failed: b (Timed out with no checkpoint)" in note, note

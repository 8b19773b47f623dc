"""A baseline that fails a task (it raised, timed out, wrote nothing) is never a figure.

The scorer gives a failed task the worst value of every metric, so that it ranks last; copied
into a baseline table, that value read as a result ("0.000 ± 1.000") on the overview page, and
the methodology check compared the baselines left as "the two best". Now the baselines command
fails unless told to keep going, and every reader of a table (pages, kit guide, Markdown,
methodology check) shows such a row as failed, with its category, and compares it with nothing.
The baselines command's own failure is tested with BDL's (kit/baseline_results.py), the kind
whose kit runs one on an organizer's task: kinds/bdl2021/tests/test_bdl_failed_baselines.py.
"""
import json
import re

import pytest
from markupsafe import escape

from bundle.leaderboard import phase_columns
from bundle.phase_plan import phase_plan
from bundle.render import environment, guide_contexts, page_contexts, render_pages
from bundle.spec import load_spec
from kinds.kind import KINDS
from runtime import failures
from test_methodology import default, report, written

# every kind whose kit commits a baseline table (label_accuracy commits none)
KINDS_WITH_TABLES = tuple(name for name in sorted(KINDS) if KINDS[name].BASELINE_RESULTS.is_file())
REASON = "training run raised: ValueError: the baseline broke"
TITLES = "|".join(re.escape(failure.title) for failure in failures.FAILURES)


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
    spec = default("label_accuracy")
    row = {"metrics": {"accuracy": {"value": 0.95, "std": 0.0, "se": 0.001},
                       "balanced_accuracy": {"value": 0.95, "std": 0.0, "se": 0.001}},
           "penalty": None}
    failed_row = {"metrics": {"accuracy": {"value": 1.0, "std": 1.0, "se": 0.0},
                              "balanced_accuracy": {"value": 1.0, "std": 1.0, "se": 0.0}},
                  "penalty": REASON, "failure": failures.TIMED_OUT}
    second = json.loads(json.dumps(row))
    second["metrics"]["accuracy"]["value"] = 0.5
    table = {"methods": {"a": "A", "b": "B", "c": "C"},
             "tasks": {"iris": {"phase": "development", "methods": {
                 "a": row, "b": failed_row, "c": second}}}}
    notes = report(written(tmp_path, "label_accuracy", spec, table)).notes
    (note,) = [n for n in notes if "phase evaluation, task iris, accuracy" in n]
    assert "the best scored baselines are a (0.95) and c (0.5)" in note, note
    assert "left out, failed: b (Timed out with no checkpoint)" in note, note

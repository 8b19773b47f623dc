"""The methodology checks (bundle/methodology.py) on BDL's own spec, tables and metrics: what
its default spec ignores, and why; its W2, a metric whose standard error the build cannot
estimate (not a share of test rows); and what its tasks' declarations say they are drawn from.
The checks themselves are tested on label_accuracy in tests/test_methodology.py."""
from __future__ import annotations

import re

from bundle.build import baseline_results_file
from bundle.methodology import IGNORE_KEY, SMALL_TEST_SET, UNSTATED_SHIFT, methodology_report
from bundle.spec import load_spec
from kinds.kind import KINDS
from test_methodology import default, ids, ignoring, report, written


def test_bdl_default_reports_the_standard_errors_it_ignores():
    """What the BDL default ignores is measured, and said, all the same."""
    spec = load_spec(KINDS["bdl2021"].DEFAULT_SPEC)
    found = methodology_report(spec, baseline_results_file(spec))
    assert {w.id for w, _ in found.ignored} == {SMALL_TEST_SET}
    shift = next(n for n in found.notes if "task digits_shift, agreement" in n)
    # the committed table carries the scorer's standard errors, so every metric is checked
    assert "(the table's se)" in shift and re.search(r"\d\.\d standard errors", shift)
    w2 = next(n for n in found.notes if "task diabetes_gap, w2" in n)
    assert "(the table's se)" in w2 and "not checked" not in w2


# ---- the test set against the baselines' gap, on BDL's W2 -----------------------------------

def bdl_table(breast_cancer: dict, diabetes_gap: dict | None = None) -> dict:
    """A BDL table in the shape kit/baseline_results.py writes: metric -> {value, std[, se]}."""
    def methods(rows):
        return {"methods": {method: {"metrics": metrics, "penalty": None}
                            for method, metrics in rows.items()}}
    tasks = {"breast_cancer": methods(breast_cancer)}
    if diabetes_gap:
        tasks["diabetes_gap"] = methods(diabetes_gap)
    return {"tasks": tasks}


def bdl() -> dict:
    """The BDL default spec less its own ignored warnings (the tables below are not its)."""
    spec = default("bdl2021")
    del spec[IGNORE_KEY]
    return spec


def agreement(value: float, **se) -> dict:
    return {"agreement": {"value": value, "std": 0.0, **se}}


def test_the_tables_own_standard_error_is_used_for_w2_and_agreement(tmp_path):
    """With an se in the table the binomial estimate is not made: a gap of 0.01 is then ten
    standard errors; and W2, which the build cannot estimate, is checked with the table's."""
    table = bdl_table({"a": agreement(0.95, se=0.001), "b": agreement(0.94, se=0.001)},
                      {"a": {"w2": {"value": 1.0, "se": 0.2}},
                       "b": {"w2": {"value": 1.1, "se": 0.2}}})
    found = report(written(tmp_path, "bdl2021", bdl(), table))
    assert ids(found.warnings) == [SMALL_TEST_SET]
    assert "task diabetes_gap, w2" in found.warnings[0].found
    assert "the table's se" in found.warnings[0].found
    assert any("task breast_cancer, agreement" in n and "10.0 standard errors" in n
               for n in found.notes)


def test_w2_without_a_standard_error_is_said_to_be_unchecked(tmp_path):
    """W2 is no share of test rows: without the table's se, nothing estimates one.
    (label_accuracy ranks every task on its accuracy, a share: its tables cannot show this.)"""
    table = bdl_table({"a": agreement(0.95), "b": agreement(0.75)},
                      {"a": {"w2": {"value": 1.0}}, "b": {"w2": {"value": 1.0001}}})
    found = report(written(tmp_path, "bdl2021", bdl(), table))
    assert found.warnings == ()
    assert any(n.startswith("phase evaluation, task diabetes_gap, w2: not checked: no standard "
                            "error: the table gives no se for w2") for n in found.notes)


# ---- distributions: what BDL's declarations say they are drawn from -------------------------

def test_bdls_wine_drawn_unlike_every_development_task_warns(tmp_path):
    spec = default("bdl2021")
    del spec["tasks"]["wine"]["distribution_shift"]
    (warning,) = report(written(tmp_path, "bdl2021", spec)).warnings
    assert (warning.id, warning.key) == (UNSTATED_SHIFT, "tasks.wine")
    assert warning.file == KINDS["bdl2021"].EMBEDDED_ROOT / "wine" / "wine_task.json"
    assert ('phase evaluation scores task wine, drawn from "sklearn.datasets.load_wine; split: '
            'stratified; test blocks: clean", and none of the tasks of the phases before it '
            '(iris, digits, digits_cnn) is drawn alike') in warning.found
    assert "tasks.wine.distribution_shift" in warning.advice

    ignored = report(written(tmp_path, "bdl2021", ignoring(spec, UNSTATED_SHIFT)))
    assert ignored.warnings == () and ids(w for w, _ in ignored.ignored) == [UNSTATED_SHIFT]


def test_a_final_task_drawn_like_a_development_task_does_not_warn(tmp_path):
    """digits_shift is drawn as the development task digits_cnn is: the same dataset, split
    and corrupted test blocks."""
    spec = default("bdl2021")
    assert "distribution_shift" not in spec["tasks"]["digits_shift"]
    found = report(written(tmp_path, "bdl2021", spec))
    assert found.warnings == ()

"""The methodology checks at build time (bundle/methodology.py): each warning raised by a spec
made to raise it, with its id, key, file and words; the same spec with the warning ignored is
silent about it; the default specs raise none (or only those they ignore, with a reason); bad
values of the new keys are refused naming the key. The checks read declarations and small
tables only: no bundle is built but one, by the command line, to see the warning printed and the
build pass."""
from __future__ import annotations

import dataclasses
import json
import math
import shutil
from pathlib import Path

import pytest
import yaml

import build_bundle
from bundle.build import baseline_results_file
from bundle.methodology import (FINAL_SUBMISSIONS, IGNORE_KEY, MAX_FINAL_SUBMISSIONS,
                                SHORT_DEVELOPMENT, SMALL_TEST_SET, UNSTATED_SHIFT,
                                check_distributions, methodology_report, report_lines,
                                task_facts, with_ignored)
from bundle.spec import SpecError, load_spec
from kinds.kind import KINDS

REASON = "the organizer's reason, long enough to be one"


def default(kind: str) -> dict:
    return yaml.safe_load(KINDS[kind].DEFAULT_SPEC.read_text(encoding="utf-8"))


def written(tmp_path: Path, kind: str, spec: dict, table: dict | None = None) -> Path:
    """The spec in a folder of its own (data_root null: the kind's embedded tasks), with its
    logo and, if given, its baseline table next to it."""
    shutil.copyfile(KINDS[kind].DEFAULT_SPEC.parent / spec["logo"], tmp_path / spec["logo"])
    if table is not None:
        (tmp_path / "baseline_results.json").write_text(json.dumps(table))
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def report(path: Path):
    spec = load_spec(path)
    return methodology_report(spec, baseline_results_file(spec))


def ignoring(spec: dict, warning: str) -> dict:
    return {**spec, IGNORE_KEY: {**spec.get(IGNORE_KEY, {}), warning: REASON}}


def ids(found) -> list[str]:
    return [warning.id for warning in found]


# ---- the default specs ----------------------------------------------------------------------

@pytest.mark.parametrize("kind", sorted(KINDS))
def test_default_specs_raise_no_warning_but_those_they_ignore_with_a_reason(kind):
    spec = load_spec(KINDS[kind].DEFAULT_SPEC)
    found = methodology_report(spec, baseline_results_file(spec))
    assert found.warnings == ()
    stated = default(kind).get(IGNORE_KEY, {})
    assert {w.id for w, _ in found.ignored} == set(stated)
    assert all(reason == stated[w.id] for w, reason in found.ignored)
    assert not [note for note in found.notes if "changes nothing" in note]


# ---- 1. submissions to the final phase -------------------------------------------------------

def test_a_final_phase_with_many_submissions_warns(tmp_path):
    spec = default("label_accuracy")
    spec["phases"]["evaluation"]["max_submissions"] = MAX_FINAL_SUBMISSIONS + 1
    path = written(tmp_path, "label_accuracy", spec)
    (warning,) = report(path).warnings
    assert (warning.id, warning.key, warning.file) == (
        FINAL_SUBMISSIONS, "phases.evaluation.max_submissions", path)
    assert f"allows {MAX_FINAL_SUBMISSIONS + 1} submissions per participant, more than " \
           f"{MAX_FINAL_SUBMISSIONS}" in warning.text()
    assert f"{IGNORE_KEY}.{FINAL_SUBMISSIONS}" in warning.text()

    silenced = report(written(tmp_path, "label_accuracy", ignoring(spec, FINAL_SUBMISSIONS)))
    assert silenced.warnings == ()
    assert [(w.id, reason) for w, reason in silenced.ignored] == [(FINAL_SUBMISSIONS, REASON)]


def test_the_threshold_itself_is_allowed(tmp_path):
    spec = default("label_accuracy")
    spec["phases"]["evaluation"]["max_submissions"] = MAX_FINAL_SUBMISSIONS
    assert report(written(tmp_path, "label_accuracy", spec)).warnings == ()


# ---- 2. the test set against the baselines' gap ----------------------------------------------

def baseline_table(iris: dict, wine: dict | None = None) -> dict:
    """A baseline table in the shape detailed_results.json writes a metric (and BDL's
    kit/baseline_results.py a table): metric -> {value, std[, se]}."""
    def methods(rows):
        return {"methods": {method: {"metrics": metrics, "penalty": None}
                            for method, metrics in rows.items()}}
    tasks = {"iris": methods(iris)}
    if wine:
        tasks["wine"] = methods(wine)
    return {"tasks": tasks}


def accuracy(value: float, **se) -> dict:
    return {"accuracy": {"value": value, "std": 0.0, **se}}


def test_two_baselines_closer_than_two_binomial_standard_errors_warn(tmp_path):
    spec = default("label_accuracy")
    table = baseline_table({"a": accuracy(0.95), "b": accuracy(0.94), "c": accuracy(0.5)})
    path = written(tmp_path, "label_accuracy", spec, table)
    found = report(path)
    # iris is scored in both phases, and each phase's ranking is checked
    assert [(w.id, w.key) for w in found.warnings] == [
        (SMALL_TEST_SET, "phases.development.tasks"), (SMALL_TEST_SET, "phases.evaluation.tasks")]
    warning = found.warnings[-1]
    assert warning.file == KINDS["label_accuracy"].EMBEDDED_ROOT / "iris" / "iris_task.json"
    se = math.sqrt(0.94 * 0.06 / 45)          # the larger of the two baselines'
    assert f"the two best baselines, a and b, are 0.01 apart, under 2 standard errors " \
           f"(2 x {se:.2g}, sqrt(p(1-p)/n) over n = 45 test rows)" in warning.text()
    # tasks the table leaves out are said to be unchecked, not passed
    assert any("task wine, accuracy: not checked: the baseline table has 0 baseline(s)" in n
               for n in found.notes)

    assert report(written(tmp_path, "label_accuracy", ignoring(spec, SMALL_TEST_SET), table)) \
        .warnings == ()


def test_baselines_far_apart_do_not_warn(tmp_path):
    table = baseline_table({"a": accuracy(0.95), "b": accuracy(0.75)})
    found = report(written(tmp_path, "label_accuracy", default("label_accuracy"), table))
    assert found.warnings == ()
    assert any("task iris, accuracy: the best baselines are a (0.95) and b (0.75)" in n
               for n in found.notes)


def test_the_tables_own_standard_error_is_used_where_it_has_one(tmp_path):
    """With an se in the table the binomial estimate is not made: a gap of 0.01 is then ten
    standard errors on iris, and two baselines 0.01 apart with an se of 0.02 are too close on
    wine (a metric the build cannot estimate: kinds/bdl2021/tests/test_bdl_methodology.py)."""
    table = baseline_table({"a": accuracy(0.95, se=0.001), "b": accuracy(0.94, se=0.001)},
                           {"a": accuracy(0.80, se=0.02), "b": accuracy(0.79, se=0.02)})
    found = report(written(tmp_path, "label_accuracy", default("label_accuracy"), table))
    assert ids(found.warnings) == [SMALL_TEST_SET, SMALL_TEST_SET]      # wine, in each phase
    assert all("task wine, accuracy" in w.found and "the table's se" in w.found
               for w in found.warnings)
    assert any("task iris, accuracy" in n and "10.0 standard errors" in n
               for n in found.notes)


def retina_rows(auroc: float, referral: float, se: float | None) -> dict:
    def entry(value):
        return value if se is None else {"value": value, "se": se}
    return {"auroc_in": entry(auroc), "referral_joint": entry(referral), "penalty": None}


def test_a_phase_ranked_by_its_weighted_loss_is_checked_on_it(tmp_path):
    """Retina ranks by the weighted loss: its standard error is bounded by the weighted mean
    of the metrics' (0.5 x 0.02 + 0.5 x 0.02 = 0.02 here); losses 0.2 and 0.21 are too close."""
    rows = {"a": retina_rows(0.8, 0.8, 0.02), "b": retina_rows(0.79, 0.79, 0.02)}
    table = {"tasks": {"severity_test": rows, "population_test": rows}}
    spec = default("retina")
    del spec["ignore_methodology_warnings"]       # the default's reason covers its own tables
    found = report(written(tmp_path, "retina", spec, table))
    (warning,) = found.warnings
    assert (warning.id, warning.key) == (SMALL_TEST_SET, "phases.final.tasks")
    assert warning.file == tmp_path / "baseline_results.json"
    assert "phase final, weighted loss: the two best baselines, a and b, are 0.01 apart" \
        in warning.found and "at most: the weighted mean" in warning.found
    assert any("phase development, weighted loss: not checked" in n for n in found.notes)

    unsure = {"a": retina_rows(0.8, 0.8, None), "b": retina_rows(0.79, 0.79, None)}
    found = report(written(tmp_path, "retina", spec, {"tasks": {"severity_test": unsure,
                                                                "population_test": unsure}}))
    assert found.warnings == ()
    assert any("phase final, weighted loss: not checked: no standard error: the table gives no "
               "se for auroc_in" in n for n in found.notes)


# ---- 3. development time --------------------------------------------------------------------

def test_a_development_time_shorter_than_the_final_phase_warns(tmp_path):
    spec = {**default("label_accuracy"), "end_date": "2027-09-30 23:59:59"}
    path = written(tmp_path, "label_accuracy", spec)
    (warning,) = report(path).warnings
    assert (warning.id, warning.key, warning.file) == (
        SHORT_DEVELOPMENT, "phases.evaluation.start", path)
    assert "participants have 107.0 days to develop (phases.development.start to " \
           "phases.evaluation.start) and 183.0 days in the final phase" in warning.found

    assert report(written(tmp_path, "label_accuracy", ignoring(spec, SHORT_DEVELOPMENT))) \
        .warnings == ()


def test_without_an_end_date_the_final_phase_has_no_length_to_compare(tmp_path):
    spec = {**default("label_accuracy"), "end_date": None}
    found = report(written(tmp_path, "label_accuracy", spec))
    assert found.warnings == ()
    assert any(n.startswith("development time: not checked: the spec has no end_date")
               for n in found.notes)


# ---- 4. distributions -----------------------------------------------------------------------

def facts_drawn_from(spec, **sources):
    """The spec's task facts with the given ``data_source``s: label_accuracy says of none of
    its tasks what its data are drawn from (the test below), and the check is a function of
    the facts."""
    facts = task_facts(spec)
    return {name: dataclasses.replace(fact, source=sources.get(name, fact.source))
            for name, fact in facts.items()}


def one_task_per_phase() -> dict:
    spec = default("label_accuracy")
    spec["phases"]["development"]["tasks"] = ["iris"]
    spec["phases"]["evaluation"]["tasks"] = ["wine"]
    return spec


def test_a_final_task_drawn_unlike_every_development_task_warns(tmp_path):
    spec = load_spec(written(tmp_path, "label_accuracy", one_task_per_phase()))
    facts = facts_drawn_from(spec, iris="sklearn.datasets.load_iris",
                             wine="sklearn.datasets.load_wine")
    (warning,) = check_distributions(spec, facts).warnings
    assert (warning.id, warning.key) == (UNSTATED_SHIFT, "tasks.wine")
    assert warning.file == KINDS["label_accuracy"].EMBEDDED_ROOT / "wine" / "wine_task.json"
    assert ('phase evaluation scores task wine, drawn from "sklearn.datasets.load_wine", and '
            'none of the tasks of the phases before it (iris) is drawn alike') in warning.found
    assert "tasks.wine.distribution_shift" in warning.advice

    ignoring_it = load_spec(written(tmp_path, "label_accuracy",
                                    ignoring(one_task_per_phase(), UNSTATED_SHIFT)))
    ignored = with_ignored([check_distributions(ignoring_it, facts)],
                           ignoring_it.ignored_warnings)
    assert ignored.warnings == () and ids(w for w, _ in ignored.ignored) == [UNSTATED_SHIFT]


def test_public_and_hidden_tasks_of_one_phase_are_compared():
    """A results phase whose kind publishes some tasks' references and hides others' (no
    embedded kind has one: the facts are changed here, the check being a function of them)."""
    spec = load_spec(KINDS["label_accuracy"].DEFAULT_SPEC)
    facts = facts_drawn_from(spec, iris="sklearn.datasets.load_iris", wine="other rows")
    facts["iris"] = dataclasses.replace(facts["iris"], public_references=True)
    (warning,) = check_distributions(spec, facts).warnings
    assert (warning.id, warning.key) == (UNSTATED_SHIFT, "tasks.wine")
    assert "phase development scores task wine" in warning.found
    assert "none of the public tasks of phase development (iris)" in warning.found
    stated = dataclasses.replace(spec, distribution_shifts={
        **spec.distribution_shifts, "wine": REASON})
    assert check_distributions(stated, facts).warnings == ()


def test_a_kind_that_does_not_say_what_its_data_are_drawn_from_is_not_checked(tmp_path):
    spec = default("label_accuracy")
    spec["phases"]["development"]["tasks"] = ["iris"]
    spec["phases"]["evaluation"]["tasks"] = ["wine"]
    found = report(written(tmp_path, "label_accuracy", spec))
    assert found.warnings == ()
    assert ("distributions, phase evaluation, task wine: not checked: the kind label_accuracy "
            "does not say what this task's data are drawn from") in found.notes


# ---- the keys -------------------------------------------------------------------------------

def test_an_ignored_warning_that_does_not_arise_is_said_to_change_nothing(tmp_path):
    found = report(written(tmp_path, "label_accuracy",
                           ignoring(default("label_accuracy"), UNSTATED_SHIFT)))
    assert found.warnings == () and found.ignored == ()
    assert f"{IGNORE_KEY}.{UNSTATED_SHIFT}: no such warning arises; the entry changes " \
           "nothing" in found.notes


@pytest.mark.parametrize("edit, message", [
    ({IGNORE_KEY: {"no-such-warning": REASON}},
     f"{IGNORE_KEY}: found \"no-such-warning\", expected one of ['{FINAL_SUBMISSIONS}'"),
    ({IGNORE_KEY: {FINAL_SUBMISSIONS: "no"}},
     f"{IGNORE_KEY}.{FINAL_SUBMISSIONS}: found \"no\", expected at least 20 characters"),
    ({IGNORE_KEY: [FINAL_SUBMISSIONS]},
     f"{IGNORE_KEY}: found [\"{FINAL_SUBMISSIONS}\"], expected a value of type object"),
    ({"tasks": {"iris": {"budget_seconds": 10, "distribution_shift": 5},
                "wine": {"budget_seconds": 10}}},
     "tasks.iris.distribution_shift: found 5, expected a value of type string"),
    ({"tasks": {"iris": {"budget_seconds": 10, "distribution_shift": "shifted"},
                "wine": {"budget_seconds": 10}}},
     "tasks.iris.distribution_shift: found \"shifted\", expected at least 20 characters"),
])
def test_bad_values_of_the_keys_are_refused_naming_the_key(tmp_path, edit, message):
    path = written(tmp_path, "label_accuracy", {**default("label_accuracy"), **edit})
    with pytest.raises(SpecError) as refused:
        load_spec(path)
    assert message in str(refused.value)


# ---- the build's output ---------------------------------------------------------------------

def test_the_build_prints_the_warnings_and_passes(tmp_path, capsys):
    spec = default("label_accuracy")
    spec["phases"]["evaluation"]["max_submissions"] = 50
    path = written(tmp_path, "label_accuracy", spec)
    code = build_bundle.main(["--config", str(path), "--phase", "development",
                              "--out", str(tmp_path / "dist")])
    out, err = capsys.readouterr()
    assert code == 0 and list((tmp_path / "dist").glob("*.zip"))
    warnings, notes = report_lines(report(path))
    assert warnings and all(line in err for line in warnings)
    assert all(line in out for line in notes)
    assert f"warning: methodology [{FINAL_SUBMISSIONS}] phases.evaluation.max_submissions" in err


@pytest.mark.parametrize("kind_name", ["retina", "pgdl2020"])
def test_the_committed_tables_standard_errors_beside_flat_rows_are_read(kind_name):
    """PGDL's and Retina's tables keep a row's figures flat and their standard errors in
    ``se``: every phase is then checked, none 'not checked'."""
    spec = load_spec(KINDS[kind_name].DEFAULT_SPEC)
    found = methodology_report(spec, baseline_results_file(spec))
    checked = [n for n in found.notes if "weighted loss" in n]
    assert checked and not any("not checked" in n for n in checked), checked
    assert {w.id for w, _ in found.ignored} == {SMALL_TEST_SET}

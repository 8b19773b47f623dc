"""Competition rules: one module per rule on the build side (bundle/competition_rules/) and one
on the worker side (runtime/rules/), each registered by one line; the sd columns are the first."""
import dataclasses
import json
import math
import re

import pytest

from bundle import competition_rules
from bundle.phase_plan import phase_plan
from bundle.programs import scoring_config
from bundle.spec import load_spec
from kinds.kind import KINDS
from plans import embedded_phase
from runtime import failures, rules
from runtime.scoring import penalised
from scoring_program.scorer.config import ConfigError, parse_config, scores_file_keys
from test_kind_conformance import REPO, _lines, core_files

# The names the sd rule's code uses (the prose "sd" of the scorer's report and README only
# describes the column), and where they may stand: its two modules and the kind records,
# which declare the hooks it asks of a kind.
SD_WORDS = re.compile(r"\bhas_std\b|\bstd_description\b|STD_SUFFIX|worst_spread|statistic\W+\"std\"")
SD_ALLOWED = {"bundle/competition_rules/sd_columns.py", "runtime/rules/sd_columns.py",
              "kinds/kind.py"}
# The standard-error columns: their spec key and statistic (every kind measures a standard
# error; only writing it as a column is the rule's). The scorer's README names the key.
SE_WORDS = re.compile(r"standard_error_columns|statistic\W+\"se\"|STATISTIC = \"se\"")
SE_ALLOWED = {"bundle/competition_rules/se_columns.py", "runtime/rules/se_columns.py",
              "scoring_program/README.md"}      # which says how to ask for them
# The epoch budgets' checks, conversion, fields and texts: asking whether a kind times an
# epoch, timing one, reading what an epoch is, converting a budget, the budget in epochs and
# its conversion wherever they are carried (spec, plan, configs, run record), saying so on the
# pages and in the dry run. BDL's metrics say "calibration" too, but no core file does.
EPOCH_WORDS = re.compile(r"\btimes_epochs\b|\bepoch_seconds\b|\bEPOCH_UNIT\b|\bepoch_text\b|"
                         r"\bcalibrate\b|budget_epochs|epoch_unit|calibration|short_budgets")
EPOCH_ALLOWED = {"bundle/competition_rules/epoch_budgets.py", "runtime/rules/epoch_budgets.py",
                 "kinds/kind.py"}
# Public rows: its spec keys and fields, its full figures' statistics and private files, and
# the kind's flag. Besides its modules and the kind records, the platforms' own texts name
# the spec key (how an organizer reveals the figures on each site), and the fingerprint
# script hashes the private file by name, independently of the code it checks; the
# registries name the module once, to register it.
ROWS_WORDS = re.compile(r"\bpublic_rows\b|reveal_full_scores|full_value|full_weighted_loss|"
                        r"FULL_STATISTICS|full_scores|SCORES_PUBLIC_ROWS|scores_public_rows")
ROWS_ALLOWED = {"bundle/competition_rules/public_rows.py", "runtime/rules/public_rows.py",
                "kinds/kind.py", "bundle/platforms/codalab.py", "bundle/platforms/codabench.py",
                "scripts/fingerprint.py"}
# A registry's line naming a rule's module (``RULES = registered_modules(__name__, ...)``).
REGISTRATION = re.compile(r'^    "\w+",$')
REGISTRIES = {"bundle/competition_rules/__init__.py", "runtime/rules/__init__.py"}
# The gate's words: its spec key, its fields and config entries, its record entry, its exit.
# BDL's "convergence gate" (a check of its references) is another thing. The registries name
# the rule (their lists of rules, their RULES); the kind records declare its hook; the rule
# records give it as the example of their hooks for tasks run first.
GATE_WORDS = re.compile(r"(?<!convergence )\bgat(e|ed|es)\b|\bgate_\w+|_gate\b",
                        re.IGNORECASE)
GATE_ALLOWED = {"bundle/competition_rules/gate.py", "runtime/rules/gate.py", "kinds/kind.py",
                "bundle/competition_rules/__init__.py", "runtime/rules/__init__.py",
                "bundle/competition_rules/records.py", "runtime/rules/records.py"}
# Units' loop, checks and log lines: planning a task in units, asking the kind for them,
# the states of units not done. The child protocol's unit window (ingest/supervisor.py:
# UnitWindow, units_done, a unit's own kill) and the fields the outcome and the run record
# carry (``units``) are not among these words.
UNIT_WORDS = re.compile(r"\brun_in_units\b|\bunit_plan\b|\bnot_reached\b|\.units\(|\bunits\[")
UNIT_ALLOWED = {"runtime/rules/units.py", "kinds/kind.py"}
# The smoke test's names: its spec key, config and record entries, marker, folder and exit
# status. The core's docstrings may give it as the example of a hook; the kit's zip tool,
# the participants' side, writes the marker; the scorer's README says what exit 6 scores.
SMOKE_WORDS = re.compile(r"smoke_test|SMOKE_TEST|SMOKE_MARKER|--smoke|\bsmoke/")
SMOKE_ALLOWED = {"bundle/competition_rules/smoke_test.py", "runtime/rules/smoke_test.py",
                 "starting_kit/submission_zip.py", "scoring_program/README.md"}


def _names(registry):
    return [rule.name for rule in registry.RULES]


def test_each_rule_has_a_build_half_and_a_worker_half():
    """In the same order; only a rule with nothing to build has no build half."""
    worker_only = {"units"}
    assert _names(competition_rules) == [name for name in _names(rules) if name not in worker_only]


@pytest.mark.parametrize("words, allowed", [
    (SD_WORDS, SD_ALLOWED), (SE_WORDS, SE_ALLOWED), (EPOCH_WORDS, EPOCH_ALLOWED),
    (ROWS_WORDS, ROWS_ALLOWED), (GATE_WORDS, GATE_ALLOWED), (UNIT_WORDS, UNIT_ALLOWED),
    (SMOKE_WORDS, SMOKE_ALLOWED),
], ids=["sd_columns", "se_columns", "epoch_budgets", "public_rows", "gate", "units",
        "smoke_test"])
def test_a_rules_words_stand_only_in_its_modules_and_the_kind_records(words, allowed):
    """Besides the lines that register a rule, and the few places each rule's list allows."""
    hits = [f"{where}: {line.strip()}" for where, line in _lines(core_files())
            if words.search(line) and where.split(":")[0] not in allowed
            and not (where.split(":")[0] in REGISTRIES and REGISTRATION.match(line))]
    assert not hits, "\n".join(hits)


@pytest.fixture(scope="module")
def config():
    """The default competition's development phase: BDL, whose tasks have per-chain sds."""
    return scoring_config(embedded_phase("development", kind="bdl2021"))


def test_the_rule_adds_an_sd_column_after_each_metric_and_the_scorer_accepts_it(config):
    keys = [column["key"] for column in config["columns"]]
    sd = [column for column in config["columns"] if column["statistic"] in rules.column_statistics()]
    assert sd and all(keys[keys.index(c["key"]) - 1] == f"{c['task']}_{c['metric']}" for c in sd)
    assert [c.key for c in parse_config(config).columns] == keys


def test_an_sd_column_of_a_task_without_replicates_is_refused(config):
    raw = json.loads(json.dumps(config))
    sd = next(c for c in raw["columns"] if c["statistic"] in rules.column_statistics())
    task = next(t for t in raw["tasks"] if t["name"] == sd["task"])
    task["settings"]["chain_reference"] = None
    with pytest.raises(ConfigError, match=rf"task {sd['task']!r} has no sd to write"):
        parse_config(raw)


def test_a_penalised_task_gets_each_metrics_whole_range_as_its_sd(config):
    task = parse_config(config).tasks[0]
    result = penalised(task, "no prediction", None, cap=7.0, failure=failures.NOTHING)
    for score_type in task.score_types:
        upper = score_type.maximum if score_type.maximum is not None else 7.0
        assert math.isclose(result.metrics[score_type.name].std, upper - score_type.minimum)
        assert rules.column_value("std", result, score_type.name) == result.metrics[score_type.name].std


def _with_public_part(plan, rows: int):
    """The plan with its first task scored on a public part of ``rows`` test rows."""
    first, *others = plan.tasks
    return dataclasses.replace(plan, tasks=(
        dataclasses.replace(first, rules={**first.rules, "public_rows": rows}), *others))


def test_a_public_part_adds_hidden_full_columns_that_only_the_private_output_gets():
    plan = _with_public_part(embedded_phase("development", kind="bdl2021"), 5)
    raw = scoring_config(plan)
    task = plan.tasks[0].name
    private = [c for c in raw["columns"] if c["statistic"] in rules.private_statistics()]
    metrics = [c["metric"] for c in raw["columns"]
               if c["task"] == task and c["statistic"] == "value"]
    assert [c["key"] for c in private] == [f"{task}_{m}_full" for m in metrics] \
        + ["weighted_loss_full"]
    assert not set(scores_file_keys(raw)) & {c["key"] for c in private}
    parsed = parse_config(raw)
    assert parsed.private_keys == {"full": [c["key"] for c in private]}
    assert rules.score_options(parsed.task(task)) == {"rows": 5}
    assert rules.score_options(parsed.tasks[1]) == {}
    assert rules.result_notes(parsed.task(task))[0].startswith("scored on its first 5 test rows")
    assert not [c for c in raw["columns"] if c["statistic"] in rules.private_statistics()
                and c["task"] not in (task, None)]


def test_the_scorer_refuses_a_malformed_public_part_or_one_its_kind_cannot_score():
    raw = scoring_config(_with_public_part(embedded_phase("development", kind="bdl2021"), 5))
    raw["tasks"][0]["public_rows"] = 0
    with pytest.raises(ConfigError, match=r"tasks\[0\]\.public_rows: expected a positive integer"):
        parse_config(raw)
    spec = load_spec(KINDS["label_accuracy"].DEFAULT_SPEC)
    other = scoring_config(phase_plan(spec, spec.phases[0].key))
    other["tasks"][0]["public_rows"] = 5
    with pytest.raises(ConfigError, match=r"tasks\[0\]\.public_rows: this kind does not score"):
        parse_config(other)


def test_a_task_run_in_units_never_records_negative_training_seconds():
    """The units rule adds its children's wall times, rounded to the millisecond, and takes
    the first child's start-up from them: a task whose code began and took no time at all
    came out at -2.3e-05 s on a loaded machine (the organizer matrix, a PGDL zoo), and the
    scorer refused the record (``run_record._task_run``: "expected a non-negative number"),
    failing the submission. It is 0 now."""
    from ingestion_program.ingest.supervisor import TaskOutcome
    from runtime.rules import units

    class Contract:
        def check_output(self, merged, task, where):
            return merged, []

    child = TaskOutcome(status="ok", message="", wall_seconds=0.1000004,
                        predictions=None, prediction=None, startup_seconds=0.1000234,
                        training_seconds=0.0, units_done=1)
    combined = units._combined(object(), Contract(), [(0, child)], [units._DONE], None,
                               (("network_1",), 5.0))
    assert combined.wall_seconds == 0.1 and combined.training_seconds == 0.0
    never = dataclasses.replace(child, training_seconds=None)
    assert units._combined(object(), Contract(), [(0, never)], [units._DONE], None,
                           (("network_1",), 5.0)).training_seconds is None

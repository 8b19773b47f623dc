"""Competition rules, worker side: one module per rule, registered by one line in ``RULES``.

A competition rule (a phase's gate, public rows with full scores kept private, budgets in
epochs, units with their own hard limit, sd columns, a phase's smoke test) is one module
here, shipped in both programs with the rest of ``runtime/``, and one module of the same name
under ``bundle/competition_rules/`` on the build side, where it has anything to build (units
do not: the kind's own hook decides). Standard library and numpy only (this runs on the platform's
worker; a kind's own values reach a rule through the kind's records).

The scorer and the ingestion ask this registry, never a rule module, so the hooks' defaults
(what a rule without the hook means) live here and nowhere else. A rule module defines the
hooks it needs, all optional:

- ``COLUMN_STATISTICS``: the statistics (scoring config ``columns[].statistic``) the rule's
  leaderboard columns carry; each such column names a task and one of its metrics, which the
  scorer checks as it checks a metric's value column. Default: none.
- ``column_problem(statistic, task)``: why a config column of that statistic cannot be
  written for ``task`` (a ``runtime.scoring.TaskConfig``), or None. Default: no problem.
- ``column_value(statistic, result, metric)``: the column's value for a ``TaskResult``; a
  penalised task's result already holds the worst figures. Required with a statistic.
- ``worst_metric_fields(score_type, cap) -> dict``: the ``MetricResult`` fields the rule's
  columns read, at their worst, for a penalised task (``runtime.scoring.penalised``): a
  failed task must not rank well on a rule's column either. Default: none.

The ingestion and the scorer hold a rule's values without knowing them: ``TaskSpec.rules``,
``IngestionConfig.rules``, ``TaskConfig.rules`` and ``ScoringConfig.rules`` are mappings of
the rules' own field names (two rules may not use one name), read from the configs by:

- ``task_fields(raw_task, where)``, ``config_fields(raw, where)`` -> dict: from one task of
  the ingestion's config and from the config itself (what the build half's
  ``ingestion_task_entries`` / ``ingestion_config_entries`` wrote; ``where`` names the place
  in a problem); raise ``RuleError`` on a malformed entry. Default: none.
- ``scoring_task_fields(raw_task, where)``, ``scoring_config_fields(raw, where)`` -> dict:
  the same from the scoring config. Default: none.
- ``task_budget(task, data, contract)``: the ingestion's ``TaskSpec`` as it runs on this
  machine, after its data is staged and before the participant's code runs (epoch budgets:
  the budget converted to seconds here); raises ``RuleError`` when the organizer must fix the
  bundle. The child process gets the task's ``rules`` in its spec. Default: the task unchanged.
- ``record_fields(task) -> dict``: the rule's entries in the task's run record
  (``TaskRun.rules``), which the scorer's detailed results repeat. Default: none.
- ``task_notes(fields) -> list[str]``: what the log and the detailed results say of a task,
  from those entries. Default: nothing.

Figures kept from participants (public rows' full figures) and how a task is scored:

- ``PRIVATE_STATISTICS = {statistic: core statistic}``: the statistics of the rule's private
  columns, each the scorer's own ``value`` or ``weighted_loss`` computed on the private
  results: the tasks with rules' ``score_options`` scored again without them, the others'
  results as they are.
  Their values go to ``private/<PRIVATE_OUTPUT>_scores.txt`` (and ``.json``), with the
  private results' details in ``private/<PRIVATE_OUTPUT>_results.json``, never to the scores
  file: every column of it is public on Codabench. Default: none.
- ``PRIVATE_OUTPUT``: the stem of those files. Required with ``PRIVATE_STATISTICS``.
- ``score_options(task) -> dict``: keyword arguments the rule adds to the kind's
  ``score_task`` for what participants see (``TaskConfig``: ``task``). Default: none.
- ``result_notes(task) -> list[str]``: what the report and the log add to a task's result.
  Default: none.

A rule module imports ``records.py`` (``RuleError`` and the records hooks return), never this
registry.

A rule may run tasks of its own before the phase's, and fail the submission (the gate):

- ``config_tasks(raw, where, parse_tasks) -> dict``: ``IngestionConfig.rules`` entries that
  hold tasks, each list read by ``parse_tasks(raw_list, where)`` as the phase's are.
  Default: none.
- ``extra_tasks(config)``: the ``TaskSpec``s it runs besides the phase's (the run's worst
  case counts them). Default: none.
- ``run_first(config, contract, run_tasks) -> dict``: runs its tasks before the phase's,
  through ``run_tasks(tasks) -> [(task, outcome, run, problems)]`` (the core's own run of a
  task, writing no output; ``run``: the task's run as the record states it; ``problems``:
  the rules' ``outcome_problems``, so that a rule never asks this registry), and returns its
  entries in the run record (``RunRecord.rules``, top-level keys of the signed record).
  Default: none.
- ``record_entries(raw, where) -> dict``: its entries of a run record as read back (raise
  ``RuleError`` on a malformed one). Default: none.
- ``record_failure(entries) -> str | None``: why the submission fails, by those entries; the
  ingestion then runs none of the phase's tasks and both programs exit ``RULE_FAILED``.
  Default: none.
- ``unrun_failure(config) -> str | None``: why, in this phase (a ``ScoringConfig``), a
  submission whose code never ran fails rather than being scored at the worst. Default: none.
- ``outcome_problems(task, outcome) -> list[str]``: what the rule finds wrong with a task's
  ``TaskOutcome`` that ended ok (units: a unit not done in time), for a rule that needs the
  task complete. Default: none.

A rule may run other tasks instead of the phase's, scored apart and never ranked (the smoke
test), and refuse a submission outright:

- ``submission_refusal(config, submission) -> (reason, failure category) | None``: why the
  ingestion runs nothing of this submission (its folder ``submission``), refusing it as it
  refuses one that carries a command of its own; the record says why and the submission
  fails. Default: none.
- ``runs_instead(config, submission) -> RunInstead | None``: the tasks the ingestion runs
  instead of the phase's and of everything ``run_first`` would run, from ``$input/<folder>``
  into ``$output/<folder>``, and the rule's entries in the run record. Default: None.
- ``scoring_configs(raw, where, parse_config) -> dict``: ``ScoringConfig.rules`` entries that
  hold a scoring config of their own, each read by ``parse_config(raw, where)`` as the
  phase's is. Default: none.
- ``scores_instead(config, entries) -> ScoreInstead | None``: by the run record's entries
  (``RunRecord.rules``), what the scorer scores instead of the phase's tasks: ``ref/<folder>``
  against ``res/<folder>`` with its own config, the report under its own heading, the scores
  on stderr and no scores file, then the exit status it names. Default: None.

A rule may run a task its own way, each child the core's:

- ``task_runner(task, contract)``: how the task runs, a function of ``run_child`` returning
  its ``TaskOutcome``, where ``run_child(**window)`` runs one child over the task, within the
  supervisor's ``UnitWindow(**window)`` if given (units: one child per stretch of units, each
  unit under its own limit); None: the core runs the task in one child. Default: None.
- ``outcome_lines(task, outcome) -> list[str]``: what the ingestion's log says of a task's
  outcome besides the core's lines (units: how many were not done). Default: none.

"""
from __future__ import annotations

from . import epoch_budgets, gate, public_rows, sd_columns, se_columns, smoke_test, units
from .records import RuleError, RunInstead, ScoreInstead  # noqa: F401  (the rules' own names)

RULES = (
    sd_columns,
    se_columns,
    epoch_budgets,
    gate,
    public_rows,
    units,
    smoke_test,
)


def merged_hook(registered, hook: str, *args) -> dict:
    """Every rule's ``hook(*args)`` mapping among ``registered``, in one; two rules may not
    set one name (each rule's fields are its own, so the core holds them all in one mapping).
    The build side's registry gathers its hooks with it too."""
    merged: dict = {}
    for rule in registered:
        if hasattr(rule, hook):
            entries = getattr(rule, hook)(*args)
            clash = sorted(set(entries) & set(merged))
            if clash:
                raise RuleError(f"rule {rule.__name__}: {hook} sets {clash}, set by another rule")
            merged.update(entries)
    return merged


def listed_hook(registered, hook: str, *args) -> list:
    """Every rule's ``hook(*args)`` list among ``registered``, joined in their order."""
    return [item for rule in registered if hasattr(rule, hook)
            for item in getattr(rule, hook)(*args)]


def _merged(hook: str, *args) -> dict:
    return merged_hook(RULES, hook, *args)


def _listed(hook: str, *args) -> list:
    return listed_hook(RULES, hook, *args)


def column_statistics() -> tuple[str, ...]:
    """Every statistic a registered rule's columns carry (none by default)."""
    return tuple(statistic for rule in RULES for statistic in getattr(rule, "COLUMN_STATISTICS", ()))


def _owner(statistic: str):
    return next(rule for rule in RULES if statistic in getattr(rule, "COLUMN_STATISTICS", ()))


def worst_metric_fields(score_type, cap: float | None) -> dict:
    """The fields of a penalised task's ``MetricResult`` the rules set (none by default)."""
    fields = {}
    for rule in RULES:
        if hasattr(rule, "worst_metric_fields"):
            fields.update(rule.worst_metric_fields(score_type, cap))
    return fields


def column_problem(statistic: str, task) -> str | None:
    """Why the rule owning ``statistic`` cannot write its column for ``task``, or None."""
    rule = _owner(statistic)
    return rule.column_problem(statistic, task) if hasattr(rule, "column_problem") else None


def column_value(statistic: str, result, metric: str) -> float:
    """The value of a rule's column for one task's result."""
    return _owner(statistic).column_value(statistic, result, metric)


def task_budget(task, data, contract):
    """The task as the rules set it up to run on this machine (unchanged by default)."""
    for rule in RULES:
        if hasattr(rule, "task_budget"):
            task = rule.task_budget(task, data, contract)
    return task


def task_fields(raw_task: dict, where: str) -> dict:
    """``TaskSpec.rules``: the rules' fields of one task of the ingestion's config."""
    return _merged("task_fields", raw_task, where)


def config_fields(raw: dict, where: str) -> dict:
    """``IngestionConfig.rules``: the rules' fields of the ingestion's config."""
    return _merged("config_fields", raw, where)


def scoring_task_fields(raw_task: dict, where: str) -> dict:
    """``TaskConfig.rules``: the rules' fields of one task of the scoring config."""
    return _merged("scoring_task_fields", raw_task, where)


def scoring_config_fields(raw: dict, where: str) -> dict:
    """``ScoringConfig.rules``: the rules' fields of the scoring config."""
    return _merged("scoring_config_fields", raw, where)




def record_fields(task) -> dict:
    """``TaskRun.rules``: the rules' entries in a task's run record, from the task as it ran
    (after ``task_budget``); the scorer's detailed results repeat them (none by default)."""
    return _merged("record_fields", task)


def task_notes(fields: dict) -> list[str]:
    """What the ingestion's log and the detailed results say of a task, from its run record's
    rule entries (``TaskRun.rules``), in ``RULES`` order (none by default)."""
    return _listed("task_notes", fields)


def private_statistics() -> dict[str, str]:
    """Every private statistic of a registered rule, and the core statistic it is computed as."""
    merged: dict[str, str] = {}
    for rule in RULES:
        merged.update(getattr(rule, "PRIVATE_STATISTICS", {}))
    return merged


def private_output(statistic: str) -> str:
    """The stem of the private files that hold the columns of a private statistic."""
    return next(rule.PRIVATE_OUTPUT for rule in RULES
                if statistic in getattr(rule, "PRIVATE_STATISTICS", {}))


def score_options(task) -> dict:
    """The keyword arguments of the kind's ``score_task`` for what participants see."""
    return _merged("score_options", task)


def result_notes(task) -> list[str]:
    """What the rules say of a task's result in the report and the log, in ``RULES`` order."""
    return _listed("result_notes", task)


RULE_FAILED = 3     # both programs' exit status when a rule fails the submission


def config_tasks(raw: dict, where: str, parse_tasks) -> dict:
    """The ``IngestionConfig.rules`` entries that hold tasks, read by ``parse_tasks``."""
    return _merged("config_tasks", raw, where, parse_tasks)


def extra_tasks(config) -> tuple:
    """The tasks the rules run besides the phase's (none by default)."""
    return tuple(task for rule in RULES if hasattr(rule, "extra_tasks")
                 for task in rule.extra_tasks(config))


def run_first(config, contract, run_tasks) -> dict:
    """What the rules run before the phase's tasks: their entries in the run record."""
    return _merged("run_first", config, contract, run_tasks)


def record_entries(raw: dict, where: str) -> dict:
    """``RunRecord.rules``: the rules' entries of a run record as read."""
    return _merged("record_entries", raw, where)


def record_failure(entries: dict) -> str | None:
    """Why the rules fail the submission, by their run record entries; None: they do not."""
    return _first("record_failure", entries)


def unrun_failure(config) -> str | None:
    """Why a submission whose code never ran fails in this phase rather than scoring worst."""
    return _first("unrun_failure", config)


def outcome_problems(task, outcome) -> list[str]:
    """What the rules find wrong with a task's outcome that ended ok (none by default)."""
    return [problem for rule in RULES if hasattr(rule, "outcome_problems")
            for problem in rule.outcome_problems(task, outcome)]


def _first(hook: str, *args):
    return next((found for rule in RULES if hasattr(rule, hook)
                 for found in [getattr(rule, hook)(*args)] if found), None)


def task_runner(task, contract):
    """How a rule runs this task (a function of the core's ``run_child``), or None: whole."""
    return _first("task_runner", task, contract)


def outcome_lines(task, outcome) -> list[str]:
    """The rules' lines on a task's outcome in the ingestion's log, in ``RULES`` order."""
    return [line for rule in RULES if hasattr(rule, "outcome_lines")
            for line in rule.outcome_lines(task, outcome)]


def submission_refusal(config, submission) -> tuple[str, str] | None:
    """Why a rule refuses the submission before anything of it runs, and its failure
    category; None: no rule does."""
    return _first("submission_refusal", config, submission)


def runs_instead(config, submission) -> RunInstead | None:
    """The tasks a rule runs instead of the phase's, or None: the phase's run."""
    return _first("runs_instead", config, submission)


def output_folders(config) -> list[str]:
    """The folders of the ingestion's output that the phase's rules may write (a rule's tasks
    run instead of the phase's go to one): names a submission must not hold where the worker
    copies it over that output."""
    return _listed("output_folders", config)


def scoring_configs(raw: dict, where: str, parse_config) -> dict:
    """The ``ScoringConfig.rules`` entries that hold scoring configs, read by ``parse_config``."""
    return _merged("scoring_configs", raw, where, parse_config)


def scores_instead(config, entries: dict) -> ScoreInstead | None:
    """What the scorer scores instead of the phase's tasks, by the run record's entries."""
    return _first("scores_instead", config, entries)

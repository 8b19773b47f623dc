"""Competition rules, worker side: one module per rule, registered by one line in ``RULES``.

A competition rule (a phase's gate, public rows with full scores kept private, budgets in
epochs, units with their own hard limit, sd columns, a phase's smoke test) is one module
here, shipped in both programs with the rest of ``runtime/``, and one module of the same name
under ``bundle/competition_rules/`` on the build side, where it has anything to build (units
do not: the kind's own hook decides). Standard library and numpy only (this runs on the platform's
worker; a kind's own values reach a rule through the kind's records).

A rule is a frozen record, ``WorkerRule`` (``records.py``), which its module makes at its end
(``RULE = WorkerRule(name=..., hook=function, ...)``) and this registry holds by its module's
name, checked when registered (``records.registered_modules``). The record's fields are the
hooks, each described there with what its absence means. The scorer and the ingestion ask
this registry, never a rule, so those defaults are applied here and nowhere else.

A rule module imports ``records.py`` (``RuleError`` and the records hooks return), never this
registry.
"""
from __future__ import annotations

from .records import RuleError, Run  # noqa: F401  (the rules' own names)
from .records import WorkerRule, field_name, registered  # noqa: F401  (a rule's record)
from .records import registered_modules

# One line per rule: the module's name (its RULE is imported and checked), in the order the
# core applies them; the build side's registry lists its halves in the same order.
RULES = registered_modules(
    __name__,
    "sd_columns",
    "se_columns",
    "epoch_budgets",
    "gate",
    "public_rows",
    "units",
    "smoke_test",
)


def merged_hook(rules, hook, *args) -> dict:
    """Every rule's ``hook(rule)(*args)`` mapping among ``rules``, in one, where ``hook(rule)``
    is the rule's field (None: the rule has none); two rules may not set one name (each rule's
    fields are its own, so the core holds them all in one mapping). The build side's registry
    gathers its hooks with it too."""
    merged: dict = {}
    for rule in rules:
        function = hook(rule)
        if function is not None:
            entries = function(*args)
            clash = sorted(set(entries) & set(merged))
            if clash:
                raise RuleError(f"rule {rule.name}: {field_name(rule, function)} sets {clash}, "
                                "set by another rule")
            merged.update(entries)
    return merged


def listed_hook(rules, hook, *args) -> list:
    """Every rule's ``hook(rule)(*args)`` list among ``rules``, joined in their order."""
    return [item for rule in rules for function in [hook(rule)] if function is not None
            for item in function(*args)]


def first_hook(rules, hook, *args):
    """The first rule's ``hook(rule)(*args)`` among ``rules`` that is not empty, or None."""
    return next((found for rule in rules for function in [hook(rule)] if function is not None
                 for found in [function(*args)] if found), None)


def _merged(hook, *args) -> dict:
    return merged_hook(RULES, hook, *args)


def _listed(hook, *args) -> list:
    return listed_hook(RULES, hook, *args)


def _first(hook, *args):
    return first_hook(RULES, hook, *args)


def column_statistics() -> tuple[str, ...]:
    """Every statistic a registered rule's columns carry (none by default)."""
    return tuple(statistic for rule in RULES for statistic in rule.COLUMN_STATISTICS)


def _owner(statistic: str):
    return next(rule for rule in RULES if statistic in rule.COLUMN_STATISTICS)


def worst_metric_fields(score_type, cap: float | None) -> dict:
    """The fields of a penalised task's ``MetricResult`` the rules set (none by default)."""
    fields = {}
    for rule in RULES:
        if rule.worst_metric_fields is not None:
            fields.update(rule.worst_metric_fields(score_type, cap))
    return fields


def column_problem(statistic: str, task) -> str | None:
    """Why the rule owning ``statistic`` cannot write its column for ``task``, or None."""
    rule = _owner(statistic)
    return rule.column_problem(statistic, task) if rule.column_problem is not None else None


def column_value(statistic: str, result, metric: str) -> float:
    """The value of a rule's column for one task's result."""
    return _owner(statistic).column_value(statistic, result, metric)


def task_budget(task, data, contract):
    """The task as the rules set it up to run on this machine (unchanged by default)."""
    for rule in RULES:
        if rule.task_budget is not None:
            task = rule.task_budget(task, data, contract)
    return task


def task_fields(raw_task: dict, where: str) -> dict:
    """``TaskSpec.rules``: the rules' fields of one task of the ingestion's config."""
    return _merged(lambda rule: rule.task_fields, raw_task, where)


def config_fields(raw: dict, where: str) -> dict:
    """``IngestionConfig.rules``: the rules' fields of the ingestion's config."""
    return _merged(lambda rule: rule.config_fields, raw, where)


def scoring_task_fields(raw_task: dict, where: str) -> dict:
    """``TaskConfig.rules``: the rules' fields of one task of the scoring config."""
    return _merged(lambda rule: rule.scoring_task_fields, raw_task, where)


def scoring_config_fields(raw: dict, where: str) -> dict:
    """``ScoringConfig.rules``: the rules' fields of the scoring config."""
    return _merged(lambda rule: rule.scoring_config_fields, raw, where)


def record_fields(task) -> dict:
    """``TaskRun.rules``: the rules' entries in a task's run record, from the task as it ran
    (after ``task_budget``); the scorer's detailed results repeat them (none by default)."""
    return _merged(lambda rule: rule.record_fields, task)


def task_notes(fields: dict) -> list[str]:
    """What the ingestion's log and the detailed results say of a task, from its run record's
    rule entries (``TaskRun.rules``), in ``RULES`` order (none by default)."""
    return _listed(lambda rule: rule.task_notes, fields)


def private_statistics() -> dict[str, str]:
    """Every private statistic of a registered rule, and the core statistic it is computed as."""
    merged: dict[str, str] = {}
    for rule in RULES:
        merged.update(rule.PRIVATE_STATISTICS)
    return merged


def private_output(statistic: str) -> str:
    """The stem of the private files that hold the columns of a private statistic."""
    return next(rule.PRIVATE_OUTPUT for rule in RULES
                if statistic in rule.PRIVATE_STATISTICS)


def score_options(task) -> dict:
    """The keyword arguments of ``runtime.scoring.score_task`` for what participants see."""
    return _merged(lambda rule: rule.score_options, task)


def result_notes(task) -> list[str]:
    """What the rules say of a task's result in the report and the log, in ``RULES`` order."""
    return _listed(lambda rule: rule.result_notes, task)


RULE_FAILED = 3     # both programs' exit status when a rule fails the submission


def config_tasks(raw: dict, where: str, parse_tasks) -> dict:
    """The ``IngestionConfig.rules`` entries that hold tasks, read by ``parse_tasks``."""
    return _merged(lambda rule: rule.config_tasks, raw, where, parse_tasks)


PHASE_RUN = "phase"     # the name of the phase's own run


def _placed(found: list, own: Run) -> list:
    """The runs in order: the rules' (``RULES`` order), then the phase's own; a run that runs
    ``instead`` of the others alone (the first such)."""
    instead = [run for run in found if run.instead]
    return instead[:1] if instead else [*found, own]


def runs(config, submission) -> list:
    """What the ingestion runs for this submission (its folder; None: a submission that asks
    for nothing, as the run's worst case counts it), in order (``records.Run``)."""
    return _placed(_listed(lambda rule: rule.runs, config, submission),
                   Run(name=PHASE_RUN, tasks=config.tasks))


def record_entries(raw: dict, where: str) -> dict:
    """``RunRecord.rules``: the rules' entries of a run record as read."""
    return _merged(lambda rule: rule.record_entries, raw, where)


def outcome_problems(task, outcome) -> list[str]:
    """What the rules find wrong with a task's outcome that ended ok (none by default)."""
    return _listed(lambda rule: rule.outcome_problems, task, outcome)


def task_runner(task, contract):
    """How a rule runs this task (a function of the core's ``run_child``), or None: whole."""
    return _first(lambda rule: rule.task_runner, task, contract)


def outcome_lines(task, outcome) -> list[str]:
    """The rules' lines on a task's outcome in the ingestion's log, in ``RULES`` order."""
    return _listed(lambda rule: rule.outcome_lines, task, outcome)


def submission_refusal(config, submission) -> tuple[str, str] | None:
    """Why a rule refuses the submission before anything of it runs, and its failure
    category; None: no rule does."""
    return _first(lambda rule: rule.submission_refusal, config, submission)


def output_folders(config) -> list[str]:
    """The folders of the ingestion's output that the phase's rules may write (their runs'):
    names a submission must not hold where the worker copies it over that output."""
    return _listed(lambda rule: rule.output_folders, config)


def scoring_configs(raw: dict, where: str, parse_config) -> dict:
    """The ``ScoringConfig.rules`` entries that hold scoring configs, read by ``parse_config``."""
    return _merged(lambda rule: rule.scoring_configs, raw, where, parse_config)


def record_runs(config, entries: dict | None) -> list:
    """What the scorer finds run, by the run record's entries (None: the code never ran, though
    the phase runs code), in order (``records.Run``): the phase's own run is scored with
    ``config``."""
    return _placed(_listed(lambda rule: rule.record_runs, config, entries),
                   Run(name=PHASE_RUN, config=config))

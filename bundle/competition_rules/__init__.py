"""Competition rules, build side: one module per rule, registered by one line in ``RULES``.

A competition rule is what a competition asks beyond scoring predictions: a phase's gate
(a final phase with one submission must run its code), public rows with the full scores kept
private, budgets in epochs, units each under their own hard limit, sd columns, a phase's smoke
test (a trial run on public data, scored but never ranked). Each is one
module here and one module of the same name in the shipped ``runtime/rules/`` (the worker
side: what the ingestion and the scorer do), so a new rule is its two modules plus one line in
each ``RULES``, and its kind's values (hooks on the ``Kind`` record) where it needs any. A rule
with nothing to build (units) has its worker module only.

A rule is a frozen record, ``BuildRule`` (``records.py``), which its module makes at its end
(``RULE = BuildRule(name=..., hook=function, ...)``) and this registry holds by its module's
name, checked when registered (``runtime.rules.records.registered_modules``). The record's
fields are the hooks, each described there with what its absence means. The core asks this registry, never a rule, for
every registered rule; those defaults are applied here and nowhere else. A rule imports neither
this registry nor the core: what it needs of them is handed to its hook (``load_task``,
``planned``, ``stand_in``, ``config_of``, ``budget_facts``).

Every rule named above is on this seam. ``docs/extending.md``, "Adding a rule", says which
hooks each uses and every step of adding one.
"""
from __future__ import annotations

from runtime.rules import listed_hook, merged_hook
from runtime.rules.records import registered_modules

from .records import BuildRule  # noqa: F401  (a rule's record)

# One line per rule: the module's name, in the worker side's order (a rule with nothing to
# build, units, has no line here).
RULES = registered_modules(
    __name__,
    "sd_columns",
    "se_columns",
    "epoch_budgets",
    "gate",
    "public_rows",
    "smoke_test",
)


def _listed(hook, *args) -> list:
    return listed_hook(RULES, hook, *args)


def _merged(hook, *args) -> dict:
    return merged_hook(RULES, hook, *args)


def spec_keys() -> list[tuple[str, dict]]:
    """The rules' spec key records: (where in the spec's keys, e.g. ``tasks.<task>``, {name:
    ``bundle.spec_key.Key``}), which ``bundle/spec_schema.py`` adds to its own."""
    return [(where, keys) for rule in RULES for where, keys in rule.SPEC_KEYS.items()]


def spec_values(spec: dict) -> dict:
    """``CompetitionSpec.rules``: what the rules read from a valid spec, its defaults filled."""
    return _merged(lambda rule: rule.spec_values, spec)


def spec_problems(raw: dict, data_root, load_task) -> list[str]:
    """The rules' problems with a spec's keys, in ``RULES`` order (none by default);
    ``load_task(name)``: the spec's task as the core plans it."""
    return _listed(lambda rule: rule.spec_problems, raw, data_root, load_task)


def metric_columns(plan, task, metric, value_column) -> list:
    """The columns the rules add after one metric's value column, in ``RULES`` order."""
    return _listed(lambda rule: rule.metric_columns, plan, task, metric, value_column)


def plan_task(spec, name: str, spec_budgets: bool) -> dict:
    """``PlannedTask.rules`` of one task (empty by default)."""
    return _merged(lambda rule: rule.plan_task, spec, name, spec_budgets)


def plan_phase(spec, phase_key: str, code: bool) -> dict:
    """``PhasePlan.rules`` of a phase (empty by default); ``code``: its tasks run as code."""
    return _merged(lambda rule: rule.plan_phase, spec, phase_key, code)


def seconds_budget(rules: dict) -> dict:
    """A task's ``PlannedTask.rules`` once its budget is given in seconds instead (local runs,
    tests): a rule drops what then no longer holds (default: all kept)."""
    for rule in RULES:
        if rule.seconds_budget is not None:
            rules = rule.seconds_budget(rules)
    return rules


def budget_text(task) -> str | None:
    """A task's budget as the pages state it, where a rule states it (else None: seconds)."""
    return next((text for rule in RULES if rule.budget_text is not None
                 for text in [rule.budget_text(task)] if text), None)


def budget_facts(tasks) -> list[str]:
    """What the rules say of these tasks' budgets on the pages, in ``RULES`` order."""
    return _listed(lambda rule: rule.budget_facts, tasks)


def ingestion_task_entries(task) -> dict:
    """The rules' entries in one task of the ingestion's config."""
    return _merged(lambda rule: rule.ingestion_task_entries, task)


def scoring_task_entries(task) -> dict:
    """The rules' entries in one task of the scoring config."""
    return _merged(lambda rule: rule.scoring_task_entries, task)


def ingestion_config_entries(plan) -> dict:
    """The rules' top-level entries in the ingestion's config."""
    return _merged(lambda rule: rule.ingestion_config_entries, plan)


def scoring_config_entries(plan, config_of) -> dict:
    """The rules' top-level entries in the scoring config; ``config_of(name, tasks)``: the
    core's whole scoring config of the plan run on those tasks alone."""
    return _merged(lambda rule: rule.scoring_config_entries, plan, config_of)


def page_facts(plan) -> dict:
    """What the rules give the pages' and the kit's templates for one phase (the rule's own
    names: its module's docstring says which)."""
    return _merged(lambda rule: rule.page_facts, plan)


def dry_run_notes(output) -> list[str]:
    """What the rules note of a dry run's scoring output folder (not failures), in ``RULES``
    order (none by default)."""
    return _listed(lambda rule: rule.dry_run_notes, output)


def task_columns(plan, task, columns) -> list:
    """The columns the rules add after a task's own, in ``RULES`` order."""
    return _listed(lambda rule: rule.task_columns, plan, task, columns)


def aggregate_columns(plan, aggregate) -> list:
    """The columns the rules add after the weighted loss column, in ``RULES`` order."""
    return _listed(lambda rule: rule.aggregate_columns, plan, aggregate)


def phase_facts(plan) -> list[tuple[str, str]]:
    """The (label, text) facts the rules add to a phase's on the pages, in ``RULES`` order;
    each rule is handed ``budget_facts``, the rules' words on a list of tasks' budgets."""
    return _listed(lambda rule: rule.phase_facts, plan, budget_facts)


def withholds_figures(spec) -> bool:
    """Whether a rule keeps figures from participants until the organizer rebuilds."""
    return any(rule.withholds_figures(spec) for rule in RULES if rule.withholds_figures is not None)


def plan_phase_tasks(spec, phase_key: str, code: bool, planned, stand_in) -> dict:
    """The entries of ``PhasePlan.rules`` that hold tasks, planned by ``planned(names)`` or
    made by ``stand_in(tasks, work)``, the kit's public stand-in of planned tasks."""
    return _merged(lambda rule: rule.plan_phase_tasks, spec, phase_key, code, planned,
                   stand_in)


def replace_tasks(rules: dict, change) -> dict:
    """A phase's ``PhasePlan.rules`` with every task list the rules hold passed through
    ``change(tasks) -> tasks`` (default: unchanged)."""
    for rule in RULES:
        if rule.replace_tasks is not None:
            rules = rule.replace_tasks(rules, change)
    return rules


def extra_tasks(plan) -> tuple:
    """The tasks the ingestion runs besides the phase's, in ``RULES`` order (none by default)."""
    return tuple(_listed(lambda rule: rule.extra_tasks, plan))


def spec_extra_tasks(raw: dict, phase_key: str) -> dict[str, list[str]]:
    """{what they are: task names} the rules add to a run of a phase of a valid spec."""
    return _merged(lambda rule: rule.spec_extra_tasks, raw, phase_key)


def ingestion_config_tasks(plan, entry) -> dict:
    """The rules' top-level ingestion config entries that hold tasks, each by ``entry(task)``."""
    return _merged(lambda rule: rule.ingestion_config_tasks, plan, entry)


def ingestion_config_extra_tasks(config: dict) -> list[dict]:
    """The task entries of a written ingestion config that run besides the phase's."""
    return _listed(lambda rule: rule.ingestion_config_extra_tasks, config)


def public_tasks_apart(plan) -> dict[str, tuple]:
    """{folder: tasks} the rules stage apart in the input and reference data, made of public
    data only (none by default)."""
    return _merged(lambda rule: rule.public_tasks_apart, plan)


def kit_steps(plan, sample: str) -> list[dict]:
    """The commands the rules add to the kit's steps, in ``RULES`` order (none by default)."""
    return _listed(lambda rule: rule.kit_steps, plan, sample)


def dry_run_submissions(ingestion_config: dict) -> list[tuple[str, list[str], int]]:
    """The sample code's variants the dry run also sends, and the scorer's expected exit."""
    return _listed(lambda rule: rule.dry_run_submissions, ingestion_config)


def not_checked() -> list[str]:
    """What the dry run does not reproduce of the rules (nothing by default)."""
    return [line for rule in RULES for line in rule.NOT_CHECKED]

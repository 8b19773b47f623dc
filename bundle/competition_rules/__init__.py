"""Competition rules, build side: one module per rule, registered by one line in ``RULES``.

A competition rule is what a competition asks beyond scoring predictions: a phase's gate
(a final phase with one submission must run its code), public rows with the full scores kept
private, budgets in epochs, units each under their own hard limit, sd columns. Each is one
module here and one module of the same name in the shipped ``runtime/rules/`` (the worker
side: what the ingestion and the scorer do), so a new rule is its two modules plus one line in
each ``RULES``, and its kind's values (hooks on the ``Kind`` record) where it needs any.

The core asks this registry, never a rule module, for every registered rule; the hooks'
defaults (what a rule without the hook means) live here and nowhere else. A rule module
defines the hooks it needs, all optional:

- ``metric_columns(plan, task, metric, value_column)``: leaderboard columns to put after a
  task's metric's value column (a ``bundle.leaderboard.LeaderboardColumn``, which a rule
  derives its own from with ``dataclasses.replace``). Their ``statistic`` must be one of the
  worker-side rule's ``COLUMN_STATISTICS``. Default: none.
- ``spec_problems(raw, data_root)``: what is wrong, by meaning, with the rule's keys of a spec
  that passed the schema (``raw``: the spec as loaded), as ``bundle.spec`` states problems.
  Default: none.
- ``plan_task(spec, name, spec_budgets) -> dict``: the ``bundle.phase_plan.TaskPlan`` fields
  the rule sets for task ``name`` (``spec_budgets``: whether it runs as code under the spec's
  budgets, not a budget in seconds given instead). Default: none.
- ``ingestion_task_entries(task) -> dict``: the rule's entries in a task of the ingestion's
  config (``bundle.programs.ingestion_config``; ``task``: a ``TaskPlan``), which the
  worker-side rule's ``task_fields`` reads back. Default: none.
- ``budget_facts(tasks) -> list[str]``: what the pages add, once for a list of a phase's (or
  its gate's) ``TaskPlan``s, to the tasks' budgets (``TaskPlan.budget_text``): epoch budgets
  say what an epoch is. Default: none.

Hooks the other rules would add when they move here (each is still spread over the spec, the
phase plan, the programs, the pages and the worker today; see ``docs/architecture.md``,
"Rules"):

- ``SPEC_KEYS``: ``bundle/spec_schema.py`` records for the rule's keys (gate: a phase's
  ``final`` and submission limit; public rows: ``public_rows``; epochs: ``budget_epochs``),
  which spec_schema would gather from this registry;
- ``plan_phase(spec, phase) -> dict``: the fields the rule adds to the phase plan (``gated``;
  public rows' ``public_rows`` would use ``plan_task``);
- ``scoring_config(plan) -> dict`` and ``ingestion_config(plan) -> dict``: its entries in the
  programs' configs (``bundle/programs.py``: ``gated``, ``public_rows``, units);
- ``phase_columns(plan, columns)``: columns for the whole phase (public rows' hidden
  full_weighted_loss);
- ``page_facts(plan) -> dict``: what the pages and the kit's guide say of it
  (``bundle/render.py`` and the templates: the gate's warning).
"""
from __future__ import annotations

from . import epoch_budgets, sd_columns

RULES = (
    sd_columns,
    epoch_budgets,
)


def metric_columns(plan, task, metric, value_column) -> list:
    """The columns the rules add after one metric's value column, in ``RULES`` order."""
    return [column for rule in RULES if hasattr(rule, "metric_columns")
            for column in rule.metric_columns(plan, task, metric, value_column)]


def spec_problems(raw: dict, data_root) -> list[str]:
    """The rules' problems with a spec's keys, in ``RULES`` order (none by default)."""
    return [problem for rule in RULES if hasattr(rule, "spec_problems")
            for problem in rule.spec_problems(raw, data_root)]


def budget_facts(tasks) -> list[str]:
    """What the rules say of these tasks' budgets on the pages, in ``RULES`` order."""
    return [fact for rule in RULES if hasattr(rule, "budget_facts")
            for fact in rule.budget_facts(tasks)]


def ingestion_task_entries(task) -> dict:
    """The rules' entries in one task of the ingestion's config, in ``RULES`` order."""
    entries = {}
    for rule in RULES:
        if hasattr(rule, "ingestion_task_entries"):
            entries.update(rule.ingestion_task_entries(task))
    return entries


def plan_task(spec, name: str, spec_budgets: bool) -> dict:
    """The ``TaskPlan`` fields the rules set for one task (none by default)."""
    fields = {}
    for rule in RULES:
        if hasattr(rule, "plan_task"):
            fields.update(rule.plan_task(spec, name, spec_budgets))
    return fields

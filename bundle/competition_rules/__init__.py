"""Competition rules, build side: one module per rule, registered by one line in ``RULES``.

A competition rule is what a competition asks beyond scoring predictions: a phase's gate
(a final phase with one submission must run its code), public rows with the full scores kept
private, budgets in epochs, units each under their own hard limit, sd columns, a phase's smoke
test (a trial run on public data, scored but never ranked). Each is one
module here and one module of the same name in the shipped ``runtime/rules/`` (the worker
side: what the ingestion and the scorer do), so a new rule is its two modules plus one line in
each ``RULES``, and its kind's values (hooks on the ``Kind`` record) where it needs any. A rule
with nothing to build (units) has its worker module only.

The core asks this registry, never a rule module, for every registered rule; the hooks'
defaults (what a rule without the hook means) live here and nowhere else. The core holds a
rule's values without knowing them: ``CompetitionSpec.rules``, ``PlannedTask.rules`` and
``PhasePlan.rules`` are mappings of the rules' own field names (two rules may not use one
name). A rule module defines the hooks it needs, all optional:

- ``SPEC_KEYS = {where: {name: Key}}``: the rule's spec keys (``bundle.spec_key.Key``), added
  by ``bundle/spec_schema.py`` to the mapping at ``where`` (``""``: the top level;
  ``tasks.<task>``; ``phases.<phase>``), so the schema, the defaults and the reference page
  have them. Default: none.
- ``spec_problems(raw, data_root)``: what is wrong, by meaning, with the rule's keys of a spec
  that passed the schema (``raw``: the spec as loaded), as ``bundle.spec`` states problems.
  Default: none.
- ``spec_values(raw) -> dict``: the rule's entries in ``CompetitionSpec.rules``, read from
  the valid spec (defaults filled). Default: none.
- ``plan_task(spec, name, spec_budgets) -> dict``: the rule's entries in
  ``PlannedTask.rules`` of task ``name`` (``spec_budgets``: whether it runs as code under the
  spec's budgets, not a budget in seconds given instead). Default: none.
- ``plan_phase(spec, phase_key, code) -> dict``: the rule's entries in ``PhasePlan.rules``
  (``code``: the phase's tasks run as code). Default: none.
- ``metric_columns(plan, task, metric, value_column)``: leaderboard columns to put after a
  task's metric's value column (a ``bundle.leaderboard.LeaderboardColumn``, which a rule
  derives its own from with ``dataclasses.replace``). Their ``statistic`` must be one of the
  worker-side rule's ``COLUMN_STATISTICS``. Default: none.
- ``ingestion_task_entries(task)``, ``scoring_task_entries(task)`` -> dict: the rule's
  entries in one task of the ingestion's or the scoring config (``bundle/programs.py``;
  ``task``: a ``PlannedTask``), which the worker-side rule's ``task_fields`` /
  ``scoring_task_fields`` read back. Default: none.
- ``ingestion_config_entries(plan)``, ``scoring_config_entries(plan)`` -> dict: the rule's
  top-level entries in those configs, read back by ``config_fields`` /
  ``scoring_config_fields``. Default: none.
- ``seconds_budget(rules) -> dict``: a task's ``PlannedTask.rules`` once its budget is given
  in seconds instead of the spec's (``bundle.phase_plan.with_budget``). Default: unchanged.
- ``budget_text(task) -> str | None``: a task's budget as the pages state it, where the rule
  states it otherwise than in seconds. Default: seconds.
- ``budget_facts(tasks) -> list[str]``: what the pages add, once for a list of a phase's (or
  its gate's) ``PlannedTask``s, to the tasks' budgets: epoch budgets say what an epoch is.
  Default: none.
- ``page_facts(plan) -> dict``: what the rule gives the pages' and the kit's templates for a
  phase, under its own names. Default: none.
- ``dry_run_notes(output) -> list[str]``: what the dry run notes (not a failure) of a scoring
  output folder: epoch budgets, a conversion too short to time. Default: none.
- ``task_columns(plan, task, columns)``: leaderboard columns to put after a task's own
  (``columns``: the task's columns so far, its metrics' and the rules' included), derived
  from them as ``metric_columns`` does. A column the rule keeps from participants is
  ``hidden``: its ``statistic`` is one of the worker-side rule's ``PRIVATE_STATISTICS``.
  Default: none.
- ``aggregate_columns(plan, aggregate)``: columns to put after the weighted loss column
  (``aggregate``), as ``task_columns``. Default: none.
- ``phase_facts(plan) -> list[tuple[str, str]]``: (label, text) facts the pages add to a
  phase's facts, before its metric weights (the gate: what runs first; public rows: what is
  scored during the phase). Default: none.
- ``withholds_figures(spec) -> bool``: whether the built bundles keep figures from
  participants until the organizer rebuilds (the build's summary then says how to reveal
  them, in the platform's words). Default: False.

A rule that runs tasks of its own besides the phase's (the gate: an earlier phase's, first)
holds them in ``PhasePlan.rules`` and is given the core's own way with tasks, so they are
planned, written and staged as the phase's are:

- ``plan_phase_tasks(spec, phase_key, code, planned) -> dict``: the rule's entries in
  ``PhasePlan.rules`` that hold tasks, made with ``planned(names)`` (the phase's own task
  planning). Default: none.
- ``replace_tasks(rules, change) -> dict``: a phase's ``PhasePlan.rules`` with each task list
  the rule holds passed through ``change(tasks) -> tasks`` (a budget given in seconds; the
  kit's stand-in runs none); an empty list is no such tasks. Default: unchanged.
- ``extra_tasks(plan)``: the ``PlannedTask``s the ingestion runs besides the phase's, whose
  inputs are staged with theirs. Default: none.
- ``spec_extra_tasks(raw, phase_key) -> {what: [task names]}``: the same from a spec that
  passed the schema, for the phase's time limit check. Default: none.
- ``ingestion_config_tasks(plan, entry) -> dict``: the rule's top-level entries in the
  ingestion's config that hold tasks, each written by ``entry(task)`` as the phase's are
  (read back by the worker half's ``config_tasks``). Default: none.
- ``ingestion_config_extra_tasks(config) -> list[dict]``: the task entries of a written
  ingestion config (a bundle's) that the rule runs besides the phase's, for the platform
  rules' time limit checks. Default: none.

A rule that runs other tasks instead of the phase's on request (the smoke test: public data
shaped like the phase's tasks, scored but never ranked) says where they are staged and how the
kit and the dry run take part:

- ``public_tasks_apart(plan) -> {folder: [PlannedTask]}``: tasks made of public data only,
  whose inputs and references are staged in ``folder`` of the phase's input and reference
  data (the worker half's ``runs_instead`` runs them from there); the leakage check does not
  count those references as hidden. Default: none.
- ``kit_steps(plan, sample) -> list[dict]``: commands the starting kit page and guide add
  after the core's (``{command, does}``, as ``render._kit_steps`` makes them), run from the
  unzipped kit's folder on its sample folder ``sample``; each must run as written. Default:
  none.
- ``dry_run_submissions(ingestion_config) -> [(label, kit tool options, exit status)]``: the
  kit's sample code zipped again by the kit's ``submission_zip.py`` with those options, which
  the dry run also sends to the phase (whose written ingestion config is given), expecting
  the scorer to exit with that status after writing its report and no scores file.
  Default: none.
- ``NOT_CHECKED``: what the dry run does not reproduce of the rule, added to its list.
  Default: nothing.

Every rule named above is on this seam. ``docs/extending.md``, "Adding a rule", says which
hooks each uses and every step of adding one.
"""
from __future__ import annotations

from runtime.rules import listed_hook, merged_hook

from . import epoch_budgets, gate, public_rows, sd_columns, se_columns, smoke_test

RULES = (
    sd_columns,
    se_columns,
    epoch_budgets,
    gate,
    public_rows,
    smoke_test,
)


def _listed(hook: str, *args) -> list:
    return listed_hook(RULES, hook, *args)


def _merged(hook: str, *args) -> dict:
    return merged_hook(RULES, hook, *args)


def spec_keys() -> list[tuple[str, dict]]:
    """The rules' spec key records: (where in the spec's keys, e.g. ``tasks.<task>``, {name:
    ``bundle.spec_key.Key``}), which ``bundle/spec_schema.py`` adds to its own."""
    return [(where, keys) for rule in RULES for where, keys in getattr(rule, "SPEC_KEYS", {}).items()]


def spec_values(spec: dict) -> dict:
    """``CompetitionSpec.rules``: what the rules read from a valid spec, its defaults filled."""
    return _merged("spec_values", spec)


def spec_problems(raw: dict, data_root) -> list[str]:
    """The rules' problems with a spec's keys, in ``RULES`` order (none by default)."""
    return _listed("spec_problems", raw, data_root)


def metric_columns(plan, task, metric, value_column) -> list:
    """The columns the rules add after one metric's value column, in ``RULES`` order."""
    return _listed("metric_columns", plan, task, metric, value_column)


def plan_task(spec, name: str, spec_budgets: bool) -> dict:
    """``PlannedTask.rules`` of one task (empty by default)."""
    return _merged("plan_task", spec, name, spec_budgets)


def plan_phase(spec, phase_key: str, code: bool) -> dict:
    """``PhasePlan.rules`` of a phase (empty by default); ``code``: its tasks run as code."""
    return _merged("plan_phase", spec, phase_key, code)


def seconds_budget(rules: dict) -> dict:
    """A task's ``PlannedTask.rules`` once its budget is given in seconds instead (local runs,
    tests): a rule drops what then no longer holds (default: all kept)."""
    for rule in RULES:
        if hasattr(rule, "seconds_budget"):
            rules = rule.seconds_budget(rules)
    return rules


def budget_text(task) -> str | None:
    """A task's budget as the pages state it, where a rule states it (else None: seconds)."""
    return next((text for rule in RULES if hasattr(rule, "budget_text")
                 for text in [rule.budget_text(task)] if text), None)


def budget_facts(tasks) -> list[str]:
    """What the rules say of these tasks' budgets on the pages, in ``RULES`` order."""
    return _listed("budget_facts", tasks)


def ingestion_task_entries(task) -> dict:
    """The rules' entries in one task of the ingestion's config."""
    return _merged("ingestion_task_entries", task)


def scoring_task_entries(task) -> dict:
    """The rules' entries in one task of the scoring config."""
    return _merged("scoring_task_entries", task)


def ingestion_config_entries(plan) -> dict:
    """The rules' top-level entries in the ingestion's config."""
    return _merged("ingestion_config_entries", plan)


def scoring_config_entries(plan) -> dict:
    """The rules' top-level entries in the scoring config."""
    return _merged("scoring_config_entries", plan)


def page_facts(plan) -> dict:
    """What the rules give the pages' and the kit's templates for one phase (the rule's own
    names: its module's docstring says which)."""
    return _merged("page_facts", plan)


def dry_run_notes(output) -> list[str]:
    """What the rules note of a dry run's scoring output folder (not failures), in ``RULES``
    order (none by default)."""
    return _listed("dry_run_notes", output)


def task_columns(plan, task, columns) -> list:
    """The columns the rules add after a task's own, in ``RULES`` order."""
    return _listed("task_columns", plan, task, columns)


def aggregate_columns(plan, aggregate) -> list:
    """The columns the rules add after the weighted loss column, in ``RULES`` order."""
    return _listed("aggregate_columns", plan, aggregate)


def phase_facts(plan) -> list[tuple[str, str]]:
    """The (label, text) facts the rules add to a phase's on the pages, in ``RULES`` order."""
    return _listed("phase_facts", plan)


def withholds_figures(spec) -> bool:
    """Whether a rule keeps figures from participants until the organizer rebuilds."""
    return any(rule.withholds_figures(spec) for rule in RULES if hasattr(rule, "withholds_figures"))


def plan_phase_tasks(spec, phase_key: str, code: bool, planned) -> dict:
    """The entries of ``PhasePlan.rules`` that hold tasks, planned by ``planned(names)``."""
    return _merged("plan_phase_tasks", spec, phase_key, code, planned)


def replace_tasks(rules: dict, change) -> dict:
    """A phase's ``PhasePlan.rules`` with every task list the rules hold passed through
    ``change(tasks) -> tasks`` (default: unchanged)."""
    for rule in RULES:
        if hasattr(rule, "replace_tasks"):
            rules = rule.replace_tasks(rules, change)
    return rules


def extra_tasks(plan) -> tuple:
    """The tasks the ingestion runs besides the phase's, in ``RULES`` order (none by default)."""
    return tuple(_listed("extra_tasks", plan))


def spec_extra_tasks(raw: dict, phase_key: str) -> dict[str, list[str]]:
    """{what they are: task names} the rules add to a run of a phase of a valid spec."""
    return _merged("spec_extra_tasks", raw, phase_key)


def ingestion_config_tasks(plan, entry) -> dict:
    """The rules' top-level ingestion config entries that hold tasks, each by ``entry(task)``."""
    return _merged("ingestion_config_tasks", plan, entry)


def ingestion_config_extra_tasks(config: dict) -> list[dict]:
    """The task entries of a written ingestion config that run besides the phase's."""
    return _listed("ingestion_config_extra_tasks", config)


def public_tasks_apart(plan) -> dict[str, tuple]:
    """{folder: tasks} the rules stage apart in the input and reference data, made of public
    data only (none by default)."""
    return _merged("public_tasks_apart", plan)


def kit_steps(plan, sample: str) -> list[dict]:
    """The commands the rules add to the kit's steps, in ``RULES`` order (none by default)."""
    return _listed("kit_steps", plan, sample)


def dry_run_submissions(ingestion_config: dict) -> list[tuple[str, list[str], int]]:
    """The sample code's variants the dry run also sends, and the scorer's expected exit."""
    return _listed("dry_run_submissions", ingestion_config)


def not_checked() -> list[str]:
    """What the dry run does not reproduce of the rules (nothing by default)."""
    return [line for rule in RULES for line in getattr(rule, "NOT_CHECKED", ())]

"""The record a competition rule is on the build side (``BuildRule``), which each rule module
makes at its end and the registry (``bundle/competition_rules/__init__.py``) holds. A leaf, so
that a rule module imports it at its top and never the registry that imports the rule.

A rule module ends with one ``RULE = BuildRule(name=..., hook=function, ...)``, naming each
hook and constant it gives; the registry holds ``RULES = registered(module.RULE, ...)``. A rule
module is a leaf too: it imports neither the registry nor the core that calls its hooks, which
hand it what it needs of theirs (``load_task``, ``planned``, ``stand_in``, ``config_of``,
``budget_facts``; ``tests/test_import_cycles.py``). The record is checked as the worker side's
``WorkerRule`` is (``runtime/rules/records.py``): a name that is no field fails when the record
is made, a hook that is not callable or a constant of the wrong type too, and two rules of one
name when they are registered."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from runtime.rules.records import check_fields, constant, hook


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class BuildRule:
    """A competition rule as the builder sees it: every hook a field, None (or nothing) where
    the rule has none, which the registry reads as its default. Each field's comment says what
    it is and what its default means.

    The core holds a rule's values without knowing them: ``CompetitionSpec.rules``,
    ``PlannedTask.rules`` and ``PhasePlan.rules`` are mappings of the rules' own field names
    (two rules may not use one name)."""
    name: str       # the rule's, its module's name (``bundle/competition_rules/<name>.py``)

    # ---- the spec, the plan and the programs' configs ------------------------------------
    # ``{where: {name: Key}}``: the rule's spec keys (``bundle.spec_key.Key``), added by
    # ``bundle/spec_schema.py`` to the mapping at ``where`` (``""``: the top level;
    # ``tasks.<task>``; ``phases.<phase>``), so the schema, the defaults and the reference
    # page have them. Default: none.
    SPEC_KEYS: Mapping[str, Mapping] = constant(Mapping, dict)
    # ``spec_problems(raw, data_root, load_task)``: what is wrong, by meaning, with the rule's
    # keys of a spec that passed the schema (``raw``: the spec as loaded), as ``bundle.spec``
    # states problems. ``load_task(name)``: the spec's task ``name`` as the core plans it (a
    # ``PlannedTask`` with no budget, ``phase_plan.load_planned_task``), which raises
    # ``TaskDataError`` where its declaration cannot be read. Default: none.
    spec_problems: Callable[..., list] | None = hook()
    # ``spec_values(raw) -> dict``: the rule's entries in ``CompetitionSpec.rules``, read from
    # the valid spec (defaults filled). Default: none.
    spec_values: Callable[[dict], dict] | None = hook()
    # ``plan_task(spec, name, spec_budgets) -> dict``: the rule's entries in
    # ``PlannedTask.rules`` of task ``name`` (``spec_budgets``: whether it runs as code under
    # the spec's budgets, not a budget in seconds given instead). Default: none.
    plan_task: Callable[..., dict] | None = hook()
    # ``plan_phase(spec, phase_key, code) -> dict``: the rule's entries in ``PhasePlan.rules``
    # (``code``: the phase's tasks run as code). Default: none.
    plan_phase: Callable[..., dict] | None = hook()
    # ``metric_columns(plan, task, metric, value_column)``: leaderboard columns to put after a
    # task's metric's value column (a ``bundle.leaderboard.LeaderboardColumn``, which a rule
    # derives its own from with ``dataclasses.replace``). Their ``statistic`` must be one of
    # the worker-side rule's ``COLUMN_STATISTICS``. Default: none.
    metric_columns: Callable[..., list] | None = hook()
    # ``ingestion_task_entries(task)``, ``scoring_task_entries(task)`` -> dict: the rule's
    # entries in one task of the ingestion's or the scoring config (``bundle/programs.py``;
    # ``task``: a ``PlannedTask``), which the worker-side rule's ``task_fields`` /
    # ``scoring_task_fields`` read back. Default: none.
    ingestion_task_entries: Callable[[object], dict] | None = hook()
    scoring_task_entries: Callable[[object], dict] | None = hook()
    # ``ingestion_config_entries(plan)``, ``scoring_config_entries(plan, config_of)`` -> dict:
    # the rule's top-level entries in those configs, read back by ``config_fields`` /
    # ``scoring_config_fields``. ``config_of(name, tasks)``: the core's whole scoring config
    # (the default platform's) of the plan run on those tasks alone, under phase name
    # ``name`` (``phase_plan.tasks_alone``: no rule's tasks besides). Default: none.
    ingestion_config_entries: Callable[[object], dict] | None = hook()
    scoring_config_entries: Callable[..., dict] | None = hook()
    # ``seconds_budget(rules) -> dict``: a task's ``PlannedTask.rules`` once its budget is
    # given in seconds instead of the spec's (``bundle.phase_plan.with_budget``). Default:
    # unchanged.
    seconds_budget: Callable[[dict], dict] | None = hook()

    # ---- the pages, the build's summary and the dry run ------------------------------------
    # ``budget_text(task) -> str | None``: a task's budget as the pages state it, where the
    # rule states it otherwise than in seconds. Default: seconds.
    budget_text: Callable[[object], str | None] | None = hook()
    # ``budget_facts(tasks) -> list[str]``: what the pages add, once for a list of a phase's
    # (or its gate's) ``PlannedTask``s, to the tasks' budgets: epoch budgets say what an epoch
    # is. Default: none.
    budget_facts: Callable[[object], list] | None = hook()
    # ``page_facts(plan) -> dict``: what the rule gives the pages' and the kit's templates for
    # a phase, under its own names. Default: none.
    page_facts: Callable[[object], dict] | None = hook()
    # ``dry_run_notes(output) -> list[str]``: what the dry run notes (not a failure) of a
    # scoring output folder: epoch budgets, a conversion too short to time. Default: none.
    dry_run_notes: Callable[[object], list] | None = hook()
    # ``task_columns(plan, task, columns)``: leaderboard columns to put after a task's own
    # (``columns``: the task's columns so far, its metrics' and the rules' included), derived
    # from them as ``metric_columns`` does. A column the rule keeps from participants is
    # ``hidden``: its ``statistic`` is one of the worker-side rule's ``PRIVATE_STATISTICS``.
    # Default: none.
    task_columns: Callable[..., list] | None = hook()
    # ``aggregate_columns(plan, aggregate)``: columns to put after the weighted loss column
    # (``aggregate``), as ``task_columns``. Default: none.
    aggregate_columns: Callable[..., list] | None = hook()
    # ``phase_facts(plan, budget_facts) -> list[tuple[str, str]]``: (label, text) facts the
    # pages add to a phase's facts, before its metric weights (the gate: what runs first;
    # public rows: what is scored during the phase). ``budget_facts(tasks)``: the rules' words
    # on a list of tasks' budgets (the registry's, as for the phase's own). Default: none.
    phase_facts: Callable[..., list] | None = hook()
    # ``withholds_figures(spec) -> bool``: whether the built bundles keep figures from
    # participants until the organizer rebuilds (the build's summary then says how to reveal
    # them, in the platform's words). Default: False.
    withholds_figures: Callable[[object], bool] | None = hook()

    # ---- tasks of its own besides the phase's (the gate: an earlier phase's, first) ----------
    # The rule holds them in ``PhasePlan.rules`` and is given the core's own way with tasks,
    # so they are planned, written and staged as the phase's are.
    # ``plan_phase_tasks(spec, phase_key, code, planned, stand_in) -> dict``: the rule's
    # entries in ``PhasePlan.rules`` that hold tasks, made with ``planned(names)`` (the
    # phase's own task planning) or ``stand_in(tasks, work)``: the kit's public stand-in of
    # those planned tasks (``phase_plan.stand_in_plan``), its files made in folder ``work``,
    # as (its tasks, a line per task saying what data it is), or None where there is none.
    # Default: none.
    plan_phase_tasks: Callable[..., dict] | None = hook()
    # ``replace_tasks(rules, change) -> dict``: a phase's ``PhasePlan.rules`` with each task
    # list the rule holds passed through ``change(tasks) -> tasks`` (a budget given in
    # seconds; the kit's stand-in runs none); an empty list is no such tasks. Default:
    # unchanged.
    replace_tasks: Callable[..., dict] | None = hook()
    # ``extra_tasks(plan)``: the ``PlannedTask``s the ingestion runs besides the phase's,
    # whose inputs are staged with theirs. Default: none.
    extra_tasks: Callable[[object], tuple] | None = hook()
    # ``spec_extra_tasks(raw, phase_key) -> {what: [task names]}``: the same from a spec that
    # passed the schema, for the phase's time limit check. Default: none.
    spec_extra_tasks: Callable[[dict, str], dict] | None = hook()
    # ``ingestion_config_tasks(plan, entry) -> dict``: the rule's top-level entries in the
    # ingestion's config that hold tasks, each written by ``entry(task)`` as the phase's are
    # (read back by the worker half's ``config_tasks``). Default: none.
    ingestion_config_tasks: Callable[..., dict] | None = hook()
    # ``ingestion_config_extra_tasks(config) -> list[dict]``: the task entries of a written
    # ingestion config (a bundle's) that the rule runs besides the phase's, for the platform
    # rules' time limit checks. Default: none.
    ingestion_config_extra_tasks: Callable[[dict], list] | None = hook()

    # ---- other tasks run instead of the phase's on request (the smoke test: public data
    # shaped like the phase's tasks, scored but never ranked): where they are staged and how
    # the kit and the dry run take part --------------------------------------------------------
    # ``public_tasks_apart(plan) -> {folder: [PlannedTask]}``: tasks made of public data only,
    # whose inputs and references are staged in ``folder`` of the phase's input and reference
    # data (the worker half's ``runs`` run them from there); the leakage check does
    # not count those references as hidden. Default: none.
    public_tasks_apart: Callable[[object], dict] | None = hook()
    # ``kit_steps(plan, sample) -> list[dict]``: commands the starting kit page and guide add
    # after the core's (``{command, does}``, as ``render._kit_steps`` makes them), run from
    # the unzipped kit's folder on its sample folder ``sample``; each must run as written.
    # Default: none.
    kit_steps: Callable[..., list] | None = hook()
    # ``dry_run_submissions(ingestion_config) -> [(label, kit tool options, exit status)]``:
    # the kit's sample code zipped again by the kit's ``submission_zip.py`` with those
    # options, which the dry run also sends to the phase (whose written ingestion config is
    # given), expecting the scorer to exit with that status after writing its report and no
    # scores file. Default: none.
    dry_run_submissions: Callable[[dict], list] | None = hook()
    # What the dry run does not reproduce of the rule, added to its list. Default: nothing.
    NOT_CHECKED: tuple[str, ...] = constant(tuple, tuple)

    def __post_init__(self):
        check_fields(self)

"""What the rule modules and the registry (``runtime/rules/__init__.py``) share: the record each
rule is (``WorkerRule``), the error a rule raises and the record of what runs (``Run``). A leaf,
so that a rule module imports it at its top and never the registry that imports the rule.

A rule module ends with one ``RULE = WorkerRule(name=..., hook=function, ...)``, naming each
hook and constant it gives; the registry names the module on one line of
``RULES = registered_modules(__name__, "module", ...)``. The
record is checked when it is made (a name that is no field is refused by the dataclass itself,
a hook that is not callable or a constant of the wrong type here) and when it is registered
(one rule to a name, a field given with the fields it needs), so a misspelled hook fails at
import rather than being ignored. The build side's ``BuildRule``
(``bundle/competition_rules/records.py``) is made and checked the same way."""
from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping


class RuleError(ValueError):
    """A rule cannot apply to this bundle as built: the organizer must fix it."""


class RuleDefinitionError(TypeError):
    """A rule's record is malformed (raised at import, naming the rule and its field)."""


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class Run:
    """What runs: tasks the participant's code runs in one go, and what becomes of them. A
    phase's submission makes a list of runs (``rules.runs`` on the ingestion's side,
    ``rules.record_runs`` on the scorer's): the rules' runs, then the phase's own, or a rule's
    run alone where it runs ``instead`` of the others. The ingestion runs each in order and stops
    at one that fails the submission; the scorer fails the submission where a run says why, and
    scores each ``scored`` run, a ``ranked`` one to the scores file, another apart. A field a
    side does not read keeps its default there."""
    name: str                       # the rule's name; the phase's own run: ``PHASE_RUN``
    instead: bool = False           # runs instead of every other run, the phase's included
    folder: str = ""                # under $input and $output, ref/ and res/: kept apart
    scored: bool = True             # predictions written and scored; False: only its entries
    ranked: bool = True             # its scores go to the scores file (the leaderboard)
    # -- the ingestion's (``runs``)
    tasks: tuple = ()               # TaskSpecs, their inputs relative to $input/<folder>
    announcement: str = ""          # the log's line before its tasks run
    entries: Mapping = dataclasses.field(default_factory=dict)   # its entries in the run record
    # ``verdict(done, contract) -> (entries, failure)``, after its tasks ran, from ``done``:
    # ``[(task, outcome, run, problems)]`` (``run``: the task's run as the record states it;
    # ``problems``: the rules' ``outcome_problems``): its entries in the run record (in place
    # of ``entries``) and why the submission fails (None: it does not; else no later run runs
    # and the ingestion exits ``RULE_FAILED``).
    verdict: Callable | None = None
    # -- the scorer's (``record_runs``)
    failure: str | None = None      # why the submission fails (exit ``RULE_FAILED``), or None
    config: object = None           # the ScoringConfig of its tasks
    heading: str = "Scoring report"   # the detailed results' heading
    exit_status: int = 0            # after it is scored; non-zero: the platforms fail it
    closing: str = ""               # the log's last line, where it is scored apart


def hook(required_with: str | None = None):
    """A hook field: a function of the rule's, or None where the rule has none (what that
    means is the registry's default). ``required_with``: a field whose giving needs this one."""
    return dataclasses.field(default=None, metadata={"type": Callable,
                                                     "required_with": required_with})


def constant(expected_type: type, default_factory: Callable | None = None,
             required_with: str | None = None):
    """A constant field of ``expected_type``, by default ``default_factory()`` (nothing), or
    None without one."""
    metadata = {"type": expected_type, "required_with": required_with}
    if default_factory is None:
        return dataclasses.field(default=None, metadata=metadata)
    return dataclasses.field(default_factory=default_factory, metadata=metadata)


def check_fields(rule) -> None:
    """A record's checks when it is made: a name, every hook callable or None, every constant
    of its type; one error naming the rule and each field at fault."""
    if not isinstance(rule.name, str) or not rule.name:
        raise RuleDefinitionError(f"a {type(rule).__name__} needs a name, found {rule.name!r}")
    values = vars(rule)
    wrong = []
    for field in dataclasses.fields(rule):
        expected, value = field.metadata.get("type"), values[field.name]
        if expected is None or value is None:
            continue
        if expected is Callable and not callable(value):
            wrong.append(f"{field.name} must be a function, found {value!r}")
        elif expected is not Callable and not isinstance(value, expected):
            wrong.append(f"{field.name} must be a {expected.__name__}, found {value!r}")
    if wrong:
        raise RuleDefinitionError(f"rule {rule.name!r}: {'; '.join(wrong)}")


def _given(value) -> bool:
    return value is not None and value != () and value != {}


def registered(*rules) -> tuple:
    """The rules a registry holds, in order, once checked: one rule to a name, and each field
    given with the fields it is required with (``required_with``)."""
    names = [rule.name for rule in rules]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise RuleDefinitionError(f"rules registered twice under one name: {', '.join(twice)}")
    for rule in rules:
        values = vars(rule)
        for field in dataclasses.fields(rule):
            needs = field.metadata.get("required_with")
            if needs and _given(values[needs]) and not _given(values[field.name]):
                raise RuleDefinitionError(f"rule {rule.name!r}: gives {needs} but no "
                                          f"{field.name}, which is required with it")
    return tuple(rules)


def registered_modules(package: str, *modules: str) -> tuple:
    """The rules of ``package``'s modules, named in order, registered (``registered``): each
    module's ``RULE``, whose name is the module's, so a registry names each rule on one line
    and a module without its record, or holding another rule's, fails at import."""
    rules = []
    for module in modules:
        rule = vars(importlib.import_module(f"{package}.{module}")).get("RULE")
        if rule is None:
            raise RuleDefinitionError(f"rule module {package}.{module} makes no RULE at its end")
        if rule.name != module:
            raise RuleDefinitionError(f"rule module {package}.{module} holds the rule "
                                      f"{rule.name!r}: a rule is named after its module")
        rules.append(rule)
    return registered(*rules)


def field_name(rule, value) -> str:
    """The name of the field of ``rule`` that holds ``value`` (for a registry's messages)."""
    return next(name for name, held in vars(rule).items() if held is value)


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class WorkerRule:
    """A competition rule as the scorer and the ingestion see it: every hook a field, None (or
    nothing) where the rule has none, which the registry reads as its default. Each field's
    comment says what it is and what its default means.

    The ingestion and the scorer hold a rule's values without knowing them: ``TaskSpec.rules``,
    ``IngestionConfig.rules``, ``TaskConfig.rules`` and ``ScoringConfig.rules`` are mappings
    of the rules' own field names (two rules may not use one name)."""
    name: str               # the rule's, its module's name (``runtime/rules/<name>.py``)

    # ---- leaderboard columns -----------------------------------------------------------
    # The statistics (scoring config ``columns[].statistic``) the rule's leaderboard columns
    # carry; each such column names a task and one of its metrics, which the scorer checks as
    # it checks a metric's value column. Default: none.
    COLUMN_STATISTICS: tuple[str, ...] = constant(tuple, tuple)
    # ``column_problem(statistic, task)``: why a config column of that statistic cannot be
    # written for ``task`` (a ``runtime.scoring.TaskConfig``), or None. Default: no problem.
    column_problem: Callable[[str, object], str | None] | None = hook()
    # ``column_value(statistic, result, metric)``: the column's value for a ``TaskResult``; a
    # penalised task's result already holds the worst figures. Required with a statistic.
    column_value: Callable[[str, object, str], float] | None = hook(
        required_with="COLUMN_STATISTICS")
    # ``worst_metric_fields(score_type, cap) -> dict``: the ``MetricResult`` fields the rule's
    # columns read, at their worst, for a penalised task (``runtime.scoring.penalised``): a
    # failed task must not rank well on a rule's column either. Default: none.
    worst_metric_fields: Callable[..., dict] | None = hook()

    # ---- the rule's values, read from the configs --------------------------------------
    # ``task_fields(raw_task, where)``, ``config_fields(raw, where)`` -> dict: from one task of
    # the ingestion's config and from the config itself (what the build half's
    # ``ingestion_task_entries`` / ``ingestion_config_entries`` wrote; ``where`` names the
    # place in a problem); raise ``RuleError`` on a malformed entry. Default: none.
    task_fields: Callable[[dict, str], dict] | None = hook()
    config_fields: Callable[[dict, str], dict] | None = hook()
    # ``scoring_task_fields(raw_task, where)``, ``scoring_config_fields(raw, where)`` -> dict:
    # the same from the scoring config. Default: none.
    scoring_task_fields: Callable[[dict, str], dict] | None = hook()
    scoring_config_fields: Callable[[dict, str], dict] | None = hook()
    # ``task_budget(task, data, contract)``: the ingestion's ``TaskSpec`` as it runs on this
    # machine, after its data is staged and before the participant's code runs (epoch
    # budgets: the budget converted to seconds here); raises ``RuleError`` when the organizer
    # must fix the bundle. The child process gets the task's ``rules`` in its spec. Default:
    # the task unchanged.
    task_budget: Callable[..., object] | None = hook()
    # ``record_fields(task) -> dict``: the rule's entries in the task's run record
    # (``TaskRun.rules``), which the scorer's detailed results repeat. Default: none.
    record_fields: Callable[[object], dict] | None = hook()
    # ``task_notes(fields) -> list[str]``: what the log and the detailed results say of a
    # task, from those entries. Default: nothing.
    task_notes: Callable[[dict], list] | None = hook()

    # ---- figures kept from participants (public rows' full figures), how a task is scored --
    # ``{statistic: core statistic}``: the statistics of the rule's private columns, each the
    # scorer's own ``value`` or ``weighted_loss`` computed on the private results: the tasks
    # with rules' ``score_options`` scored again without them, the others' results as they
    # are. Their values go to ``private/<PRIVATE_OUTPUT>_scores.txt`` (and ``.json``), with
    # the private results' details in ``private/<PRIVATE_OUTPUT>_results.json``, never to the
    # scores file: every column of it is public on Codabench. Default: none.
    PRIVATE_STATISTICS: Mapping[str, str] = constant(Mapping, dict)
    # The stem of those files. Required with ``PRIVATE_STATISTICS``.
    PRIVATE_OUTPUT: str | None = constant(str, required_with="PRIVATE_STATISTICS")
    # ``score_options(task) -> dict``: keyword arguments the rule adds to the core's
    # ``runtime.scoring.score_task`` for what participants see (``TaskConfig``: ``task``).
    # Default: none.
    score_options: Callable[[object], dict] | None = hook()
    # ``result_notes(task) -> list[str]``: what the report and the log add to a task's
    # result. Default: none.
    result_notes: Callable[[object], list] | None = hook()

    # ---- what runs: runs of its own, first (the gate) or instead (the smoke test) --------
    # ``config_tasks(raw, where, parse_tasks) -> dict``: ``IngestionConfig.rules`` entries
    # that hold tasks, each list read by ``parse_tasks(raw_list, where)`` as the phase's are.
    # Default: none.
    config_tasks: Callable[..., dict] | None = hook()
    # ``runs(config, submission) -> list[Run]``: the ingestion's runs of the rule for this
    # submission (its folder; None: one that asks for nothing, as the run's worst case counts
    # it), each with its tasks, folder, announcement and entries in the run record or its
    # ``verdict`` (``records.Run``). A run runs before the phase's own, or ``instead`` of
    # every other. Default: none.
    runs: Callable[..., list] | None = hook()
    # ``record_entries(raw, where) -> dict``: its entries of a run record as read back (raise
    # ``RuleError`` on a malformed one). Default: none.
    record_entries: Callable[[dict, str], dict] | None = hook()
    # ``record_runs(config, entries) -> list[Run]``: by the run record's entries
    # (``RunRecord.rules``; None: the code never ran, though the phase runs code), the
    # scorer's runs of the rule in this phase (a ``ScoringConfig``): one whose ``failure``
    # fails the submission (exit ``RULE_FAILED``), one scored apart (``ranked`` False:
    # ``ref/<folder>`` against ``res/<folder>`` with its own ``config``, the report under its
    # ``heading``, the scores on stderr and no scores file, then its ``exit_status``), one
    # not scored. Default: none.
    record_runs: Callable[..., list] | None = hook()
    # ``outcome_problems(task, outcome) -> list[str]``: what the rule finds wrong with a
    # task's ``TaskOutcome`` that ended ok (units: a unit not done in time), for a rule that
    # needs the task complete. Default: none.
    outcome_problems: Callable[[object, object], list] | None = hook()

    # ---- a submission refused outright, the folders a run of the rule writes --------------
    # ``submission_refusal(config, submission) -> (reason, failure category) | None``: why the
    # ingestion runs nothing of this submission (its folder ``submission``), refusing it as it
    # refuses one that carries a command of its own; the record says why and the submission
    # fails. Default: none.
    submission_refusal: Callable[..., tuple | None] | None = hook()
    # ``output_folders(config) -> list[str]``: the folders of the ingestion's output the rule
    # may write in this phase (the folders of its runs), names a submission must not hold
    # where the worker copies it over that output. Default: none.
    output_folders: Callable[[object], list] | None = hook()
    # ``scoring_configs(raw, where, parse_config) -> dict``: ``ScoringConfig.rules`` entries
    # that hold a scoring config of their own, each read by ``parse_config(raw, where)`` as
    # the phase's is. Default: none.
    scoring_configs: Callable[..., dict] | None = hook()

    # ---- a task run the rule's own way, each child the core's ----------------------------
    # ``task_runner(task, contract)``: how the task runs, a function of ``run_child``
    # returning its ``TaskOutcome``, where ``run_child(**window)`` runs one child over the
    # task, within the supervisor's ``UnitWindow(**window)`` if given (units: one child per
    # stretch of units, each unit under its own limit); None: the core runs the task in one
    # child. Default: None.
    task_runner: Callable[..., Callable | None] | None = hook()
    # ``outcome_lines(task, outcome) -> list[str]``: what the ingestion's log says of a
    # task's outcome besides the core's lines (units: how many were not done). Default: none.
    outcome_lines: Callable[[object, object], list] | None = hook()

    def __post_init__(self):
        check_fields(self)

"""Checks of a competition's design at build time: warnings where its final ranking will not
mean much. None of them stops the build; an organizer whose competition has a reason to differ
gives that reason under ``ignore_methodology_warnings.<id>`` and the build prints the reason
instead of the warning (docs/building.md, "Methodology warnings").

Each check is a pure function of the spec and of what the build read for it (each task's
``TaskFacts``, read through the kind's ``test_rows``, ``data_source``,
``has_public_references`` and ``PROPORTION_METRICS``; the baseline table) and returns a ``Check``: its warnings and its notes, which
say what it measured or why it measured nothing. ``methodology_report`` reads those facts, runs
every check and sets the ignored warnings apart.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from kinds.baseline_table import category, failed, task_rows
from kinds.kind import KINDS
from runtime.rules.se_columns import unmeasured_se

from .phase_plan import declaration_path, load_planned_task

FINAL_SUBMISSIONS = "final-phase-submissions"
SMALL_TEST_SET = "test-set-too-small"
SHORT_DEVELOPMENT = "short-development-phase"
UNSTATED_SHIFT = "undeclared-distribution-shift"
WARNING_IDS = (FINAL_SUBMISSIONS, SMALL_TEST_SET, SHORT_DEVELOPMENT, UNSTATED_SHIFT)

IGNORE_KEY = "ignore_methodology_warnings"
SHIFT_KEY = "distribution_shift"            # tasks.<task>.distribution_shift

# By chance alone, the best of k equally good submissions scores above their common mean by
# the expected maximum of k standard normals, in standard errors of the test set: 1.2 for 5,
# 1.5 for 10, 2.5 for 100; a participant who learns from each score gains more. Five keeps
# that gain near one standard error and still allows for a broken upload or two.
MAX_FINAL_SUBMISSIONS = 5
# Two baselines closer than this many standard errors are ranked by the draw of the test set.
GAP_STANDARD_ERRORS = 2.0


@dataclass(frozen=True)
class Finding:
    """One warning: its id, the spec key and the file it concerns, what the check found and
    what to do about it."""
    id: str
    key: str
    file: Path
    found: str
    advice: str

    def text(self) -> str:
        return (f"[{self.id}] {self.key} ({self.file}): {self.found}. {self.advice} (where it "
                f"does not apply: give the reason as {IGNORE_KEY}.{self.id} in the spec)")


@dataclass(frozen=True)
class Check:
    warnings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TaskFacts:
    """What the checks read of a task, from its declaration through its kind."""
    declaration: Path
    task_type: str
    source: str | None              # the kind's data_source: what the rows are drawn from
    test_rows: int | None
    public_references: bool         # the kind publishes them in a results phase


@dataclass(frozen=True)
class Score:
    value: float
    se: float | None                # as the table gives it


@dataclass(frozen=True)
class Report:
    warnings: tuple[Finding, ...]
    ignored: tuple[tuple[Finding, str], ...]     # each with the spec's reason
    notes: tuple[str, ...]


def final_phase(spec):
    """The phase whose leaderboard decides the ranking. The spec marks none; Codabench takes
    its last phase as the final one (codabench_v2.md §1.4), and phases run in the spec's order."""
    return spec.phases[-1]


def _days(delta) -> str:
    return f"{delta.total_seconds() / 86400:.1f} days"


# ---- 1. submissions to the final phase ------------------------------------------------------

def check_final_submissions(spec) -> Check:
    final = final_phase(spec)
    if final.max_submissions <= MAX_FINAL_SUBMISSIONS:
        return Check()
    return Check((Finding(
        FINAL_SUBMISSIONS, f"phases.{final.key}.max_submissions", spec.path,
        f"the final phase {final.key} allows {final.max_submissions} submissions per "
        f"participant, more than {MAX_FINAL_SUBMISSIONS}: the best of many scores on one "
        "hidden test set is partly chance, and participants who learn from each score fit "
        "that test set",
        f"Allow at most {MAX_FINAL_SUBMISSIONS} there, and let participants iterate in an "
        "earlier phase"),))


# ---- 2. test set size against the baselines' gap --------------------------------------------

def baseline_scores(table: dict, task: str) -> dict[str, dict[str, Score]]:
    """Each baseline's scores of a task in a baseline table, by method and metric. Two shapes
    are committed: ``tasks.<task>.methods.<method>.metrics.<metric>.{value, std[, se]}`` (BDL,
    as detailed_results.json writes a metric) and ``tasks.<task>.<method>.<metric>: value``
    (PGDL, Retina), with the standard errors beside them, ``se.<metric>``. A baseline that
    failed the task (a ``penalty``) is left out: its figures are the scorer's worst values,
    not a result (``failed_baselines`` names them)."""
    scores = {}
    for method, row in task_rows(table, task).items():
        if not isinstance(row, dict) or failed(row):
            continue
        entries = row.get("metrics", row)
        errors = row.get("se") if isinstance(row.get("se"), dict) else {}
        scores[method] = {metric: score for metric, entry in entries.items()
                          if (score := _score(entry, errors.get(metric))) is not None}
    return scores


def failed_baselines(table: dict, tasks) -> dict[str, str]:
    """{method: its failure's category} of the baselines that failed one of ``tasks``."""
    return {method: category(row) for task in tasks
            for method, row in task_rows(table, task).items() if failed(row)}


def _left_out(failures: dict[str, str]) -> str:
    """What a note adds where baselines failed: they are not among those compared."""
    if not failures:
        return ""
    return ("; left out, failed: " + ", ".join(f"{method} ({why})"
                                               for method, why in failures.items()))


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def _score(entry, se=None) -> Score | None:
    if _number(entry):
        return Score(float(entry), float(se) if _number(se) else None)
    if isinstance(entry, dict) and _number(entry.get("value")):
        return Score(float(entry["value"]), float(entry["se"]) if _number(entry.get("se"))
                     else None)
    return None


def standard_error(score: Score, metric: str, facts: TaskFacts, kind) -> tuple[float | None, str]:
    """The table's ``se`` where it has one; for a metric that is a share of the task's test
    rows, the binomial sqrt(p (1 - p) / n), which takes the rows as independent draws; else
    none, with the reason."""
    if score.se is not None:
        return score.se, "the table's se"
    score_type = _score_type(metric, facts, kind)
    if score_type is not None and score.value in (score_type.minimum, score_type.maximum):
        # The scorer gives no standard error of 0 at an end of the range (n/a): the board
        # shows the metric's whole range there, and so does this check.
        return (unmeasured_se(score_type, score.value),
                "none at an end of the metric's range: its whole range, as on the leaderboard")
    if metric in kind.PROPORTION_METRICS and facts.test_rows:
        n = facts.test_rows
        return (math.sqrt(score.value * (1 - score.value) / n),
                f"sqrt(p(1-p)/n) over n = {n} test rows")
    if metric in kind.PROPORTION_METRICS:
        return None, "the task's declaration does not say how many test rows it has"
    return None, (f"the table gives no se for {metric}, and {metric} is not a share of test "
                  "rows, whose standard error the build could estimate")


def _score_type(metric: str, facts: TaskFacts, kind):
    task_type = kind.task_types.get(facts.task_type)
    return next((t for t in task_type.score_types if t.name == metric), None) \
        if task_type else None


def _gap_check(where: str, key: str, file: Path,
               best: list[tuple[str, float, float, str]], failures: dict[str, str]) -> Check:
    """The two best of (method, value, standard error, how it was had), among the baselines
    that did not fail (``failures``: those that did, named in the note)."""
    (first, a, se_a, how), (second, b, se_b, _) = best
    # The larger of the two: a share of 1.0 has a binomial se of 0, which its rival's is not.
    se, gap = max(se_a, se_b), abs(a - b)
    ratio = f"{gap / se:.1f} standard errors" if se else "both at the end of the metric's range"
    scored = " scored" if failures else ""
    note = (f"{where}: the best{scored} baselines are {first} ({a:.4g}) and {second} ({b:.4g}), "
            f"{gap:.2g} apart; standard error {se:.2g} ({how}): {ratio}{_left_out(failures)}")
    if gap >= GAP_STANDARD_ERRORS * se and gap > 0:
        return Check(notes=(note,))
    return Check((Finding(
        SMALL_TEST_SET, key, file,
        f"{where}: the two best{scored} baselines, {first} and {second}, are {gap:.2g} apart, "
        f"under {GAP_STANDARD_ERRORS:g} standard errors ({GAP_STANDARD_ERRORS:g} x {se:.2g}, {how}): "
        "the test set is too small to rank methods this close",
        "Score the phase on more test rows (a larger test set), or expect the ranking of "
        "methods this close to be chance"),), (note,))


def _task_gap(spec, phase, name: str, facts: TaskFacts, table: dict) -> Check:
    """A phase ranked by each task's primary metric (the average rank over tasks, or one
    task's metric): the two best baselines of each task."""
    kind = KINDS[spec.kind]
    metric = kind.task_types[facts.task_type].primary
    where = f"phase {phase.key}, task {name}, {metric.name}"
    rows = {method: scores[metric.name] for method, scores in baseline_scores(table, name).items()
            if metric.name in scores}
    failures = failed_baselines(table, [name])
    if len(rows) < 2:
        return Check(notes=(f"{where}: not checked: the baseline table has {len(rows)} "
                            f"baseline(s) with this metric{_left_out(failures)}",))
    ranked = sorted(rows.items(), key=lambda row: row[1].value, reverse=metric.higher_is_better)
    best = []
    for method, score in ranked[:2]:
        se, how = standard_error(score, metric.name, facts, kind)
        if se is None:
            return Check(notes=(f"{where}: not checked: no standard error: {how}",))
        best.append((method, score.value, se, how))
    return _gap_check(where, f"phases.{phase.key}.tasks", facts.declaration, best, failures)


def _weighted_loss(spec, phase, method_scores: dict[str, dict[str, Score]],
                   facts: dict[str, TaskFacts]) -> tuple[float, float | None, str] | None:
    """A baseline's weighted loss over the phase's tasks, as the scorer computes it
    (scores_file.weighted_loss), and a bound on its standard error: the weighted mean of the
    metrics' standard errors, which no correlation between them can exceed. None where the
    table lacks one of its metrics."""
    kind = KINDS[spec.kind]
    total = weights = bound = 0.0
    missing = ""
    for name in phase.tasks:
        for metric in kind.task_types[facts[name].task_type].score_types:
            weight = spec.weights.get(metric.name, 0.0)
            if not weight:
                continue
            score = method_scores.get(name, {}).get(metric.name)
            if score is None:
                return None
            total, weights = total + weight * metric.as_loss(score.value), weights + weight
            se, how = standard_error(score, metric.name, facts[name], kind)
            if se is None:
                missing = missing or how
            else:
                bound += weight * se
    if not weights:
        return None
    return (total / weights, None if missing else bound / weights,
            missing or "at most: the weighted mean of the metrics' standard errors")


def _aggregate_gap(spec, phase, facts: dict[str, TaskFacts], table: dict,
                   table_file: Path) -> Check:
    """A phase ranked by the weighted loss: the two best baselines on it."""
    where = f"phase {phase.key}, weighted loss"
    by_method: dict[str, dict[str, dict[str, Score]]] = {}
    for name in phase.tasks:
        for method, scores in baseline_scores(table, name).items():
            by_method.setdefault(method, {})[name] = scores
    failures = failed_baselines(table, phase.tasks)
    losses = {method: loss for method, scores in by_method.items() if method not in failures
              and (loss := _weighted_loss(spec, phase, scores, facts)) is not None}
    if len(losses) < 2:
        return Check(notes=(f"{where}: not checked: the baseline table has {len(losses)} "
                            "baseline(s) with every metric of the phase's tasks"
                            + _left_out(failures),))
    ranked = sorted(losses.items(), key=lambda row: row[1][0])[:2]
    missing = next((how for _, (_, se, how) in ranked if se is None), None)
    if missing:
        return Check(notes=(f"{where}: not checked: no standard error: {missing}",))
    return _gap_check(where, f"phases.{phase.key}.tasks", table_file,
                      [(method, loss, se, how) for method, (loss, se, how) in ranked], failures)


def check_test_size(spec, facts: dict[str, TaskFacts], table: dict | None,
                    table_file: Path | None) -> Check:
    """Every phase's ranking metric, on the baselines of the table."""
    if table is None:
        return Check(notes=("test set size: not checked: no baseline table (a "
                            "baseline_results.json next to the spec, as the kind's "
                            "kit/baseline_results.py writes it)",))
    if KINDS[spec.kind].RANKS_BY_AGGREGATE:
        checks = [_aggregate_gap(spec, phase, facts, table, table_file) for phase in spec.phases]
    else:
        checks = [_task_gap(spec, phase, name, facts[name], table)
                  for phase in spec.phases for name in phase.tasks]
    return Check(tuple(w for check in checks for w in check.warnings),
                 tuple(n for check in checks for n in check.notes))


# ---- 3. development time --------------------------------------------------------------------

def check_development_time(spec) -> Check:
    """The phases before the final one are the participants' time to develop; the final
    phase's own time, from its start to ``end_date``, is spent against its hidden test."""
    final = final_phase(spec)
    if len(spec.phases) < 2:
        return Check(notes=(f"development time: not checked: {final.key} is the only phase",))
    if spec.end_date is None:
        return Check(notes=("development time: not checked: the spec has no end_date, so the "
                            f"final phase {final.key} has no length",))
    first = spec.phases[0]
    development, final_time = final.start - first.start, spec.end_date - final.start
    if development >= final_time:
        return Check()
    return Check((Finding(
        SHORT_DEVELOPMENT, f"phases.{final.key}.start", spec.path,
        f"participants have {_days(development)} to develop (phases.{first.key}.start to "
        f"phases.{final.key}.start) and {_days(final_time)} in the final phase (to end_date): "
        "a method is then mostly chosen against the final phase's hidden scores",
        "Open the first phase earlier, or end the competition sooner (end_date)"),))


# ---- 4. distributions of the public and the hidden tasks ------------------------------------

def _comparisons(spec, facts: dict[str, TaskFacts]) -> list[tuple[str, str, list, list]]:
    """(phase, what its public side is, public tasks, hidden tasks): a phase holding tasks
    whose references its public data publish and tasks whose references it hides; and the
    final phase's hidden tasks against every task of the phases before it, on which
    participants develop."""
    def public(phase) -> list[str]:
        return [] if phase.code_submission else [t for t in phase.tasks
                                                 if facts[t].public_references]
    pairs = []
    for phase in spec.phases:
        shown = public(phase)
        hidden = [t for t in phase.tasks if t not in shown]
        if shown and hidden:
            pairs.append((phase.key, f"the public tasks of phase {phase.key}", shown, hidden))
    final = final_phase(spec)
    earlier = list(dict.fromkeys(t for phase in spec.phases[:-1] for t in phase.tasks))
    if earlier:
        pairs.append((final.key, "the tasks of the phases before it", earlier,
                      [t for t in final.tasks if t not in public(final)]))
    return pairs


def check_distributions(spec, facts: dict[str, TaskFacts]) -> Check:
    """A hidden task is drawn from another distribution than the public side where its kind's
    ``data_source`` matches none of the public tasks'; a task is drawn like itself, and one
    whose spec entry states its shift (``tasks.<task>.distribution_shift``) is not warned of."""
    warnings, notes = [], []
    for phase, what, shown, hidden in _comparisons(spec, facts):
        sources = {facts[t].source for t in shown}
        for name in hidden:
            if name in shown or name in spec.distribution_shifts:
                continue
            source = facts[name].source
            if source is not None and source in sources:
                continue
            if source is None or None in sources:
                notes.append(f"distributions, phase {phase}, task {name}: not checked: the "
                             f"kind {spec.kind} does not say what "
                             f"{'this task' if source is None else 'a public task'}'s data are "
                             "drawn from")
                continue
            warnings.append(Finding(
                UNSTATED_SHIFT, f"tasks.{name}", facts[name].declaration,
                f"phase {phase} scores task {name}, drawn from \"{source}\", and none of "
                f"{what} ({', '.join(shown)}) is drawn alike: they are drawn from "
                + "; ".join(f'"{s}"' for s in sorted(sources)),
                f"Where the difference is intended, say how the task differs as "
                f"tasks.{name}.{SHIFT_KEY}; otherwise let participants develop on a task "
                "drawn like it"))
    return Check(tuple(warnings), tuple(notes))


# ---- the report ------------------------------------------------------------------------------

def task_facts(spec) -> dict[str, TaskFacts]:
    """Every task of a phase, read from its declaration (load_spec has checked them all)."""
    kind = KINDS[spec.kind]
    facts = {}
    for name in dict.fromkeys(t for phase in spec.phases for t in phase.tasks):
        task = load_planned_task(spec.kind, name, spec.data_root)
        facts[name] = TaskFacts(declaration_path(spec.data_root, name), task.task_type,
                                kind.data_source(task.declaration),
                                kind.test_rows(task.declaration),
                                kind.has_public_references(task))
    return facts


def with_ignored(checks: list[Check], ignored: dict[str, str]) -> Report:
    """The warnings the spec ignores set apart with its reasons; an ignored id that no check
    raised is said to change nothing."""
    found = [warning for check in checks for warning in check.warnings]
    notes = [note for check in checks for note in check.notes]
    notes += [f"{IGNORE_KEY}.{name}: no such warning arises; the entry changes nothing"
              for name in ignored if not any(w.id == name for w in found)]
    return Report(tuple(w for w in found if w.id not in ignored),
                  tuple((w, ignored[w.id]) for w in found if w.id in ignored), tuple(notes))


def methodology_report(spec, table_file: Path | None) -> Report:
    """Every check on the spec, with the baseline table at ``table_file`` (None: none)."""
    facts = task_facts(spec)
    table = json.loads(table_file.read_text(encoding="utf-8")) if table_file else None
    return with_ignored([check_final_submissions(spec),
                         check_test_size(spec, facts, table, table_file),
                         check_development_time(spec),
                         check_distributions(spec, facts)], spec.ignored_warnings)


def report_lines(report: Report) -> tuple[list[str], list[str]]:
    """(warnings, the rest): the lines the build prints."""
    warnings = [f"warning: methodology {w.text()}" for w in report.warnings]
    reasons = dict((w.id, reason) for w, reason in report.ignored)
    rest = []
    for name, reason in reasons.items():
        keys = [w.key for w, _ in report.ignored if w.id == name]
        rest.append(f"  [{name}] ignored ({len(keys)} warning(s), at "
                    f"{', '.join(dict.fromkeys(keys))}): {reason} ({IGNORE_KEY}.{name})")
    return warnings, rest + [f"  {note}" for note in report.notes]

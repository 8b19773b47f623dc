"""The scoring run: ``python3 $program/score.py $input $output [/app/data]`` on the worker.

Reads ``$input/ref`` (hidden references; or, where the phase keeps them sealed on the
worker, the mount named third, ``worker_references.py``) and ``$input/res`` (the
submission's files, or what the ingestion program wrote) by name only: the worker leaves
other files in both (codalab_v1.md G21). Writes ``$output/scores.txt`` and ``$output/detailed_results.html``.
Exit status: 0 scored; 1 reference data or config broken (the organizer's to fix); 2 bad
arguments or an internal error; 3 a competition rule fails the submission (``runtime/rules/``:
by the run record, as it would have on CodaLab, whose worker fails it at the ingestion's exit,
or, in a phase whose rule says so, because the code never ran at all: a zip CodaLab took for
prediction files, whose finishing would use up the phase's submissions); 4 the ingestion
refused the submission (it carries a command of its own, which the platform runs outside the
sandbox); 5 no task could be scored (every task penalised: missing or malformed predictions,
every training run failed, prediction files in a code phase, an empty zip): the report is
written, the scores file is not, and both platforms fail the submission, which then counts
toward no limit (codabench_v2.md §3.7, codalab_v1.md §4.7), where a Finished all-worst
submission would use one up. What is scored is each scored run the record shows
(``rules.record_runs``): the phase's own, or a rule's run instead of it (the smoke test),
scored apart, reported, never written to a scores file, and the run's exit status (6 for the
smoke test) fails the submission on both platforms, so that it ranks nowhere and counts toward
no limit. A task with no usable prediction beside scored ones gets the worst value of every
column and the submission is scored; the report says why. Every failure is explained on
stderr in one line first, and every exit but bad arguments writes ``detailed_results.html``
anew: on failure, a page that says why (``report.SubmissionFailed``), since the platforms
show it for a failed submission, often where no log is shown.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

from runtime.formats import (RECORD_KEY_NAME, RECORD_NAME, FormatError, RunRecord, TaskRun,
                             read_record_key, read_run_record, signature_problem)
from runtime.formats.run_record import (codabench_layout, importer_key, shown_submission,
                                       submission_digest)

from runtime import failures, rules
from runtime.scoring import ReferenceDataError, result_summary

from .config import (CONFIG_NAME, PRIVATE_FOLDER, SIGNED_RULES, ConfigError, load_config,
                     private_files)
from .parallel_scoring import score_all
from .report import (INTERNAL_FAULT, ORGANIZERS_FAULT, RULE_FAULT, SubmissionFailed,
                     render_failure, render_report)
from .scores_file import column_values, weighted_loss, write_scores
from .worker_references import open_worker_references

USAGE = ("usage: score.py INPUT_DIR OUTPUT_DIR [WORKER_DATA]   (INPUT_DIR holds ref/ and res/; "
         "WORKER_DATA: the worker's data mount, where a phase keeps its references sealed)")
REPORT_NAME = "detailed_results.html"
DETAILS_NAME = "detailed_results.json"     # the report's numbers, for scripts


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _run_record(res: Path, problems: list[str]):
    if not (res / RECORD_NAME).is_file():
        return None
    try:
        return read_run_record(res / RECORD_NAME)
    except FormatError as error:
        problems.append(f"ingestion record ignored: {error}")
        return None


NOT_A_TRAINING_RUN = ("this phase scores what your code predicts when the ingestion program runs "
                      "it; {why}. Prediction files are not accepted in this phase (CodaLab "
                      "takes a zip without a root 'metadata' file for prediction files and "
                      "never runs its code)")


def record_refusal(config, ref: Path, res: Path, record,
                   on_codabench: bool = False) -> str | None:
    """Why ``res/`` cannot be taken for the output of a training run, where the phase needs
    one; None when it can (or the phase takes prediction files). ``on_codabench``: scored in
    Codabench's layout, where a v1.5 bundle's ingestion signs with its importer key; only a v1.5
    bundle's scorer (``signed_or_importer``) accepts that key, since a native Codabench bundle's
    ingestion never signs with it."""
    if config.record == "optional":
        return None
    if record is None:
        return NOT_A_TRAINING_RUN.format(why=f"the output holds no readable {RECORD_NAME}")
    if config.record in SIGNED_RULES:
        try:
            key = read_record_key(ref)
        except FormatError as error:
            raise ReferenceDataError(str(error)) from None
        if key is None:
            raise ReferenceDataError(f"{ref / RECORD_KEY_NAME}: missing; it checks the "
                                     "ingestion record (rebuild the bundle)")
        problem = signature_problem(res / RECORD_NAME, key)
        if problem and on_codabench and config.record == "signed_or_importer":
            problem = problem if signature_problem(res / RECORD_NAME, importer_key(key)) else None
        shown = shown_submission(res.parent) if on_codabench else None
        if problem:
            return NOT_A_TRAINING_RUN.format(why=problem) + _copied_over(shown, record)
        if shown is not None and record.submission != submission_digest(shown):
            return ANOTHER_SUBMISSIONS_RECORD + _copied_over(shown, record)
    return None


ANOTHER_SUBMISSIONS_RECORD = (
    f"the {RECORD_NAME} scored is not this submission's: it was signed for a run of other "
    "files, so it is an earlier run's output, not this one's")
COPIED_OVER = ("; Codabench copies your submission's files over the ingestion's output before "
               "scoring, and your zip holds {names}, named like what the ingestion writes, so "
               "they replaced its output: remove them from the zip (the starting kit's "
               "submission_zip.py refuses such files)")


def _copied_over(shown: Path | None, record) -> str:
    """Where the worker shows the submission: its files that landed on the ingestion's."""
    if shown is None:
        return ""
    outputs = {RECORD_NAME, *(record.files if record is not None else ())}
    names = sorted(name for name in outputs if (shown / name).is_file())
    return COPIED_OVER.format(names=", ".join(names)) if names else ""


def _refused_record(config, reason: str) -> RunRecord:
    """Every task as a run that delivered nothing, so each is penalised with the reason:
    what the phase got is not the output of its code."""
    return RunRecord({task.name: TaskRun("invalid", float(task.budget_seconds or 0.0),
                                         message=reason, failure=failures.WRONG_PHASE)
                      for task in config.tasks})


CODE_IN_RESULTS_PHASE = ("; the submission holds code ({files}), but this phase scores "
                         "prediction files and runs no code")


def _code_in_results_phase(config, res: Path, result):
    """A phase that takes prediction files, sent code: a task whose file is missing is the
    wrong phase's submission, not an empty one."""
    code = sorted(path.name for path in res.glob("*.py"))
    if config.record != "optional" or not code or result.failure != failures.NOTHING:
        return result
    return dataclasses.replace(result, failure=failures.WRONG_PHASE, penalty=result.penalty
                               + CODE_IN_RESULTS_PHASE.format(files=", ".join(code[:3])))


def _with_traceback(result, record):
    """A penalised run that raised: the participant's own frames the ingestion recorded."""
    run = record.tasks.get(result.task.name) if record else None
    if not result.penalised or run is None or run.has_prediction or not run.traceback:
        return result
    return dataclasses.replace(result, traceback=run.traceback)


def _penalty_lines(result) -> list[str]:
    """The log's lines of a penalised task: its category first, then their traceback."""
    return ([f"task {result.task.name} penalised: {result.headline}"]
            + [f"task {result.task.name}:   | {line}" for line in result.traceback.splitlines()])


SUBMISSION_REFUSED = 4   # the ingestion ran nothing of it (it carries a command of its own)
NOTHING_SCORED = 5       # every task penalised: failed, so that it uses up no submission
NOTHING_SCORED_REASON = ("no task could be scored (every task was penalised; each task's reason "
                         "is given with it)")


def _rule_fields(result, record) -> dict:
    """The rules' entries in the task's signed run record (a budget in epochs' conversion)."""
    run = record.tasks.get(result.task.name) if record else None
    return dict(run.rules) if run is not None else {}


def _with_notes(result, record):
    """The report says what a budget in epochs came to on the worker that ran the code, and
    what the rules say of the task's figures."""
    notes = []
    notes += rules.task_notes(_rule_fields(result, record))
    notes += rules.result_notes(result.task)
    return dataclasses.replace(result, notes=(*result.notes, *notes)) if notes else result


def _not_scored(refusal: str | None, record, made) -> tuple[int, SubmissionFailed] | None:
    """Where nothing is scored and the submission fails: the exit status and why, or None.
    A rule's run may fail a submission whose code never ran; the ingestion may have refused
    it (nothing ran); a rule's run may fail it by the run record (the tasks it ran first fell
    short). ``made``: the runs the record shows (``rules.record_runs``)."""
    rule_failure = next((run.failure for run in made if run.failure), None)
    if rule_failure and refusal:
        return rules.RULE_FAILED, SubmissionFailed(
            f"{refusal}. {rule_failure}", (failures.BY_CODE[failures.WRONG_PHASE],))
    if refusal or record is None:
        return None
    if record.refused:
        runs = list(record.tasks.values())
        return SUBMISSION_REFUSED, SubmissionFailed(
            f"the ingestion refused the submission: {record.refused}",
            _categories([failures.of_run(run.status, run.failure) for run in runs],
                        failures.BY_CODE[failures.SANDBOX]))
    if rule_failure:
        runs = _rules_runs(record)
        return rules.RULE_FAILED, SubmissionFailed(
            rule_failure, _categories([_failure_of(run) for _, run in runs], RULE_FAULT),
            tuple((task, run["traceback"]) for task, run in runs
                  if isinstance(run.get("traceback"), str) and run["traceback"]))
    return None


def _rules_runs(record) -> list[tuple[str, dict]]:
    """The task runs a rule keeps in its record entry (tasks it ran before the phase's), as
    (task, run) in the record's order."""
    return [(task, run) for entry in record.rules.values() if isinstance(entry, dict)
            and isinstance(entry.get("tasks"), dict)
            for task, run in entry["tasks"].items() if isinstance(run, dict)]


def _failure_of(run: dict) -> str | None:
    """The category of a run a rule kept, None where it ended ok (the rule may still have
    found it wanting: the kind's own test of those runs)."""
    status = run.get("status")
    return None if status == "ok" else failures.of_run(status, failures.known(run.get("failure")))


def _categories(codes, fallback: failures.Failure) -> tuple[failures.Failure, ...]:
    """Each named category once, in order; ``fallback`` where none is named."""
    named = tuple(failures.BY_CODE[code] for code in dict.fromkeys(codes) if code)
    return named or (fallback,)


def _write_page(output_dir: Path, page: str) -> None:
    """The page whole or not at all, in place of anything of its name: the worker uploads it
    as it changes (Codabench every 5 s) and a file placed there before must not stay. A link
    of that name is replaced, not followed; the partial file's name ends in no '.html', so a
    worker looking for any page never takes it."""
    output_dir.mkdir(parents=True, exist_ok=True)
    target = output_dir / REPORT_NAME
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    descriptor, partial = tempfile.mkstemp(dir=output_dir, prefix=".detailed-", suffix=".part")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as opened:
            opened.write(page)
        os.chmod(partial, 0o644)     # read by the worker's uploader, maybe not as this user
        os.replace(partial, target)
    finally:
        if os.path.lexists(partial):
            os.unlink(partial)


def score(input_dir: Path, output_dir: Path, program_dir: Path,
          worker_data: Path | None = None) -> int:
    """``worker_data``: the worker's data mount, where a phase keeps its references sealed
    instead of in ``$input/ref``."""
    config = load_config(program_dir / CONFIG_NAME)
    on_codabench = codabench_layout(program_dir, input_dir)
    if config.worker_references is None:
        return _score(config, input_dir / "ref", input_dir, output_dir, on_codabench)
    with tempfile.TemporaryDirectory(prefix="references-") as opened:
        ref = open_worker_references(config.worker_references, worker_data, Path(opened))
        return _score(config, ref, input_dir, output_dir, on_codabench)


def _score(config, ref: Path, input_dir: Path, output_dir: Path, on_codabench: bool) -> int:
    res = input_dir / "res"
    for folder, what in ((ref, "reference data"), (res, "submission")):
        if not folder.is_dir():
            raise ReferenceDataError(f"{folder}: missing ({what} folder)")
    problems: list[str] = []
    record = _run_record(res, problems)
    refusal = record_refusal(config, ref, res, record, on_codabench)
    made = rules.record_runs(config, None if refusal else record.rules if record else {})
    stopped = _not_scored(refusal, record, made)
    if stopped is not None:
        status, failed = stopped
        _say(f"not scored: {failed.reason}. The submission fails; failed submissions do not "
             "count toward the limits")
        _write_page(output_dir, render_failure(failed, config.phase))
        return status
    if refusal:
        record = _refused_record(config, refusal)
    statuses = [(_score_ranked if run.ranked else _score_apart)(
        run, ref, res, output_dir, record, problems) for run in made if run.scored]
    return next((status for status in statuses if status), 0)


def _score_ranked(run, ref: Path, res: Path, output_dir: Path, record, problems) -> int:
    """A run whose scores go to the leaderboard (the phase's own): the report, the scores
    file, the rules' private figures; ``NOTHING_SCORED`` where every task is penalised."""
    config = run.config
    ref, res = ref / run.folder, res / run.folder
    results = [_with_traceback(_code_in_results_phase(config, res, _with_notes(result, record)),
                               record) for result in score_all(config, ref, res, record)]
    private = _private_results(config, ref, res, record, results)
    for result in results:
        if result.penalised:
            for line in _penalty_lines(result):
                _say(line)
        for note in result.notes:
            _say(f"task {result.task.name}: {note}")
    output_dir.mkdir(parents=True, exist_ok=True)
    usable = [r for r in results if not r.penalised]
    loss = weighted_loss(results)
    failed = None if usable else _nothing_scored(results)
    _write_page(output_dir, render_report(results, config.scoring, phase=config.phase,
                                          weighted_loss=loss, problems=problems, failed=failed))
    if failed:
        problems.append(f"not scored: {NOTHING_SCORED_REASON}. The submission fails; failed "
                        "submissions do not count toward the limits")
    _write_details(output_dir / DETAILS_NAME, config, results, problems, record)
    for problem in problems:
        _say(problem)
    if not usable:
        return NOTHING_SCORED
    text = _write_scores(output_dir, config, column_values(config, results, private), private,
                         record)
    print(f"scored {len(usable)} of {len(results)} task(s) of phase {config.phase}:\n{text}", end="")
    return run.exit_status


def _nothing_scored(results) -> SubmissionFailed:
    """Every task penalised: each category once, and where their code raised, their line."""
    return SubmissionFailed(
        NOTHING_SCORED_REASON, _categories([result.failure for result in results], RULE_FAULT),
        tuple((result.task.name, result.traceback) for result in results if result.traceback))


def _score_apart(run, ref: Path, res: Path, output_dir: Path, record, problems) -> int:
    """A run never ranked (the smoke test), scored with its own config: the report under the
    run's heading and the scores in the log, never a scores file, then the run's exit status,
    so that the platforms rank nothing of it."""
    config = run.config
    results = [_with_traceback(_with_notes(result, record), record)
               for result in score_all(config, ref / run.folder, res / run.folder, record)]
    for result in results:
        for line in _penalty_lines(result) if result.penalised else []:
            _say(line)
        for note in result.notes:
            _say(f"task {result.task.name}: {note}")
    output_dir.mkdir(parents=True, exist_ok=True)
    loss = weighted_loss(results)
    _write_page(output_dir, render_report(results, config.scoring, phase=config.phase,
                                          weighted_loss=loss, problems=[],
                                          heading=run.heading))
    _write_details(output_dir / DETAILS_NAME, config, results, [], record)
    kept = {key for keys in config.private_keys.values() for key in keys}
    _say(f"{run.heading}: {len(results)} task(s) of phase {config.phase}")
    for key, value in column_values(config, results).items():
        if key not in kept:             # the rules' private figures stay private here too
            _say(f"{key}: {value}")
    _say(run.closing)
    return run.exit_status


def _write_details(path: Path, config, results, problems, record) -> None:
    """The report's numbers as JSON, for scripts: what participants may see."""
    path.write_text(json.dumps(
        {"phase": config.phase, "weighted_loss": weighted_loss(results), "problems": problems,
         "tasks": {r.task.name: {**result_summary(r), **_rule_fields(r, record)}
                   for r in results}}, indent=1) + "\n", encoding="utf-8")


def _private_results(config, ref: Path, res: Path, record, results) -> list | None:
    """Every task as the rules' private columns read it, where the phase has any: the tasks
    the rules score with options of theirs (a public part of the rows) are scored again
    without them, the others' results serve as they are."""
    if not config.private_columns:
        return None
    restricted = dataclasses.replace(config, tasks=tuple(
        task for task in config.tasks if rules.score_options(task)))
    rescored = {r.task.name: r for r in score_all(restricted, ref, res, record, private=True)}
    return [rescored.get(result.task.name, result) for result in results]


def _write_scores(output_dir: Path, config, values: dict, private_results, record) -> str:
    """The leaderboard's values; the rules' private figures, with their details, where only
    the organizers can read them: the private output (CodaLab v1.5's private_output.zip; on
    Codabench the scoring output, which the phase hides). Returns what may be shown."""
    kept = config.private_keys
    for output, keys in kept.items():
        stem, details = private_files(output)
        private = output_dir / PRIVATE_FOLDER
        private.mkdir(exist_ok=True)
        write_scores(private, {key: values[key] for key in keys}, stem=stem)
        _write_details(private / details, config, private_results, [], record)
    hidden = {key for keys in kept.values() for key in keys}
    return write_scores(output_dir, {key: value for key, value in values.items()
                                     if key not in hidden})


def main(argv: list[str], program_dir: Path) -> int:
    if len(argv) not in (2, 3):
        _say(USAGE)
        return 2
    try:
        return score(Path(argv[0]), Path(argv[1]), program_dir,
                     Path(argv[2]) if len(argv) == 3 else None)
    except (ConfigError, ReferenceDataError) as error:
        _say(f"scoring stopped, the organizer must fix: {error}")
        _page_of_fault(Path(argv[1]), ORGANIZERS_FAULT)
        return 1
    except Exception as error:   # noqa: BLE001 - last resort: explain before the traceback
        _say(f"internal error in the scoring program ({type(error).__name__}: {error}); "
             "please report it to the organizers with the traceback below")
        traceback.print_exc()
        _page_of_fault(Path(argv[1]), INTERNAL_FAULT)
        return 2


def _page_of_fault(output_dir: Path, fault) -> None:
    """A failure that is not the submission's: the page says who must act and nothing of the
    error, whose text may name or quote the hidden references; it replaces any report
    written before the error."""
    failed = SubmissionFailed("the scoring program stopped before it scored your submission",
                              (fault,))
    try:
        _write_page(output_dir, render_failure(failed, None))
    except OSError as error:
        _say(f"could not write {output_dir / REPORT_NAME}: {error}")

"""Codabench (competition.yaml ``version: 2``, codabench_v2.md): its yaml and member layout,
texts, worker and rules.

Facts from codabench_v2.md: phases, tasks and leaderboards are lists; dates are quoted UTC
strings (an unquoted timestamp loses its time of day); keys and titles of columns are at
most 36 characters; a column of index 0 ranks; ``submission_rule`` is set explicitly
(``Add``, the default, is manual). Codabench's ``avg`` computation averages values, not
ranks, so CodaLab's average-rank column has no Codabench form: the weighted loss (several
tasks) or the task's primary metric (one task) ranks instead.
"""
from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from pathlib import Path

import yaml

from ..dry_run import (DATASET_KEYS_NOT_CHECKED, SAMPLES, StepResult, kept_keys,
                       own_command_step, phase_keys, private_full_scores, score_step,
                       start_own_command, submission_step, timed, unzip, unzip_bundle,
                       without_capabilities, worker_env)
from ..leaderboard import LeaderboardColumn, codabench_columns
from ..render import environment, logo_member, yaml_scalar
from ..rules.codabench_yaml import items
from ..spec import CompetitionSpec, PhaseSpec
from ..worker import NO_OUTPUT_FAILURE, NO_PREDICTIONS_FAILURE
from . import Platform
from .codabench_site import hidden_figure_leaks, leaderboard_problem

LEADERBOARD_KEY = "results"
SUBMISSION_RULE = "Force_Last"
# The default queue caps execution_time_limit at this (MAX_EXECUTION_TIME_LIMIT, §3.1).
DEFAULT_QUEUE_LIMIT_SECONDS = 600
# A phase without execution_time_limit gets this (codabench_v2.md §3.1): another fact that
# happens to be the same number.
DEFAULT_EXECUTION_TIME_LIMIT_SECONDS = 600
PAGE_FILES = {"Overview": "pages/overview.html", "Evaluation": "pages/evaluation.html",
              "Data": "pages/data.html", "Starting kit": "pages/starting_kit.html"}
TERMS_FILE = "pages/terms.html"


def quoted(value) -> str:
    """A YAML scalar for Codabench: strings and dates quoted (dates as UTC text)."""
    return yaml_scalar(value, quote_dates=True)


def _phase_end(spec: CompetitionSpec, phases: list[PhaseSpec], index: int):
    """Codabench phases must not overlap, and one may not end as the next starts (§1.4): a
    phase ends a second before the next opens; the last at the competition's end date."""
    if index + 1 < len(phases):
        return phases[index + 1].start - dt.timedelta(seconds=1)
    return spec.end_date


def _phase_fields(spec, phases, index, files, hide_scores: bool,
                  task_indexes: list[int]) -> list[tuple[str, str]]:
    phase = phases[index]
    fields = [("name", phase.label), ("description", phase.description), ("start", phase.start)]
    end = _phase_end(spec, phases, index)
    if end:
        fields.append(("end", end))
    fields += [("max_submissions", phase.max_submissions),
               ("max_submissions_per_day", phase.max_submissions_per_day),
               ("execution_time_limit", phase.execution_time_limit),
               ("public_data", files["public_data"]), ("starting_kit", files["starting_kit"])]
    if hide_scores:      # its scoring output holds the full figures in private/ (§3.9)
        fields.append(("hide_score_output", True))
    return [(k, quoted(v)) for k, v in fields] + [
        ("tasks", "[" + ", ".join(map(str, task_indexes)) + "]")]


PROGRAM_KEYS = ("scoring_program", "reference_data", "ingestion_program", "input_data")


def _tasks(phases: list[PhaseSpec], files: list[dict]) -> tuple[list[dict], list[list[int]]]:
    """The Codabench tasks, and each phase's task indexes: one Codabench task per phase, which
    runs and scores all its tasks in one run. With several, a submission would become one child
    per task, and the leaderboard's Force_Last rule would keep one child of each submission
    (§3.10; spec key codabench_tasks)."""
    tasks = [{"index": index, "fields": [
        ("name", quoted(f"{phase.label} tasks")),
        ("description", quoted("All tasks of the phase, scored together")),
        *((key, quoted(phase_files[key])) for key in PROGRAM_KEYS if key in phase_files)]}
        for index, (phase, phase_files) in enumerate(zip(phases, files))]
    return tasks, [[task["index"]] for task in tasks]


def competition_yaml_v2(spec: CompetitionSpec, phases: list[PhaseSpec], files: list[dict],
                        columns: list[LeaderboardColumn], logo: str,
                        hide_scores: list[bool] | None = None) -> str:
    """The version 2 yaml of a competition holding ``phases``, each with its own Codabench
    task; every phase shares ``leaderboards[0]`` (§1.4). ``hide_scores``: per phase, whether
    its scoring output holds full figures only organizers may read."""
    hide_scores = hide_scores or [False] * len(phases)
    top_level = [("title", spec.title), ("description", spec.description), ("image", logo),
                 ("terms", TERMS_FILE), ("docker_image", spec.docker_image),
                 ("registration_auto_approve", False), ("enable_detailed_results", True),
                 ("make_programs_available", False), ("make_input_data_available", False),
                 ("competition_type", "competition")]
    if spec.codabench_queue:
        top_level.append(("queue", spec.codabench_queue))
    tasks, indexes = _tasks(phases, files)
    contacts = [o["contact"] for o in spec.organizers if "@" in o.get("contact", "")]
    if contacts:
        top_level.append(("contact_email", contacts[0]))
    context = {
        "spec_name": spec.path.name,
        "top_level": [(k, quoted(v)) for k, v in top_level],
        "pages": [{"title": quoted(title), "file": quoted(path)} for title, path in PAGE_FILES.items()],
        "tasks": tasks,
        "phases": [{"index": index, "fields": _phase_fields(spec, phases, index, phase_files,
                                                            hide_scores[index], indexes[index])}
                   for index, phase_files in enumerate(files)],
        "leaderboards": [{"title": quoted("Results"), "key": quoted(LEADERBOARD_KEY),
                          "submission_rule": quoted(SUBMISSION_RULE),
                          "columns": [{"index": index, "fields": [
                              ("title", quoted(c.label)), ("key", quoted(c.key)),
                              ("sorting", quoted(c.sort)), ("precision", quoted(c.numeric_format))]}
                              for index, c in enumerate(codabench_columns(columns))]}],
    }
    text = environment().get_template("competition_v2.yaml.j2").render(context)
    parsed = yaml.safe_load(text)
    assert parsed["version"] == 2 and all(isinstance(p["start"], str) for p in parsed["phases"])
    return text


# ---- the worker (§3) ------------------------------------------------------------------

def _program_container(app: Path, submission: Path, folder: Path) -> Path:
    """The folders Codabench mounts into the submission's own container (§3.4): its files as
    /app/program, the shared output and the input data; not the ingestion program."""
    folder.mkdir(parents=True)
    (folder / "program").symlink_to(submission)
    (folder / "output").symlink_to(app / "output")
    (folder / "input_data").symlink_to(app / "input_data")
    return folder


def _push_output(name: str, output: Path, step: StepResult | None) -> StepResult | None:
    """§3.7: the worker writes output/metadata, and fails if the program wrote one, or if
    no container or copy made the output folder."""
    if not output.is_dir():
        return StepResult(name, "output", 0.0, "failed", NO_OUTPUT_FAILURE)
    if (output / "metadata").exists():
        return StepResult(name, "output", 0.0, "failed",
                          "Error, the output directory already contains a metadata file")
    code = 0 if step is None or step.status == "ok" else 1
    (output / "metadata").write_text(f"exitCode: 0\nelapsedTime: 0\ningestionExitCode: {code}\n"
                                     "ingestionElapsedTime: 0\n")
    return None


def _no_predictions(name: str) -> StepResult:
    """The scoring job was queued when the prediction step set the status to Scoring, and
    cannot download a prediction result that was never uploaded (§3.3)."""
    return StepResult(name, "scoring", 0.0, "failed", (
        f"{NO_PREDICTIONS_FAILURE}: the prediction step uploaded no output, and the worker "
        "tries to download it 10 times, 20 s apart, before failing the submission"))


def _hidden_figures_kept(step: StepResult, phase: dict, competition: dict, keys: list[str],
                         app: Path) -> None:
    """§3.9: no figure the scorer keeps for the organizers reaches anyone else through the
    site (its submissions API, logs, scoring output or detailed results)."""
    if step.status != "ok":
        return
    leaks = hidden_figure_leaks(phase, competition, keys, app / "output", step.log,
                                kept_keys(app / "program"))
    if leaks:
        step.status, step.detail = "failed", "figures kept from participants would be public:\n" \
            + "\n".join(leaks)


def _leaderboard_step(competition: dict, phase: dict, scored: dict[str, dict]) -> StepResult:
    """§3.10: what the leaderboard's rule keeps of a participant's two submissions of this
    phase's zip, each scored as above on every task."""
    board = competition["leaderboards"][0]
    ranking = next(c for c in board["columns"] if c["index"] == board.get("primary_index", 0))
    problem = leaderboard_problem(board.get("submission_rule", "Add"),
                                  (ranking["key"], ranking.get("sorting", "desc")),
                                  list(scored), scored)
    return StepResult(phase.get("name", "phase"), "leaderboard", 0.0,
                      "failed" if problem else "ok", problem or "")


class Codabench(Platform):
    name = "codabench"
    title = "Codabench"
    bundle_suffix = "-codabench"
    upload_where = "Codabench: Benchmarks > Management > Upload"
    image_key = "docker_image"
    default_image = "codalab/codalab-legacy:py37"
    reveal_text = ("at the end, for the final ranking on all test rows: rebuild with "
                   "reveal_full_scores: true, replace each task's scoring program and re-run all "
                   "submissions (the full figures are meanwhile in private/ of each submission's "
                   "scoring output, which only organizers can download; check a re-run's "
                   "scoring log: Codabench may keep running the old program for a while, its "
                   "issue #2128)")
    signing_text = ("code phases: the ingestion signs its record with a key made from the "
                    "secret in {secret} (keep it to rebuild the same bundles); on Codabench the "
                    "key is in the ingestion program: leave 'make programs available' off in the "
                    "competition's editor, or participants can download it and forge scored runs")
    gpu_workers = ("a container gets the GPU only on workers started with USE_GPU (codabench_v2.md "
                   "§3.4): name a queue of GPU workers (spec key codabench_queue)")
    # Never in a leaderboard column: the submissions API shows hidden ones too (§3.9).
    full_scores_text = ("Tasks scored on a public part of their test rows are also scored on all "
                        "of them for every submission; those full figures go to the submission's "
                        "scoring output, which this phase hides from participants, and to no "
                        "leaderboard column. At the end the organizers re-score every submission "
                        "on all rows for the final ranking. Your detailed results and logs show "
                        "the public part only.")
    ranking_text = ("Codabench averages values, not ranks, so the average rank over tasks that "
                    "ranks this competition on CodaLab cannot be expressed here: the weighted "
                    "loss ranks instead.")
    timeout_message = "Execution Time Limit exceeded. Limit was {limit:g} seconds"
    record_rule = "signed"
    # Codabench mounts no reference data in the prediction step and gives each container only
    # its own program folder (§3.4), so the key that signs the run record is in the ingestion
    # program, which participants cannot download (make_programs_available: false).
    record_key_in_program = True
    not_reproduced = (
        "the time limit as the real worker applies it: this worker revision does not enforce it "
        "(its alarm is swallowed); the dry run enforces min(limit, 600 s) as the default queue "
        "should (on a custom queue, the limit), and the ingestion's per-task budgets are the "
        "real bound; that a custom queue exists and admits you is checked only on upload",
        "network access from the container (on unless the worker host disables it)",
        "the site's upload limits (submissions per day and in total); the leaderboard's rule "
        "is modelled for one participant's two submissions of the same zip, not for many",
        DATASET_KEYS_NOT_CHECKED,
    )
    # Codabench files both zip and YAML problems as structure.
    zip_rule, yaml_rule, files_rule = "v2-structure", "v2-structure", "v2-tasks"
    missing_yaml = ("competition.yaml is missing from the zip root ('competition.yaml is "
                    "missing from zip')")
    default_queue_limit_seconds = DEFAULT_QUEUE_LIMIT_SECONDS
    default_execution_time_limit_seconds = DEFAULT_EXECUTION_TIME_LIMIT_SECONDS

    # ---- building ---------------------------------------------------------------------

    def documents(self, spec, phases, plans, columns, files, pages) -> dict[str, bytes]:
        hide_scores = [any(task.public_rows for task in plan.tasks) for plan in plans]
        members = {"competition.yaml": competition_yaml_v2(spec, phases, files, columns,
                                                           logo_member(spec),
                                                           hide_scores).encode("utf-8"),
                   logo_member(spec): spec.logo.read_bytes(),
                   TERMS_FILE: pages["terms.html"].encode("utf-8")}
        for path in PAGE_FILES.values():
            members[path] = pages[path.split("/")[-1]].encode("utf-8")
        return members

    def spec_problem(self, spec) -> str | None:
        return None if spec.logo else "Codabench requires a logo (image): set logo: in the spec"

    def leaderboard_columns(self, columns: list) -> list:
        return codabench_columns(columns)

    def ranking_note(self, columns: list) -> str:
        return self.ranking_text if any(column.computed for column in columns) else ""

    def names_gpu_queue(self, spec) -> bool:
        return bool(spec.codabench_queue)

    def phase_warnings(self, phase, spec) -> list[str]:
        if not spec.codabench_queue and phase.execution_time_limit > DEFAULT_QUEUE_LIMIT_SECONDS:
            return [f"execution_time_limit {phase.execution_time_limit} s: Codabench's default "
                    f"queue caps it at {DEFAULT_QUEUE_LIMIT_SECONDS} s (a custom queue does not)"]
        return []

    def dataset_upload_step(self, dataset) -> str:
        return (f"on Codabench open Resources > Datasets/Programs > Add Dataset/Program, name "
                f"it {dataset.name}, type '{dataset.file_type}', upload {dataset.file}; click it "
                "in the list to see its key")

    # ---- the worker -------------------------------------------------------------------

    def worker_variables(self, program: str, root: Path) -> dict[str, Path | str]:
        """The legacy variables as the worker replaces them in one container whose /app is
        ``root`` (§3.4): the same names for every program, its folders differing between the
        ingestion and any other container (the scorer's, a submission's own)."""
        ingestion = program == "ingestion_program"
        return {"$input": root / ("input_data" if ingestion else "input"),
                "$output": root / "output",
                "$program": root / "program", "$ingestion_program": root / "program",
                "$hidden": root / "input" / "ref", "$shared": root / "shared",
                "$submission_program": root / "ingested_program", "$tmp": root / "output",
                "$predictions": root / "output" if ingestion else root / "input" / "res"}

    def _timed(self, phase: str, step: str, app: Path, program: str, python: str,
               limit: float) -> StepResult:
        """Codabench runs every container from its own /app/program, without capabilities."""
        return timed(self, phase, step, app / "program", self.worker_variables(program, app),
                     python, app / "program", limit, env=worker_env(),
                     prefix=without_capabilities())

    def dry_run(self, bundle_zip: Path, python: str, submission_zip: Path | None = None,
                datasets: dict[str, Path] | None = None) -> list[StepResult]:
        with tempfile.TemporaryDirectory(prefix="dry-run-v2-") as work:
            bundle = unzip_bundle(bundle_zip, Path(work) / "bundle", datasets)
            competition = yaml.safe_load((bundle / "competition.yaml").read_text(encoding="utf-8"))
            columns = competition["leaderboards"][0]["columns"]
            keys = [c["key"] for c in columns if c.get("computation") is None]
            tasks = {str(t["index"]): t for t in competition["tasks"]}
            results = []
            for number, phase in enumerate(competition["phases"]):
                scored = {}
                for index in phase["tasks"]:
                    steps = self._run_task(bundle, competition, phase, tasks[str(index)], keys,
                                           python, Path(work) / f"phase{number}-task{index}",
                                           submission_zip)
                    if steps[-1].status == "ok":
                        scored[str(tasks[str(index)].get("name", index))] = steps[-1].scores
                    results += steps
                if len(scored) == len(phase["tasks"]):       # a failed submission ranks nowhere
                    results.append(_leaderboard_step(competition, phase, scored))
            return results

    def _predict(self, bundle: Path, name: str, task: dict, submission_zip: Path, python: str,
                 work: Path, limit: float) -> tuple[list[StepResult], Path]:
        app = work / "predict" / "app"
        app.mkdir(parents=True)
        code_phase = bool(task.get("ingestion_program"))
        submission = unzip(submission_zip, work / "submission")
        step, dispatch = submission_step(name, submission, self, code_phase, app / "output")
        if dispatch.makes_output:
            (app / "output").mkdir(exist_ok=True)
        results = [step]
        ingestion = None
        if dispatch.runs_ingestion:
            unzip(bundle / task["ingestion_program"], app / "program")
            unzip(bundle / task["input_data"], app / "input_data")
            shutil.copytree(submission, app / "ingested_program")
            own = start_own_command(submission, self.worker_variables(
                "submission", _program_container(app, submission, work / "predict" / "program_app")),
                submission, self, python)
            ingestion = self._timed(name, "ingestion", app, "ingestion_program", python, limit)
            results.append(ingestion)
            results += own_command_step(name, own, limit)
        pushed = _push_output(name, app / "output", ingestion)
        if pushed:
            results.append(pushed)
        return results, app / "output"

    def _run_task(self, bundle: Path, competition: dict, phase: dict, task: dict,
                  keys: list[str], python: str, work: Path,
                  submission_zip: Path | None) -> list[StepResult]:
        """One Codabench task of a phase: a child submission of its own when the phase has
        several (§3.1), each under the phase's time limit."""
        name = phase.get("name", "phase")
        if len(phase.get("tasks", [])) > 1:
            name = f"{name} / {str(task.get('name', task.get('index'))).removesuffix(f' ({name})')}"
        limit = float(phase.get("execution_time_limit", DEFAULT_EXECUTION_TIME_LIMIT_SECONDS))
        if not competition.get("queue"):     # the default queue caps it (§3.1)
            limit = min(limit, DEFAULT_QUEUE_LIMIT_SECONDS)
        kit = unzip(bundle / phase["starting_kit"], work / "starting_kit")
        submission_zip = submission_zip or kit / SAMPLES[bool(task.get("ingestion_program"))]
        # Exit codes of the prediction step are not checked: scoring always follows (§3.7).
        results, predictions = self._predict(bundle, name, task, submission_zip, python, work,
                                             limit)
        if not predictions.is_dir():
            return results + [_no_predictions(name)]
        score = work / "score" / "app"
        unzip(bundle / task["scoring_program"], score / "program")
        unzip(bundle / task["reference_data"], score / "input" / "ref")
        shutil.copytree(predictions, score / "input" / "res")
        (score / "output").mkdir(parents=True)
        step = self._timed(name, "scoring", score, "scoring_program", python, limit)
        if step.status == "ok" and (score / "output" / "metadata").exists():
            step.status, step.detail = "failed", "the scorer wrote output/metadata: Codabench fails the step"
        score_step(name, step, score / "output", phase_keys(score / "program", keys), self)
        _hidden_figures_kept(step, phase, competition, keys, score)
        private_full_scores(step, score / "program", score / "output")
        return results + [step]

    # ---- what the rules read ----------------------------------------------------------

    def writes(self, competition: dict) -> bool:
        # any "version" key means a v2 bundle, even a mistyped "2" (which its checks report)
        return "version" in competition

    def pick_yaml(self, names: list[str]) -> str | None:
        """§0: competition.yaml must be at the zip root."""
        return "competition.yaml" if "competition.yaml" in names else None

    def program_zips(self, bundle, programs: tuple[str, ...]) -> list[tuple[str, str]]:
        pairs = {(f"tasks[{index}].{program}", task[program])
                 for index, task in enumerate(items(bundle.comp, "tasks")) for program in programs
                 if isinstance(task, dict) and isinstance(task.get(program), str)}
        return sorted(pairs, key=lambda pair: pair[1])


PLATFORM = Codabench()

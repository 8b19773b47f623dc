"""CodaLab Competitions v1.5 (codalab_v1.md): its competition.yaml, texts, worker and rules.

The yaml is a mapping of phases numbered from 1 with one leaderboard serving every phase
(G26); dates are unquoted (G8: a quoted date fails there). The worker runs a code phase's
ingestion only for a submission whose root has ``metadata`` (§4.1) and splits a program's
command on single spaces (§3.3).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import yaml

from ..dry_run import (DATASET_KEYS_NOT_CHECKED, SAMPLES, StepResult, own_command_step,
                       phase_keys, private_full_scores, score_step, start_own_command,
                       submission_step, timed, unzip, unzip_bundle, worker_env)
from ..leaderboard import LeaderboardColumn
from ..render import PAGES, environment, logo_member, yaml_scalar
from ..rules.codalab_yaml import program_members
from ..spec import CompetitionSpec, PhaseSpec
from . import Platform

LEADERBOARD_LABEL = "Results"
DATASET_TYPES = {"input_data": "Input Data", "reference_data": "Reference Data",
                 "public_data": "Public Data", "starting_kit": "Starting Kit"}


# ---- competition.yaml -----------------------------------------------------------------

def _phase_fields(phase: PhaseSpec, files: dict[str, str]) -> list[tuple[str, str]]:
    fields = {"phasenumber": None, "label": phase.label, "description": phase.description,
              "start_date": phase.start, "max_submissions": phase.max_submissions,
              "max_submissions_per_day": phase.max_submissions_per_day,
              "is_scoring_only": not phase.code_submission,
              "execution_time_limit": phase.execution_time_limit,
              "color": "blue" if phase.code_submission else "green", **files}
    return [(key, yaml_scalar(value)) for key, value in fields.items() if key != "phasenumber"]


def _column_fields(column: LeaderboardColumn, rank: int) -> list[tuple[str, str]]:
    fields = [("label", yaml_scalar(column.label)), ("rank", yaml_scalar(rank)),
              ("sort", yaml_scalar(column.sort)),
              ("numeric_format", yaml_scalar(column.numeric_format))]
    if column.selection_default:
        fields.append(("selection_default", yaml_scalar(column.selection_default)))
    if column.computed:     # fields must be one comma-separated string (a list crashes the site)
        fields.append(("computed", "{operation: Avg, fields: "
                       + json.dumps(",".join(column.computed_fields)) + "}"))
    return fields


def competition_yaml(spec: CompetitionSpec, phases: list[PhaseSpec], files: list[dict[str, str]],
                     columns: list[LeaderboardColumn], title: str) -> str:
    """The v1.5 yaml of a competition holding ``phases`` (numbered 1.. in order, each with
    its own files); its one leaderboard serves every phase (G26)."""
    top_level = [("title", title), ("description", spec.description),
                 ("competition_docker_image", spec.docker_image), ("has_registration", True),
                 ("force_submission_to_leaderboard", True), ("enable_detailed_results", True)]
    if spec.end_date:
        top_level.append(("end_date", spec.end_date))
    if spec.logo:
        top_level.append(("image", logo_member(spec)))
    context = {
        "spec_name": spec.path.name,
        "top_level": [(key, yaml_scalar(value)) for key, value in top_level],
        "html": [(page, yaml_scalar(f"{page}.html")) for page in PAGES],
        "phases": [{"number": number, "fields": [("phasenumber", str(number))]
                    + _phase_fields(phase, phase_files)}
                   for number, (phase, phase_files) in enumerate(zip(phases, files), start=1)],
        "leaderboard_label": yaml_scalar(LEADERBOARD_LABEL),
        "columns": [{"key": c.key, "fields": _column_fields(c, rank)}
                    for rank, c in enumerate(columns, start=1)],
    }
    text = environment().get_template("competition.yaml.j2").render(context)
    _verify_yaml(text, title, phases, columns)
    return text


def _verify_yaml(text: str, title: str, phases: list[PhaseSpec], columns) -> None:
    """Read back what we wrote the way the site will, and compare with what we meant."""
    parsed = yaml.safe_load(text)
    assert parsed["title"] == title, "title did not survive YAML"
    for number, phase in enumerate(phases, start=1):
        assert parsed["phases"][number]["start_date"] == phase.start, "start date not a datetime"
    assert list(parsed["leaderboard"]["columns"]) == [c.key for c in columns]


# ---- the worker (§4) ------------------------------------------------------------------

def _unzip_like_codalab(archive: Path, destination: Path) -> Path:
    """get_bundle (§4.3): data zips as they are, and every top-level inner zip extracted
    into a sibling folder named without ``.zip``."""
    unzip(archive, destination)
    for inner in sorted(destination.glob("*.zip")):
        try:
            unzip(inner, inner.with_suffix(""))
        except zipfile.BadZipFile:
            pass        # the worker's extractall would fail the run; the scorer never reads it
    return destination


def _input_leftovers(input_dir: Path) -> None:
    """§4.2-4.3, G21: what get_bundle leaves next to ref/ and res/ in the scoring input."""
    (input_dir / "metadata").write_text("ref: file:///ref.zip\nres: file:///res.zip\n")
    for folder in ("history", "scores", "coopetition"):
        (input_dir / folder).mkdir(parents=True, exist_ok=True)
        (input_dir / folder / "metadata").write_text("")
    (input_dir / "tmp0000.zip").write_bytes(b"")


class CodaLab(Platform):
    name = "codalab"
    title = "CodaLab v1.5"
    bundle_suffix = ""
    upload_where = "CodaLab: Create competition > upload the zip"
    image_key = "competition_docker_image"
    default_image = "codalab/codalab-legacy:latest"
    reveal_text = ("at the end, for the final ranking on all test rows: rebuild with "
                   "reveal_full_scores: true in the spec, replace each phase's scoring program "
                   "with the rebuilt one and re-run all submissions (the full figures are "
                   "meanwhile in each submission's private output)")
    signing_text = ("code phases: the ingestion signs its record with a key made from the "
                    "secret in {secret} (keep it to rebuild the same bundles); the key is in the "
                    "hidden reference data, which the participant's containers never see")
    gpu_workers = ("a container gets the GPU only on workers started with USE_GPU (codalab_v1.md "
                   "§4.5): after upload choose a queue of GPU workers in the competition's editor "
                   "(Edit > Queue)")
    # v1.5 has no hidden leaderboard columns (§2.4): the full figures go to the private output.
    full_scores_text = ("Tasks scored on a public part of their test rows are also scored on all "
                        "of them for every submission; CodaLab v1.5 has no hidden leaderboard "
                        "columns, so those full figures go to each submission's private output, "
                        "which only the organizers can read. At the end the organizers re-score "
                        "every submission on all rows for the final ranking. Your detailed "
                        "results and logs show the public part only.")
    timeout_message = ("exceeded the phase's execution_time_limit of {limit:g} s (the worker "
                       "kills it: 'Execution time limit exceeded!')")
    record_rule = "signed"
    # CodaLab mounts the hidden reference data ($hidden) into the ingestion's container only,
    # while a submission's own command shares the run folder, ingestion program included
    # (§4.4-4.5): the key that signs the run record waits in the reference data.
    record_key_in_program = False
    not_reproduced = (
        "the container's memory limit (the worker host's memory minus 512 MB) and its CPU speed",
        "network access from the container (the v1 worker sets none; it depends on the host)",
        "the site's upload limits (max_submission_size, submissions per day and in total)",
        "leaderboard placement (force_submission_to_leaderboard) and auto-migration (§4.11)",
        DATASET_KEYS_NOT_CHECKED,
    )
    zip_rule, yaml_rule, files_rule = "zip-structure", "yaml-parses", "phase-files"
    missing_yaml = "no member name contains '.yaml' (the site fails with IndexError)"

    # ---- building ---------------------------------------------------------------------

    def documents(self, spec, phases, plans, columns, files, pages) -> dict[str, bytes]:
        """v1.5 has no hidden columns (§2.4): full figures go to the private output."""
        shown = [column for column in columns if not column.hidden]
        members = {"competition.yaml": competition_yaml(spec, phases, files, shown,
                                                        spec.title).encode("utf-8")}
        members.update({name: html.encode("utf-8") for name, html in pages.items()})
        if spec.logo:
            members[logo_member(spec)] = spec.logo.read_bytes()
        return members

    def after_upload_notes(self, spec) -> list[str]:
        if not spec.codabench_queue:
            return []
        return ["custom queue: CodaLab v1.5 takes no queue in competition.yaml (the key is "
                "refused, G12); after upload choose yours in the competition's editor "
                "(Edit > Queue), or the default queue runs it"]

    def dataset_upload_step(self, dataset) -> str:
        return (f"on CodaLab open My Datasets > Create Dataset (/my/datasets/create), name it "
                f"{dataset.name}, type '{DATASET_TYPES[dataset.file_type]}', upload "
                f"{dataset.file}; the Key column of My Datasets (/my/datasets/) shows its key")

    # ---- the worker -------------------------------------------------------------------

    def worker_variables(self, program: str, root: Path) -> dict[str, Path | str]:
        """§3.3 in ``root``, the worker's temporary folder of a submission: the ingestion
        runs in predict/run/ with the reference data beside it, the scorer in score/run/."""
        step = "predict" if program == "ingestion_program" else "score"
        run = root / step / "run"
        variables = {"$program": run / "program", "$predictions": run / "input" / "res",
                     "$input": run / "input", "$output": run / "output", "$tmp": run / "temp",
                     "$shared": root / "shared"}
        if program == "ingestion_program":
            variables |= {"$program": run / "ingestion_program",        # sic (§3.3)
                          "$ingestion_program": run / "ingestion_program",
                          "$submission_program": run / "program", "$hidden": root / "hidden_ref"}
        return variables

    def dry_run(self, bundle_zip: Path, python: str, submission_zip: Path | None = None,
                datasets: dict[str, Path] | None = None) -> list[StepResult]:
        with tempfile.TemporaryDirectory(prefix="dry-run-") as work:
            bundle = unzip_bundle(bundle_zip, Path(work) / "bundle", datasets)
            competition = yaml.safe_load((bundle / "competition.yaml").read_text(encoding="utf-8"))
            columns = competition["leaderboard"]["columns"]
            keys = [key for key, column in columns.items() if "computed" not in column]
            results = []
            for number, phase in sorted(competition["phases"].items()):
                name = phase.get("label", str(number))
                results += self._run_phase(bundle, name, phase, keys, python,
                                           Path(work) / f"phase{number}", submission_zip)
            return results

    def _predict(self, bundle: Path, name: str, phase: dict, submission_zip: Path, python: str,
                 work: Path, limit: float) -> tuple[list[StepResult], Path, bool]:
        run = work / "predict" / "run"
        for folder in ("input", "output", "temp"):
            (run / folder).mkdir(parents=True)
        (run / "output" / "detailed_results.html").write_text("")      # §4.6: made before the run
        submission = _unzip_like_codalab(submission_zip, run / "program")
        step, dispatch = submission_step(name, submission, self, True, run / "output")
        results = [step]
        if dispatch.runs_ingestion:
            unzip(bundle / phase["ingestion_program"], run / "ingestion_program")
            _unzip_like_codalab(bundle / phase["input_data"], run / "input")
            _unzip_like_codalab(bundle / phase["reference_data"], work / "hidden_ref")
            variables = self.worker_variables("ingestion_program", work)
            # G20: the submission's own command shares the run folder but not $hidden.
            own = start_own_command(submission, {**variables, "$program": run / "program",
                                                 "$hidden": "$hidden"}, run, self, python)
            results.append(timed(self, name, "ingestion", run / "ingestion_program", variables,
                                 python, run, limit, env=worker_env(
                                     {"PYTHONPATH": f"{os.environ.get('PYTHONPATH', '')}:{run / 'program'}"})))
            results += own_command_step(name, own, limit)
        exit_code = 0 if results[-1].status == "ok" else 1
        (run / "output" / "metadata").write_text(           # §4.6: appended by the worker
            f"exitCode: {exit_code}\ningestionExitCode: {exit_code}\nelapsedTime: {results[-1].seconds:.1f}\n")
        # The worker fails the predict step only where it cannot start it or a program failed; a
        # zip it takes for prediction files (our submission step says why that is a mistake)
        # finishes there and is scored (§4.1), and the scorer decides what that costs.
        completed = (dispatch.runs_ingestion or dispatch.copies_to_output) and all(
            result.status == "ok" for result in results[1:])
        return results, run / "output", completed

    def _run_phase(self, bundle: Path, name: str, phase: dict, keys: list[str], python: str,
                   work: Path, submission_zip: Path | None) -> list[StepResult]:
        limit = float(phase.get("execution_time_limit", 300))
        kit = unzip(bundle / phase["starting_kit"], work / "starting_kit")
        code_phase = phase.get("is_scoring_only", True) is False
        submission_zip = submission_zip or kit / SAMPLES[code_phase]
        results: list[StepResult] = []
        if code_phase:
            results, predictions, completed = self._predict(bundle, name, phase, submission_zip,
                                                            python, work, limit)
            if not completed:
                return results      # a failed predict step is never scored (§4.7)
        else:
            predictions = _unzip_like_codalab(submission_zip, work / "results")
        run = work / "score" / "run"
        unzip(bundle / phase["scoring_program"], run / "program")
        _unzip_like_codalab(bundle / phase["reference_data"], run / "input" / "ref")
        shutil.copytree(predictions, run / "input" / "res")
        _input_leftovers(run / "input")
        for folder in ("output", "temp"):
            (run / folder).mkdir(parents=True)
        (run / "output" / "detailed_results.html").write_text("")
        step = timed(self, name, "scoring", run / "program",
                     self.worker_variables("scoring_program", work), python, run, limit,
                     env=worker_env())
        score_step(name, step, run / "output", phase_keys(run / "program", keys), self)
        private_full_scores(step, run / "program", run / "output")
        return results + [step]

    # ---- what the rules read ----------------------------------------------------------

    def writes(self, competition: dict) -> bool:
        return "version" not in competition

    def pick_yaml(self, names: list[str]) -> str | None:
        """§1: the site parses the first member whose name contains '.yaml'."""
        return next((name for name in names if ".yaml" in name), None)

    def program_zips(self, bundle, programs: tuple[str, ...]) -> list[tuple[str, str]]:
        return list(program_members(bundle, *programs))


PLATFORM = CodaLab()

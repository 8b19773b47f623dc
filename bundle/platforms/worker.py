"""How each platform's worker starts a program and treats a participant's submission.

Programs (codalab_v1.md §3.3, §4.4; codabench_v2.md §3.4): the command is the
``command:`` of the program's metadata; variables are replaced with plain string
replacement, and the line is split without a shell. Submissions (codalab_v1.md §4.1,
codabench_v2.md §3.4): whether the ingestion program runs, or the files are taken as
predictions, depends on the submission's own metadata file on CodaLab; Codabench (v1.27 on)
reads no metadata of a submission and copies it over the prediction output before scoring.
Used by the builder's dry run,
the tests and, copied into every starting kit as ``worker.py``, the kit's ``run_local.py`` and
``submission_zip.py``, so all of them decide exactly as the platform does; the kit's tools ask
this module rather than naming a platform. Standard library and PyYAML only.
"""
from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

PYTHON_COMMANDS = ("python3", "python")


class WorkerCommandError(ValueError):
    pass


CODALAB, CODABENCH = "codalab", "codabench"
PLATFORMS = (CODALAB, CODABENCH)


def _metadata_path(program_dir: Path, platform: str) -> Path:
    """The first of the site's metadata names that the folder holds (codabench_v2.md §3.4:
    Codabench prefers ``metadata.yaml``), else the plain ``metadata``."""
    names = WORKERS[platform].metadata_names
    return next((Path(program_dir) / name for name in names if (Path(program_dir) / name).is_file()),
                Path(program_dir) / names[-1])


def program_command(program_dir: Path, variables: dict[str, Path | str], python: str,
                    platform: str = CODALAB) -> list[str]:
    """argv for the program, with ``python3`` replaced by the given interpreter.

    CodaLab splits the substituted line on single spaces; Codabench hands it to docker-py,
    which uses shlex.split. Neither runs a shell.
    """
    metadata_path = _metadata_path(program_dir, platform)
    try:
        metadata = yaml.safe_load(metadata_path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise WorkerCommandError(f"{metadata_path}: unreadable ({error})") from None
    if not isinstance(metadata, dict) or not isinstance(metadata.get("command"), str):
        raise WorkerCommandError(f"{metadata_path}: needs a single-line 'command:' string")
    extra = sorted(set(metadata) - {"command", "description"})
    if extra:
        raise WorkerCommandError(f"{metadata_path}: keys {extra} would be fetched as URLs by the "
                                 "worker; only command and description are allowed")
    return command_argv(metadata["command"], variables, python, platform)


def command_argv(command: str, variables: dict[str, Path | str], python: str,
                 platform: str = CODALAB) -> list[str]:
    """argv for a metadata's ``command`` line, as ``program_command`` describes."""
    line = command.strip()
    # Longest names first: "$program" is inside "$ingestion_program" and "$submission_program".
    for name in sorted(variables, key=len, reverse=True):
        line = line.replace(name, str(variables[name]))
    argv = WORKERS[platform].split_command(line)
    if argv[0] in PYTHON_COMMANDS:
        argv[0] = python
    return argv


def run_program(program_dir: Path, variables: dict[str, Path | str], python: str, cwd: Path,
                timeout: float | None = None, platform: str = CODALAB, env: dict | None = None,
                prefix: tuple[str, ...] = (), stream: bool = False) -> subprocess.CompletedProcess:
    """Run it to the end; ``prefix`` wraps the command (e.g. to drop capabilities), and
    ``stream`` shows its stdout live instead of capturing it."""
    argv = [*prefix, *program_command(program_dir, variables, python, platform)]
    if not stream:
        return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              env=env, errors="replace")
    return subprocess.run(argv, cwd=cwd, stdout=None, stderr=subprocess.PIPE, text=True,
                          timeout=timeout, env=env, errors="replace")


# ---- How each worker decides "code or results" for a participant's submission ------------

CODE_METADATA = "description: code submission (runs through the ingestion program)\n"


@dataclass(frozen=True)
class Dispatch:
    """What the platform's prediction step does with an unzipped submission folder."""
    runs_ingestion: bool           # the phase's ingestion program is started on it
    copies_to_output: bool         # its files are copied into the prediction output (CodaLab)
    problem: str | None = None     # why it will not be scored as the participant intends
    # Codabench v1.27 on: its files are copied over the prediction output before scoring
    # (codabench_v2.md §3.4, Run._copy_submission_to_input_res), so they are scored too.
    copied_over_predictions: bool = False
    refused: bool = False          # nothing of it may run: the dry run stops at the problem

    @property
    def ok(self) -> bool:
        return self.problem is None


def submission_metadata(folder: Path, platform: str) -> tuple[str | None, object]:
    """(file name, parsed content) of the metadata file the platform reads, or (None, None).

    Read with the worker's own loader, which builds what tags ask for (CodaLab: ``yaml.load``
    of PyYAML 3.10, §3.3; Codabench before v1.27: ``yaml.FullLoader``, §3.4; v1.27 on reads
    no submission's metadata); ``yaml.FullLoader`` stands for both, so a command that a tag,
    an escape or a merge key makes is seen as the worker sees it. Participants' files only:
    the CodaLab dry run goes on to start that command anyway."""
    site = WORKERS[platform]
    for name in site.metadata_names:
        path = Path(folder) / name
        if path.is_file():
            try:
                data = path.read_bytes()
                # CodaLab (Python 2) hands PyYAML bytes, which it decodes by their byte order
                # mark; Codabench (Python 3) opens the file as UTF-8 text.
                stream = data.decode(site.metadata_encoding) if site.metadata_encoding else data
                return name, yaml.load(stream, Loader=yaml.FullLoader)
            except Exception as error:   # noqa: BLE001 - whatever it raises, the worker fails
                return name, WorkerCommandError(f"{name} is not valid YAML ({_yaml_error(error)})")
    return None, None


def _yaml_error(error: Exception) -> str:
    """PyYAML's problem and its line, the same words whether it read bytes or text."""
    problem, mark = getattr(error, "problem", None), getattr(error, "problem_mark", None)
    if not (problem and mark):
        return " ".join(str(error).split())
    context = getattr(error, "context", None)
    return f"{context + ', ' if context else ''}{problem} on line {mark.line + 1}"


def dispatch_submission(folder: Path, platform: str, has_ingestion: bool,
                        outputs: tuple[str, ...] = ()) -> Dispatch:
    """The worker's rule (codalab_v1.md §4.1, G18, G20; codabench_v2.md §3.4).

    CodaLab runs the ingestion program only when the zip has a root ``metadata``; without
    it the files are taken as predictions, and a ``command`` in the metadata is started next
    to the ingestion program. Codabench (v1.27 on) starts only the ingestion program, reads
    nothing of the submission's metadata, and copies the submission over the prediction
    output before scoring: a file named like one of ``outputs`` (what the phase's ingestion
    writes there) would replace it, so such a code submission is refused before it runs.
    """
    site = WORKERS[platform]
    name, metadata = submission_metadata(folder, platform)
    if isinstance(metadata, WorkerCommandError):
        return Dispatch(False, False, f"{metadata}; {UNREADABLE_METADATA}",
                        site.copies_submission_over_output)
    if not has_ingestion:
        return _results_dispatch(platform, name, metadata)
    if not site.runs_ingestion_without_metadata and name is None:
        return Dispatch(False, True, (
            "the submission has no file named 'metadata' at its root, so CodaLab takes it for "
            "prediction files: it copies them to the output and never runs the ingestion "
            "program, and nothing of your code is run. Add a file 'metadata' holding the single "
            "line 'description: my submission' (submission_zip.py adds it)"))
    clash = overwrite_problem(folder, outputs) if site.copies_submission_over_output else None
    if clash:
        return Dispatch(False, False, clash, refused=True)
    problem = _code_metadata_problem(name, metadata)
    return Dispatch(True, False, problem, site.copies_submission_over_output)


# One text for both sites, so the kit says it once: the workers that read a submission's
# metadata fail it, and the ingestion (submission_metadata.py) refuses it on every release.
OWN_COMMAND = ("CodaLab's worker (and Codabench's before v1.27; v1.27 on ignores it) would start "
               "it next to the ingestion program, in parallel, and the ingestion refuses such "
               "a submission")
UNREADABLE_METADATA = ("CodaLab's worker (and Codabench's before v1.27) fails such a submission, "
                       "and the ingestion refuses it")


def overwrite_problem(folder: Path, outputs: tuple[str, ...]) -> str | None:
    """Why a code submission holding a file (or folder) named like one the ingestion writes
    at the root of its output (``outputs``; a folder's name ends with '/') is refused: the
    Codabench worker copies the submission over that output before scoring. A kit's zip is
    meant to run on both sites, so the kit asks this whatever its platform."""
    clashes = [name for name in outputs
               if os.path.lexists(Path(folder) / name.rstrip("/"))]
    if not clashes:
        return None
    one = len(clashes) == 1
    return (f"{', '.join(clashes)}: Codabench copies your submission over the ingestion's "
            f"output before scoring, so {'this file' if one else 'these files'} would replace "
            f"what the ingestion writes under the same name (its predictions, its signed run "
            "record, a task's log or the smoke test's folder) and the submission would not be "
            f"scored as it ran; rename or remove {'it' if one else 'them'}")


def zip_problems(folder: Path, code: bool, outputs: tuple[str, ...] = ()) -> list[str]:
    """What any platform would do wrong with ``folder`` zipped by the kit's submission_zip.py,
    each problem once. A code zip gets ``CODE_METADATA`` where the folder has no metadata, so
    a site that would take it for prediction files only for the lack of one is no problem.
    ``outputs``: what the phase's ingestion writes at the root of its output (kit.json)."""
    problems = []
    for platform in PLATFORMS:
        dispatch = dispatch_submission(folder, platform, has_ingestion=code, outputs=outputs)
        fixed_by_added_metadata = (code and not dispatch.runs_ingestion and not dispatch.refused
                                   and submission_metadata(folder, platform)[0] is None)
        if dispatch.problem and not fixed_by_added_metadata and dispatch.problem not in problems:
            problems.append(dispatch.problem)
    return problems


def _results_dispatch(platform: str, name: str | None, metadata) -> Dispatch:
    """A results phase has no ingestion program: the submission is the predictions. CodaLab
    copies it to the output; Codabench (v1.27 on) runs nothing in the prediction step and
    copies it over that (empty) output before scoring, metadata file or not."""
    site = WORKERS[platform]
    if not site.copies_submission_over_output:
        return Dispatch(False, True)
    if name is not None and isinstance(metadata, dict) and metadata.get("command"):
        # compute_worker.py at c7dbc756 (v1.25), _run_program_directory: the command runs
        # instead of the files being copied; v1.27 on ignores it. The site's release is not
        # known here, so the kit refuses it.
        return Dispatch(False, False, (
            f"a results submission must not hold a command in '{name}': a Codabench server "
            "older than v1.27 starts it instead of scoring your files (v1.27 on ignore it). "
            "Remove the file: prediction files need none"), True)
    return Dispatch(False, False, None, True)


def _code_metadata_problem(name: str | None, metadata) -> str | None:
    if name is None:
        return None
    if metadata is not None and not isinstance(metadata, dict):
        return f"{name} must be a YAML mapping with only 'description:', found {metadata!r}"
    metadata = metadata or {}
    if metadata.get("command"):
        return f"{name} has a 'command'; {OWN_COMMAND}. Keep only 'description:' (G20)"
    extra = sorted(map(str, set(metadata) - {"description"}))
    if extra:
        return (f"{name} has keys {extra}; the CodaLab worker downloads every such value as a "
                "URL. Keep only 'description:' (G18)")
    return None


# ---- How the CodaLab site reads scores.txt ----------------------------------------------

def parse_scores_like_site(text: str, keys: list[str]) -> tuple[dict[str, float], list[str]]:
    """codalab_v1.md §4.8: ``label, value = line.split(":")``, float(value), known keys."""
    scores, problems = {}, []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line:
            continue
        parts = line.split(":")
        if len(parts) != 2:
            problems.append(f"scores.txt line {number}: {line!r} does not have exactly one ':'")
            continue
        key, value = parts[0].strip(), parts[1]
        try:
            number_value = float(value)
        except ValueError:
            problems.append(f"scores.txt line {number}: {value.strip()!r} is not a number")
            continue
        if key in scores:
            problems.append(f"scores.txt line {number}: duplicate key {key}")
        elif not math.isfinite(number_value) or abs(number_value) >= 1e10:
            problems.append(f"scores.txt line {number}: {key} = {number_value} (must be finite, < 1e10)")
        scores[key] = number_value
    written, expected = set(scores), set(keys)
    if written - expected:
        problems.append(f"scores.txt keys not on the leaderboard (the site drops them): "
                        f"{sorted(written - expected)}")
    if expected - written:
        problems.append(f"leaderboard keys the scorer did not write (shown as '-'): "
                        f"{sorted(expected - written)}")
    return scores, problems


def _read_scores_codabench(output: Path, keys: list[str]) -> tuple[dict[str, float], list[str]]:
    """scores.json first, else scores.txt read as YAML; flat finite numbers (§3.8)."""
    if (output / "metadata").exists():
        return {}, ["the scorer wrote output/metadata: Codabench fails the step"]
    if (output / "scores.json").is_file():
        raw = json.loads((output / "scores.json").read_text())
    elif (output / "scores.txt").is_file():
        raw = yaml.safe_load((output / "scores.txt").read_text())
    else:
        return {}, ["Could not find scores file, did the scoring program output it?"]
    if not isinstance(raw, dict):
        return {}, [f"scores must be a flat mapping, found {type(raw).__name__}"]
    problems = [f"{key}: {value!r} is not a finite number below 1e10" for key, value in raw.items()
                if not isinstance(value, (int, float)) or not math.isfinite(value) or abs(value) >= 1e10]
    written, expected = set(raw), set(keys)
    if written != expected:
        problems.append(f"scores.json keys differ from the leaderboard's: extra "
                        f"{sorted(written - expected)}, missing {sorted(expected - written)}")
    return raw, problems


def read_scores(output: Path, keys: list[str], platform: str) -> tuple[dict[str, float], list[str]]:
    """The scores the platform would store from a scoring output folder, and what is wrong."""
    return WORKERS[platform].read_scores(Path(output), keys)


def _read_scores_codalab(output: Path, keys: list[str]) -> tuple[dict[str, float], list[str]]:
    """scores.txt, as the site parses it (parse_scores_like_site)."""
    scores_file = output / "scores.txt"
    if not scores_file.is_file():
        return {}, ["no scores.txt in the output (the site marks the submission FAILED)"]
    return parse_scores_like_site(scores_file.read_text(encoding="utf-8", errors="replace"), keys)


@dataclass(frozen=True)
class SiteWorker:
    """Where one site's worker differs from the other's; the functions above ask this record,
    never a platform's name."""
    metadata_names: tuple[str, ...]     # a program's or submission's metadata file, first found
    split_command: Callable[[str], list[str]]     # how the substituted command line is split
    # CodaLab takes a code phase's zip without a root ``metadata`` for prediction files
    runs_ingestion_without_metadata: bool
    read_scores: Callable[[Path, list[str]], tuple[dict[str, float], list[str]]]
    # how a submission's metadata reaches the YAML loader: None for bytes (PyYAML decodes
    # them by their byte order mark), else the text's encoding
    metadata_encoding: str | None
    # the worker starts a submission's own metadata command beside the ingestion
    starts_own_command: bool
    # the worker copies the submission over the prediction output before scoring
    copies_submission_over_output: bool


WORKERS = {
    # codalab_v1.md §3.3: the line is split on single spaces, no shell
    CODALAB: SiteWorker(("metadata",), lambda line: line.split(" "), False,
                        _read_scores_codalab, None, True, False),
    # codabench_v2.md §3.4: docker-py splits the line with shlex, no shell. Since v1.27 the
    # worker reads no metadata of a submission; our ingestion refuses one it cannot prove
    # free of a command, as older servers start it (submission_metadata.py)
    CODABENCH: SiteWorker(("metadata.yaml", "metadata"), shlex.split, True,
                          _read_scores_codabench, "utf-8", False, True),
}


def penalised_tasks(output: Path) -> list[str]:
    """'task: reason' for each task the scorer penalised, from its detailed_results.json."""
    details = Path(output) / "detailed_results.json"
    try:
        tasks = json.loads(details.read_text(encoding="utf-8")).get("tasks", {})
    except (OSError, ValueError, AttributeError):
        return []
    return [f"{name}: {entry['penalty']}" for name, entry in sorted(tasks.items())
            if isinstance(entry, dict) and entry.get("penalty")]

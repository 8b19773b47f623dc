"""Program rules, both platforms: each program zip carries a one-line command the worker runs.

Both workers substitute ``$variables`` with str.replace and split the command on single
spaces, with no shell (codalab_v1.md §3.3, G18, G19; codabench_v2.md §3.4), so one command
check serves both, each platform with the variables its worker replaces (its object's
``worker_variables``, the table its dry run uses too). The metadata file
differs: CodaLab reads ``metadata``, Codabench prefers ``metadata.yaml``.
"""
from __future__ import annotations

import re
import zipfile
from typing import Iterator

import yaml

from .codabench_yaml import items
from .codalab_yaml import program_members
from .framework import CODABENCH, CODALAB, REZIP, Bundle, CannotCheck, Problem, rule
from .zip_hygiene import walk

SHELL = ("&", "|", ">", "<", ";", "`", "$(", "'", '"')


def _command_problems(command, allowed: frozenset) -> list[str]:
    if not isinstance(command, str) or not command.strip():
        return ["is not a non-empty string"]
    shell = [token for token in SHELL if token in command]
    unknown = sorted(set(re.findall(r"\$(\w*)", command)) - allowed)
    return [text for bad, text in (
        ("\n" in command or "\r" in command, "spans several lines"),
        (command != command.strip(), "has leading or trailing whitespace"),
        ("  " in command or "\t" in command, "has a double space or a tab (an empty argument)"),
        (shell, f"uses shell syntax {shell}, but no shell runs it"),
        ("=" in command.split(" ")[0], "starts with an environment assignment"),
        (unknown, f"uses {['$' + u for u in unknown]}, which the worker does not replace for "
                  f"this program (allowed: {sorted('$' + v for v in allowed)})")) if bad]


PYTHONS = ("python", "python3")


def _isolation_problems(command, program: str) -> list[str]:
    """The ingestion must start Python isolated: CodaLab's worker puts the submission's folder
    on its PYTHONPATH (codalab_v1.md §4.5), so without -I a participant's sitecustomize.py or
    json.py runs inside the ingestion, with the hidden data and the signing key in reach."""
    words = command.split(" ") if isinstance(command, str) else []
    if program != "ingestion_program" or not words or words[0] not in PYTHONS:
        return []
    if len(words) < 2 or words[1] != "-I":
        return [f"starts {words[0]} without -I: the worker's PYTHONPATH holds the participant's "
                "folder, whose modules would then run inside the ingestion"]
    return []


@rule("program-metadata", "each scoring/ingestion zip has a root metadata with only command and "
      "description; one single-spaced command line, no shell syntax, known variables "
      "(§3.3, G18, G19)", "write one line like: command: python3 $program/score.py $input $output",
      CODALAB)
def check_program_metadata(bundle: Bundle) -> Iterator[Problem]:
    """§3.3, G18, G19: the command is str.replace'd and split on single spaces: no shell."""
    for program, member in program_members(bundle, "scoring_program", "ingestion_program"):
        try:
            archive = bundle.nested(member)
        except CannotCheck as error:
            yield f"{program} not checked: {error}"
            continue
        if "metadata" not in archive.namelist():
            inner = [n for n in archive.namelist() if re.fullmatch(r"[^/]+/metadata", n)]
            yield (f"{member}: no 'metadata' at the zip root"
                   + (f" (found {inner[0]!r}; we emit program zips flat)" if inner else ""), REZIP)
            continue
        try:
            metadata = yaml.safe_load(archive.read("metadata"))
        except yaml.YAMLError as error:
            metadata = f"invalid YAML ({error})"
        if not isinstance(metadata, dict):
            yield f"{member}::metadata is {metadata!r}, not a mapping of command and description"
            continue
        extra = sorted(map(str, set(metadata) - {"command", "description"}))
        if extra:
            yield (f"{member}::metadata has keys {extra}; the worker fetches their values as URLs",
                   "keep only command and description (G18)")
        command = metadata.get("command")
        yield from (f"{member}::metadata command {command!r} {problem} (G19)"
                    for problem in _command_problems(
                        command, bundle.platform.command_variables(program)))
        yield from (f"{member}::metadata command {command!r} {problem}"
                    for problem in _isolation_problems(command, program))


def _codabench_metadata(archive: zipfile.ZipFile) -> dict | None:
    for name in ("metadata.yaml", "metadata"):
        if name in archive.namelist():
            return yaml.safe_load(archive.read(name))
    return None


@rule("v2-programs", "each task's scoring/ingestion zip has a root metadata.yaml (or metadata) "
      "with one plain command line using known variables, and no junk (codabench_v2.md §3.4)",
      "put metadata.yaml with one command: line at the zip root", CODABENCH)
def check_programs_v2(bundle: Bundle) -> Iterator[Problem]:
    """§3.4: without a command the worker fails ('missing command'); no shell runs it."""
    for i, task in enumerate(items(bundle.comp, "tasks")):
        for program in ("scoring_program", "ingestion_program"):
            member = task.get(program)
            if member not in bundle.names:           # a missing zip is the v2-tasks failure
                continue
            archive = bundle.nested(member)
            metadata = _codabench_metadata(archive)
            if not isinstance(metadata, dict) or "command" not in metadata:
                yield (f"tasks[{i}].{program}: {member} has no metadata.yaml with a command "
                       "('Could not find scores file' / 'missing command')",
                       "put metadata.yaml with command: at the zip root")
                continue
            for problem in _command_problems(metadata["command"],
                                             bundle.platform.command_variables(program)):
                yield f"tasks[{i}].{program}: command {problem}", "one plain command line"
            for problem in _isolation_problems(metadata["command"], program):
                yield f"tasks[{i}].{program}: command {problem}", "start it as python3 -I"
            for junk in walk(archive, f"{member}::", 1):
                yield junk, "rezip without junk"

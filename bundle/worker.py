"""How the CodaLab v1.5 compute worker starts a program (codalab_v1.md §3.3, §4.4).

The command is the ``command:`` of the program's ``metadata``; variables are replaced
with plain string replacement, and the line is split on single spaces: no shell, no
quoting. Used by ``run_local``, the tests and the builder's dry run, so all three start
programs exactly as the platform does.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

PYTHON_COMMANDS = ("python3", "python")


class WorkerCommandError(ValueError):
    pass


def program_command(program_dir: Path, variables: dict[str, Path | str], python: str) -> list[str]:
    """argv for the program, with ``python3`` replaced by the given interpreter."""
    metadata_path = Path(program_dir) / "metadata"
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
    line = metadata["command"].strip()
    # Longest names first: "$program" is inside "$ingestion_program" and "$submission_program".
    for name in sorted(variables, key=len, reverse=True):
        line = line.replace(name, str(variables[name]))
    argv = line.split(" ")
    if argv[0] in PYTHON_COMMANDS:
        argv[0] = python
    return argv


def run_program(program_dir: Path, variables: dict[str, Path | str], python: str, cwd: Path,
                timeout: float | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(program_command(program_dir, variables, python), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)

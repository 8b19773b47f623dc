"""How the CodaLab v1.5 compute worker starts a program (codalab_v1.md §3.3, §4.4).

The command is the ``command:`` of the program's ``metadata``; variables are replaced
with plain string replacement, and the line is split on single spaces: no shell, no
quoting. Used by ``run_local``, the tests and the builder's dry run, so all three start
programs exactly as the platform does.
"""
from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import yaml

PYTHON_COMMANDS = ("python3", "python")


class WorkerCommandError(ValueError):
    pass


CODALAB, CODABENCH = "codalab", "codabench"


def _metadata_path(program_dir: Path, platform: str) -> Path:
    """CodaLab reads ``metadata``; Codabench prefers ``metadata.yaml`` (codabench_v2.md §3.4)."""
    preferred = Path(program_dir) / "metadata.yaml"
    if platform == CODABENCH and preferred.is_file():
        return preferred
    return Path(program_dir) / "metadata"


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
    line = metadata["command"].strip()
    # Longest names first: "$program" is inside "$ingestion_program" and "$submission_program".
    for name in sorted(variables, key=len, reverse=True):
        line = line.replace(name, str(variables[name]))
    argv = shlex.split(line) if platform == CODABENCH else line.split(" ")
    if argv[0] in PYTHON_COMMANDS:
        argv[0] = python
    return argv


def run_program(program_dir: Path, variables: dict[str, Path | str], python: str, cwd: Path,
                timeout: float | None = None, platform: str = CODALAB) -> subprocess.CompletedProcess:
    return subprocess.run(program_command(program_dir, variables, python, platform), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)

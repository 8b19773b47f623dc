"""This machine's Python and packages next to the competition image's, for run_local.

Code with a time budget trains as far as this machine lets it in that time, so a local score
holds for the platform only where the interpreter, the packages (numpy's BLAS above all) and
the load are alike. The image's versions come from the kit's copy of the repository's
``requirements-image.txt``, the one place they are written.
"""
from __future__ import annotations

import ast
import csv
import importlib.metadata
import inspect
import os
import platform
import sys
from pathlib import Path

IMAGE_REQUIREMENTS = "requirements-image.txt"
# The variables a BLAS or OpenMP runtime reads for its thread count (OMP_NUM_THREADS,
# OPENBLAS_NUM_THREADS, MKL_NUM_THREADS, NUMEXPR_NUM_THREADS...). The worker's container sets
# none: each program sets its own (ingestion.py and score.py one thread, the ingestion's
# supervisor the task's cores for the participant's code), and a value left in this shell
# would replace theirs.
THREAD_VARIABLE_SUFFIX = "_NUM_THREADS"


def program_environment() -> dict[str, str]:
    """This process's environment as the programs should get it: no thread count of ours."""
    return {name: value for name, value in os.environ.items()
            if not name.endswith(THREAD_VARIABLE_SUFFIX)}


def image_versions(path: Path) -> dict[str, str]:
    """{distribution: version} of ``name==version`` lines (comments and blanks skipped)."""
    versions = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = (part.strip() for part in line.split("==", 1))
            versions[name.lower()] = version
    return versions


def imported_modules(folders: list[Path]) -> set[str]:
    """Top-level modules imported by the .py files under ``folders`` (or those files)."""
    sources = set()             # each text parsed once: both programs ship the runtime
    for folder in map(Path, folders):
        for path in [folder] if folder.is_file() else sorted(folder.rglob("*.py")):
            sources.add(path.read_text(encoding="utf-8", errors="replace"))
    names = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue            # the ingestion reports it, with the line
        for node in import_statements(tree):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif node.module and not node.level:
                names.add(node.module.split(".")[0])
    return names


# The fields of a statement that hold statements; an import is a statement, and no expression
# holds one, so a walk over these alone meets every import and a tenth of the nodes.
STATEMENT_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def import_statements(tree: ast.AST):
    """Every ``import`` and ``from ... import`` of a module, nested ones too."""
    waiting = [tree]
    while waiting:
        node = waiting.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        for field in STATEMENT_BLOCKS:
            block = getattr(node, field, None)
            if isinstance(block, list):
                waiting.extend(block)


def _distributions_of(modules: set[str], wanted: dict[str, str]) -> list[str]:
    """The image's distributions that provide one of ``modules`` (pyyaml provides yaml): by
    name, or by the installed distribution's own record of its modules. Only the image's
    distributions are read: importlib.metadata.packages_distributions() reads every installed
    one, a fifth of a CPU-second in an environment with a framework or two."""
    by_name = {module.lower().replace("_", "-") for module in modules}
    return sorted(name for name in wanted
                  if name in by_name or not modules.isdisjoint(_top_level_modules(name)))


def _top_level_modules(name: str) -> set[str]:
    """The top-level modules an installed distribution provides, found as
    packages_distributions() finds them: its top_level.txt, else the first part of each path
    its RECORD lists (read as text: a path object per file costs ten times as much)."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return set()
    declared = (dist.read_text("top_level.txt") or "").split()
    if declared:
        return set(declared)
    record = dist.read_text("RECORD")
    paths = ([row[0] for row in csv.reader(record.splitlines()) if row] if record is not None
             else [str(path) for path in dist.files or ()])
    tops = {path.split("/", 1)[0] if "/" in path else inspect.getmodulename(path) or path
            for path in paths}
    return {top for top in tops if "." not in top}


def _installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def report(requirements: Path | None, image: str | None, code: list[Path]) -> list[str]:
    """Lines saying which interpreter and packages run here and, for each package that the
    programs or ``code`` import, the image's version; a warning line per difference."""
    lines = [f"python: {sys.executable} (Python {platform.python_version()})"]
    if requirements is None or not requirements.is_file():
        return lines + [f"the versions in {image or 'the competition image'} are not known to "
                        "this kit: compare them yourself"]
    wanted = image_versions(requirements)
    differ = []
    for name in _distributions_of(imported_modules(code), wanted):
        here = _installed(name)
        lines.append(f"  {name} {here or 'not installed'} (the image: {wanted[name]})")
        if here != wanted[name]:
            differ.append(f"{name} {here or 'not installed'}")
    if differ:
        lines.append(f"warning: {', '.join(differ)} here, not as in {image}: code that trains "
                     "until its budget runs out gets as far as these packages and this "
                     "machine's load let it, so its local scores can differ from the "
                     "platform's (a venv with the image's versions: pip install -r "
                     f"{IMAGE_REQUIREMENTS})")
    return lines

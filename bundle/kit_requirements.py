"""What a participant installs before running a starting kit: read from what the kit's own
Python files import, once the kit is staged, and written into the kit as ``requirements.txt``,
which the guide's first command installs (``templates/guide_install.md.j2``).

The basic line is every package of the competition's image that a file of the kit imports
(its tools, programs, sample and baselines), and everything the baseline the guide runs needs.
The shipped programs may use the image's packages only (they are tested in .venv-image), so an
import of anything else in them is optional by construction (a framework tried where the
image has it); such an import in another baseline is an optional line of its own, named with
the files that need it, so that no one downloads a framework of several GB to run the kit.
Packages are named without versions: the line must install on the participant's Python (the
image's numpy has no wheel for a newer one), and run_local already compares the versions it
finds with the image's (versions.py, from the kit's requirements-image.txt).
"""
from __future__ import annotations

import ast
import functools
import importlib.metadata
import sys
from pathlib import Path

REQUIREMENTS_FILE = "requirements.txt"
INSTALL_COMMAND = f"python -m pip install -r {REQUIREMENTS_FILE}"
BASELINES = "baselines"


def imported_modules(path: Path) -> set[str]:
    """The top-level names of the absolute imports of one Python file."""
    try:
        return set(_imports_of_source(path.read_text(encoding="utf-8")))
    except SyntaxError as error:
        error.filename = str(path)
        raise


@functools.lru_cache(maxsize=4096)
def _imports_of_source(source: str) -> frozenset[str]:
    """By the text, not the path: a kit holds the runtime twice (in each program), every
    phase's kit holds the same files, and each baseline's closure reads the baselines it
    shares with the others; parsed once each, the default build's requirements take 1/20 of
    the time they took (they were two thirds of the build)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return frozenset(names)


def image_packages(requirements: Path) -> list[str]:
    """The distributions a ``name==version`` requirements file names, as it spells them."""
    return [line.split("#", 1)[0].split("==", 1)[0].strip()
            for line in requirements.read_text(encoding="utf-8").splitlines()
            if "==" in line.split("#", 1)[0]]


@functools.cache
def _installed_providers() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def distribution(module: str, preferred: list[str]) -> str:
    """The distribution that provides ``module`` (pyyaml for yaml), one of ``preferred`` where
    one is; by the builder's installed packages, else the module's own name."""
    providers = [name.lower() for name in _installed_providers().get(module, [module])]
    return next((name for name in preferred if name.lower() in providers), providers[0])


def _distributions_imported(paths: list[Path], local: set[str], image: list[str]) -> set[str]:
    """The distributions that provide what ``paths`` import, less the standard library's
    modules and the kit's own (``local``)."""
    return {distribution(module, image) for path in paths for module in imported_modules(path)
            if module not in sys.stdlib_module_names and module not in local}


def _baseline_closure(folder: Path, start: str, local: set[str]) -> list[Path]:
    """The baseline file ``start`` and the baselines it imports, directly or not."""
    seen, pending = [], [folder / start]
    while pending:
        path = pending.pop()
        if path in seen or not path.is_file():
            continue
        seen.append(path)
        pending += [folder / f"{name}.py" for name in imported_modules(path) if name in local]
    return seen


def kit_requirements(kit: Path, example_baseline: str, image_requirements: Path) -> dict:
    """The kit's install record: ``file`` and ``command`` (the guide's first line),
    ``packages`` (what that line installs), ``optional`` (one ``{"package", "files"}`` per
    package only some baselines need) and ``image_versions`` (the kit's copy of the image's
    versions, or ""). ``example_baseline``: the baseline file the guide runs;
    ``image_requirements``: the image's packages (requirements-image.txt)."""
    files = sorted(kit.rglob("*.py"))
    local = {path.stem for path in files} | {path.name for path in kit.rglob("*") if path.is_dir()}
    image = image_packages(image_requirements)
    in_image = {name.lower() for name in image}
    baselines = kit / BASELINES
    packages = sorted({name for name in _distributions_imported(files, local, image)
                       if name.lower() in in_image}
                      | _distributions_imported(_baseline_closure(baselines, example_baseline,
                                                                  local), local, image),
                      key=str.lower)
    optional = {}
    for path in sorted(baselines.glob("*.py")):
        # a baseline needs what the baselines it imports need (torch through a shared network)
        needs = _distributions_imported(_baseline_closure(baselines, path.name, local), local,
                                        image)
        for name in sorted(needs - set(packages)):
            optional.setdefault(name, []).append(path.relative_to(kit).as_posix())
    return {"file": REQUIREMENTS_FILE, "command": INSTALL_COMMAND, "packages": packages,
            "optional": [{"package": name, "files": paths}
                         for name, paths in sorted(optional.items())],
            # the image's versions, where the kit has them (not for a GPU image)
            "image_versions": (image_requirements.name
                               if (kit / image_requirements.name).is_file() else "")}


def write_requirements(kit: Path, record: dict) -> None:
    """The kit's requirements file, the basic line's packages, one a line."""
    lines = ["# What this kit's tools, programs, sample and the baseline its guide runs import.",
             f"# {record['command']}", *record["packages"]]
    (kit / record["file"]).write_text("\n".join(lines) + "\n", encoding="utf-8")

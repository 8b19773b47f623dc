"""``codabench-bundle``: the one installed command, routing each subcommand to the command
line that already does the work (``python build_bundle.py`` and the others keep working as
they are; this module only routes).

  codabench-bundle new my_competition --kind retina        a spec and data to start from
  codabench-bundle build --config my_competition/spec.yaml --phase all
  codabench-bundle check --config my_competition/spec.yaml --phase all   build, then dry-run
  codabench-bundle check dist/my-competition-codabench.zip               dry-run a bundle
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import venv
from pathlib import Path

import yaml

from kinds import DEFAULT_KIND, KINDS

REPO = Path(__file__).resolve().parents[1]       # the clone, or site-packages when installed
IMAGE_REQUIREMENTS = REPO / "requirements-image.txt"
IMAGE_PYTHON_VARIABLE = "CODABENCH_BUNDLE_IMAGE_PYTHON"

COMMANDS = {
    "new": "write a spec and a data folder to start a competition from (asks, or takes flags)",
    "build": "build the bundles of a spec (python build_bundle.py's options)",
    "check": "dry-run a bundle zip as the platform's worker would; without one: build, then "
             "dry-run",
    "convert": "convert an organizer's tasks in their original formats (--kind pgdl2020 or "
               "retina; python -m reference_data --kind KIND convert)",
    "references": "generate, verify or export a kind's hidden references (--kind KIND)",
    "baselines": "run the kit's baselines on a spec's tasks and write its baseline table",
    "local-run": "build a phase's starting kit and run a submission in it "
                 "(python -m bundle.local_run)",
    "ranks": "rank intervals of a finished phase's leaderboard (scoring_program/ranks.py)",
}


class RouteError(Exception):
    """A usage mistake caught before any work: one line, exit 2."""


def _usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, what in COMMANDS.items()]
    return ("usage: codabench-bundle COMMAND [OPTIONS]   (COMMAND --help: its options)\n\n"
            "commands:\n" + "\n".join(lines) + "\n\n" + __doc__.split("\n\n")[1])


def _take_option(argv: list[str], name: str) -> tuple[str | None, list[str]]:
    """``--name VALUE`` (or ``--name=VALUE``) taken out of ``argv``."""
    for index, argument in enumerate(argv):
        if argument == name and index + 1 < len(argv):
            return argv[index + 1], argv[:index] + argv[index + 2:]
        if argument.startswith(name + "="):
            return argument.split("=", 1)[1], argv[:index] + argv[index + 1:]
    return None, argv


def _given(argv: list[str], name: str) -> bool:
    return any(a == name or a.startswith(name + "=") for a in argv)


def _known_kind(name: str) -> str:
    if name not in KINDS:
        raise RouteError(f"unknown kind {name!r}; expected one of {', '.join(sorted(KINDS))}")
    return name


def _spec_kind(argv: list[str]) -> str:
    """The kind of the spec named by --config (for routing only; the command validates it)."""
    config, _ = _take_option(list(argv), "--config")
    if config is None:
        return DEFAULT_KIND
    try:
        raw = yaml.safe_load(Path(config).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise RouteError(f"--config {config}: cannot read the spec ({error})") from None
    return _known_kind(str(raw.get("kind", DEFAULT_KIND)) if isinstance(raw, dict)
                       else DEFAULT_KIND)


# ---- the image's environment, for the dry run ----------------------------------------------

def image_environment_folder() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "codabench-bundle" / "image-env"


def _requirements_digest() -> str:
    return hashlib.sha256(IMAGE_REQUIREMENTS.read_bytes()).hexdigest()


def _grant_traverse(path: Path) -> None:
    """As root, the dry run's ingestion runs participant code as 'nobody' (as CodaLab's
    worker does), which must reach the interpreter and its packages: execute-only permission
    on the folders above them, as scripts/bootstrap.sh grants for the clone's."""
    if os.geteuid() != 0:
        return
    for folder in [path, *path.parents]:
        mode = folder.stat().st_mode
        if not mode & 0o001:
            os.chmod(folder, mode | 0o001)


def _make_image_environment(folder: Path) -> None:
    print(f"making the image's environment (requirements-image.txt) in {folder}; once, a "
          "few minutes", file=sys.stderr, flush=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(folder)
    python = folder / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "-r", str(IMAGE_REQUIREMENTS)], check=True)
    (folder / ".requirements.sha256").write_text(_requirements_digest() + "\n")


def image_python() -> Path:
    """A Python with the docker image's packages, for the dry run: the variable's, the
    clone's ``.venv-image`` (scripts/bootstrap.sh), else one made on first use in the user's
    cache folder and reused while requirements-image.txt is unchanged."""
    if os.environ.get(IMAGE_PYTHON_VARIABLE):
        return Path(os.environ[IMAGE_PYTHON_VARIABLE])
    clone = REPO / ".venv-image" / "bin" / "python"
    if clone.exists():
        return clone
    folder = image_environment_folder()
    stamp = folder / ".requirements.sha256"
    current = stamp.is_file() and stamp.read_text().strip() == _requirements_digest()
    if not (current and (folder / "bin" / "python").exists()):
        try:
            _make_image_environment(folder)
        except (OSError, subprocess.CalledProcessError) as error:
            raise RouteError(f"could not make the image's environment in {folder} ({error}); "
                             f"set {IMAGE_PYTHON_VARIABLE} to a Python with the packages of "
                             f"{IMAGE_REQUIREMENTS}") from None
    python = folder / "bin" / "python"
    _grant_traverse(folder)
    _grant_traverse(python.resolve().parent)
    return python


# ---- the routes ------------------------------------------------------------------------------

def _with_out(argv: list[str]) -> list[str]:
    """Bundles go to ./dist of the folder the command runs in (build_bundle.py's default is
    its own folder's dist/, which for an installed package is site-packages)."""
    return argv if _given(argv, "--out") or "-h" in argv or "--help" in argv \
        else [*argv, "--out", str(Path.cwd() / "dist")]


def _build(argv: list[str]) -> int:
    import build_bundle
    return build_bundle.main(_with_out(argv))


def _check(argv: list[str]) -> int:
    import build_bundle
    if "-h" not in argv and "--help" not in argv:
        python = image_python()
        print(f"the dry run uses the image's packages from {python}", flush=True)
        build_bundle.IMAGE_PYTHON = python     # read by build_bundle._check at each dry run
    if argv and not argv[0].startswith("-"):
        return build_bundle.main(["--check", argv[0], *argv[1:]])
    return build_bundle.main(["--check", *_with_out(argv)])


def _reference_data(command: str | None, argv: list[str]) -> int:
    """``command`` None: the first word of ``argv`` (references generate|verify|export)."""
    from reference_data.__main__ import main as reference_main
    kind, rest = _take_option(argv, "--kind")
    if command is None:
        if not rest or rest[0] not in ("generate", "verify", "export"):
            raise RouteError("references: expected generate, verify or export (with "
                             "--kind KIND and its options)")
        command, rest = rest[0], rest[1:]
    return reference_main(["--kind", _known_kind(kind or DEFAULT_KIND), command, *rest])


def _convert(argv: list[str]) -> int:
    if not _given(argv, "--kind") and "-h" not in argv and "--help" not in argv:
        raise RouteError("convert: expected --kind KIND (a kind with a convert: pgdl2020, "
                         "retina)")
    return _reference_data("convert", argv)


def _baselines(argv: list[str]) -> int:
    kind, rest = _take_option(argv, "--kind")
    name = _known_kind(kind) if kind else _spec_kind(rest)
    from kinds.kind import kind as kind_record
    script = kind_record(name).KIT / "baseline_results.py"
    if not script.is_file():
        raise RouteError(f"baselines: kind {name} has no baseline table (no {script.name} in "
                         "its kit)")
    spec = importlib.util.spec_from_file_location(f"_baseline_results_{name}", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main(rest)


def _local_run(argv: list[str]) -> int:
    from bundle.local_run import main as local_run_main
    return local_run_main(argv)


def _ranks(argv: list[str]) -> int:
    from scoring_program.ranks import main as ranks_main
    return ranks_main(argv)


def _new(argv: list[str]) -> int:
    from bundle.new_competition import main as new_main
    return new_main(argv)


ROUTES = {"new": _new, "build": _build, "check": _check, "convert": _convert,
          "references": lambda argv: _reference_data(None, argv), "baselines": _baselines,
          "local-run": _local_run, "ranks": _ranks}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        from importlib.metadata import PackageNotFoundError, version
        try:
            print(f"codabench-bundle {version('codabench-bundle')}")
        except PackageNotFoundError:
            print("codabench-bundle (not installed: run from a clone)")
        return 0
    if argv[0] not in ROUTES:
        print(f"error: unknown command {argv[0]!r}; expected one of {', '.join(ROUTES)}",
              file=sys.stderr)
        return 2
    try:
        status = ROUTES[argv[0]](argv[1:])
    except RouteError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except SystemExit as leaving:     # argparse's own usage errors and --help
        return leaving.code if isinstance(leaving.code, int) else (0 if leaving.code is None
                                                                   else 2)
    return status or 0


if __name__ == "__main__":
    sys.exit(main())

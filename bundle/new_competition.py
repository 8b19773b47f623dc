"""``codabench-bundle new FOLDER``: a spec and a data folder to start a competition from.

Each question is one record (type, default, help), as the spec's keys are
(``bundle/spec_key.py``): a flag where given, else a prompt on a terminal, else the default.
The spec is the kind's default competition cut down to the phases asked for, each on one of
the kind's small embedded tasks (copied into the data folder, with a README of which files
go where), so it builds and dry-runs at once until the organizer's files replace them.
"""
from __future__ import annotations

import argparse
import datetime
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

from kinds import DEFAULT_KIND, KINDS

PHASE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,30}$")     # the spec's names (spec_key.NAMED)
SPEC_FILE = "spec.yaml"
PHASE_SPACING = datetime.timedelta(days=30)


class NewError(Exception):
    """A bad answer or a folder that is not free: one line, exit 2, nothing written."""


def _kind(text: str) -> str:
    if text not in KINDS:
        raise NewError(f"unknown kind {text!r}; expected one of {', '.join(sorted(KINDS))}")
    return text


def _title(text: str) -> str:
    if not text.strip() or not re.search(r"[A-Za-z0-9]", text):
        raise NewError(f"title {text!r}: expected words with at least one letter or digit")
    return text.strip()


def _phases(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    bad = [name for name in names if not PHASE_NAME.match(name)]
    if not names or bad:
        raise NewError(f"phases {text!r}: expected comma-separated names of lowercase letters, "
                       "digits and _, each starting with a letter (e.g. development,final)")
    if len(set(names)) != len(names):
        raise NewError(f"phases {text!r}: expected each name once")
    return names


@dataclass(frozen=True)
class Question:
    name: str                       # the flag is --<name with - for _>
    parse: Callable[[str], object]  # raises NewError naming what was expected
    default: str
    help: str


QUESTIONS = (
    Question("kind", _kind, DEFAULT_KIND,
             "the competition kind: " + ", ".join(sorted(KINDS))),
    Question("title", _title, "My competition", "the competition's title"),
    Question("phases", _phases, "development,final",
             "phase names, comma-separated, in order: all but the last take prediction files, "
             "the last takes code (one phase: code)"),
    Question("data_root", str, "data",
             "the folder of the tasks' files, relative to the spec's folder"),
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="codabench-bundle new", description=__doc__.split(
        "\n\n")[0].split(": ", 1)[1])
    parser.add_argument("folder", type=Path, help="a new (or empty) folder for the spec")
    for question in QUESTIONS:
        parser.add_argument(f"--{question.name.replace('_', '-')}", dest=question.name,
                            default=None, help=f"{question.help} (default: {question.default})")
    parser.add_argument("--yes", action="store_true",
                        help="ask nothing: the defaults for every answer not given")
    return parser


def _ask(question: Question) -> object:
    while True:
        text = input(f"{question.help} [{question.default}]: ").strip() or question.default
        try:
            return question.parse(text)
        except NewError as error:
            print(f"  {error}", file=sys.stderr)


def answers(args, interactive: bool) -> dict:
    found = {}
    for question in QUESTIONS:
        given = getattr(args, question.name)
        if given is None and interactive:
            found[question.name] = _ask(question)
        else:
            found[question.name] = question.parse(question.default if given is None else given)
    return found


# ---- the spec ------------------------------------------------------------------------------

def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40].strip("-")


def _template_phases(default: dict) -> tuple[dict, dict]:
    """The default competition's first results phase and last code phase (either stands in
    for the other where a kind has only one sort)."""
    phases = list(default["phases"].values())
    results = [p for p in phases if p.get("submission") == "results"]
    code = [p for p in phases if p.get("submission") == "code"]
    return (results or code)[0], (code or results)[-1]


def _phase(name: str, template: dict, start: datetime.datetime) -> dict:
    entry = {"label": name.replace("_", " ").capitalize(),
             "description": template["description"], "start": start,
             "submission": template["submission"], "tasks": template["tasks"][:1],
             "execution_time_limit": template["execution_time_limit"]}
    for key in ("max_submissions", "max_submissions_per_day"):
        if key in template:
            entry[key] = template[key]
    return entry


def competition_spec(found: dict, default: dict, today: datetime.date) -> dict:
    results, code = _template_phases(default)
    names = found["phases"]
    first = datetime.datetime.combine(today, datetime.time()) + PHASE_SPACING
    phases = {name: _phase(name, results if index < len(names) - 1 else code,
                           first + index * PHASE_SPACING) for index, name in enumerate(names)}
    tasks = {task: default["tasks"][task] for phase in phases.values() for task in phase["tasks"]}
    return {"kind": found["kind"], "slug": _slug(found["title"]), "title": found["title"],
            "description": f"{found['title']}: a {found['kind']} competition.",
            "organizers": default["organizers"], "logo": "logo.png",
            "docker_image": default["docker_image"],
            "end_date": first + len(names) * PHASE_SPACING, "data_root": found["data_root"],
            "tasks": tasks, "phases": phases,
            "pages": {"overview": f"Welcome to {found['title']}.",
                      "terms": default["pages"].get("terms", "Be fair.")}}


# ---- the files -----------------------------------------------------------------------------

def _free(folder: Path, what: str) -> None:
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise NewError(f"{folder}: exists and is not empty; expected a new or empty folder for "
                       f"the {what} (nothing was written)")


def _data_readme(kind: str, root: Path, tasks: dict, manual: Path) -> str:
    lines = [f"# The tasks' files ({kind})", "",
             "One folder per task, named as the task is in `tasks:` of the spec. Each folder "
             "here is one of the kind's small embedded tasks, so the competition builds and "
             "dry-runs now; replace it with your own task's files, named as these are, and "
             "rename the task in the spec (`tasks:` and the phases' `tasks:`) to your "
             "folder's name.", ""]
    for task in tasks:
        lines += [f"## `{task}/`", ""]
        lines += [f"- `{path.relative_to(root / task).as_posix()}`"
                  for path in sorted((root / task).rglob("*")) if path.is_file()]
        lines.append("")
    lines += [f"What each file holds, and the kind's tools (convert, references): {manual}", ""]
    return "\n".join(lines)


def write_competition(folder: Path, found: dict, today: datetime.date) -> Path:
    from kinds.kind import kind as kind_record
    record = kind_record(found["kind"])
    default = yaml.safe_load(Path(record.DEFAULT_SPEC).read_text(encoding="utf-8"))
    spec = competition_spec(found, default, today)
    data_root = folder / found["data_root"]
    _free(folder, "spec")
    _free(data_root, "data")
    folder.mkdir(parents=True, exist_ok=True)
    for task in spec["tasks"]:
        shutil.copytree(Path(record.EMBEDDED_ROOT) / task, data_root / task,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(Path(record.DEFAULT_SPEC).parent / default["logo"], folder / "logo.png")
    manual = Path(record.DEFAULT_SPEC).parent / "README.md"
    (data_root / "README.md").write_text(
        _data_readme(found["kind"], data_root, spec["tasks"], manual), encoding="utf-8")
    path = folder / SPEC_FILE
    path.write_text(f"# Written by `codabench-bundle new`; every key: docs/spec_reference.md\n"
                    + yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, width=96),
                    encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    interactive = not args.yes and sys.stdin.isatty()
    try:
        found = answers(args, interactive)
        path = write_competition(args.folder, found, datetime.date.today())
    except NewError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {path} and {args.folder / found['data_root']}/ (its README.md says which "
          "files go where); next:\n"
          f"  codabench-bundle build --config {path} --phase all\n"
          f"  codabench-bundle check --config {path} --phase all")
    return 0


if __name__ == "__main__":
    sys.exit(main())

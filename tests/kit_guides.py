"""What a starting kit's guide (README.md) says, checked against the bundle it ships in: its
competition.yaml, its pages and the kit's own files (Codabench and CodaLab v1.5 bundles)."""
import html
import io
import json
import re
import zipfile
from pathlib import Path

import yaml

# Kit paths a guide may name without shipping them: what the participant makes.
PARTICIPANT_FILES = ("my_submission/", "my_predictions/", "submission.zip", "predictions.zip",
                     "smoke.zip")
KIT_SUFFIXES = (".py", ".json", ".zip", ".md", ".npz", ".csv", ".predict")


def _text(fragment: str) -> str:
    """HTML as plain text: tags out, entities decoded, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def _flat(text: str) -> str:
    return " ".join(text.split())


def _per_phase(page: str, start: str, end: str, labels: list[str]) -> dict[str, str]:
    """The part of a page between two headings, split by phase (<h4>label</h4> when the
    competition holds several phases)."""
    section = page.split(start, 1)[1].split(end, 1)[0]
    if len(labels) == 1:
        return {labels[0]: section}
    pieces = re.split(r"<h4>(.*?)</h4>", section)
    return {html.unescape(label): body for label, body in zip(pieces[1::2], pieces[2::2])}


def _facts(evaluation: str) -> dict[str, list[tuple[str, str]]]:
    """Each phase's facts table (label -> value rows), keyed by its Phase row."""
    tables = {}
    for table in re.findall(r"<table border=\"1\" cellpadding=\"4\">\n(<tr><th align=\"left\">"
                            r".*?)</table>", evaluation, re.DOTALL):
        rows = [(_text(label), _text(value)) for label, value in
                re.findall(r"<tr><th align=\"left\">(.*?)</th><td>(.*?)</td></tr>", table)]
        tables[dict(rows)["Phase"]] = rows
    return tables


def kit_of(bundle: zipfile.ZipFile, member: str) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(bundle.read(member))) as kit:
        return {name: kit.read(name) for name in kit.namelist() if not name.endswith("/")}


def kit_paths_named(guide: str, kit: dict[str, bytes]) -> list[str]:
    """Kit paths the guide names in backticks that the kit lacks. A name with a folder is a
    kit path; a bare file name is one unless it is a file of a submission (the sample's)."""
    samples = {name for member, data in kit.items() if member.endswith(".zip")
               for name in zipfile.ZipFile(io.BytesIO(data)).namelist()}
    config = json.loads(kit["kit.json"])
    own = samples | {config["entry_file"], *PARTICIPANT_FILES}
    missing = []
    tokens = re.findall(r"`([^`\s]+)`", guide)
    # a name with <task> stands for each task's
    tokens = [token.replace("<task>", task) if "<task>" in token else token
              for token in tokens for task in (config["tasks"] if "<task>" in token else [""])]
    for token in dict.fromkeys(tokens):
        if token in own or token.startswith(("-", ".", "$")) or re.search(r"[<>()=\[\]]", token):
            continue
        if "/" not in token and not token.endswith(KIT_SUFFIXES):
            continue                # a variable, a key, a function: not a path
        if token.endswith("/"):
            found = any(name.startswith(token) for name in kit)
        else:
            found = token in kit
        if not found:
            missing.append(token)
    return missing


def agreement_problems(bundle_path: Path) -> list[str]:
    """Where a kit's guide tells participants other rankings, limits or file names than the
    bundle's yaml and pages, or names a kit file the kit lacks; empty when they agree."""
    problems = []
    with zipfile.ZipFile(bundle_path) as bundle:
        competition = yaml.safe_load(bundle.read("competition.yaml"))
        pages = {name: bundle.read(_page_member(competition, name)).decode() for name in
                 ("evaluation", "overview", "starting_kit")}
        phases = _phases(competition)
        kits = {phase["label"]: kit_of(bundle, phase["starting_kit"]) for phase in phases}
    labels = [phase["label"] for phase in phases]
    ranking = _text(re.search(r"<p>(Ranking: .*?)</p>", pages["evaluation"], re.DOTALL)[1])
    rank_column = _rank_column(competition)
    facts = _facts(pages["evaluation"])
    limits = _per_phase(pages["evaluation"], "<h3>Budgets, sandbox and hardware</h3>",
                        "<h3>Leaderboard columns</h3>", labels)
    baselines = _per_phase(pages["overview"], "<h3>Baseline results</h3>",
                           "<h3>Organizers</h3>", labels)
    for phase in phases:
        label, kit = phase["label"], kits[phase["label"]]
        guide = kit["README.md"].decode()
        flat = _flat(guide)
        where = f"{bundle_path.name} {label} README.md"
        say = lambda message: problems.append(f"{where}: {message}")   # noqa: E731
        # ranking: the evaluation page's words, and the yaml's ranking column
        if ranking not in flat:
            say(f"lacks the evaluation page's ranking {ranking!r}")
        # (the page's ranking, checked above, may say why the average rank is not used)
        if not rank_column.get("computed") and "average rank" in flat.replace(ranking, ""):
            say(f"speaks of an average rank; the yaml ranks by {rank_column['label']!r}")
        # limits: the yaml's execution time limit, the page's facts and sandbox limits
        if f"{phase['execution_time_limit']} s" not in flat:
            say(f"lacks the yaml's execution time limit {phase['execution_time_limit']} s")
        for name, value in facts[label]:
            if value not in flat:
                say(f"lacks the page's {name}: {value!r}")
        for line in re.findall(r"<li>(.*?)</li>", limits[label], re.DOTALL):
            if _text(line) not in flat:
                say(f"lacks the page's limit {_text(line)!r}")
        # baselines: the overview's note; its table's file only where the overview has a table
        note = _text(re.search(r"<p>(.*?)</p>", baselines[label], re.DOTALL)[1])
        if note not in flat:
            say(f"lacks the overview's baseline note {note!r}")
        if ("<table" in baselines[label]) != ("baseline_results.json" in kit):
            say("ships baseline_results.json where the overview shows no table, or not where "
                "it does")
        # file names: what the programs read and write, as the guide and the page name them
        problems += [f"{where}: {message}" for message in _file_problems(kit, guide, pages)]
        problems += [f"{where}: names `{path}`, which the kit lacks"
                     for path in kit_paths_named(guide, kit)]
    return problems


# The two platforms' competition.yaml (bundle/platforms/): Codabench's is version 2.

def _page_member(competition: dict, page: str) -> str:
    if competition.get("version") == 2:
        return f"pages/{page}.html"
    return f"{page}.html"


def _phases(competition: dict) -> list[dict]:
    """Each phase's label, starting kit and execution time limit, in order."""
    if competition.get("version") == 2:
        return [{**phase, "label": phase["name"]} for phase in competition["phases"]]
    return [competition["phases"][number] for number in sorted(competition["phases"])]


def _rank_column(competition: dict) -> dict:
    """The column the leaderboard ranks by: its label, and what computes it (``computed``:
    CodaLab's Avg, or Codabench's avg_rank)."""
    if competition.get("version") == 2:
        (board,) = competition["leaderboards"]
        index = board.get("primary_index", 0)
        (column,) = [column for column in board["columns"] if column["index"] == index]
        return {"label": column["title"],
                **({"computed": column["computation"]} if column.get("computation") else {})}
    (column,) = [column for column in competition["leaderboard"]["columns"].values()
                 if column.get("selection_default")]
    return column


def _file_problems(kit: dict[str, bytes], guide: str, pages: dict[str, str]) -> list[str]:
    config = json.loads(kit["kit.json"])
    scoring = json.loads(kit["programs/scoring_program/scoring_config.json"])
    ingestion = json.loads(kit["programs/ingestion_program/ingestion_config.json"])
    page = _text(pages["starting_kit"])
    problems = []
    if config["code_submission"]:
        named = [config["entry_file"]]
    else:
        named = [task["settings"]["submission_stem"] + "." for task in scoring["tasks"]]
    for name in named:
        if name not in guide:
            problems.append(f"does not name {name!r}, which the phase's programs read")
        if name not in page:
            problems.append(f"names {name!r}, which the starting kit page does not")
    for task in ingestion["tasks"]:
        path = f"data/input/{task['inputs']}"
        if path not in guide:
            problems.append(f"does not name the input {path}")
        if not any(member == path or member.startswith(path + "/") for member in kit):
            problems.append(f"the kit lacks the input {path}")
    return problems

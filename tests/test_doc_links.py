"""The repository's markdown files link only to files and headings that exist (relative links;
web addresses are not fetched)."""
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+)$")


def tracked_markdown():
    listing = subprocess.run(["git", "ls-files", "*.md"], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout.split()
    return [REPO / name for name in listing if (REPO / name).is_file()]


def prose_lines(path):
    """The lines outside fenced code blocks, where a link or heading is one."""
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            yield line


def anchor(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower()).replace(" ", "-")


def anchors(path):
    return {anchor(match.group(1)) for line in prose_lines(path)
            if (match := HEADING.match(line))}


def broken_links(path):
    where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    for line in prose_lines(path):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue
            file_part, _, fragment = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.exists():
                yield f"{where}: {target} (no such file)"
            elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
                yield f"{where}: {target} (no such heading)"


def test_the_readme_and_every_kind_has_a_manual():
    files = set(tracked_markdown())
    assert REPO / "README.md" in files
    kinds = [folder for folder in (REPO / "kinds").iterdir() if (folder / "kind.py").is_file()]
    assert kinds and all(folder / "README.md" in files for folder in kinds)


def test_relative_links_point_at_existing_files_and_headings():
    broken = [problem for path in tracked_markdown() for problem in broken_links(path)]
    assert not broken, "\n".join(broken)


def test_anchors_follow_githubs_spelling(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Top\n## Ingestion (code submissions)\n```\n# not a heading\n```\n"
                    "[ok](#ingestion-code-submissions) [bad](#not-a-heading) [gone](nowhere.md)\n")
    assert anchors(page) == {"top", "ingestion-code-submissions"}
    problems = list(broken_links(page))
    assert len(problems) == 2 and "#not-a-heading" in problems[0] and "nowhere.md" in problems[1]


ARCHITECTURE = REPO / "docs" / "architecture.md"
CITED_PATH = re.compile(r"`([\w./-]+/[\w./-]*)`")


def test_the_architecture_page_is_a_short_map_whose_cited_paths_exist():
    """docs/architecture.md is a map (at most 150 lines; the detail is in the modules'
    docstrings), and each path it names in code quotes is there: from the repository's root,
    or from one of its top-level folders (``ingest/frames.py`` is the ingestion program's)."""
    lines = ARCHITECTURE.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"docs/architecture.md has {len(lines)} lines"
    tops = [REPO, *(folder for folder in REPO.iterdir() if folder.is_dir())]
    cited = {path for line in lines for path in CITED_PATH.findall(line) if "<" not in path}
    missing = sorted(path for path in cited
                     if not any((top / path.rstrip("/")).exists() for top in tops))
    assert cited and not missing, missing

"""What participants read: every page of every default bundle, rendered in headless Chromium.

The text checked is document.body.innerText, taken from the browser after it has parsed the
page, so it is what a reader sees: entities decoded, tags gone. An entity or a tag still visible
there was escaped once too often. The dates and limits the pages state are compared with the
bundle's own competition.yaml (and the task budgets with its ingestion config), which is what the
site enforces. A full-page PNG of every page is kept under test-artifacts/screenshots/.
"""
from __future__ import annotations

import io
import json
import re
import shutil
import zipfile
import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from browser import Browser, browser_or_skip
from runtime.formats import write_matrix
from kinds.bdl2021.runtime.formats import read_chain_probs, read_chain_samples
from conftest import ARTIFACTS, REPO, report_artifacts
from scoring_harness import new_run, run_scoring
from scoring_program.scorer.main import NOTHING_SCORED

pytestmark = pytest.mark.slow
SCREENSHOTS = ARTIFACTS / "screenshots"
PLATFORMS = ("codalab", "codabench")

# Element names that would betray markup escaped as text. A closed list on purpose: pages
# legitimately show placeholders such as "<task>_task.json".
TAG_NAMES = ("a|abbr|b|big|blockquote|body|br|caption|code|col|colgroup|dd|del|details|div|dl|"
             "dt|em|font|h[1-6]|head|hr|html|i|img|ins|kbd|li|link|meta|ol|p|pre|q|s|samp|script|"
             "small|span|strong|style|sub|summary|sup|svg|table|tbody|td|tfoot|th|thead|title|tr|"
             "tt|u|ul|var")
LITERAL_TAG = re.compile(rf"</?(?:{TAG_NAMES})(?:\s[^<>]*)?/?>", re.IGNORECASE)
LITERAL_ENTITY = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]{1,31}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});")
DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2} \d{2}:\d{2}(?::\d{2})?) UTC\b")


# -- the browser and how each platform shows an organizer page ----------------------------------

class OneTabBrowser(Browser):
    """Browser, with every page loaded in one tab, kept open. Browser.visit opens a tab for
    each page and closes it after, and a tab cost Chromium more than most pages do: this
    file's 50-odd pages took it 20 CPU seconds in a tab each, 11.5 in one tab. Each page is
    still a fresh document (a navigation), in the window's viewport as a new tab's (visit
    then sets its own). visit's opening, attaching and closing of a tab are answered with the
    kept one, so what visit does to a page stays browser.py's."""

    _kept: tuple[str, str] | None = None            # the tab's target and session ids

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        kept = self._kept
        if kept and method == "Target.createTarget":
            super().call("Emulation.clearDeviceMetricsOverride", session=kept[1])
            return {"targetId": kept[0]}
        if kept and method in ("Target.attachToTarget", "Target.closeTarget") \
                and params["targetId"] == kept[0]:
            return {"sessionId": kept[1]} if method == "Target.attachToTarget" else {}
        result = super().call(method, params, session)
        if kept is None and method == "Target.attachToTarget":
            self._kept = params["targetId"], result["sessionId"]
        return result


@pytest.fixture(scope="session")
def browser():
    instance = browser_or_skip()            # started, or the test skipped saying why
    instance.__class__ = OneTabBrowser      # the same browser, its pages in one tab
    yield instance
    instance.close()


@pytest.fixture(scope="session")
def screenshots(request) -> Path:
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)      # no stale pictures of older runs
    SCREENSHOTS.mkdir(parents=True)
    report_artifacts(request.config, SCREENSHOTS)
    return SCREENSHOTS


def as_the_platform_shows_it(page_html: str, title: str) -> str:
    """The page inside a site frame, inserted the way both sites do: as innerHTML of a tab.

    CodaLab strips <script> blocks when it saves a page and renders it through DOMPurify with
    <style> forbidden (codalab_v1.md §2.2); both are removed here the same way. Codabench runs the
    page through Markdown first (codabench_v2.md §1.7); check_markdown_safe covers that.
    """
    cleaned = re.sub(r"<(script|style)\b.*?</\1\s*>", "", page_html, flags=re.S | re.I)
    literal = json.dumps(cleaned).replace("</", "<\\/")    # cannot close the frame's <script>
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>"
            f"{title}</title></head><body><div id=\"tab\"></div>"
            f"<script>document.getElementById('tab').innerHTML = {literal};</script></body></html>")


def check_markdown_safe(page_html: str) -> list[str]:
    """Codabench renders pages with `marked` and KaTeX. A page that begins with a tag and has no
    blank line is one raw HTML block, passed through unchanged; a `$` could start maths."""
    problems = []
    body = page_html.split("\n", 1)[1] if page_html.startswith("<!DOCTYPE") else page_html
    if re.search(r"\n[ \t]*\n", body.strip()):
        problems.append("a blank line ends the raw HTML block: Markdown would parse what follows")
    if "$" in page_html:
        problems.append("a '$' may be rendered as KaTeX maths on Codabench")
    return problems


# -- a bundle and the facts its yaml states ------------------------------------------------------

@dataclass
class Bundle:
    platform: str
    path: Path
    pages: dict[str, str]                     # page name -> html
    start: dt.datetime
    end: dt.datetime | None
    execution_time_limit: int
    max_submissions: int
    max_submissions_per_day: int
    budgets: dict[str, float] = field(default_factory=dict)   # empty for results phases

    @property
    def name(self) -> str:
        return self.path.stem


def _utc(value) -> dt.datetime:
    """A yaml date: a datetime (CodaLab) or a quoted "YYYY-MM-DD HH:MM:SS" (Codabench), UTC."""
    return value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))


def shown_date(text: str) -> dt.datetime | None:
    """A date as a page shows it, "YYYY-MM-DD HH:MM[:SS] UTC", or None."""
    match = DATE.fullmatch(text.strip()) or DATE.search(text)
    return dt.datetime.fromisoformat(match.group(1)) if match else None


def read_bundle(platform: str, path: Path) -> Bundle:
    with zipfile.ZipFile(path) as archive:
        comp = yaml.safe_load(archive.read("competition.yaml"))
        if platform == "codabench":
            assert comp["version"] == 2
            phase = comp["phases"][0]
            files = [page["file"] for page in comp["pages"]] + [comp["terms"]]
            start, end = phase["start"], phase.get("end")
        else:
            (phase,) = comp["phases"].values()
            files = list(comp["html"].values())
            start, end = phase["start_date"], comp.get("end_date")
        pages = {Path(member).stem: archive.read(member).decode("utf-8") for member in files}
        budgets = {}
        if "ingestion_program.zip" in archive.namelist():
            with zipfile.ZipFile(io.BytesIO(archive.read("ingestion_program.zip"))) as program:
                config = json.loads(program.read("ingestion_config.json"))
            budgets = {task["name"]: task["budget_seconds"] for task in config["tasks"]}
    return Bundle(platform, path, pages, _utc(start), _utc(end) if end else None,
                  phase["execution_time_limit"], phase["max_submissions"],
                  phase["max_submissions_per_day"], budgets)


def all_bundles(default_bundles) -> list[Bundle]:
    return [read_bundle(platform, path) for platform in PLATFORMS
            for path in sorted(default_bundles[platform].glob("*.zip"))]


# -- the detailed results, written by each bundle's own scoring program ------------------------

def detailed_results(bundle: Path, work: Path) -> str:
    """Score a submission with the bundle's scoring program and reference data, in the CodaLab
    worker's layout (the scorer writes the same report on Codabench). The submission is each
    task's first HMC chain; with several tasks the last one is left out, so that the report also
    shows a penalty and its reason."""
    prepared = work / "prepared"
    with zipfile.ZipFile(bundle) as archive:
        for member, folder in (("scoring_program.zip", "program"), ("reference_data.zip", "ref")):
            zipfile.ZipFile(io.BytesIO(archive.read(member))).extractall(prepared / folder)
    run = new_run(prepared, work / "run")
    chains = sorted((prepared / "ref").glob("*_chain_*.npy"))
    for chain in chains[:-1] if len(chains) > 1 else chains:
        task, kind = chain.name.split("_chain_")
        if kind == "probs.npy":
            write_matrix(run / "input" / "res" / f"{task}_probs.csv", read_chain_probs(chain)[0])
        else:
            write_matrix(run / "input" / "res" / f"{task}_samples.csv", read_chain_samples(chain)[0])
    result = run_scoring(run)
    # A code phase scores only what its ingestion signed: there every task is penalised and
    # the submission fails, its report still written, with each reason.
    assert result.returncode in (0, NOTHING_SCORED), result.stderr
    return (run / "output" / "detailed_results.html").read_text(encoding="utf-8")


# -- what is checked on the visible text -------------------------------------------------------

def escaping_problems(text: str) -> list[str]:
    found = LITERAL_ENTITY.findall(text) + LITERAL_TAG.findall(text)
    return [f"visible markup {item!r}" for item in dict.fromkeys(found)]


def table_value(text: str, label: str) -> str | None:
    """The cell right of a row header in a two-column table: innerText joins cells with a tab."""
    match = re.search(rf"^{re.escape(label)}\t(.*)$", text, re.M)
    return match.group(1).strip() if match else None


def fact_problems(text: str, bundle: Bundle, known_starts: set[dt.datetime]) -> list[str]:
    problems = []

    def expect(label, pattern, *wanted):
        value = table_value(text, label)
        match = re.fullmatch(pattern, value) if value is not None else None
        if value is None:
            problems.append(f"no '{label}' row")
        elif not match or match.groups() != tuple(map(str, wanted)):
            problems.append(f"'{label}' says {value!r}; competition.yaml says {wanted}")

    for label, wanted in (("Opens", bundle.start), ("Closes", bundle.end)):
        value = table_value(text, label)
        if value is None:
            problems.append(f"no '{label}' row")
        elif shown_date(value) != wanted:
            problems.append(f"'{label}' says {value!r}; competition.yaml says {wanted} (UTC)")
    expect("Submissions", r"at most (\d+) in total and (\d+) per day",
           bundle.max_submissions, bundle.max_submissions_per_day)
    expect("Execution time limit", r"(\d+) s .*", bundle.execution_time_limit)
    if bundle.budgets:
        value = table_value(text, "Training time budget per task") or ""
        shown = {name: float(seconds) for name, seconds in re.findall(r"(\w+) ([\d.]+) s", value)}
        if shown != bundle.budgets:
            problems.append(f"budgets shown {shown}; the ingestion config has {bundle.budgets}")
    for date in DATE.findall(text):
        if dt.datetime.fromisoformat(date) not in known_starts | {bundle.end}:
            problems.append(f"date {date} UTC is no phase start or end in these bundles' yaml")
    return problems


def overview_problems(text: str, bundle: Bundle) -> list[str]:
    problems = []
    current = [line for line in text.splitlines() if "(this competition)" in line]
    opens = re.search(r"opens (.+? UTC)", current[0]) if len(current) == 1 else None
    if not opens or shown_date(opens.group(1)) != bundle.start:
        problems.append(f"timeline line of this phase: {current}; it opens {bundle.start} UTC")
    ends = re.search(r"competition ends (.+? UTC)", text)
    if bundle.end and (not ends or shown_date(ends.group(1)) != bundle.end):
        problems.append(f"the timeline does not give the end, {bundle.end} UTC")
    lines = text.splitlines()
    header = next((line.split("\t") for line in lines if line.startswith("task\t")), None)
    if header is None or "budget" not in header:
        return problems + ["no task table with a budget column"]
    rows = [line.split("\t") for line in lines
            if len(line.split("\t")) == len(header) and line.split("\t")[0] in bundle_tasks(bundle)]
    for row in rows:
        budget = bundle.budgets.get(row[0])
        wanted = f"{budget:g} s" if budget is not None else "-"
        if row[header.index("budget")] != wanted:
            problems.append(f"task table: {row[0]} budget {row[header.index('budget')]!r}, "
                            f"expected {wanted!r}")
    if not rows:
        problems.append("the task table lists no task")
    return problems


def data_problems(text: str, bundle: Bundle) -> list[str]:
    """Every file the data page says participants can download is in the zip it names."""
    lines = [line.split("\t") for line in text.splitlines()]
    header = next((cells for cells in lines if cells[:2] == ["task", "file"]), None)
    if header is None or "where" not in header:
        return ["no file table with a 'where' column"]
    problems, rows = [], [cells for cells in lines if len(cells) == len(header) and cells != header]
    with zipfile.ZipFile(bundle.path) as archive:
        for zip_name, place in (("public_data.zip", "public data"), ("input_data.zip", "input data")):
            listed = {cells[1] for cells in rows if place in cells[header.index("where")]}
            members = (set(zipfile.ZipFile(io.BytesIO(archive.read(zip_name))).namelist())
                       if zip_name in archive.namelist() else set())
            problems += [f"data table: {name} is not in {zip_name}" for name in sorted(listed - members)]
    return problems + ([] if rows else ["the file table is empty"])


def bundle_tasks(bundle: Bundle) -> set[str]:
    with zipfile.ZipFile(bundle.path) as archive:
        with zipfile.ZipFile(io.BytesIO(archive.read("reference_data.zip"))) as ref:
            return {name.split("_chain_")[0] for name in ref.namelist() if "_chain_" in name}


# -- the tests ---------------------------------------------------------------------------------

def competition_pages(bundle: Path, platform: str) -> dict[str, str]:
    """Every page of a bundle of several phases, by name: the HTML as the organizer uploads it."""
    with zipfile.ZipFile(bundle) as archive:
        comp = yaml.safe_load(archive.read("competition.yaml"))
        files = ([page["file"] for page in comp["pages"]] + [comp["terms"]]
                 if platform == "codabench" else list(comp["html"].values()))
        return {Path(member).stem: archive.read(member).decode() for member in files}


def render(browser: Browser, html: str, frame: Path, picture: Path) -> str:
    frame.write_text(html, encoding="utf-8")
    return browser.visit(frame.as_uri(), picture)


@pytest.fixture(scope="module")
def default_pages(tmp_path_factory) -> tuple[Path, dict]:
    """The folder the default bundles' pages are framed in (each page's frame, whatever the
    platform, is <page>.html there) and what each frame showed: {frame html: (its visible
    text, its screenshot)}. Of the 30 pages of both platforms' default bundles, 18 differed
    when this was written: the terms of every phase, the kit guide of both tracks, and most
    pages on both platforms are the same bytes. The same bytes in the same file render the
    same, so Chromium renders each once; every bundle keeps its screenshot, and each is
    checked against its own bundle's facts."""
    return tmp_path_factory.mktemp("default-pages"), {}


@pytest.mark.parametrize("platform", PLATFORMS)
def test_every_page_reads_right_in_a_browser(platform, browser, default_bundles, screenshots,
                                             default_pages):
    bundles = all_bundles(default_bundles)
    known_starts = {b.start for b in bundles if b.platform == platform}
    problems, shown = [], 0
    frames, rendered = default_pages
    for bundle in (b for b in bundles if b.platform == platform):
        assert {"overview", "evaluation", "data", "terms", "starting_kit"} <= set(bundle.pages)
        for page, html in bundle.pages.items():
            where = f"{bundle.name}/{page}"
            frame, picture = (as_the_platform_shows_it(html, page),
                              screenshots / platform / bundle.name / f"{page}.png")
            if frame in rendered:          # rendered already (default_pages)
                text, first = rendered[frame]
                picture.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(first, picture)
            else:
                text = render(browser, frame, frames / f"{page}.html", picture)
                rendered[frame] = text, picture
            shown += 1
            assert len(text) > 100, f"{where} shows almost nothing: {text!r}"
            found = escaping_problems(text)
            if page in ("overview", "evaluation"):
                found += fact_problems(text, bundle, known_starts)
            if page == "overview":
                found += overview_problems(text, bundle)
            if page == "data":
                found += data_problems(text, bundle)
            if page == "evaluation":
                # the symbols of the formulas are there, rendered: no escaped or missing markup
                found += [] if "Σ" in text else ["the metric formulas lost their Σ"]
                if "evaluation-light" in bundle.name or "evaluation" == bundle.name:
                    own = "a submission whose metadata file holds a command: is refused and fails"
                    found += [] if own in " ".join(text.split()) else [
                        "no word of what the platform runs outside the sandbox"]
            if platform == "codabench":
                found += check_markdown_safe(html)
            problems += [f"{where}: {problem}" for problem in found]
    print(f"{shown} {platform} pages rendered; screenshots in {screenshots / platform}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_detailed_results_read_right_in_a_browser(platform, browser, default_bundles, screenshots,
                                                  tmp_path):
    problems = []
    for bundle in sorted(default_bundles[platform].glob("*.zip")):
        work = tmp_path / bundle.stem
        html = detailed_results(bundle, work)
        # Shown as its own page (CodaLab's link, Codabench's frame): scripts, if any, would run.
        page = work / "detailed_results.html"
        page.write_text(html, encoding="utf-8")
        text = browser.visit(page.as_uri(), screenshots / platform / bundle.stem
                             / "detailed_results.png")
        assert len(text) > 100, f"{bundle.stem}: the detailed results show almost nothing"
        problems += [f"{bundle.stem}/detailed_results: {p}" for p in escaping_problems(text)]
        if len(list((work / "prepared" / "ref").glob("*_chain_*.npy"))) > 1 \
                and "penalised" not in text.lower():
            problems.append(f"{bundle.stem}: the task left out is not shown as penalised")
    assert not problems, "\n".join(problems)


def test_escaping_check_catches_double_escaped_markup():
    """The check itself: what the evaluation page once showed is caught, clean text is not."""
    assert escaping_problems("(1/N) &Sigma;<sub>i</sub> 1[argmax]")
    assert escaping_problems("a &amp; b") and escaping_problems("x</p>")
    assert not escaping_problems("(1/N) Σi p(c|xi); <task>_probs.csv; a & b; x < y > z")


def test_formulas_are_markup_built_from_escaped_text():
    """Text is escaped once and `_{x}` becomes a subscript; the template must not escape again."""
    from kinds.bdl2021.pages import FORMULAS, formula_html
    assert formula_html("a<b & c_{HMC}") == "a&lt;b &amp; c<sub>HMC</sub>"
    assert formula_html("x_{<i>}") == "x<sub>&lt;i&gt;</sub>"
    for text in FORMULAS.values():
        assert "&" not in text and "<" not in text, "FORMULAS are plain text, not HTML"
        assert str(formula_html(text)).count("<sub>") == text.count("_{")


@pytest.mark.parametrize("platform", PLATFORMS)
def test_one_competition_pages_read_right_in_a_browser(platform, browser, screenshots, tmp_path):
    """A competition holding both phases (layout one): every page, as participants see it,
    describes both phases with their own dates, limits and budgets, and the organizer's
    Markdown shows as a link, not as its source."""
    import shutil

    from bundle.build import build_competition
    from bundle.spec import DEFAULT_SPEC, load_spec
    raw = yaml.safe_load(DEFAULT_SPEC.read_text())
    raw.update(layout="one", pages={**raw["pages"], "overview": "Read the **rules** and the "
                                    "[guide](https://example.org/guide) first."})
    shutil.copyfile(DEFAULT_SPEC.parent / raw["logo"], tmp_path / raw["logo"])
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    spec = load_spec(tmp_path / "spec.yaml")
    built = build_competition(spec, ["development", "evaluation"], "light", tmp_path / "out",
                              platform=platform)
    pages = competition_pages(built.path, platform)
    texts = {}
    for page, html in pages.items():
        texts[page] = render(browser, as_the_platform_shows_it(html, page), tmp_path / f"{page}.html",
                             screenshots / platform / "one-competition" / f"{page}.png")
        assert not escaping_problems(texts[page]), (page, escaping_problems(texts[page]))
    overview, evaluation = texts["overview"], texts["evaluation"]
    for phase in spec.phases:
        assert phase.start.strftime("%Y-%m-%d %H:%M UTC") in overview
        assert f"{phase.execution_time_limit} s" in evaluation
    assert "Evaluation (Light track)" in overview and "Development" in overview
    assert "breast_cancer 30 s" in evaluation            # the light track's own budget
    assert "separate competition" not in overview
    assert "**rules**" not in overview and "](https" not in overview
    assert "Read the rules and the guide first." in " ".join(overview.split())
    for page in ("data", "starting_kit"):
        assert "Development" in texts[page] and "Evaluation (Light track)" in texts[page]


@pytest.mark.parametrize("platform", PLATFORMS)
def test_retina_pages_and_report_read_right_in_a_browser(platform, browser, screenshots, tmp_path,
                                                         built_bundles, shared_local_runs):
    """The Retina competition as participants see it: every page, with its baseline table and
    the rule that ties in uncertainty keep the file's order, and the detailed results of a
    baseline with its ROC, referral, reliability and per-grade charts drawn."""
    spec = REPO / "kinds" / "retina" / "default_spec.yaml"
    # The default competition (one, of every phase) as `build_bundle.py --phase all
    # --platform ...` writes it, built once a test run (built_bundles: the same build as
    # test_kind_conformance.py's, which dry-runs it).
    built = sorted(built_bundles(spec, platform).glob("*.zip"))
    assert len(built) == 1, built                   # its layout: one competition, every phase
    pages = competition_pages(built[0], platform)
    texts = {}
    for page, html in pages.items():
        texts[page] = render(browser, as_the_platform_shows_it(html, page),
                             tmp_path / f"{page}.html",
                             screenshots / platform / "retina" / f"{page}.png")
        assert not escaping_problems(texts[page]), (page, escaping_problems(texts[page]))
    assert "Deep ensemble (5 networks)" in texts["overview"]
    assert "ties keep the order of the test file" in texts["evaluation"]
    assert "severity_test" in texts["overview"] and "population_val" in texts["overview"]
    # The organizer's local run of the baseline (its report is the same on either platform):
    # one a test run, which test_retina_kind.py's test of the baselines reads too.
    run, out = shared_local_runs(spec, "final", baseline="mc_dropout", score_hidden=True)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    report = out / "scoring" / "run" / "output" / "detailed_results.html"
    text = browser.visit(report.as_uri(), screenshots / platform / "retina" / "detailed_results.png")
    assert not escaping_problems(text)
    for title in ("Every figure, per evaluation set", "NHS screening standard",
                  "Uncertainty by true grade"):
        assert title in text
    svg = report.read_text(encoding="utf-8")
    assert svg.count("<svg") == 2 * (2 + 3 + 5)       # per task: ROC, reliability, 3 referral, 5 grades


# What the data page's example images report once the page has loaded: each image's
# naturalWidth (0 for an image the browser could not decode) and whether the figures' table
# is there.
IMAGES_STATE = ("JSON.stringify({widths: Array.from(document.images, i => i.naturalWidth),"
                " complete: document.readyState === 'complete'"
                " && Array.from(document.images).every(i => i.complete),"
                " table: !!document.querySelector('table.training')})")


def visit_and_evaluate(browser: Browser, url: str, expression: str, screenshot: Path) -> dict:
    """Load ``url``, wait until every image has loaded or failed, save a full-page PNG and
    return ``expression``'s JSON value."""
    import time
    browser.visit(url, screenshot)
    target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.call("Target.attachToTarget", {"targetId": target,
                                                     "flatten": True})["sessionId"]
    try:
        browser.call("Page.enable", session=session)
        browser._events.clear()
        browser.call("Page.navigate", {"url": url}, session)
        browser.wait_for("Page.loadEventFired", session)
        deadline = time.monotonic() + 20
        while True:
            value = json.loads(browser.call("Runtime.evaluate", {
                "expression": expression, "returnByValue": True}, session)["result"]["value"])
            if value["complete"] or time.monotonic() > deadline:
                return value
            time.sleep(0.2)
    finally:
        browser.call("Target.closeTarget", {"targetId": target})


@pytest.mark.parametrize("platform", PLATFORMS)
def test_data_page_example_images_load_in_a_browser(platform, browser, screenshots, tmp_path,
                                                     built_bundles):
    """The data page of every kind's default phase with image tasks, as the platform shows
    it: the figures' table is there and every example image decodes (naturalWidth > 0)."""
    from bundle.build import build_competition, bundle_name, competition_targets
    from bundle.phase_plan import phase_plan
    from bundle.spec import load_spec
    from kinds.kind import KINDS
    shown = 0
    for name in KINDS:
        spec = load_spec(KINDS[name].DEFAULT_SPEC)
        hook = KINDS[name].public_training
        for phase in spec.phases:
            plan = phase_plan(spec, phase.key, None)
            if hook is None or not any(hook(t) and hook(t).images for t in plan.tasks):
                continue
            # The phase's competition as `build_bundle.py --phase <phase>` writes it. Where the
            # kind's default build holds that very bundle (one competition a phase, this one
            # without tracks), it is that build's (built_bundles, once a test run).
            if spec.layout != "one" and competition_targets(spec, phase.key) == [([phase.key],
                                                                                   None)]:
                path = (built_bundles(KINDS[name].DEFAULT_SPEC, platform)
                        / bundle_name(spec, [phase.key], None, platform))
            else:
                path = build_competition(spec, [phase.key], None, tmp_path / name / phase.key,
                                         platform=platform).path
            html = competition_pages(path, platform)["data"]
            frame = tmp_path / f"{name}-{phase.key}-data.html"
            frame.write_text(as_the_platform_shows_it(html, "data"), encoding="utf-8")
            state = visit_and_evaluate(browser, frame.as_uri(), IMAGES_STATE,
                                       screenshots / platform / "data-examples"
                                       / f"{name}-{phase.key}.png")
            where = f"{name}/{phase.key}"
            assert state["table"], f"{where}: no table of the training data"
            assert state["widths"] and all(w > 0 for w in state["widths"]), (where, state)
            if platform == "codabench":
                assert not check_markdown_safe(html), (where, check_markdown_safe(html))
            shown += 1
    assert shown, "no kind's default competition has an image task"

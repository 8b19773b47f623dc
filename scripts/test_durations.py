"""Writes docs/test_durations.md: how long the suite takes, per file and per slow test.

    .venv/bin/python scripts/test_durations.py                   # runs the README's test command
    .venv/bin/python scripts/test_durations.py --from junit.xml  # reads a finished run

Each test's CPU seconds (the property ``cpu_seconds`` that tests/cpu_accounting.py records: the
test's process and every process it waited for) are added up per file and for the suite, beside
the wall time: how much of the cores' time the run used says whether more workers could help
(cores idle) or only less work can (cores busy).

The table names every test over 30 s and flags each one over 60 s that lacks the `slow` marker
(which tests carry it is asked of pytest's collection, since a junit file does not record
markers). A test's time is its setup, call and teardown, so a module-scoped fixture counts
toward the first test that uses it.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "docs" / "test_durations.md"
LISTED_SECONDS = 30.0
MARKER_REQUIRED_SECONDS = 60.0
MARKER = "slow"


@dataclass(frozen=True)
class CaseTime:
    file: str
    name: str
    seconds: float
    outcome: str  # passed, failed, error or skipped
    cpu_seconds: float | None = None     # None: the run did not record it

    @property
    def node_id(self):
        return f"{self.file}::{self.name}"


@dataclass(frozen=True)
class SuiteRun:
    wall_seconds: float
    timestamp: str
    host: str
    tests: list
    cores: int | None = None             # of the machine that ran it, where known


def junit_address(node_id):
    """pytest's junit (classname, name) of a node id (as _pytest.junitxml.mangle_test_address)."""
    path, _, rest = node_id.partition("::")
    names = [name for name in rest.split("::") if name != "()"]
    module = path[:-len(".py")] if path.endswith(".py") else path
    return ".".join([module.replace("/", ".")] + names[:-1]), names[-1]


def file_of(classname):
    """The test file a junit classname comes from: the longest dotted prefix that is a file."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        candidate = "/".join(parts[:end]) + ".py"
        if (REPO / candidate).is_file():
            return candidate, parts[end:]
    return classname, []


def outcome_of(case):
    for tag in ("failure", "error", "skipped"):
        if case.find(tag) is not None:
            return "failed" if tag == "failure" else tag
    return "passed"


def cpu_of(case):
    """A junit testcase's recorded CPU seconds, or None."""
    for prop in case.iter("property"):
        if prop.get("name") == "cpu_seconds":
            return float(prop.get("value"))
    return None


def cpu_text(tests):
    """The tests' CPU seconds added up, or a dash where none was recorded."""
    known = [t.cpu_seconds for t in tests if t.cpu_seconds is not None]
    return f"{sum(known):.1f}" if known else "–"


def cpu_line(run):
    known = [t.cpu_seconds for t in run.tests if t.cpu_seconds is not None]
    if not known:
        return "- CPU: not recorded by this run"
    line = (f"- CPU: {minutes(sum(known))} in all (each test's process and those it waited "
            "for, setup and teardown included)")
    if run.cores and run.wall_seconds:
        line += (f"; the {run.cores} cores were busy {sum(known) / (run.cores * run.wall_seconds):.0%}"
                 " of the wall time")
    return line


def read_junit(path):
    root = ElementTree.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    tests = []
    for suite in suites:
        for case in suite.iter("testcase"):
            file, classes = file_of(case.get("classname", ""))
            name = "::".join(classes + [case.get("name", "")])
            tests.append(CaseTime(file, name, float(case.get("time") or 0), outcome_of(case),
                                  cpu_of(case)))
    return SuiteRun(wall_seconds=sum(float(s.get("time") or 0) for s in suites),
                    timestamp=suites[0].get("timestamp", "") if suites else "",
                    host=suites[0].get("hostname", "") if suites else "", tests=tests)


def marked_node_ids(marker=MARKER, files=None):
    """The node ids pytest selects with `-m <marker>`, in their junit spelling. ``files``: the
    test files to collect (those of the run the table is of: a test elsewhere is never looked
    up, and collecting the whole suite costs seconds per file); None: the whole suite."""
    if files is not None:
        files = sorted(file for file in set(files) if (REPO / file).is_file())
        if not files:
            return set()
    listing = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-m", marker,
         *(files or ())], cwd=REPO, capture_output=True, text=True)
    if listing.returncode not in (0, 5):  # 5: nothing collected
        raise SystemExit(f"pytest --collect-only -m {marker} failed:\n{listing.stdout[-2000:]}"
                         f"{listing.stderr[-2000:]}")
    node_ids = set()
    for line in listing.stdout.splitlines():
        if "::" in line and not line.startswith(" "):
            classname, name = junit_address(line.strip())
            file, classes = file_of(classname)
            node_ids.add(f"{file}::{'::'.join(classes + [name])}")
    return node_ids


def unmarked_slow_tests(run, marked):
    return [test for test in run.tests
            if test.seconds > MARKER_REQUIRED_SECONDS and test.node_id not in marked]


def per_file(run):
    files = {}
    for test in run.tests:
        files.setdefault(test.file, []).append(test)
    return sorted(files.items(), key=lambda item: (-sum(t.seconds for t in item[1]), item[0]))


def minutes(seconds):
    return f"{seconds:.1f} s ({seconds / 60:.1f} min)"


def render(run, marked, source):
    outcomes = {}
    for test in run.tests:
        outcomes[test.outcome] = outcomes.get(test.outcome, 0) + 1
    counts = ", ".join(f"{count} {outcome}" for outcome, count in sorted(outcomes.items()))
    lines = [
        "# Test durations",
        "",
        f"Generated by `scripts/test_durations.py` from {source}"
        + (f", run at {run.timestamp}" if run.timestamp else "")
        + (f" on `{run.host}`" if run.host else "") + ". Do not edit by hand.",
        "",
        f"- Whole suite, wall time: **{minutes(run.wall_seconds)}**",
        f"- Tests: {len(run.tests)} ({counts or 'none'}); their times add up to "
        f"{minutes(sum(t.seconds for t in run.tests))} (setup and teardown included; parallel "
        "workers overlap, so this can exceed the wall time)",
        cpu_line(run),
        "",
        "## Per file",
        "",
        "| file | tests | seconds | CPU seconds | slowest test | its seconds |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for file, tests in per_file(run):
        slowest = max(tests, key=lambda t: t.seconds)
        lines.append(f"| `{file}` | {len(tests)} | {sum(t.seconds for t in tests):.1f} "
                     f"| {cpu_text(tests)} | `{slowest.name}` | {slowest.seconds:.1f} |")
    listed = sorted((t for t in run.tests if t.seconds > LISTED_SECONDS),
                    key=lambda t: (-t.seconds, t.node_id))
    lines += ["", f"## Tests over {LISTED_SECONDS:.0f} s", ""]
    if listed:
        lines += [f"| test | seconds | `{MARKER}` marker |", "|---|---:|---|"]
        lines += [f"| `{t.node_id}` | {t.seconds:.1f} | {'yes' if t.node_id in marked else 'NO'} |"
                  for t in listed]
    else:
        lines.append("None.")
    unmarked = unmarked_slow_tests(run, marked)
    lines += ["", f"## Over {MARKER_REQUIRED_SECONDS:.0f} s without the `{MARKER}` marker", ""]
    lines += [f"- `{t.node_id}`: {t.seconds:.1f} s" for t in unmarked] or ["None."]
    return "\n".join(lines) + "\n"


def run_suite(junit_path, pytest_args):
    """The README's test command (`python -m pytest` at the repository's root), with junit."""
    started = time.monotonic()
    status = subprocess.run([sys.executable, "-m", "pytest", f"--junitxml={junit_path}",
                             *pytest_args], cwd=REPO).returncode
    return status, time.monotonic() - started


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="junit", type=Path,
                        help="read this junit xml file instead of running the suite")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="default: %(default)s")
    parser.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)),
                        help="the cores of the machine that ran the suite (default: this "
                             "one's, %(default)s)")
    parser.add_argument("pytest_args", nargs="*",
                        help="passed on to pytest when it runs the suite (after --)")
    args = parser.parse_args(argv)
    if args.junit:
        status, run = 0, read_junit(args.junit)
        run = SuiteRun(run.wall_seconds, run.timestamp, run.host, run.tests, args.cores)
        source = f"`{args.junit.name}`"
    else:
        with tempfile.TemporaryDirectory() as folder:
            junit_path = Path(folder) / "junit.xml"
            status, wall = run_suite(junit_path, args.pytest_args)
            if not junit_path.is_file():
                raise SystemExit(f"pytest exited {status} without writing {junit_path}")
            run = read_junit(junit_path)
        # the session's own clock misses interpreter start-up and collection; ours does not
        run = SuiteRun(wall, run.timestamp, run.host, run.tests, args.cores)
        source = "`python -m pytest" + "".join(f" {arg}" for arg in args.pytest_args) + "`"
    marked = marked_node_ids(files=[test.file for test in run.tests])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(run, marked, source), encoding="utf-8")
    for test in unmarked_slow_tests(run, marked):
        print(f"over {MARKER_REQUIRED_SECONDS:.0f} s without the {MARKER} marker: "
              f"{test.node_id} ({test.seconds:.1f} s)", file=sys.stderr)
    print(f"wrote {args.out} ({len(run.tests)} tests, {minutes(run.wall_seconds)})")
    return status


if __name__ == "__main__":
    sys.exit(main())

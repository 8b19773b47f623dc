"""scripts/test_durations.py: the durations table read from a junit file, with made-up times."""
import dataclasses
import os
import subprocess
import textwrap
import xml.etree.ElementTree as ElementTree
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import test_durations  # noqa: E402  (a script, not a package)

REPO = Path(__file__).resolve().parents[1]

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="5" time="130.5"
 timestamp="2026-01-01T00:00:00" hostname="box">
<testcase classname="tests.test_spec" name="test_quick" time="0.5">
  <properties><property name="cpu_seconds" value="0.4" /></properties></testcase>
<testcase classname="tests.test_spec" name="test_marked_long[a-1]" time="75.0">
  <properties><property name="cpu_seconds" value="50.0" /></properties></testcase>
<testcase classname="tests.test_build.TestZips" name="test_unmarked_long" time="61.0">
  <properties><property name="cpu_seconds" value="20.5" /></properties>
  <failure message="boom">trace</failure></testcase>
<testcase classname="tests.test_build" name="test_listed_only" time="31.0" />
<testcase classname="tests.test_build" name="test_skipped" time="0.0">
  <skipped message="no chromium" /></testcase>
</testsuite></testsuites>
"""
MARKED = {"tests/test_spec.py::test_marked_long[a-1]"}


def written_table(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    run = dataclasses.replace(test_durations.read_junit(junit), cores=2)
    return run, test_durations.render(run, MARKED, "`junit.xml`")


def test_a_junit_file_reads_as_files_tests_outcomes_and_the_suites_wall_time(tmp_path):
    run, _ = written_table(tmp_path)
    assert run.wall_seconds == 130.5 and run.host == "box"
    assert [(t.file, t.name, t.seconds, t.outcome) for t in run.tests] == [
        ("tests/test_spec.py", "test_quick", 0.5, "passed"),
        ("tests/test_spec.py", "test_marked_long[a-1]", 75.0, "passed"),
        ("tests/test_build.py", "TestZips::test_unmarked_long", 61.0, "failed"),
        ("tests/test_build.py", "test_listed_only", 31.0, "passed"),
        ("tests/test_build.py", "test_skipped", 0.0, "skipped")]


def test_the_table_sorts_files_lists_tests_over_30_s_and_flags_unmarked_ones_over_60_s(tmp_path):
    _, table = written_table(tmp_path)
    assert "Whole suite, wall time: **130.5 s (2.2 min)**" in table
    assert "Tests: 5 (1 failed, 3 passed, 1 skipped)" in table
    per_file = table.split("## Per file")[1].split("## Tests over")[0]
    assert per_file.index("tests/test_build.py") < per_file.index("tests/test_spec.py")
    # CPU: what the tests recorded (test_listed_only and test_skipped recorded none)
    assert ("| `tests/test_build.py` | 3 | 92.0 | 20.5 | `TestZips::test_unmarked_long` | 61.0 |"
            in per_file)
    assert "| `tests/test_spec.py` | 2 | 75.5 | 50.4 |" in per_file
    assert ("CPU: 70.9 s (1.2 min) in all" in table
            and "the 2 cores were busy 27% of the wall time" in table)      # 70.9 / (2 x 130.5)
    listed = table.split("## Tests over 30 s")[1].split("## Over 60 s")[0]
    assert listed.count("| `tests/") == 3 and "test_quick" not in listed
    assert "| `tests/test_spec.py::test_marked_long[a-1]` | 75.0 | yes |" in listed
    assert "| `tests/test_build.py::test_listed_only` | 31.0 | NO |" in listed
    flagged = table.split("without the `slow` marker")[1]
    assert flagged.strip() == "- `tests/test_build.py::TestZips::test_unmarked_long`: 61.0 s"


def test_junit_addresses_follow_pytests_spelling_of_node_ids():
    assert test_durations.junit_address("tests/test_build.py::TestZips::test_x[a-1]") == (
        "tests.test_build.TestZips", "test_x[a-1]")
    assert test_durations.file_of("tests.test_build.TestZips") == ("tests/test_build.py",
                                                                    ["TestZips"])


def test_the_command_line_writes_the_table_from_a_junit_file(tmp_path):
    junit, out = tmp_path / "junit.xml", tmp_path / "durations.md"
    junit.write_text(JUNIT)
    result = subprocess.run([sys.executable, "scripts/test_durations.py", "--from", str(junit),
                             "--out", str(out)], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert out.read_text().startswith("# Test durations\n")
    # the made-up tests are not in the real suite, so none of them carries the marker there
    assert "tests/test_spec.py::test_marked_long[a-1]: over" not in result.stderr
    assert "over 60 s without the slow marker: tests/test_spec.py::test_marked_long[a-1]" \
        in result.stderr


def test_the_suite_hands_out_the_longest_file_first_by_the_committed_table():
    """conftest.py's xdist queue: the committed table's longest file leaves first, a file the
    table does not know last, and a tie keeps the queue's own order."""
    from conftest import LongestFileFirst, measured_file_seconds
    seconds = measured_file_seconds()
    longest = max(seconds, key=seconds.get)
    assert len(seconds) > 50 and Path(longest).is_file(), longest
    queue = LongestFileFirst({**seconds, "tie_a.py": 5.0, "tie_b.py": 5.0})
    for name in ("unknown.py", "tie_a.py", longest, "tie_b.py"):
        queue[name] = {}
    assert [queue.popitem(last=False)[0] for _ in range(4)] == [longest, "tie_a.py", "tie_b.py",
                                                                 "unknown.py"]


def test_a_run_without_cpu_figures_says_so(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT.replace('name="cpu_seconds"', 'name="other"'))
    run = test_durations.read_junit(junit)
    assert all(test.cpu_seconds is None for test in run.tests)
    table = test_durations.render(run, MARKED, "`junit.xml`")
    assert "- CPU: not recorded by this run" in table
    assert "| `tests/test_build.py` | 3 | 92.0 | – |" in table


def test_each_tests_cpu_counts_the_processes_it_waited_for(tmp_path):
    """The plugin's figure, through pytest-xdist as the suite runs: a test whose child
    process spends 0.3 s of its own CPU records at least that much (CPU time, whatever the
    machine's speed or load)."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_work.py").write_text(textwrap.dedent("""\
        import subprocess, sys
        SPIN = "import time\\nwhile time.process_time() < 0.3: pass"
        def test_child_works():
            subprocess.run([sys.executable, "-c", SPIN], check=True)
        def test_quick():
            pass
        """))
    junit = tmp_path / "junit.xml"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(tmp_path / "pytest.ini"), "-p",
         "cpu_accounting", "-p", "no:cacheprovider", "-n", "1", f"--junitxml={junit}",
         str(tmp_path / "test_work.py")], cwd=tmp_path, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "tests")})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    cpu = {case.get("name"): test_durations.cpu_of(case)
           for case in ElementTree.parse(junit).getroot().iter("testcase")}
    assert cpu["test_child_works"] >= 0.3 and cpu["test_quick"] is not None, cpu

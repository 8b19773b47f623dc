"""A pytest plugin (conftest.py loads it for the suite): each test's CPU seconds, from its setup
to its teardown, in its junit record as the property ``cpu_seconds``, which
scripts/test_durations.py adds up beside the wall time.

CPU, not wall time, says how much work a test is: the suite's workers share the cores, so a
test's wall time also counts the others' work. It is this process's CPU and that of every
process it waited for, with theirs (``getrusage``: RUSAGE_SELF and RUSAGE_CHILDREN; a
subprocess.run, an ingestion and the sandboxed code it waited for, a pip install). A process
nobody waits for (a daemon) is not counted."""
import resource

import pytest

PROPERTY = "cpu_seconds"
_STARTED = pytest.StashKey[float]()


def cpu_seconds() -> float:
    return sum(usage.ru_utime + usage.ru_stime for usage in (
        resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_STARTED] = cpu_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    yield
    # before the teardown's report is made: junit writes the properties that report carries
    if _STARTED in item.stash:
        item.user_properties.append((PROPERTY, round(cpu_seconds() - item.stash[_STARTED], 3)))

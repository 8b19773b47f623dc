"""bundle/progress.py: a line with the count, rate and ETA on a terminal, nothing when piped."""
from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from bundle.progress import Progress

REPO = Path(__file__).resolve().parents[1]
SCRIPT = ("from bundle.progress import Progress\n"
          "import itertools\n"
          "with Progress(5, 'decoding', 'images') as bar:\n"
          "    for _ in range(5): bar.advance()\n"
          "print('done')\n")


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_the_line_gives_count_rate_and_eta():
    clock, stream = Clock(), io.StringIO()
    bar = Progress(100, "decoding", "images", stream=stream, force=True, clock=clock)
    clock.now = 10.0
    bar.advance(25)
    line = stream.getvalue()
    assert "decoding: 25 images of 100 images" in line
    assert "2 images/s" in line and "ETA 0:30" in line and " 25%" in line


def test_a_restart_leaves_the_wait_before_it_out_of_the_rate():
    """What the reference engine does after compiling its chains (test_bdl_sampling_progress)."""
    clock, stream = Clock(), io.StringIO()
    bar = Progress(100, "sampling", "transitions", stream=stream, force=True, clock=clock)
    clock.now = 60.0            # a compilation
    bar.restart()
    clock.now = 60.1
    bar.advance(1)
    assert stream.getvalue() == ""          # no line of one unit over a tenth of a second
    clock.now = 62.0
    bar.advance(19)
    assert "20 transitions of 100 transitions" in stream.getvalue()
    assert "10 transitions/s" in stream.getvalue() and "ETA 0:08" in stream.getvalue()


def test_slow_work_gives_seconds_each_rather_than_none_a_second():
    clock, stream = Clock(), io.StringIO()
    bar = Progress(40, "sampling", "transitions", stream=stream, force=True, clock=clock)
    clock.now = 60.0
    bar.advance(3)
    assert "3 transitions of 40 transitions" in stream.getvalue()
    assert "20.0 s each" in stream.getvalue() and "ETA 12:20" in stream.getvalue()


def test_unknown_total_gives_count_and_rate_without_eta():
    clock = Clock()
    bar = Progress(None, "reading", "B", stream=io.StringIO(), force=True, clock=clock)
    clock.now = 2.0
    bar.done = 4e6
    assert bar.line(clock.now) == "reading: 4.0 MB, 2.0 MB/s, 0:02 elapsed"


def test_nothing_is_written_to_a_stream_that_is_not_a_terminal():
    stream = io.StringIO()
    with Progress(3, "x", stream=stream) as bar:
        bar.advance(3)
    assert stream.getvalue() == ""


def _run(stderr):
    return subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, stdout=subprocess.PIPE,
                          stderr=stderr, env={**os.environ, "PYTHONPATH": str(REPO)},
                          timeout=60)


def test_a_terminal_sees_the_bar_and_a_pipe_sees_nothing_extra():
    leader, follower = pty.openpty()
    try:
        result = _run(follower)
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
    assert result.stdout == b"done\n"
    assert b"decoding: 5 images of 5 images" in shown and b"ETA" in shown
    piped = _run(subprocess.PIPE)
    assert piped.stdout == b"done\n" and piped.stderr == b""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("terminal", [True, False])
def test_a_large_zip_shows_its_bytes_on_a_terminal_only(tmp_path, monkeypatch, terminal):
    """Writing a bundle's zips of real data takes minutes: on a terminal the bytes written,
    the rate and an ETA; piped, nothing. A small zip never shows a bar, and the zip's bytes
    do not depend on it."""
    from bundle import zips
    data = tmp_path / "images.bin"
    data.write_bytes(os.urandom(3 * zips.CHUNK + 5))
    stream = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(zips, "PROGRESS_BYTES", 2 * zips.CHUNK)
    shown = zips.write_zip(tmp_path / "large.zip", {"images.bin": data, "a.txt": b"a"})
    said = stream.getvalue()
    assert ("writing large.zip: 3.1 MB of 3.1 MB [####################] 100%" in said
            and "ETA" in said) == terminal
    assert terminal or said == ""
    zips.write_zip(tmp_path / "small.zip", {"a.txt": b"a"})
    assert stream.getvalue() == said
    monkeypatch.setattr(zips, "PROGRESS_BYTES", 2**60)
    quiet = zips.write_zip(tmp_path / "quiet.zip", {"images.bin": data, "a.txt": b"a"})
    assert quiet.read_bytes() == shown.read_bytes()

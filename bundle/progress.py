"""Signs of life on long organizer-side steps (convert, generate, baseline tables): one line
on stderr, redrawn in place, with the count, the rate and an ETA.

Only when stderr is a terminal: piped or redirected output (CI, logs, tests) gets nothing
extra, so the steps' own lines stay the whole record. Builder side only: the ingestion and
scoring programs (standard library and numpy) never import this module.
"""
from __future__ import annotations

import sys
import time

REDRAW_SECONDS = 0.2        # often enough to look alive, rarely enough to cost nothing


def _duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def _amount(value: float, unit: str) -> str:
    if unit == "B":     # bytes read in MB, so a rate of 60,000 records reads as MB/s
        return f"{value / 1e6:,.1f} MB"
    return f"{value:,.0f} {unit}".rstrip()


def _rate(rate: float, unit: str) -> str:
    """Units a second, or for slow work (under one a second: a transition of a large
    network's chains) seconds each, which "0 transitions/s" would hide."""
    if 0 < rate < 1 and unit != "B":
        return f"{1 / rate:,.1f} s each"
    return f"{_amount(rate, unit)}/s"


class Progress:
    """``with Progress(total, "decoding", "images") as bar: ... bar.advance()``.

    ``total`` None: a count and a rate, no ETA. ``stream``/``force`` are for tests."""

    def __init__(self, total: float | None, what: str, unit: str = "", stream=None,
                 force: bool | None = None, clock=time.monotonic):
        self.total, self.what, self.unit, self.clock = total, what, unit, clock
        self.stream = stream if stream is not None else sys.stderr
        self.shown = force if force is not None else _is_terminal(self.stream)
        self.done, self.started, self.drawn = 0.0, clock(), float("-inf")

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def advance(self, amount: float = 1) -> None:
        self.done += amount
        now = self.clock()
        if self.shown and (now - self.drawn >= REDRAW_SECONDS or self._finished()):
            self.drawn = now
            self.stream.write("\r" + self.line(now) + "\x1b[K")
            self.stream.flush()

    def restart(self) -> None:
        """Start the clock now, for work that begins after a wait not worth a rate (a
        compilation); the first line comes a redraw period later, not at once with a rate
        of one unit over no time."""
        self.started = self.drawn = self.clock()

    def clear(self) -> None:
        """Erase the line before other output is printed; the next advance redraws it."""
        if self.shown and self.drawn != float("-inf"):
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def close(self) -> None:
        if self.shown and self.drawn != float("-inf"):
            self.stream.write("\r" + self.line(self.clock()) + "\x1b[K\n")
            self.stream.flush()
            self.shown = False

    def _finished(self) -> bool:
        return self.total is not None and self.done >= self.total

    def line(self, now: float) -> str:
        elapsed = max(now - self.started, 1e-9)
        rate = self.done / elapsed
        text = f"{self.what}: {_amount(self.done, self.unit)}"
        if self.total:
            share = min(self.done / self.total, 1.0)
            bar = "#" * int(20 * share)
            text += f" of {_amount(self.total, self.unit)} [{bar:<20}] {100 * share:3.0f}%"
        text += f", {_rate(rate, self.unit)}, {_duration(elapsed)} elapsed"
        if self.total and rate > 0:
            text += f", ETA {_duration((self.total - self.done) / rate)}"
        return text


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False

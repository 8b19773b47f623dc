"""A clock that moves a fixed tick each time it is read, for code that budgets its work by
reading the time.

A baseline that trains "until the deadline" does as much work as the machine's speed allows
in wall time: a test of what it learns, run on wall time, asserts what the machine bought.
On this clock every reading costs one ``tick`` whatever the work between two readings took,
so the same code with the same seed does the same steps on any machine, loaded or idle, and
a test of its quality asserts the same thing everywhere. What the clock cannot test is
whether the deadline logic leaves enough wall time for work it does not time (a final
predictive, a process's exit): that stays a wall-clock test, with bounds that hold on a slow
machine.

Kind-neutral: any module that reads ``time.monotonic``, ``time.perf_counter`` or
``time.time`` (through ``import time`` or ``from time import ...``) can be put on it with
``install``, and a task's ``time_left`` made from ``budget``.
"""
from __future__ import annotations

import time
import types

CLOCK_FUNCTIONS = ("monotonic", "perf_counter", "time")


class VirtualClock:
    """Starts at ``start`` seconds; each reading first advances it by ``tick``."""

    def __init__(self, tick: float, start: float = 0.0):
        if tick <= 0:
            raise ValueError(f"a virtual clock needs a positive tick, got {tick!r}")
        self.tick, self.now, self.readings = tick, start, 0

    def __call__(self) -> float:
        self.readings += 1
        self.now += self.tick
        return self.now

    def sleep(self, seconds: float) -> None:
        """Sleeping passes no wall time: the clock moves on by ``seconds`` instead."""
        self.now += max(0.0, seconds)

    def time_module(self) -> types.SimpleNamespace:
        """A stand-in for the ``time`` module: its clocks are this one (and ``sleep`` moves
        it); everything else is the real module's."""
        real = {name: getattr(time, name) for name in dir(time) if not name.startswith("__")}
        return types.SimpleNamespace(**{**real, **{name: self for name in CLOCK_FUNCTIONS},
                                        "sleep": self.sleep, "virtual_clock": self})

    def install(self, monkeypatch, *modules) -> None:
        """Puts ``modules`` on this clock until the test ends: each one's ``time`` (the
        module, or another clock's stand-in) and any name it bound to one of the module's
        clocks (or to another virtual clock)."""
        stand_in = self.time_module()
        clocks = {id(getattr(time, name)) for name in CLOCK_FUNCTIONS}
        for module in modules:
            for name, value in list(vars(module).items()):
                if value is time or hasattr(value, "virtual_clock"):
                    monkeypatch.setattr(module, name, stand_in)
                elif id(value) in clocks or isinstance(value, VirtualClock):
                    monkeypatch.setattr(module, name, self)

    def budget(self, seconds: float):
        """A ``time_left()`` for a budget of ``seconds`` from now: each call reads the clock
        (so it moves on, as any reading does) and never says less than 0."""
        deadline = self.now + seconds
        return lambda: max(0.0, deadline - self())

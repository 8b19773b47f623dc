"""What a detailed-results page may show of the hidden data: the rules every kind's report
follows, in one place.

A participant chooses every value of a submission, so any grouping of the hidden rows by
those values (an order, bins) is a grouping the participant controls. A curve drawn with one
step per hidden row, or a bin that can hold a single row, hands that row's hidden value back
(a constant uncertainty in a chosen order reads every label off a referral curve). So:

* every point or bar drawn from hidden rows summarises at least ``MIN_ROWS`` of them, and
  what a participant can read from it is a count over such a group;
* the groups sit at a fixed grid of fractions of the rows (``GRID_STEPS`` steps at most,
  coarser when the set is small, none below ``MIN_ROWS`` rows), so one submission reads a
  bounded number of group counts however it is crafted;
* figures are shown to ``DECIMALS`` decimals: a crafted submission could otherwise pack many
  rows' hidden values into the last decimal places of one average.

Only the page follows these rules; the scores the leaderboard ranks are computed on every row.
Standard library and numpy only: both programs ship this module.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_ROWS = 20
GRID_STEPS = 10
DECIMALS = 3

COARSE_NOTE = (f"Every point and bar summarises at least {MIN_ROWS} hidden rows, at steps of "
               f"about {100 // GRID_STEPS}% of the rows (fewer where the set is small), and "
               f"figures are rounded to {DECIMALS} decimals: a finer chart would let a "
               "submission read the hidden values back row by row.")


def rounded(values, decimals: int = DECIMALS):
    """``values`` rounded to the shown precision (a float stays a float)."""
    if np.isscalar(values):
        return round(float(values), decimals)
    return np.round(np.asarray(values, dtype=float), decimals)


def grid_bounds(sorted_values, steps: int = GRID_STEPS, min_rows: int = 1,
                keep_ties: bool = True) -> list[int]:
    """Cut positions 0 = b_0 < b_1 < ... < b_m = n of an ascending sequence of n values.

    Each inner cut is the first allowed position at or after round(k n / steps) (k = 1 ..
    steps - 1) that leaves at least ``min_rows`` values to each side of it since the last cut;
    with ``keep_ties`` a cut never falls between equal values (they are one threshold). So at
    most ``steps`` parts, each of at least ``min_rows`` values; [0, n] when no cut fits, and
    [] when n < max(1, min_rows).
    """
    values = np.asarray(sorted_values, dtype=float).ravel()
    n = values.size
    if n < max(1, min_rows):
        return []
    allowed = np.arange(1, n)
    if keep_ties:
        allowed = allowed[values[1:] != values[:-1]]
    bounds = [0]
    for k in range(1, steps):
        earliest = max(int(round(k * n / steps)), bounds[-1] + max(1, min_rows))
        at = int(np.searchsorted(allowed, earliest))
        if at < allowed.size and n - allowed[at] >= min_rows:
            bounds.append(int(allowed[at]))
    return bounds + [n]


@dataclass(frozen=True)
class Group:
    """One group of rows: ``rows`` (indices into the values given, members only), and the
    lowest and highest value of every row of the slices it spans, members or not."""
    rows: np.ndarray
    low: float
    high: float


def grouped_rows(values, members=None, ids=None, steps: int = GRID_STEPS,
                 min_rows: int = MIN_ROWS, keep_ties: bool = True,
                 descending: bool = False) -> list[Group]:
    """The rows in groups by their ``values``, each holding at least ``min_rows`` members.

    All rows are cut at the fixed grid (``grid_bounds``, ascending values or, with
    ``descending``, descending; equal values keep their order), then each slice is kept to its
    ``members`` (a boolean mask; all rows when None) and consecutive slices are joined until a
    group holds ``min_rows`` distinct ``ids`` (a row given several times, as in a reweighted
    set, counts once; default: every index its own id); a short tail joins the last group.
    [] when the members hold fewer than ``min_rows`` ids in all.

    A group's ``low`` and ``high`` are values of all rows, so they say nothing of which rows
    are members; they may be shown only where the values are the participant's own.
    """
    values = np.asarray(values, dtype=float).ravel()
    members = np.ones(values.size, bool) if members is None else np.asarray(members, bool)
    ids = np.arange(values.size) if ids is None else np.asarray(ids).ravel()
    order = np.argsort(-values if descending else values, kind="stable")
    bounds = grid_bounds(values[order] * (-1 if descending else 1), steps, 1, keep_ties)
    spans, pending = [], []                 # each span: every row of its slices
    for start, end in zip(bounds, bounds[1:]):
        pending.append(order[start:end])
        joined = np.concatenate(pending)
        if np.unique(ids[joined[members[joined]]]).size >= min_rows:
            spans, pending = spans + [joined], []
    if pending and spans:
        spans[-1] = np.concatenate([spans[-1], *pending])
    return [Group(span[members[span]], float(values[span].min()), float(values[span].max()))
            for span in spans]

"""Standard-error columns, build side: with ``standard_error_columns: true`` every task
metric's column is followed by its standard error (how far the figure would move with another
draw of the test rows, the reference chains or a new training of the zoo; each kind says how it
measures it, ``STANDARD_ERROR`` in its runtime scoring module). The worker's half, which
writes the value, is ``runtime/rules/se_columns.py``.
"""
from __future__ import annotations

import dataclasses

from runtime.rules.se_columns import STATISTIC

from ..spec_key import Key
from .records import BuildRule

_KEY_SUFFIX = "se"
_SPEC_KEY = "standard_error_columns"

SPEC_KEYS = {"": {_SPEC_KEY: Key(
    {"type": "boolean"},
    "Add a column after each task metric's with its standard error (`<task>_<metric>_se`): "
    "how far the figure would move with another draw of the test rows (and, for BDL, of the "
    "reference chains; for PGDL, of a new training of the zoo). Where the scorer could not "
    "measure one (the detailed results show n/a), the column holds the metric's whole range. "
    "The detailed results always show it; `python -m scoring_program.ranks` turns these "
    "columns into rank intervals.",
    default=False, example=True)}}


def spec_values(raw: dict) -> dict:
    return {_SPEC_KEY: bool(raw[_SPEC_KEY])}


def plan_phase(spec, phase_key: str, code: bool) -> dict:
    return {_SPEC_KEY: spec.rules[_SPEC_KEY]}


def metric_columns(plan, task, metric, value_column) -> list:
    if not plan.rules.get(_SPEC_KEY):
        return []
    # A standard error is better small, whichever way the metric itself sorts.
    return [dataclasses.replace(
        value_column, key=f"{value_column.key}_{_KEY_SUFFIX}", label=f"{value_column.label} SE",
        sort="asc", statistic=STATISTIC,
        description=f"Standard error of {value_column.label}: how far it would move with "
                    "another draw of what it was measured on")]


RULE = BuildRule(name="se_columns", SPEC_KEYS=SPEC_KEYS, spec_values=spec_values,
                 plan_phase=plan_phase, metric_columns=metric_columns)

"""The sd columns, build side: a kind whose references have replicates (BDL's chains) gives
each metric of a task a standard deviation, shown in its own column right after the metric's.
The worker's half, which writes the value, is ``runtime/rules/sd_columns.py``.

The kind says which tasks have one (``Kind.has_std``) and how to describe it
(``Kind.std_description``).
"""
from __future__ import annotations

import dataclasses

from runtime.rules.sd_columns import STATISTIC

from kinds.kind import kind

from .records import BuildRule

_KEY_SUFFIX = "std"


def metric_columns(plan, task, metric, value_column) -> list:
    definition = kind(plan.kind)
    if not definition.has_std(task):
        return []
    # A spread is better small, whichever way the metric itself sorts.
    return [dataclasses.replace(
        value_column, key=f"{value_column.key}_{_KEY_SUFFIX}", label=f"{value_column.label} sd",
        sort="asc", description=definition.std_description(task, metric), statistic=STATISTIC)]


RULE = BuildRule(name="sd_columns", metric_columns=metric_columns)

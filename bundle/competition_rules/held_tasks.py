"""What the rules that hold tasks of their own share, build side."""
from __future__ import annotations

import dataclasses


def replace_held_tasks(rules: dict, name: str, change) -> dict:
    """The ``replace_tasks`` hook of a rule whose ``PhasePlan.rules[name]`` is a dataclass with
    a ``tasks`` field: its tasks passed through ``change``; none left is no such entry."""
    held = rules.get(name)
    if held is None:
        return rules
    tasks = change(held.tasks)
    return {**rules, name: dataclasses.replace(held, tasks=tasks) if tasks else None}

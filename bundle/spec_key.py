"""The record of one organizer spec key, and the JSON schema fragments the records share.

Apart from ``bundle/spec_schema.py`` so that a competition rule (``bundle/competition_rules/``)
can declare its own keys (its ``SPEC_KEYS``) without importing the schema that gathers them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

REQUIRED = object()             # a Key's default where the spec must give the key
TEXT = {"type": "string", "minLength": 1}
MAPPING = {"type": "object"}
NAMED = {"type": "object", "propertyNames": {"pattern": "^[a-z][a-z0-9_]{0,30}$"}}


@dataclass(frozen=True)
class Key:
    """One spec key.

    ``default`` is REQUIRED (the key must be given; for a ``<name>`` entry: at least one);
    None (nothing is filled in: the key stays absent, and ``shown`` says what that means);
    a value; or, where it depends on other keys, a function ``(spec, mapping)`` of the spec as
    given and the mapping that holds the key, its earlier keys already filled in."""
    schema: dict                  # the value's JSON schema, less the keys below it
    meaning: str
    default: object = REQUIRED
    shown: str | Callable[[], str] | None = None    # the default in words, if not its value
    example: object = None        # only where the default spec has no value at this key
    # A mapping's keys (of a list: its items' keys); a name in <> stands for any name.
    keys: dict[str, Key] = field(default_factory=dict)


def number(minimum=None, exclusive=None, maximum=None, integer=False):
    schema = {"type": "integer" if integer else "number"}
    schema.update({k: v for k, v in (("minimum", minimum), ("exclusiveMinimum", exclusive),
                                     ("maximum", maximum)) if v is not None})
    return schema

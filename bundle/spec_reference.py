"""The organizer spec's reference, generated from the spec's records so that it cannot drift.

``python -m bundle.spec_reference > docs/spec_reference.md`` writes it;
``python -m bundle.spec_reference --check`` exits 1 when the committed file differs.

Every key path of ``bundle.spec_schema.KEYS`` (``phases.<phase>.execution_time_limit``) gets
its type and constraints (from its JSON schema), whether it is required, its default (the
record's words, else the value ``with_defaults`` gives it), an example (from the default spec,
``bundle.spec.DEFAULT_SPEC``, else the record's) and its meaning.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NamedTuple

import yaml

from .spec import DEFAULT_SPEC
from .spec_schema import DATE_PATTERN, KEYS, REQUIRED, Key, filled, json_schema

REPO = Path(__file__).resolve().parent.parent
REFERENCE_FILE = REPO / "docs" / "spec_reference.md"
COMMAND = "python -m bundle.spec_reference > docs/spec_reference.md"


class ReferenceDrift(RuntimeError):
    """A key the page cannot show: no example in the default spec or in its record."""


class SpecKey(NamedTuple):
    path: str
    key: Key
    parent: str | None          # the path of the enclosing key, None at the top
    siblings: dict[str, Key]    # the keys of the mapping holding it


def schema_keys(keys: dict[str, Key] | None = None) -> list[SpecKey]:
    """Every key path, depth first, in the records' order."""
    found = []

    def walk(path: str, sub: Key | None, keys: dict[str, Key]):
        prefix = "" if not path else f"{path}[]." if sub.schema.get("type") == "array" \
            else f"{path}."
        for name, key in keys.items():
            found.append(SpecKey(prefix + name, key, path or None, keys))
            walk(prefix + name, key, key.keys)
    walk("", None, KEYS if keys is None else keys)
    return found


# --- what each column says ----------------------------------------------------------------

def _bounds(schema: dict) -> list[str]:
    parts = []
    for word, sign in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<=")):
        if word in schema:
            parts.append(f"{sign} {schema[word]:g}")
    return parts


def type_text(schema: dict) -> str:
    """The schema of one key, in words."""
    if "enum" in schema:
        return "one of " + ", ".join(f"`{value}`" for value in schema["enum"])
    if "oneOf" in schema:
        return " or ".join(type_text(option) for option in schema["oneOf"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(type_text({**schema, "type": one}) for one in kind)
    if kind == "string" and schema.get("pattern") == DATE_PATTERN:
        return "date, `YYYY-MM-DD[ HH:MM[:SS]]` (UTC)"
    if kind == "string":
        parts = ["text"]
        low, high = schema.get("minLength"), schema.get("maxLength")
        if low and high:
            parts.append(f"{low} to {high} characters")
        elif high:
            parts.append(f"at most {high} characters")
        elif low:
            parts.append("not empty" if low == 1 else f"at least {low} characters")
        if "pattern" in schema:
            parts.append(f"matching `{schema['pattern']}`")
        return ", ".join(parts)
    if kind in ("number", "integer"):
        return ", ".join([kind] + _bounds(schema))
    if kind == "null":
        return "`null`"
    if kind == "array":
        items = schema.get("items", {})
        what = "mappings" if items.get("type") == "object" else \
            type_text(items).replace("text", "texts", 1) if items else "values"
        parts = [f"list of {what}"]
        if schema.get("minItems"):
            parts.append(f"at least {schema['minItems']}")
        if schema.get("uniqueItems"):
            parts.append("no repeats")
        return ", ".join(parts)
    if kind == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            names = schema.get("propertyNames", {}).get("pattern")
            if extra.get("type") == "object":
                to = "mappings"
            elif extra.get("type") in ("number", "integer"):
                to = f"{extra['type']}s" + (f" ({', '.join(_bounds(extra))})" if _bounds(extra) else "")
            else:
                to = type_text(extra)
            parts = ["mapping of names" + (f" (`{names}`)" if names else "") + " to " + to]
            if schema.get("minProperties"):
                parts.append(f"at least {schema['minProperties']}")
            return ", ".join(parts)
        return "mapping"
    return f"`{json.dumps(schema, sort_keys=True)}`"


MISSING = object()


def _example_value(raw, path: str):
    """The value at ``path`` in the default spec (first entry of a mapping, first list item);
    MISSING where it has none."""
    value = raw
    for part in path.replace("[]", ".[]").split("."):
        if part == "[]":
            if not isinstance(value, list) or not value:
                return MISSING
            value = value[0]
        elif part.startswith("<"):
            if not isinstance(value, dict) or not value:
                return MISSING
            value = next(iter(value.values()))
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return MISSING
    return value


def _flow(value) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6, sort_keys=False,
                          allow_unicode=True).strip()
    return text.removesuffix("...").strip()


def example_text(raw, key: SpecKey, has_children: bool) -> str:
    value = _example_value(raw, key.path)
    if value is MISSING:
        value = key.key.example
        if value is None:
            raise ReferenceDrift(f"{key.path}: the default spec has no value here; give "
                                 "Key(example=...) in bundle/spec_schema.py")
    if isinstance(value, str) and len(value) > 90:
        value = value[:87].rstrip() + " ..."
    text = _flow(value)
    if has_children and len(text) > 90 and isinstance(value, dict):
        return ", ".join(f"`{name}`" for name in value) + " (see the keys below)"
    if has_children and len(text) > 90 and isinstance(value, list):
        return f"{len(value)} entries (see the keys below)"
    return f"`{text}`"


def default_text(key: SpecKey, raw: dict) -> str:
    """The record's words for its default, else the value with_defaults gives the key in a
    mapping that leaves it out (a default computed from other keys: from the default spec's)."""
    record = key.key
    if record.default is REQUIRED:
        return "—"
    if record.shown is not None:
        return record.shown() if callable(record.shown) else record.shown
    if record.default is None:
        return "—"
    value = filled({}, key.siblings, raw)[key.path.rsplit(".", 1)[-1]]
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return f"`{value:g}`"
    if value in ("", [], {}):
        return "empty" if value == "" else "none"
    return f"`{value}`"


def _required_text(key: SpecKey) -> str:
    required = key.key.default is REQUIRED
    if key.parent is None:
        return "yes" if required else "no"
    if key.path.endswith(">"):
        return "at least one" if required else "no"
    if not required:
        return "no"
    if key.path.startswith(key.parent + "[]"):
        return f"yes, in each `{key.parent}[]`"
    return f"yes, in each `{key.parent}`" if key.parent.endswith(">") else f"yes, in `{key.parent}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_reference(keys: dict[str, Key] | None = None) -> str:
    spec_keys = schema_keys(keys)
    raw = yaml.safe_load(DEFAULT_SPEC.read_text(encoding="utf-8"))
    parents = {key.parent for key in spec_keys}
    spec_name = DEFAULT_SPEC.relative_to(REPO).as_posix()
    lines = [
        "# Organizer spec reference",
        "",
        f"<!-- Generated by `{COMMAND}` from `bundle/spec_schema.py` (one record per key:",
        "     schema, default, meaning, example); do not edit by hand. -->",
        "",
        "Every key of the organizer spec (the YAML file given to `build_bundle.py --config`). "
        f"Examples are taken from the default spec, [`{spec_name}`](../{spec_name}), where it has "
        "the key. "
        "Unknown keys are errors. `<task>`, `<phase>`, `<track>` and `<metric>` stand for a name "
        "the organizer chooses (or, for `<metric>`, one of the kind's metrics); `organizers[]` is "
        "each item of the list. Dates are UTC; a YAML date without quotes is accepted.",
        "",
        "| key | type | required | default | example |",
        "|---|---|---|---|---|",
    ]
    sections = []
    for key in spec_keys:
        anchor = "".join(c for c in key.path.lower() if c.isalnum() or c in "-_")
        kind = type_text(json_schema(key.key))
        example = example_text(raw, key, key.path in parents)
        default = default_text(key, raw)
        lines.append(f"| [`{key.path}`](#{anchor}) | {_cell(kind)} | "
                     f"{_cell(_required_text(key))} | {_cell(default)} | {_cell(example)} |")
        sections += ["", f"### {key.path}", "", key.key.meaning, "",
                     f"- type: {kind}",
                     f"- required: {_required_text(key)}",
                     f"- default: {default}",
                     f"- example: {example}"]
    lines += ["", "## Keys", *sections, ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if docs/spec_reference.md is not what this generates")
    args = parser.parse_args(argv)
    text = render_reference()
    if args.check:
        committed = REFERENCE_FILE.read_text(encoding="utf-8") if REFERENCE_FILE.is_file() else ""
        if committed != text:
            shown = REFERENCE_FILE.relative_to(REPO) if REFERENCE_FILE.is_relative_to(REPO) \
                else REFERENCE_FILE
            print(f"{shown} is out of date; run: {COMMAND}", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

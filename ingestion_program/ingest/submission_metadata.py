"""A submission that carries its own command is refused before anything of it runs here.

Both workers start the ``command`` of a submission's root metadata file in a container of its
own, next to this program and at the same time (codalab_v1.md G20; codabench_v2.md §3.4:
``asyncio.gather`` of the program and ingestion containers). That container is outside our
sandbox: capabilities as the worker gives them, the network on, the output folder writable.
Nothing it does can be undone from here, so the submission fails, with the reason, whatever
its code would have scored.

The workers read the file with loaders that build Python objects (CodaLab: ``yaml.load`` of
PyYAML 3.10; Codabench: ``yaml.FullLoader``), where a tag, an escape in a quoted key, an alias
or a merge key can make a ``command`` key that a plain reading does not show. So a metadata
file passes only where it is proven free of one: one mapping whose keys are texts, none of
them ``command`` once escapes are decoded, and no tag, anchor, alias or merge key anywhere. A
key that only looks like it (``Command``, other alphabets) is left alone: the workers look up
``command`` exactly. The starting kit's ``submission_zip.py`` runs this same check.
"""
from __future__ import annotations

import codecs
import re
from pathlib import Path

# CodaLab reads ``metadata``; Codabench reads ``metadata.yaml`` first, else ``metadata``.
METADATA_NAMES = ("metadata.yaml", "metadata")
COMMAND = "command"
# A description is a line or a paragraph. PyYAML's time grows with the square of the nesting
# depth (seconds at a thousand levels), so larger or deeper files are refused unread.
MAX_METADATA_BYTES = 16 * 1024
MAX_DEPTH = 32
COMMAND_FOUND = "has a 'command:'"
ALLOWED = ("Keep only lines 'key: value' in {name}, such as 'description: my submission', "
           "without YAML tags (!!), anchors (&), aliases (*) or merge keys (<<)")
# Without PyYAML (an image we do not know), only lines that no YAML reading turns into
# another key pass: a false alarm costs a resubmission, a miss much more.
PLAIN_LINE = re.compile(r"(?P<key>[A-Za-z_][A-Za-z0-9_-]*):(?:[ \t]+(?P<value>.*))?")
VALUE_STARTS_REFUSED = ("{", "[", "!", "&", "*", "|", ">", "<<")
NODE_WORDS = {"scalar": "single text", "sequence": "list", "mapping": "mapping"}
WIDE_BYTE_ORDER_MARKS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_BE)


def own_command_problem(submission: Path) -> str | None:
    """Why the submission is refused, or None: which metadata file may start a command."""
    for name in METADATA_NAMES:
        path = Path(submission) / name
        if not (path.exists() or path.is_symlink()):
            continue
        problem = metadata_problem(path)
        if problem == COMMAND_FOUND:
            return (f"your submission's {name} has a 'command:', which the platform starts in a "
                    "container of its own next to this program, outside its sandbox; such a "
                    f"submission is not run. Keep only 'description: ...' in {name} (the kit's "
                    "submission_zip.py writes it so)")
        if problem:
            return (f"your submission's {name} {problem}, so this program cannot tell whether "
                    "the platform finds a 'command:' in it, which the platform would start in a "
                    "container of its own next to this program, outside its sandbox; such a "
                    f"submission is not run. {ALLOWED.format(name=name)} (the kit's "
                    "submission_zip.py writes it so)")
    return None


def metadata_problem(path: Path) -> str | None:
    """``COMMAND_FOUND``, what keeps the file from being proven free of a command, or None."""
    if not path.is_file():
        return "is not a regular file"
    try:
        with open(path, "rb") as stream:
            data = stream.read(MAX_METADATA_BYTES + 1)
    except OSError as error:
        return f"cannot be read ({error.strerror})"
    if len(data) > MAX_METADATA_BYTES:
        return f"is larger than {MAX_METADATA_BYTES // 1024} KiB"
    # The CodaLab worker's PyYAML reads UTF-16 too; nothing honest needs it.
    if data.startswith(WIDE_BYTE_ORDER_MARKS):
        return "is not UTF-8 text (it starts with a UTF-16 or UTF-32 byte order mark)"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return f"is not UTF-8 text (byte {error.start})"
    try:
        import yaml
    except ImportError:
        return _plain_lines_problem(text)
    return _yaml_problem(text, yaml)


def _yaml_problem(text: str, yaml) -> str | None:
    """Read with PyYAML's parser and composer, which decode escapes and show tags, anchors
    and aliases, but build no object."""
    try:
        events = _shallow_events(text, yaml)
        root = None if events is None else yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        return f"cannot be read as one YAML document ({_yaml_error(error)})"
    if events is None:
        return f"nests lists or mappings more than {MAX_DEPTH} deep"
    if root is None:
        return None                                  # empty, or comments only
    if not isinstance(root, yaml.MappingNode):
        return f"is a {NODE_WORDS[root.id]}, not a mapping of keys to values"
    if any(isinstance(key, yaml.ScalarNode) and key.value == COMMAND for key, _ in root.value):
        return COMMAND_FOUND
    return _marks_problem(events, yaml) or _keys_problem(root, yaml)


def _shallow_events(text: str, yaml) -> list | None:
    """The parser's events, or None as soon as the nesting passes ``MAX_DEPTH``."""
    events, depth = [], 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        depth += (isinstance(event, yaml.CollectionStartEvent)
                  - isinstance(event, yaml.CollectionEndEvent))
        if depth > MAX_DEPTH:
            return None
        events.append(event)
    return events


def _marks_problem(events: list, yaml) -> str | None:
    """A tag, anchor or alias anywhere: each can make a loader build what the text hides."""
    for event in events:
        if isinstance(event, yaml.AliasEvent):
            return f"has an alias (*{event.anchor}) on its {_line(event)}"
        if getattr(event, "anchor", None):
            return f"has an anchor (&{event.anchor}) on its {_line(event)}"
        if getattr(event, "tag", None):
            return f"has a YAML tag ({event.tag}) on its {_line(event)}"
    return None


def _keys_problem(root, yaml) -> str | None:
    """Keys of the root mapping that a loader could turn into others."""
    for key, _ in root.value:
        if not isinstance(key, yaml.ScalarNode):
            return f"has a key that is a {NODE_WORDS[key.id]}, not a text, on its {_line(key)}"
        if key.value == "<<":
            return f"has a merge key (<<) on its {_line(key)}"
    return None


def _yaml_error(error) -> str:
    """PyYAML's problem and line, without the excerpt it quotes."""
    problem, mark = getattr(error, "problem", None), getattr(error, "problem_mark", None)
    if problem and mark:
        context = getattr(error, "context", None)
        return f"{context + ', ' if context else ''}{problem} on line {mark.line + 1}"
    return " ".join(str(error).split())


def _line(item) -> str:
    return f"line {item.start_mark.line + 1}"


def _plain_lines_problem(text: str) -> str | None:
    """Every line blank, a comment, or ``key: value`` at the line's start whose key is a
    plain name other than command and whose value opens no flow, tag, anchor, alias, block
    or merge. ``splitlines`` breaks at every line break YAML knows (and a few more)."""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = PLAIN_LINE.fullmatch(line)
        readable = all(char.isprintable() or char == "\t" for char in line)
        if not match or not readable or "\\" in line:
            return f"has a line that is not a plain 'key: value' (line {number})"
        if match["key"] == COMMAND:
            return COMMAND_FOUND
        if (match["value"] or "").startswith(VALUE_STARTS_REFUSED):
            return f"has a value that is not plain text (line {number})"
    return None

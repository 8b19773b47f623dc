"""Command line: ``python -m reference_data [--kind KIND] {generate,verify} ...``.

How a kind's hidden references are made and checked is the kind's own (``reference_cli`` in
its ``kind.py``); this entry point picks the kind (the default competition's unless told)
and hands it the rest of the command line.
"""
from __future__ import annotations

import sys

from kinds import DEFAULT_KIND, UnknownKind
from kinds.kind import kind


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    name = DEFAULT_KIND
    if argv[:1] == ["--kind"] and len(argv) > 1:
        name, argv = argv[1], argv[2:]
    try:
        cli = kind(name).reference_cli
    except UnknownKind as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if cli is None:
        print(f"error: kind {name} makes no references of its own (its tasks' folders hold "
              "them as organizers provide them)", file=sys.stderr)
        return 2
    return cli(argv)


if __name__ == "__main__":
    sys.exit(main())

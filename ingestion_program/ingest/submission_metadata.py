"""A submission that carries its own command is refused before anything of it runs here.

Both workers start the ``command`` of a submission's root metadata file in a container of its
own, next to this program and at the same time (codalab_v1.md G20; codabench_v2.md §3.4:
``asyncio.gather`` of the program and ingestion containers). That container is outside our
sandbox: capabilities as the worker gives them, the network on, the output folder writable.
Nothing it does can be undone from here, so the submission fails, with the reason, whatever
its code would have scored.
"""
from __future__ import annotations

import re
from pathlib import Path

# CodaLab reads ``metadata``; Codabench reads ``metadata.yaml`` first, else ``metadata``.
METADATA_NAMES = ("metadata.yaml", "metadata")
# Without PyYAML (an image we do not know), any mapping key named command, in block or
# flow style, quoted or not, counts: a false alarm costs a resubmission, a miss much more.
COMMAND_KEY = re.compile(r"""(^|[{,\s?])["']?command["']?\s*:""", re.MULTILINE)


def _has_command(text: str) -> bool:
    try:
        import yaml
    except ImportError:
        return bool(COMMAND_KEY.search(text))
    try:
        content = yaml.safe_load(text)
    except yaml.YAMLError:
        return bool(COMMAND_KEY.search(text))    # the worker's loader may read it otherwise
    return isinstance(content, dict) and "command" in content


def own_command_problem(submission: Path) -> str | None:
    """Why the submission is refused, or None: which metadata file starts a command."""
    for name in METADATA_NAMES:
        path = Path(submission) / name
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if _has_command(text):
            return (f"your submission's {name} has a 'command:', which the platform starts in a "
                    "container of its own next to this program, outside its sandbox; such a "
                    f"submission is not run. Keep only 'description:' in {name} (the kit's "
                    "submission_zip.py writes it so)")
    return None

"""What the rule modules and the registry (``runtime/rules/__init__.py``) share: the error a
rule raises and the records its hooks return. A leaf, so that a rule module imports it at
its top and never the registry that imports the rule."""
from __future__ import annotations

from typing import NamedTuple


class RuleError(ValueError):
    """A rule cannot apply to this bundle as built: the organizer must fix it."""


class RunInstead(NamedTuple):
    """Tasks a rule runs instead of the phase's (``runs_instead``)."""
    folder: str             # under $input and $output: kept apart from the phase's tasks
    tasks: tuple            # TaskSpecs, their inputs relative to $input/<folder>
    entries: dict           # the rule's entries in the run record


class ScoreInstead(NamedTuple):
    """What the scorer scores instead of the phase's tasks (``scores_instead``)."""
    folder: str             # under ref/ and res/
    config: object          # the ScoringConfig of those tasks
    heading: str            # the detailed results' heading
    exit_status: int        # non-zero: the platforms fail the submission, which ranks nowhere
    closing: str            # the log's last line

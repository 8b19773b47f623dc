"""Rules checked on an emitted bundle zip, reopened from disk: one framework, both platforms.

``check_bundle(path, platform, scoring_margin_seconds)`` runs every rule registered for
``platform`` ("codalab" for CodaLab v1.5, "codabench" for Codabench ``version: 2``) and
returns their ``CheckFailure``s; empty means valid. Modules, by concern:

- ``framework``: ``CheckFailure``, ``CannotCheck``, the opened ``Bundle`` (member names, the
  parsed competition.yaml, members and nested zips), the ``@rule`` registry ``RULES`` (one
  registry, each rule tagged with its platforms) and ``check_bundle``;
- ``zip_hygiene``: flat zips without junk or odd paths (both platforms);
- ``codalab_yaml``: the v1.5 competition.yaml schema (codalab_v1.md §1-§2, §7);
- ``codabench_yaml``: the ``version: 2`` schema (codabench_v2.md §0, §1, §5);
- ``programs``: program metadata and command lines (both platforms, each with its variables);
- ``consistency``: the generated configs agree with the YAML: time limits cover the
  ingestion budgets, scorer keys equal leaderboard keys (both platforms);
- ``python_version``: on a GPU image (gpu310: Python 3.10), the programs' sources use nothing
  newer than 3.10 and import only what the image has (both platforms).

Rule names are stable (tests and build messages use them); Codabench's start with ``v2-``.
Importing the rule modules here registers their rules, in this order.
"""
from . import zip_hygiene, codalab_yaml, codabench_yaml, programs, consistency  # noqa: F401
from . import python_version  # noqa: F401
from .framework import (BOTH, CODABENCH, CODALAB, RULES, Bundle, CannotCheck, CheckFailure,
                        Rule, check_bundle, rule, rules_for)

__all__ = ["BOTH", "CODABENCH", "CODALAB", "RULES", "Bundle", "CannotCheck", "CheckFailure",
           "Rule", "check_bundle", "rule", "rules_for"]

"""Consistency rules, both platforms: the generated configs agree with competition.yaml.

The time limit must cover the ingestion program's worst case (every task's budget, grace and
overhead) plus the scoring margin (codalab_v1.md §4.5, G23; on Codabench also the default
queue's cap, codabench_v2.md §3.1), and the scorer must write exactly the leaderboard's
non-computed keys (codalab_v1.md §4.8, G14, G26). Each platform keeps its rule names.
"""
from __future__ import annotations

from typing import Iterator

from ingestion_program.ingest.config import ADDRESS_SPACE, CONFIG_NAME as INGESTION_CONFIG
from ingestion_program.ingest.config import (DEFAULT_STARTUP_SECONDS, OVERHEAD_SECONDS_PER_TASK,
                                             worst_case_seconds)
from scoring_program.scorer.config import CONFIG_NAME as SCORING_CONFIG, scores_file_keys

from .. import competition_rules
from .codabench_yaml import items
from .codalab_yaml import phases, program_members
from .framework import CODABENCH, CODALAB, Bundle, CannotCheck, Problem, is_int, rule

DEFAULT_TIME_LIMIT = 300                 # CodaLab's default execution_time_limit (§4.5)


def _ingestion_seconds(config: dict) -> tuple[float, str]:
    grace = config["limits"]["grace_seconds"]
    startup = config["limits"].get("startup_seconds", DEFAULT_STARTUP_SECONDS)
    tasks = [*competition_rules.ingestion_config_extra_tasks(config), *config["tasks"]]
    budgets = [task["budget_seconds"] for task in tasks]
    if not budgets or not all(isinstance(x, int | float) and not isinstance(x, bool)
                              for x in [*budgets, grace, startup]):
        raise ValueError(f"budgets {budgets}, grace_seconds {grace!r} and startup_seconds "
                         f"{startup!r} must be numbers")
    total = worst_case_seconds(budgets, grace, startup)
    return total, (f"{len(budgets)} tasks: sum of (budget + start-up allowance {startup:g} s + "
                   f"grace {grace:g} s + {OVERHEAD_SECONDS_PER_TASK:g} s) = {total:g} s for "
                   f"budgets {budgets}")


def _scorer_keys(bundle: Bundle, member: str) -> list:
    """The scores.txt keys the scoring program in ``member`` writes, from its generated config:
    full figures configured for the private output are not among them."""
    return scores_file_keys(bundle.read_json(member, SCORING_CONFIG))


@rule("time-limit", "execution_time_limit is a positive int covering the ingestion budgets, grace "
      "and per-task overhead plus the scoring margin (§4.5, G23)",
      "raise execution_time_limit or cut the task budgets (G23); CodaLab runs a phase's tasks in "
      "one run", CODALAB)
def check_time_limit(bundle: Bundle) -> Iterator[Problem]:
    """§4.5, G23: the worker kills each step at execution_time_limit (default 300 s)."""
    for key, phase in phases(bundle):
        where = f"phases.{key}.execution_time_limit"
        limit = phase.get("execution_time_limit", DEFAULT_TIME_LIMIT)
        if not is_int(limit) or limit <= 0:
            yield f"{where} is {limit!r}: a positive int of seconds is required"
            continue
        if not isinstance(phase.get("ingestion_program"), str):
            continue
        member = phase["ingestion_program"]
        try:
            total, detail = _ingestion_seconds(bundle.read_json(member, INGESTION_CONFIG))
        except CannotCheck as error:
            yield f"{where} not checked: {error}"
            continue
        except (KeyError, TypeError, ValueError) as error:
            yield f"{member}::{INGESTION_CONFIG} is malformed ({type(error).__name__}: {error})"
            continue
        if limit < total + bundle.margin:
            yield (f"{where} is {limit} s but {member} needs {total + bundle.margin:g} s ({detail},"
                   f" plus the scoring margin {bundle.margin:g} s)")


def _key_problems(where: str, keys: list, expected: list, ranking: list) -> Iterator[str]:
    """One scorer's keys: no duplicates, none off the leaderboard, the ranking ones written."""
    duplicates = sorted({str(k) for k in keys if keys.count(k) > 1})
    if duplicates:
        yield f"{where} lists keys {duplicates} twice (a duplicate scores.txt key raises)"
    extra = [k for k in keys if k not in expected]
    if extra:
        yield f"{where} writes keys {extra} that no non-computed column has (silently dropped)"
    unranked = [k for k in ranking if k not in keys]
    if unranked:
        yield (f"{where} never writes {unranked}, which the ranking column needs: this phase's "
               "rows would have no rank")


def _union_problems(written: set, expected: list) -> Iterator[str]:
    """A column no phase writes is empty in every phase (G26)."""
    missing = [k for k in expected if k not in written]
    if missing:
        yield f"no scoring program writes the leaderboard keys {missing} (their cells show '-')"


@rule("scoring-keys", "each scoring program's scoring_config.json columns are leaderboard "
      "non-computed keys, include what the ranking column needs, and together cover every "
      "non-computed column (§4.8, G14, G26)",
      "derive the scorer's columns and the leaderboard columns from one list", CODALAB)
def check_scoring_keys(bundle: Bundle) -> Iterator[Problem]:
    """§4.8, G14, G26: one leaderboard serves every phase; keys a phase never writes show '-',
    extra keys are silently dropped."""
    board = bundle.comp.get("leaderboard")
    columns = board.get("columns") if isinstance(board, dict) else None
    if not isinstance(columns, dict):
        raise CannotCheck("'leaderboard.columns' is not a mapping (see leaderboard)")
    expected = [k for k, c in columns.items() if not (isinstance(c, dict) and "computed" in c)]
    ranking = [k for k in _codalab_ranking_keys(columns) if k in expected]   # others: leaderboard
    written: set = set()
    for _, member in program_members(bundle, "scoring_program"):
        where = f"{member}::{SCORING_CONFIG}"
        try:
            keys = _scorer_keys(bundle, member)
        except CannotCheck as error:
            yield f"scoring keys not checked: {error}"
            return
        except (KeyError, TypeError) as error:
            yield f"{where} is malformed ({type(error).__name__}: {error})"
            return
        written |= set(keys)
        yield from _key_problems(where, keys, expected, ranking)
    yield from _union_problems(written, expected)


def _codalab_ranking_keys(columns: dict) -> list:
    """The non-computed keys the ranking column (highest selection_default) reads."""
    chosen = max(((c.get("selection_default", 0), key) for key, c in columns.items()
                  if isinstance(c, dict)), default=(0, None))
    if not chosen[0]:
        return []
    column = columns[chosen[1]]
    computed = column.get("computed")
    if isinstance(computed, dict):      # a malformed one is the leaderboard rule's finding
        fields = computed.get("fields")
        return [k.strip() for k in fields.split(",") if k.strip()] if isinstance(fields, str) else []
    return [chosen[1]]


def _v2_ranking_keys(boards: list) -> list:
    """The keys the ranking column (index 0) reads: its own, or, for a computed one (the site's
    avg_rank), those of the columns at its computation_indexes."""
    columns = [c for board in boards for c in board.get("columns", []) if isinstance(c, dict)]
    ranking = next((c for c in columns if c.get("index") == 0), None)
    if ranking is None:
        return []
    if ranking.get("computation") is None:
        return [ranking.get("key")]
    chosen = ranking.get("computation_indexes")
    chosen = chosen if isinstance(chosen, list) else []     # malformed: the leaderboard rule's
    return [c.get("key") for c in columns if c.get("index") in chosen]


def _v2_time_problems(bundle: Bundle, where: str, limit, member: str) -> Iterator[Problem]:
    needed, detail = _ingestion_seconds(bundle.read_json(member, INGESTION_CONFIG))
    needed += bundle.margin
    bounds = [(limit, "execution_time_limit")]
    if not bundle.comp.get("queue"):        # a custom queue runs the phase's limit uncapped
        bounds.append((bundle.platform.default_queue_limit_seconds, "the default queue's cap"))
    for bound, what in bounds:
        if bound < needed:
            yield (f"{where}: {what} is {bound} s but the run needs {needed:g} s "
                   f"({detail} + {bundle.margin:g} s scoring)",
                   "raise the limit, cut the budgets, or name a queue of your own (spec key "
                   "codabench_queue, its vhost UUID)")


@rule("v2-time-and-keys", "each phase's execution_time_limit, and the default queue's cap, cover "
      "its tasks' ingestion budgets plus the scoring margin; each scorer writes only the first "
      "leaderboard's non-computed keys, its ranking column (index 0) included, and together they "
      "cover them all (codabench_v2.md §1.4, §3.1, codalab_v1.md §4.8)",
      "derive the time limit, the columns and the scoring config from the same plan", CODABENCH)
def check_time_and_keys_v2(bundle: Bundle) -> Iterator[Problem]:
    """§3.1: the default queue caps the time limit; a key never written shows no score."""
    comp = bundle.comp
    tasks = {str(t.get("index")): t for t in items(comp, "tasks") if isinstance(t, dict)}
    expected = [c.get("key") for board in items(comp, "leaderboards")[:1]
                for c in board.get("columns", [])
                if isinstance(c, dict) and c.get("computation") is None]
    ranking = _v2_ranking_keys(items(comp, "leaderboards")[:1])
    written: set = set()
    fix = "derive the columns and the scoring config from the same plan"
    for i, phase in enumerate(items(comp, "phases")):
        limit = phase.get("execution_time_limit",
                          bundle.platform.default_execution_time_limit_seconds)
        for index in phase.get("tasks", []):
            task = tasks.get(str(index), {})
            if task.get("ingestion_program") in bundle.names:
                yield from _v2_time_problems(bundle, f"phases[{i}] ({task['ingestion_program']})",
                                             limit, task["ingestion_program"])
            if task.get("scoring_program") in bundle.names:
                keys = _scorer_keys(bundle, task["scoring_program"])
                written |= set(keys)
                yield from ((f"phases[{i}]: {problem}", fix) for problem in _key_problems(
                    task["scoring_program"], keys, expected, ranking))
    yield from ((problem, fix) for problem in _union_problems(written, expected))


# What a participant's process needs in address space beside the data it maps: Python, numpy
# and its BLAS threads reserve a few hundred MiB before any work is done.
INTERPRETER_ADDRESS_SPACE = 512 * 2**20
MAPPED_FIX = ("set sandbox.memory_limit: resident (the default on GPU images), or raise "
              "sandbox.memory_gib above the mapped data plus 0.5 GiB")


@rule("mapped-data-memory", "under the address-space memory rule, each code task's limit "
      "leaves room for the data its child maps (a memory map counts in full against RLIMIT_AS)",
      MAPPED_FIX, CODALAB)
@rule("v2-mapped-data-memory", "under the address-space memory rule, each code task's limit "
      "leaves room for the data its child maps (a memory map counts in full against RLIMIT_AS)",
      MAPPED_FIX, CODABENCH)
def check_mapped_data_memory(bundle: Bundle) -> Iterator[Problem]:
    """A task whose child maps more than its address space allows fails every submission at
    start-up, however careful the code (the kind's contract says how much: mapped_bytes).
    The programs are those the yaml names (a config that cannot be read is the time rules')."""
    bundle.comp                    # an unreadable yaml: this rule is not checked either
    for member in sorted(name for name in bundle.names if name.endswith("ingestion_program.zip")):
        try:
            config = bundle.read_json(member, INGESTION_CONFIG)
        except CannotCheck:
            continue
        limits = config.get("limits", {})
        if limits.get("memory_rule") != ADDRESS_SPACE:
            continue
        for task in config.get("tasks", []):
            mapped = task.get("contract", {}).get("mapped_bytes", 0)
            if mapped + INTERPRETER_ADDRESS_SPACE > limits["memory_bytes"]:
                yield (f"{member}: task {task['name']} maps {mapped / 2**30:.2f} GiB of data, "
                       f"over its address-space limit of {limits['memory_bytes'] / 2**30:.2f} GiB "
                       "with the interpreter's 0.5 GiB: every submission would fail to load it")

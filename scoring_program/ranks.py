"""Rank intervals and tie groups of a leaderboard: is rank 3 really better than rank 4?

For organizers, after the final phase. From the repository root::

    python -m scoring_program.ranks LEADERBOARD.csv --config PATH/scoring_config.json
    python -m scoring_program.ranks LEADERBOARD.csv --bundle dist/X.zip [--phase KEY]
    python -m scoring_program.ranks --runs OUT_A OUT_B ... --config PATH/scoring_config.json

or, from an unzipped scoring program (its own ``scoring_config.json`` is the default),
``python3 ranks.py LEADERBOARD.csv``. Standard library and numpy only: it ships in the
scoring program and runs in the competition's image.

Inputs. A leaderboard CSV (a header row, one row per entry: the entry's name in the column
``Username``/``username``/``name``/``entry``, else the first column of non-numbers; a ``#``
column ignored; value columns by key or by label, as Codabench's "Download as CSV" titles
them; a standard error in ``<key>_se`` or ``<label> SE``), or scoring output folders
(``--runs``: each folder's ``detailed_results.json``, ``tasks.<task>.metrics.<metric>.value``
and ``.se``; the entry is the folder's name). The config's ``ranking`` entry says how the
leaderboard ranks (``bundle/leaderboard.py`` ``ranking_entry``): one column, the average over
columns of each column's rank, or the weighted loss sum_c w_c loss_c / sum_c w_c.

Method. The ranking statistic T_j of every entry j is recomputed from the value columns, then
B seeded replicates T*_bj of it are drawn:

- with standard errors: parametric draws v*_jc ~ N(v_jc, se_jc^2), independent across entries
  and columns, and T* recomputed from them. Submissions scored on the same test rows are
  positively correlated, so the variance of a difference, var_j + var_k - 2 cov_jk, is
  overstated by independent draws: the intervals are conservative (wider);
- without standard errors but with several tasks: a paired bootstrap over tasks (every entry
  gets the same resampled task set, drawn with replacement, and T* is recomputed on it);
- with neither, no method applies and the tool refuses.

Rank intervals with simultaneous coverage 1 - alpha (Mogstad, Romano, Shaikh and Wilhelm,
2024, "Inference for ranks with applications to mobility across neighbourhoods and academic
achievement across countries", Review of Economic Studies): with s_jk the replicates' standard
deviation of T*_j - T*_k, the critical value c is the (1 - alpha) quantile over replicates of
max over pairs of |(T*_bj - T*_bk) - (T_j - T_k)| / s_jk, and (T_j - T_k) +- c s_jk are
simultaneous confidence intervals for every pairwise difference. k is significantly better
than j when its whole interval lies on the better side; entry j's rank interval is
[1 + #{k significantly better than j}, n - #{k significantly worse than j}]. Tie groups, in
the order of the observed statistic (ties by name): an entry joins the current group while
its difference from the group's first entry is not significant under the same intervals. The
max-t test controls the familywise error over all n(n-1)/2 pairs, a stronger correction than
Holm's.

Exit status: 0 done; 2 bad input (one line on stderr naming the file, row or column).
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import math
import re
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Started as a script from an unzipped program, its folder holds scorer/, runtime/, kinds/.
if __package__:
    from .scorer.config import CONFIG_NAME, ConfigError, ScoringConfig, load_config, parse_config
else:
    sys.dont_write_bytecode = True        # the program's folder may be read-only
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from scorer.config import (CONFIG_NAME, ConfigError, ScoringConfig,  # noqa: E402
                               load_config, parse_config)

DEFAULT_REPLICATES = 2000
DEFAULT_ALPHA = 0.05
DEFAULT_SEED = 0
BAD_INPUT = 2
NAME_HEADERS = ("username", "name", "entry")
MISSING_CELLS = ("", "-")
DETAILS_NAME = "detailed_results.json"
REFERENCE = ("Mogstad, Romano, Shaikh & Wilhelm (2024), Inference for ranks, "
             "Review of Economic Studies")
TEST_TEXT = ("simultaneous max-|t| over all pairs of entries (controls the familywise error "
             "over every pair; stronger than Holm's correction)")
CONSERVATIVE_TEXT = ("draws are independent across entries; submissions scored on the same "
                     "test rows are positively correlated, so the intervals are conservative")
# A pairwise spread this small relative to the statistic is rounding, not randomness.
EXACT_TOLERANCE = 1e-12
# Elements per block of the pairwise rank comparisons (bounds their memory).
BLOCK_ELEMENTS = 4_000_000


class InputError(ValueError):
    """Bad input: the message names the file, row or column and what was expected."""


# ----------------------------------------------------------------------------- the ranking

@dataclass(frozen=True)
class Criterion:
    """One value column the ranking statistic reads."""
    key: str
    label: str
    task: str
    score_type: object            # runtime.scoring.ScoreType: direction and as_loss
    weight: float                 # its weight in the weighted loss (unused otherwise)

    @property
    def metric(self) -> str:
        return self.score_type.name

    @property
    def names(self) -> tuple[str, str]:
        return self.key, self.label

    @property
    def se_names(self) -> tuple[str, str]:
        return f"{self.key}_se", f"{self.label} SE"


@dataclass(frozen=True)
class RankingRule:
    """How the leaderboard ranks: ``statistic`` over ``criteria`` (config ``ranking``)."""
    statistic: str                # column, average_rank or weighted_loss
    key: str
    label: str
    criteria: tuple[Criterion, ...]

    @property
    def higher_is_better(self) -> bool:
        return self.statistic == "column" and self.criteria[0].score_type.higher_is_better

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.task for c in self.criteria))

    def describe(self) -> str:
        keys = ", ".join(c.key for c in self.criteria)
        return {"column": f"the column {keys}",
                "average_rank": f"the mean over {keys} of each column's rank (ties: mid-ranks)",
                "weighted_loss": f"the weighted loss over {keys}"}[self.statistic]


def ranking_rule(config: ScoringConfig, source: str) -> RankingRule:
    """The config's ranking entry with each key's task, score type, label and weight."""
    if config.ranking is None:
        raise InputError(f"{source}: no 'ranking' entry (written before this tool existed); "
                         "rebuild the bundle")
    columns = {column.key: column for column in config.columns}
    criteria = []
    for key in config.ranking.keys:
        column = columns[key]
        task = config.task(column.task)
        criteria.append(Criterion(key, column.label or key, task.name,
                                  task.task_type.score_type(column.metric),
                                  float(task.weights.get(column.metric, 0.0))))
    return RankingRule(config.ranking.statistic, config.ranking.key, config.ranking.label,
                       tuple(criteria))


def oriented(rule: RankingRule, values: np.ndarray) -> np.ndarray:
    """Each column as a loss for ranking: -v where higher is better, else v."""
    signs = np.array([-1.0 if c.score_type.higher_is_better else 1.0 for c in rule.criteria])
    return values * signs


def midranks(losses: np.ndarray) -> np.ndarray:
    """Rank of each entry within each column, over axis -2 (entries) of (..., n, m):
    r_jc = 1 + #{k: l_kc < l_jc} + #{k != j: l_kc = l_jc} / 2 (tied entries share the mean
    of their positions)."""
    n, m = losses.shape[-2:]
    flat = losses.reshape(-1, n, m)
    ranks = np.empty(flat.shape)
    step = max(1, BLOCK_ELEMENTS // (n * n * m))
    for start in range(0, len(flat), step):
        block = flat[start:start + step]
        mine, other = block[:, :, None, :], block[:, None, :, :]
        below = (other < mine).sum(axis=2)
        level = (other == mine).sum(axis=2) - 1
        ranks[start:start + step] = 1 + below + level / 2
    return ranks.reshape(losses.shape)


def ranking_statistic(rule: RankingRule, values: np.ndarray,
                      multiplicity: np.ndarray | None = None) -> np.ndarray:
    """T_j for every entry, from values of shape (..., n, m) to (..., n).

    ``multiplicity`` (..., m): how often each column's task was drawn (bootstrap over tasks;
    None: once each). column: T_j = v_j; average_rank: T_j = sum_c u_c r_jc / sum_c u_c with
    r the mid-ranks; weighted_loss: T_j = sum_c u_c w_c loss_c(v_jc) / sum_c u_c w_c, loss_c
    the score type's ``as_loss`` (maximum - v where higher is better, else v)."""
    m = len(rule.criteria)
    counts = np.ones(m) if multiplicity is None else np.asarray(multiplicity, dtype=float)
    if rule.statistic == "column":
        return values[..., 0] * 1.0
    if rule.statistic == "average_rank":
        ranks = midranks(oriented(rule, values))
        return (ranks * counts[..., None, :]).sum(-1) / counts.sum(-1)[..., None]
    weights = np.array([c.weight for c in rule.criteria]) * counts
    losses = np.stack([c.score_type.as_loss(values[..., i]) for i, c in enumerate(rule.criteria)],
                      axis=-1)
    return (losses * weights[..., None, :]).sum(-1) / weights.sum(-1)[..., None]


# ------------------------------------------------------------------------------ replicates

def parametric_replicates(rule: RankingRule, values: np.ndarray, se: np.ndarray,
                          replicates: int, rng: np.random.Generator) -> np.ndarray:
    """(B, n): T recomputed from v*_bjc = v_jc + se_jc z_bjc, z independent N(0, 1)."""
    draws = values + se * rng.standard_normal((replicates, *values.shape))
    return ranking_statistic(rule, draws)


def task_bootstrap_replicates(rule: RankingRule, values: np.ndarray, replicates: int,
                              rng: np.random.Generator) -> np.ndarray:
    """(B, n): T recomputed on B task sets drawn with replacement, the same set for every
    entry (paired): a column counts as often as its task was drawn."""
    tasks = rule.tasks
    counts = rng.multinomial(len(tasks), np.full(len(tasks), 1 / len(tasks)), size=replicates)
    column_task = [tasks.index(c.task) for c in rule.criteria]
    return ranking_statistic(rule, values, counts[:, column_task])


# ------------------------------------------------------------------------------- inference

def pairwise_sd(replicates: np.ndarray) -> np.ndarray:
    """s_jk = standard deviation over b of T*_bj - T*_bk (n, n); computed from the
    differences themselves, so identical entries get exactly 0."""
    n = replicates.shape[1]
    sd = np.zeros((n, n))
    for j in range(n - 1):
        spread = (replicates[:, j:j + 1] - replicates[:, j + 1:]).std(axis=0, ddof=1)
        sd[j, j + 1:] = sd[j + 1:, j] = spread
    return sd


def exact_pairs(sd: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Pairs whose difference does not vary over the replicates (s_jk ~ 0): known exactly."""
    return sd <= EXACT_TOLERANCE * max(1.0, float(np.abs(observed).max()))


def max_t_critical_value(replicates: np.ndarray, observed: np.ndarray, sd: np.ndarray,
                         alpha: float) -> float:
    """c = (1 - alpha) quantile over b of M_b = max_{j<k, s_jk>0}
    |(T*_bj - T*_bk) - (T_j - T_k)| / s_jk (0 when no pair varies)."""
    deviation = replicates - observed
    exact = exact_pairs(sd, observed)
    largest = np.zeros(len(replicates))
    for j in range(len(observed) - 1):
        varying = ~exact[j, j + 1:]
        if varying.any():
            t = np.abs(deviation[:, j:j + 1] - deviation[:, j + 1:][:, varying]) / sd[j, j + 1:][varying]
            largest = np.maximum(largest, t.max(axis=1))
    return float(np.quantile(largest, 1 - alpha))


def significantly_better(losses: np.ndarray, sd: np.ndarray, critical: float) -> np.ndarray:
    """better[k, j]: the interval (l_k - l_j) +- c s_kj lies below 0 (k better than j; l the
    statistic as a loss). A pair known exactly differs or not by its observed difference."""
    difference = losses[:, None] - losses[None, :]
    exact = exact_pairs(sd, losses)
    return np.where(exact, difference < 0, difference + critical * sd < 0)


def rank_intervals(better: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[1 + #{k better than j}, n - #{k worse than j}] for every entry j."""
    n = len(better)
    return 1 + better.sum(axis=0), n - better.sum(axis=1)


def observed_order(losses: np.ndarray, names: list[str]) -> list[int]:
    """Entries best first; equal statistics in the order of their names."""
    return sorted(range(len(names)), key=lambda j: (losses[j], names[j]))


def tie_groups(order: list[int], better: np.ndarray) -> np.ndarray:
    """Group number of each entry: walking ``order``, an entry joins the current group while
    it is not significantly different from that group's first entry, else it starts one."""
    groups = np.zeros(len(order), dtype=int)
    first, group = order[0], 1
    for j in order:
        if better[first, j] or better[j, first]:
            first, group = j, group + 1
        groups[j] = group
    return groups


# ------------------------------------------------------------------------------ the inputs

@dataclass(frozen=True)
class Table:
    """Entries' values (n, m) of the rule's columns and their standard errors, if given."""
    names: list[str]
    values: np.ndarray
    se: np.ndarray | None
    source: str
    warnings: tuple[str, ...] = ()


def _number(cell: str, where: str, what: str = "a number") -> float:
    """A cell as a finite float; a CodaLab leaderboard cell 'value (rank)' gives its value."""
    text = cell.strip()
    shown = re.fullmatch(r"(\S+)\s*\(\d+\)", text)
    try:
        value = float(shown.group(1) if shown else text)
    except ValueError:
        raise InputError(f"{where}: {cell!r} is not a number; expected {what}") from None
    if not math.isfinite(value):
        raise InputError(f"{where}: {cell!r} is not finite; expected {what}")
    return value


def _is_number(cell: str) -> bool:
    try:
        _number(cell, "")
        return True
    except InputError:
        return False


def _header(cell: str) -> str:
    """A header cell as written, without CodaLab's b'...' (codalab_v1.md G17)."""
    text = cell.strip()
    wrapped = re.fullmatch(r"b'(.*)'", text)
    return wrapped.group(1) if wrapped else text


def _csv_rows(path: Path) -> list[list[str]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: cannot read the leaderboard CSV ({error})") from None
    try:
        rows = [row for row in csv.reader(io.StringIO(text)) if any(c.strip() for c in row)]
    except csv.Error as error:
        raise InputError(f"{path}: not a CSV file ({error})") from None
    if len(rows) < 2:
        raise InputError(f"{path}: expected a header row and one row per entry, found "
                         f"{len(rows)} row(s)")
    return rows


def _known_headers(config: ScoringConfig, rule: RankingRule) -> set[str]:
    """Every leaderboard column's key and label, and their SE forms."""
    known = {rule.key, rule.label}
    for column in config.columns:
        for name in filter(None, (column.key, column.label)):
            known |= {name, f"{name}_se" if name == column.key else f"{name} SE"}
    return known


def _name_column(header: list[str], rows: list[list[str]], known: set[str], path: Path) -> int:
    for i, cell in enumerate(header):
        if cell.lower() in NAME_HEADERS:
            return i
    for i, cell in enumerate(header):
        if cell != "#" and cell not in known and not all(
                _is_number(row[i]) or row[i].strip() in MISSING_CELLS for row in rows):
            return i
    raise InputError(f"{path}: no column of entry names: expected one titled "
                     f"{'/'.join(NAME_HEADERS)} or a column whose values are not all numbers")


def _find(header: list[str], names: tuple[str, str]) -> int | None:
    found = [i for i, cell in enumerate(header) if cell in names]
    return found[0] if found else None


def read_leaderboard(path: Path, config: ScoringConfig, rule: RankingRule) -> Table:
    """The rule's columns from a leaderboard CSV (header by key or label, SE columns
    ``<key>_se`` / ``<label> SE``); entries with a missing cell are left out, with a warning."""
    path = Path(path)
    rows = _csv_rows(path)
    header, body = [_header(cell) for cell in rows[0]], rows[1:]
    for number, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise InputError(f"{path}: row {number} has {len(row)} cells; the header has "
                             f"{len(header)}")
    repeated = sorted({cell for cell in header if header.count(cell) > 1})
    if repeated:
        raise InputError(f"{path}: header names {repeated} more than once")
    known = _known_headers(config, rule)
    name_at = _name_column(header, body, known, path)
    for i, cell in enumerate(header):
        if i != name_at and cell != "#" and cell not in known:
            raise InputError(
                f"{path}: column {i + 1} {cell!r} is not a leaderboard column of phase "
                f"{config.phase}; expected a key or label of {CONFIG_NAME}'s columns (e.g. "
                f"{rule.criteria[0].key!r} or {rule.criteria[0].label!r}), its SE "
                f"('<key>_se' or '<label> SE'), '#' or the entry's name")
    value_at = []
    for criterion in rule.criteria:
        at = _find(header, criterion.names)
        if at is None:
            raise InputError(f"{path}: no column {criterion.key!r} (or {criterion.label!r}), "
                             f"which the ranking ({rule.describe()}) needs")
        value_at.append(at)
    se_at = [_find(header, criterion.se_names) for criterion in rule.criteria]
    if any(at is not None for at in se_at) and None in se_at:
        lacking = [c.se_names[0] for c, at in zip(rule.criteria, se_at) if at is None]
        raise InputError(f"{path}: standard errors for some ranking columns only; expected "
                         f"also {', '.join(lacking)} (or '<label> SE')")
    places = lambda columns: [[f"{path}: row {r}, column {header[at]!r}" for at in columns]
                              for r in range(2, len(body) + 2)]
    with_se = se_at[0] is not None
    return _table(str(path), [row[name_at].strip() for row in body],
                  [f"{path}: row {r}" for r in range(2, len(body) + 2)],
                  [[row[at] for at in value_at] for row in body], places(value_at),
                  [[row[at] for at in se_at] for row in body] if with_se else None,
                  places(se_at) if with_se else None, [header[at] for at in value_at])


def _missing(cell) -> bool:
    return cell is None or isinstance(cell, str) and cell.strip() in MISSING_CELLS


def _table(source: str, names: list[str], rows: list[str], values: list[list],
           value_places: list[list[str]], ses: list[list] | None,
           se_places: list[list[str]] | None, columns: list[str]) -> Table:
    """Numbers from cells (strings or JSON values; None, '' or '-' missing). An entry with a
    missing value or SE is left out with a warning; a ranking column missing for every entry
    fails. ``rows``: each entry's place, ``*_places``: each cell's, for messages."""
    for row, name in zip(rows, names):
        if not name:
            raise InputError(f"{row}: empty entry name")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise InputError(f"{source}: entries {repeated} appear more than once")
    for c, column in enumerate(columns):
        if all(_missing(row[c]) for row in values):
            raise InputError(f"{source}: the ranking column {column!r} is missing for every "
                             "entry; expected a number for each")
    warnings = []
    if ses is not None and all(_missing(cell) for row in ses for cell in row):
        warnings.append(f"{source}: every standard error is missing; none used")
        ses = se_places = None
    keep = []
    for i, name in enumerate(names):
        lacking = [column for c, column in enumerate(columns) if _missing(values[i][c])]
        lacking += [f"{column} SE" for c, column in enumerate(columns)
                    if ses is not None and _missing(ses[i][c])]
        if lacking:
            warnings.append(f"{rows[i]}: entry {name!r} left out: no {', '.join(lacking)}")
        else:
            keep.append(i)
    numbers = np.array([[_cell(values[i][c], value_places[i][c], "a number")
                         for c in range(len(columns))] for i in keep]).reshape(len(keep), -1)
    errors = None
    if ses is not None:
        errors = np.array([[_cell(ses[i][c], se_places[i][c], "a standard error >= 0")
                            for c in range(len(columns))] for i in keep]).reshape(len(keep), -1)
        negative = np.argwhere(errors < 0)
        if len(negative):
            i, c = negative[0]
            raise InputError(f"{se_places[keep[i]][c]}: standard error {errors[i, c]:g} is "
                             "negative; expected a standard error >= 0")
    return Table([names[i] for i in keep], numbers, errors, source, tuple(warnings))


def _cell(cell, where: str, expected: str) -> float:
    if isinstance(cell, (int, float)) and not isinstance(cell, bool):
        if not math.isfinite(cell):
            raise InputError(f"{where}: {cell!r} is not finite; expected {expected}")
        return float(cell)
    if not isinstance(cell, str):
        raise InputError(f"{where}: {cell!r} is not a number; expected {expected}")
    return _number(cell, where, expected)


def read_runs(folders: list[Path], rule: RankingRule) -> Table:
    """The rule's columns from scoring output folders: ``tasks.<task>.metrics.<metric>.value``
    and ``.se`` of each one's detailed_results.json; the entry is the folder's name. SEs are
    used when some entry has them; an entry without them is then left out, with a warning."""
    names, rows, values, ses, value_places, se_places = [], [], [], [], [], []
    for folder in map(Path, folders):
        details = folder / DETAILS_NAME
        try:
            raw = json.loads(details.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise InputError(f"{details}: cannot read the scoring output's details "
                             f"({type(error).__name__}: {error}); expected the "
                             f"{DETAILS_NAME} the scoring program writes") from None
        tasks = raw.get("tasks") if isinstance(raw, dict) else None
        if not isinstance(tasks, dict):
            raise InputError(f"{details}: no 'tasks' mapping; expected the {DETAILS_NAME} "
                             "the scoring program writes")
        names.append(folder.resolve().name)
        rows.append(str(details))
        metrics = [_metric_entry(tasks, c) for c in rule.criteria]
        values.append([m.get("value") for m in metrics])
        ses.append([m.get("se") for m in metrics])
        places = [f"{details}: tasks.{c.task}.metrics.{c.metric}" for c in rule.criteria]
        value_places.append([f"{place}.value" for place in places])
        se_places.append([f"{place}.se" for place in places])
    with_se = any(cell is not None for row in ses for cell in row)
    return _table(f"--runs ({len(names)} folders)", names, rows, values, value_places,
                  ses if with_se else None, se_places if with_se else None,
                  [c.key for c in rule.criteria])


def _metric_entry(tasks: dict, criterion: Criterion) -> dict:
    task = tasks.get(criterion.task)
    metrics = task.get("metrics") if isinstance(task, dict) else None
    entry = metrics.get(criterion.metric) if isinstance(metrics, dict) else None
    return entry if isinstance(entry, dict) else {}


def config_from_bundle(path: Path, phase: str | None) -> tuple[dict, str]:
    """The raw scoring config of a built bundle's scoring program (a nested zip, or a folder,
    with scoring_config.json at its root) and where it was found; ``phase`` picks one when
    the bundle holds several phases."""
    try:
        outer = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as error:
        raise InputError(f"{path}: cannot open the bundle ({error})") from None
    found: dict[str, tuple[dict, str]] = {}
    with outer:
        members = outer.namelist()
        nested = [m for m in members if m.lower().endswith(".zip")]
        # scoring programs first: opening a data zip in the bundle costs its whole size
        nested.sort(key=lambda m: "scoring" not in m.lower())
        for member in members:
            if member.count("/") == 1 and member.endswith("/" + CONFIG_NAME):
                _add_config(found, outer.read(member), f"{path}::{member}")
        for member in nested:
            if found and "scoring" not in member.lower():
                break
            try:
                with zipfile.ZipFile(io.BytesIO(outer.read(member))) as inner:
                    if CONFIG_NAME in inner.namelist():
                        _add_config(found, inner.read(CONFIG_NAME),
                                    f"{path}::{member}::{CONFIG_NAME}")
            except zipfile.BadZipFile:
                continue
    if not found:
        raise InputError(f"{path}: no scoring program with a {CONFIG_NAME} in the bundle")
    if phase is None and len(found) > 1:
        raise InputError(f"{path}: the bundle holds phases {sorted(found)}; name one with --phase")
    key = phase if phase is not None else next(iter(found))
    if key not in found:
        raise InputError(f"{path}: no phase {key!r}; the bundle holds {sorted(found)}")
    return found[key]


def _add_config(found: dict, data: bytes, where: str) -> None:
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise InputError(f"{where}: not readable JSON ({error})") from None
    if isinstance(raw, dict):
        found.setdefault(str(raw.get("phase")), (raw, where))


# ------------------------------------------------------------------------------ the analysis

@dataclass(frozen=True)
class Analysis:
    names: list[str]
    statistic: np.ndarray         # T_j as the leaderboard shows it
    observed_rank: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    group: np.ndarray
    order: list[int]
    method: str                   # parametric or task_bootstrap
    critical_value: float
    replicates: int
    alpha: float
    seed: int


def analyse(rule: RankingRule, table: Table, replicates: int = DEFAULT_REPLICATES,
            alpha: float = DEFAULT_ALPHA, seed: int = DEFAULT_SEED) -> Analysis:
    """Rank intervals and tie groups of the table's entries (see the module docstring)."""
    n = len(table.names)
    if n < 2:
        raise InputError(f"{table.source}: {n} entr{'y' if n == 1 else 'ies'} with every "
                         "ranking column; expected at least 2 to rank")
    rng = np.random.default_rng(seed)
    observed = ranking_statistic(rule, table.values)
    if table.se is not None:
        method, draws = "parametric", parametric_replicates(rule, table.values, table.se,
                                                             replicates, rng)
    elif len(rule.tasks) >= 2:
        method, draws = "task_bootstrap", task_bootstrap_replicates(rule, table.values,
                                                                    replicates, rng)
    else:
        raise InputError(
            f"{table.source}: no standard errors and a single task ({rule.tasks[0]}): nothing "
            f"to resample. Give SE columns ({rule.criteria[0].se_names[0]!r} or "
            f"{rule.criteria[0].se_names[1]!r}) or scoring outputs with metrics.<metric>.se")
    sign = -1.0 if rule.higher_is_better else 1.0
    losses, loss_draws = sign * observed, sign * draws
    sd = pairwise_sd(loss_draws)
    critical = max_t_critical_value(loss_draws, losses, sd, alpha)
    better = significantly_better(losses, sd, critical)
    lower, upper = rank_intervals(better)
    order = observed_order(losses, table.names)
    observed_rank = np.empty(n, dtype=int)
    observed_rank[order] = np.arange(1, n + 1)
    return Analysis(table.names, observed, observed_rank, lower, upper,
                    tie_groups(order, better), order, method, critical, replicates, alpha, seed)


def method_text(analysis: Analysis, rule: RankingRule) -> list[str]:
    draws = ("parametric draws value ~ N(value, se^2) per entry and column; " + CONSERVATIVE_TEXT
             if analysis.method == "parametric" else
             f"paired bootstrap over the {len(rule.tasks)} tasks (one resampled task set for "
             "every entry)")
    return [f"ranking statistic: {rule.label} = {rule.describe()}",
            f"replicates: B = {analysis.replicates}, seed {analysis.seed}; {draws}",
            f"rank intervals: simultaneous coverage {1 - analysis.alpha:g} ({REFERENCE}); "
            f"critical value c = {analysis.critical_value:.3f}",
            f"pairwise test: {TEST_TEXT}; tie group: not significantly different from the "
            "group's first entry"]


def report_lines(analysis: Analysis, rule: RankingRule) -> list[str]:
    rows = [(analysis.names[j], f"{analysis.statistic[j]:.6g}", str(analysis.observed_rank[j]),
             f"[{analysis.lower[j]}, {analysis.upper[j]}]", str(analysis.group[j]))
            for j in analysis.order]
    header = ("entry", rule.label, "rank", "rank interval", "group")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
    return [*method_text(analysis, rule), "", line(header), *map(line, rows)]


def as_json(analysis: Analysis, rule: RankingRule, table: Table) -> dict:
    return {"statistic": {"key": rule.key, "label": rule.label, "kind": rule.statistic,
                          "columns": [c.key for c in rule.criteria],
                          "higher_is_better": rule.higher_is_better},
            "method": {"draws": analysis.method, "reference": REFERENCE, "test": TEST_TEXT,
                       "text": method_text(analysis, rule)},
            "seed": analysis.seed, "B": analysis.replicates, "alpha": analysis.alpha,
            "critical_value": analysis.critical_value, "warnings": list(table.warnings),
            "entries": [{"name": analysis.names[j], "statistic": float(analysis.statistic[j]),
                         "observed_rank": int(analysis.observed_rank[j]),
                         "rank_interval": [int(analysis.lower[j]), int(analysis.upper[j])],
                         "group": int(analysis.group[j])} for j in analysis.order]}


# ---------------------------------------------------------------------------- command line

def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ranks", description=(
        "Rank intervals (simultaneous coverage 1-alpha) and tie groups of a leaderboard."))
    parser.add_argument("leaderboard", nargs="?", type=Path, help="the leaderboard CSV")
    parser.add_argument("--runs", nargs="+", type=Path, metavar="DIR",
                        help="scoring output folders instead of a CSV (entry = folder name)")
    parser.add_argument("--config", type=Path, help=f"the phase's {CONFIG_NAME} (default: the "
                        "one next to this file, in an unzipped scoring program)")
    parser.add_argument("--bundle", type=Path, help="read the config from a built bundle zip")
    parser.add_argument("--phase", help="the bundle's phase, where it holds several")
    parser.add_argument("--replicates", "-B", type=int, default=DEFAULT_REPLICATES)
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the results here")
    arguments = parser.parse_args(argv)
    if (arguments.leaderboard is None) == (arguments.runs is None):
        parser.error("give a leaderboard CSV or --runs, one of the two")
    if arguments.config is not None and arguments.bundle is not None:
        parser.error("give --config or --bundle, not both")
    if arguments.replicates < 100:
        parser.error("--replicates: expected at least 100")
    if not 0 < arguments.alpha < 1:
        parser.error("--alpha: expected a number between 0 and 1")
    return arguments


def _config(arguments: argparse.Namespace) -> tuple[ScoringConfig, str]:
    if arguments.bundle is not None:
        raw, where = config_from_bundle(arguments.bundle, arguments.phase)
        return parse_config(raw, where), where
    path = arguments.config or Path(__file__).resolve().parent / CONFIG_NAME
    if arguments.config is None and not path.is_file():
        raise InputError(f"{path}: missing; give --config PATH/{CONFIG_NAME} or --bundle ZIP "
                         "(only an unzipped scoring program holds its own config)")
    return load_config(path), str(path)


def main(argv: list[str]) -> int:
    arguments = _arguments(argv)
    try:
        config, where = _config(arguments)
        rule = ranking_rule(config, where)
        table = (read_runs(arguments.runs, rule) if arguments.runs is not None
                 else read_leaderboard(arguments.leaderboard, config, rule))
        for warning in table.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        analysis = analyse(rule, table, arguments.replicates, arguments.alpha, arguments.seed)
    except (InputError, ConfigError) as error:
        print(f"ranks: {error}", file=sys.stderr)
        return BAD_INPUT
    print(f"phase {config.phase}: {len(table.names)} entries from {table.source}")
    print("\n".join(report_lines(analysis, rule)))
    if arguments.json is not None:
        try:
            arguments.json.write_text(json.dumps(as_json(analysis, rule, table), indent=1) + "\n",
                                      encoding="utf-8")
        except OSError as error:
            print(f"ranks: {arguments.json}: cannot write ({error})", file=sys.stderr)
            return BAD_INPUT
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

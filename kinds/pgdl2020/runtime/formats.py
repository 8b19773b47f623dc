"""PGDL 2020's files: a task's ``model_configs.json`` (the zoo: hyperparameters and accuracies
of every trained network) and a ``.predict`` file (the measure of every network).

Errors are ``runtime.formats.FormatError`` naming the file and what is wrong in it.
Standard library and numpy only (this module ships in the programs).

Model ids: PGDL's model folders are ``model_<id>`` and its ``model_configs.json`` may key the
models by the bare ``<id>`` (its scorer added the prefix). Here every id is the folder name,
``model_<id>``, and the zoo lists them in the order the folder names sort (as strings, so
``model_10`` before ``model_2``, as PGDL's ingestion listed them).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from runtime.formats import FormatError
from runtime.formats.json_files import read_json_object
from runtime.formats.matrix_files import PathLike

MODEL_PREFIX = "model_"
EXCEEDED = "EXCEEDED"   # PGDL's ingestion wrote it for every model left once over the time budget

# A .predict member is a model id, a number and punctuation: about 40 bytes as PGDL wrote it.
# The bounds are generous on purpose, so that an odd but small file (a 5,000-digit number,
# brackets nested 50,000 deep) still reaches the parser, which names its line; what they
# refuse is a file of millions of keys, whose parse alone would cost the scorer minutes and
# hundreds of MB before the extra keys were reported.
PREDICT_BYTES_PER_MODEL = 1024
PREDICT_SLACK_BYTES = 1 << 20
PREDICT_EXTRA_KEYS = 1000        # enough to list a wrong file's stray keys; no more are read


def model_folder(model_id) -> str:
    """The folder name of a model: ``model_<id>``; an id that already starts so is kept."""
    text = str(model_id)
    return text if text.startswith(MODEL_PREFIX) else MODEL_PREFIX + text


@dataclass(frozen=True)
class ModelZoo:
    """The trained networks of one task.

    ``ids``: folder names ``model_<id>``, sorted; every array below is in that order.
    ``hparams``: name -> each model's current value (int64 when all values are integers,
    float64 when all are numbers, else an object array; JSON lists become tuples).
    ``possible_values``: name -> the values the grid spans, in the file's order.
    ``train_acc``, ``test_acc``: float64 arrays in [0, 1].
    """

    ids: tuple[str, ...]
    hparams: dict[str, np.ndarray]
    possible_values: dict[str, tuple]
    train_acc: np.ndarray
    test_acc: np.ndarray

    @property
    def gaps(self) -> np.ndarray:
        """Generalisation gaps: train_acc - test_acc (PGDL's ``gen_gap``)."""
        return self.train_acc - self.test_acc


def _plain(value):
    """A JSON value made hashable (lists become tuples)."""
    if isinstance(value, list):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        raise TypeError("an object")
    return value


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _column(values: list) -> np.ndarray:
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return np.array(values, dtype=np.int64)
    if all(_is_number(v) for v in values):
        return np.array(values, dtype=np.float64)
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column


def _same(first, second) -> bool:
    """Equal JSON values: numbers by value (1 and 1.0 alike), never a boolean for a number."""
    if isinstance(first, tuple) and isinstance(second, tuple):
        return len(first) == len(second) and all(_same(a, b) for a, b in zip(first, second))
    if _is_number(first) and _is_number(second):
        return first == second
    return type(first) is type(second) and first == second


def _model_hparams(path: Path, model: str, entry) -> dict[str, tuple[tuple, object]]:
    """``{name: (possible_values, current_value)}`` of one model, checked on its own."""
    if not isinstance(entry, dict):
        raise FormatError(f"{path}: model {model}: expected an object with \"hparams\" and "
                          f"\"metrics\", found {type(entry).__name__}")
    hparams = entry.get("hparams")
    if not isinstance(hparams, dict) or not hparams:
        raise FormatError(f"{path}: model {model}: \"hparams\" must be a non-empty object of "
                          f"hyperparameters, found {hparams!r:.80}")
    result = {}
    for name, spec in hparams.items():
        where = f"{path}: model {model}: hyperparameter {name!r}"
        if not (isinstance(spec, dict) and "possible_values" in spec
                and "current_value" in spec):
            raise FormatError(f"{where}: expected an object with \"possible_values\" and "
                              f"\"current_value\"")
        raw = spec["possible_values"]
        try:
            if not isinstance(raw, list) or not raw:
                raise TypeError("not a non-empty list")
            possible = tuple(_plain(v) for v in raw)
            current = _plain(spec["current_value"])
            hash(possible), hash(current)
        except TypeError as error:
            raise FormatError(f"{where}: possible_values must be a non-empty list of numbers, "
                              f"strings or lists, and current_value one of them ({error})"
                              ) from None
        for index, value in enumerate(possible):
            if any(_same(value, other) for other in possible[:index]):
                raise FormatError(f"{where}: possible value {value!r} is listed twice")
        if not any(_same(current, value) for value in possible):
            raise FormatError(f"{where}: current_value {current!r} is not among the possible "
                              f"values {list(possible)!r}")
        result[name] = (possible, current)
    return result


def _accuracy(path: Path, model: str, entry: dict, key: str) -> float:
    metrics = entry.get("metrics")
    if not isinstance(metrics, dict):
        raise FormatError(f"{path}: model {model}: \"metrics\" must be an object holding "
                          f"train_acc and test_acc, found {metrics!r:.80}")
    if key not in metrics:
        raise FormatError(f"{path}: model {model}: metrics has no {key!r}")
    value = metrics[key]
    if not _is_number(value) or not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise FormatError(f"{path}: model {model}: metrics.{key} must be a number in [0, 1], "
                          f"found {value!r}")
    return float(value)


def read_model_configs(path: PathLike) -> ModelZoo:
    """Read PGDL's ``model_configs.json``:
    ``{"<id>": {"hparams": {name: {"possible_values": [...], "current_value": v}},
    "metrics": {"train_acc": a, "test_acc": b, ...}}}``.

    Checked: every model has the same hyperparameter names with the same possible values
    (listed once each); each current value is one of them; the models form the complete grid,
    every combination exactly once (a duplicate names both models, a gap names a missing
    combination and the counts); train_acc and test_acc are numbers in [0, 1]; no two ids
    name the same folder (``7`` and ``model_7``).
    """
    path = Path(path)
    raw = read_json_object(path)
    if not raw:
        raise FormatError(f"{path}: no models")
    folders: dict[str, str] = {}
    for key in raw:
        folder = model_folder(key)
        if folder in folders:
            raise FormatError(f"{path}: models {folders[folder]!r} and {key!r} both name the "
                              f"folder {folder}")
        folders[folder] = key
    ids = tuple(sorted(folders))

    per_model = {model: _model_hparams(path, model, raw[folders[model]]) for model in ids}
    first = ids[0]
    reference = per_model[first]
    names = list(reference)
    for model in ids[1:]:
        spec = per_model[model]
        if set(spec) != set(names):
            missing = sorted(set(names) - set(spec))
            extra = sorted(set(spec) - set(names))
            raise FormatError(f"{path}: model {model} has hyperparameters {sorted(spec)}, "
                              f"model {first} has {sorted(names)}"
                              + (f" (missing {missing})" if missing else "")
                              + (f" (extra {extra})" if extra else ""))
        for name in names:
            if not _same(spec[name][0], reference[name][0]):
                raise FormatError(f"{path}: hyperparameter {name!r}: model {model} lists the "
                                  f"possible values {list(spec[name][0])!r}, model {first} "
                                  f"{list(reference[name][0])!r}")
    possible = {name: reference[name][0] for name in names}

    # The grid: each model's combination as indices into the possible values.
    seen: dict[tuple[int, ...], str] = {}
    for model in ids:
        combination = tuple(next(i for i, v in enumerate(possible[name])
                                 if _same(v, per_model[model][name][1])) for name in names)
        if combination in seen:
            values = ", ".join(f"{name}={possible[name][i]!r}"
                               for name, i in zip(names, combination))
            raise FormatError(f"{path}: models {seen[combination]} and {model} have the same "
                              f"hyperparameters ({values}): each combination must appear once")
        seen[combination] = model
    expected = math.prod(len(values) for values in possible.values())
    if len(seen) != expected:
        missing = _first_missing(possible, names, seen)
        values = ", ".join(f"{name}={possible[name][i]!r}" for name, i in zip(names, missing))
        sizes = " x ".join(str(len(possible[name])) for name in names)
        raise FormatError(f"{path}: the hyperparameter grid is incomplete: expected "
                          f"{expected} models ({sizes} values), found {len(seen)}; no model "
                          f"has {values}")

    hparams = {name: _column([per_model[model][name][1] for model in ids]) for name in names}
    train = np.array([_accuracy(path, m, raw[folders[m]], "train_acc") for m in ids])
    test = np.array([_accuracy(path, m, raw[folders[m]], "test_acc") for m in ids])
    return ModelZoo(ids, hparams, possible, train, test)


def _first_missing(possible: dict[str, tuple], names: list[str], seen) -> tuple[int, ...]:
    """The first combination (in the order of the possible values) no model has."""
    sizes = [len(possible[name]) for name in names]
    for flat in range(math.prod(sizes)):
        combination, rest = [], flat
        for size in reversed(sizes):
            combination.append(rest % size)
            rest //= size
        combination = tuple(reversed(combination))
        if combination not in seen:
            return combination
    raise AssertionError("no combination is missing")


def read_predict(path: PathLike, ids: Sequence[str]) -> np.ndarray:
    """Read a PGDL ``.predict`` file, ``{model_id: value}``, as one float64 per model of ``ids``
    (in that order). Keys may be ``model_<id>`` or the bare ``<id>``; so may ``ids``.

    Refused, naming the line and the model: a model of ``ids`` with no value, a key for no
    model of ``ids`` (or two keys for one model), a value that is not a JSON number (booleans,
    numeric strings, arrays and objects included), NaN, infinity or a number beyond float64's
    range (``1e400``, an integer of 400 digits). Refused before any of it is parsed: a file
    larger than ``max_predict_bytes(len(ids))``; and once ``PREDICT_EXTRA_KEYS`` more keys than
    models have been read, the rest is not.

    PGDL's marker ``"EXCEEDED"`` (the ingestion ran out of time before that model) is read as
    NaN, not refused: the file is well formed, and the scorer penalises a task with any
    unmeasured model (PGDL zeroed the whole submission for it; we penalise that task alone).
    """
    path = Path(path)
    _check_predict_size(path, len(ids))
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FormatError(f"{path}: missing") from None
    except (OSError, ValueError) as error:
        raise FormatError(f"{path}: not readable as UTF-8 text ({error})") from None
    wanted = {model_folder(model): position for position, model in enumerate(ids)}
    values = np.full(len(wanted), np.nan)
    found: dict[str, tuple[str, int]] = {}
    extra = []
    key_limit = len(wanted) + PREDICT_EXTRA_KEYS
    for count, (key, value, literal, at) in enumerate(_flat_object(path, text), 1):
        if count > key_limit:
            raise FormatError(f"{path}: more than {key_limit:,} keys, for a task of "
                              f"{len(wanted)} models (one key each); refused at line "
                              f"{_line(text, at)} without reading further")
        folder = model_folder(key)
        if folder not in wanted:
            extra.append(key)
            continue
        if folder in found:
            first, first_at = found[folder]
            raise FormatError(f"{path}: line {_line(text, at)}: keys {first!r} and {key!r} are "
                              f"the same model ({folder}; the first is on line "
                              f"{_line(text, first_at)})")
        found[folder] = key, at
        if value != EXCEEDED:             # EXCEEDED stays NaN: the budget ran out before it
            values[wanted[folder]] = _number(path, text, at, folder, value, literal)
    missing = [model for model in wanted if model not in found]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"no value for {len(missing)} model(s): {_some(missing)}")
        if extra:
            parts.append(f"{len(extra)} key(s) for no model of the task: {_some(extra)}")
        raise FormatError(f"{path}: expected one value for each of the task's {len(wanted)} "
                          f"models; " + "; ".join(parts))
    return values


def max_predict_bytes(models: int) -> int:
    """The largest .predict file read for a task of ``models`` networks."""
    return PREDICT_SLACK_BYTES + models * PREDICT_BYTES_PER_MODEL


def _check_predict_size(path: Path, models: int) -> None:
    """Refuse a file far larger than ``models`` entries can be, from its size alone."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise FormatError(f"{path}: missing") from None
    bound = max_predict_bytes(models)
    if size > bound:
        raise FormatError(f"{path}: {size:,} bytes, far more than a .predict file of "
                          f"{models} models can need (at most {bound:,} bytes: "
                          f"{PREDICT_BYTES_PER_MODEL:,} per model plus {PREDICT_SLACK_BYTES:,}); "
                          f"refused without reading it")


class _NonFinite(str):
    """NaN / Infinity / -Infinity as the JSON text spelled them (json accepts them)."""


# Integers are read as floats: the measure is a float64, and a Python int of thousands of
# digits would overflow (or pass ``sys.int_info``'s digit limit) on its way there.
_SCALARS = json.JSONDecoder(parse_int=float, parse_constant=_NonFinite)
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_CONTAINERS = {"[": "an array", "{": "an object"}


def _flat_object(path: Path, text: str):
    """``(key, value, literal, offset)`` for each member of the one JSON object in ``text``,
    whose values must be scalars. Read one member at a time: an array or object where a value
    belongs is refused where it opens, so no nesting depth can exhaust the recursion limit as
    ``json.loads`` would."""
    at = _skip(text, 0)
    if text[at:at + 1] != "{":
        raise _syntax(path, text, at, "a JSON object {model_id: value}")
    at = _skip(text, at + 1)
    closing = text[at:at + 1] == "}"
    while not closing:
        if text[at:at + 1] != '"':
            raise _syntax(path, text, at, "a model id in double quotes")
        key, at = _scalar(path, text, at, "a model id in double quotes")
        at = _skip(text, at)
        if text[at:at + 1] != ":":
            raise _syntax(path, text, at, f"':' after the key {key!r}")
        start = _skip(text, at + 1)
        value, at = _scalar(path, text, start, f"a number as the value of {key!r}")
        yield key, value, text[start:at], start
        at = _skip(text, at)
        if text[at:at + 1] not in (",", "}"):
            raise _syntax(path, text, at, f"',' or '}}' after the value of {key!r}")
        closing = text[at] == "}"
        at = _skip(text, at + 1)
    if at < len(text):
        raise _syntax(path, text, at, "nothing after the object's closing '}'")


def _skip(text: str, at: int) -> int:
    return _WHITESPACE.match(text, at).end()


def _scalar(path: Path, text: str, at: int, expected: str):
    """The string, number or literal that starts at ``at``, and where it ends."""
    if text[at:at + 1] in _CONTAINERS:
        raise FormatError(f"{_where(path, text, at)}: expected {expected}, found "
                          f"{_CONTAINERS[text[at]]} (a .predict file is one flat object "
                          f"{{model_id: number}})")
    try:
        return _SCALARS.raw_decode(text, at)
    except json.JSONDecodeError as error:
        raise FormatError(f"{path}: line {error.lineno} column {error.colno}: expected "
                          f"{expected}: {error.msg.removesuffix(' at')}") from None


def _syntax(path: Path, text: str, at: int, expected: str) -> FormatError:
    found = repr(text[at]) if at < len(text) else "the end of the file"
    return FormatError(f"{_where(path, text, at)}: expected {expected}, found {found}")


def _number(path: Path, text: str, at: int, model: str, value, literal: str) -> float:
    """A member's value as a finite float64, or FormatError naming its line and model."""
    if _is_number(value) and math.isfinite(value):
        return float(value)
    where = f"{path}: line {_line(text, at)}: model {model}"    # counted on error only
    if isinstance(value, _NonFinite) or _is_number(value):
        beyond = "" if isinstance(value, _NonFinite) else ", beyond the range of a float64"
        raise FormatError(f"{where}: expected a finite number, found {_excerpt(literal)}{beyond}")
    raise FormatError(f"{where}: expected a number, found {type(value).__name__} {value!r:.60}")


def _excerpt(literal: str, shown: int = 40) -> str:
    if len(literal) <= shown:
        return literal
    return f"{literal[:shown // 2]}...{literal[-8:]} ({len(literal)} characters)"


def _line(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


def _where(path: Path, text: str, at: int) -> str:
    line = _line(text, at)
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    return f"{path}: line {line} column {column}"


def _some(names: list[str], shown: int = 5) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def check_measures(array, ids: Sequence[str], what: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """One float per network of ``ids``, in their order: the ingestion's check of what the
    code returns and the scorer's of an uploaded ``.npy``, so both programs refuse the same
    arrays (FormatError naming ``what``). NaN marks a network not measured (the scorer
    penalises the task then; the second value says how many); an infinite value is refused,
    as the ``.predict`` reader refuses it, since no ranking can use it."""
    try:
        values = np.asarray(array, dtype=np.float64).ravel()
    except (TypeError, ValueError) as error:
        raise FormatError(f"{what}: not numbers ({error})") from None
    if values.shape != (len(ids),):
        raise FormatError(f"{what}: expected {len(ids)} values (one per network), "
                          f"found {values.size}")
    if np.isinf(values).any():
        raise FormatError(f"{what}: network {ids[int(np.argmax(np.isinf(values)))]} got an "
                          "infinite measure")
    missing = int(np.isnan(values).sum())
    return values, ((f"{missing} of {len(ids)} networks have no measure",) if missing else ())


def write_predict(path: PathLike, ids: Sequence[str], values) -> None:
    """Write a ``.predict`` file as PGDL's ingestion did: ``{"model_<id>": value}``, keys
    sorted, indent 4. ``values[k]`` is the measure of ``ids[k]``: a finite number, or
    ``EXCEEDED`` for a model not measured in time (ValueError for anything else)."""
    if len(ids) != len(values):
        raise ValueError(f"{len(ids)} ids but {len(values)} values")
    content = {}
    for model, value in zip(ids, values):
        folder = model_folder(model)
        if folder in content:
            raise ValueError(f"model {folder} is listed twice")
        if isinstance(value, str) and value == EXCEEDED:
            content[folder] = EXCEEDED
            continue
        if isinstance(value, (bool, np.bool_)):
            raise ValueError(f"model {folder}: expected a number, found {value!r}")
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"model {folder}: expected a finite number or {EXCEEDED!r}, "
                             f"found {value!r}")
        content[folder] = number
    Path(path).write_text(json.dumps(content, sort_keys=True, indent=4) + "\n", encoding="utf-8")

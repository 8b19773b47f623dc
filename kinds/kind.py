"""A competition kind's whole interface, as frozen records: the builder's (``Kind``) and the
programs' (``ScoringRuntime``, ``IngestionRuntime``, ``Participant``).

Each record is made from its module's names (``kinds/<name>/kind.py`` for ``Kind``, the
kind's ``runtime/`` modules for the others): a module defines each field it provides under the
field's own name, and names nothing it leaves to the default. The record is checked when it is
made (so when the kind is loaded): a required hook left out, or a value of the wrong type,
raises ``KindDefinitionError`` naming the kind and every such hook. The optional hooks'
defaults are here and nowhere else, so the core reads every field without asking whether the
kind has it. ``KINDS`` maps each registered name (``kinds/__init__.py``) to its record, loading
a kind's definition only when it is first asked for; ``kind(name)`` is the look-up.

Shipped in both programs (``bundle.programs.copy_shipped_code``), so standard library only, and
importing it imports no kind: a kind's build-time code is loaded only when the builder asks for
its ``Kind``. The builder's fields:

Constants (their names as the kinds' modules spell them):

- ``DEFAULT_SPEC``, ``EMBEDDED_ROOT`` (the default ``data_root``), ``TEMPLATES`` (its
  ``kind_tasks``, ``kind_evaluation``, ``kind_data`` and ``kind_submission`` page parts),
  ``KIT`` (its guide ``README.md.j2`` and ``baselines/``), ``BASELINE_RESULTS``,
  ``DEFAULT_WEIGHTS``, ``AGGREGATE_DESCRIPTION``, ``SCORING_DESCRIPTION`` (its scoring
  program's metadata description), ``EXAMPLE_BASELINE`` (the file of ``KIT/baselines/`` that
  the guide's commands run);
- optional: ``ZEROED_PUBLIC_ARRAYS`` (placeholders the leakage check proves all zeros),
  ``RANKS_BY_AGGREGATE`` (rank by the weighted loss, not the average rank over tasks),
  ``ENTRY`` (the module and function a code submission defines), ``EPOCH_UNIT`` (what an
  epoch is, for a budget in epochs; the kind's runtime ``ingestion`` then provides
  ``epoch_seconds(task, data)``: ``times_epochs``) and ``PROPORTION_METRICS`` (metrics that
  are the share of a task's ``test_rows`` meeting a condition row by row, so that the
  methodology check can estimate their standard error, ``bundle/methodology.py``).

Hooks:

- tasks: ``task_type(declaration)``; ``prediction_stem(task)``; optional ``has_std(task)``
  (default: no task has one) and ``std_description(task, metric)``, required with
  ``has_std`` (the leaderboard's sd columns: a kind whose references have replicates);
- program configs: ``scoring_settings(task)`` and ``ingestion_contract(task)``;
- data: ``input_file(task)``, ``stage_inputs``, ``stage_reference``, ``stage_public`` and
  ``has_public_references``; optional ``task_problems(task)`` (its files),
  ``unconverged_reference_problems(task)`` (references whose runs did not converge: refused
  unless the spec accepts them, ``bundle/spec.py``), ``test_rows(declaration)`` (for a
  public part of the test rows, and the standard error of a proportion) and
  ``data_source(declaration)`` (what the task's data are drawn from, in words that are equal
  for two tasks drawn alike; None where the declaration does not say: the methodology check
  compares them);
- pages: ``page_context(plan, phase, baseline_results)``: what its page parts show; optional
  ``public_training(task)``: the task's public training data as a ``PublicTraining`` record
  (default None: the data page shows no figures of it), from which the core's
  ``bundle/data_examples.py`` writes the data page's shapes, counts and example images;
- starting kit: ``sample_results(plan, destination)`` and
  ``sample_code_submission(destination)``; optional ``stage_kit(plan, destination)`` (default:
  ``KIT/baselines/`` as it is; what a baseline imports must be there, since an organizer's
  local run goes through the built kit too) and ``stand_in_task(task, folder)`` (the public
  stand-in of a hidden task). Its guide is ``KIT/README.md.j2``, rendered from the pages'
  context of the kit's phase (``bundle.render.guide_contexts``), so that the guide and the
  pages say the same;
- optional ``reference_cli(argv)``: ``python -m reference_data --kind <name> ...``.

Read from the kind's runtime (what the programs see): ``task_types``, ``times_epochs`` and
``scores_public_rows``.

The programs' side: ``scoring_runtime(name)``, ``ingestion_runtime(name)`` (with its
``participant``) are the records of the kind's ``runtime/scoring.py``, ``runtime/ingestion.py``
and ``runtime/participant.py``, made from each module's names, with the same checks and the
optional hooks' defaults here too:

- scoring: ``ScoringRuntime``'s fields, each described once, where the core uses them, in
  ``runtime/scoring.py``'s docstring; but the public-rows rule's flag, ``SCORES_PUBLIC_ROWS``
  (default False: no task is scored on a part of its rows), which needs ``first_rows`` and
  ``first_submission_rows``;
- ingestion: ``output_bytes(task)``, ``check_output(array, task, what)``; optional
  ``stage_inputs(task, input_dir, folder, child_uid=None)`` (default: the task's one inputs
  file, copied readable; every name beneath ``input_dir`` is opened with
  ``runtime/beneath.py``, never through a link; ``child_uid``: the separate user the child
  runs as, CodaLab's ``nobody``, or None where it runs as the ingestion's own user, root,
  which owns the input files: a kind may link an input file into ``folder`` only where the
  child can change neither its content nor its metadata), ``units(task)`` (default: none,
  the task runs whole), ``gate_problem(array, task)`` (default: none beyond the core's) and
  ``epoch_seconds(task, data)`` (default None: no budget in epochs);
- participant (the sandboxed child's side, staged alone next to ``child_main.py``, which reads
  it there): ``SIGNATURE`` and ``call(function, spec, begin, checkpoint)``.

A task is a folder ``<data_root>/<task>/`` holding ``<task>_task.json``, its declaration; what
else the folder holds is the kind's business.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from kinds import KINDS as PACKAGES
from kinds import package, runtime_module
from runtime.beneath import copy_beneath

DEFAULT_ENTRY = ("submission", "predict")
DEFAULT_EPOCH_UNIT = "one pass of the reference training"


class KindDefinitionError(TypeError):
    pass


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


# A required field's default: the record names every one left out at once, which a
# dataclass without defaults cannot (its TypeError stops at the signature, without the kind).
REQUIRED = _Required()


def _field(expected_type, default=REQUIRED):
    return dataclasses.field(default=default, metadata={"type": expected_type})


def _hook(default=REQUIRED):
    return _field(Callable, default)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PublicTraining:
    """A task's training data as participants download it, for the data page's figures and
    example images (``Kind.public_training``). Nothing else may be put here: the page is
    public, and the build's leakage check reads its images back.

    ``source``: the public file(s) the figures come from, as the page names them;
    ``input_shape``: one training example's shape; ``targets``: every training row's class
    (or grade) or, when ``classification`` is false, its value of y, a 1-d array;
    ``target``: what a target is called on the page ("class", "grade", "y"); ``images``: for
    image inputs, a function of row indices returning those training rows as an array
    (n, H, W) or (n, H, W, C), C 1 or 3 (None: the inputs are not images); ``also``: other
    per-row labels to count, by name (Retina's referable label beside its grade)."""
    source: str
    input_shape: tuple
    targets: object
    target: str = "class"
    classification: bool = True
    images: Callable | None = None
    also: Mapping = dataclasses.field(default_factory=dict)


def _no_problems(task) -> list[str]:
    return []


def _rows_unknown(declaration: dict) -> None:
    return None


def _source_unknown(declaration: dict) -> None:
    return None


def _no_std(task) -> bool:
    return False


def _no_units(task) -> tuple[tuple[str, ...], float]:
    return (), 0.0


def _no_gate_problem(array, task) -> None:
    return None


def _no_cap(task, reference) -> None:
    return None


def _no_details() -> dict:
    return {}


def copy_inputs_file(task, input_dir: Path, folder: Path, child_uid: int | None = None) -> Path:
    """The default ``stage_inputs``: the task's one inputs file, copied for the sandboxed
    child to read (it can never reach input_dir itself), never through a link
    (``runtime/beneath.py``)."""
    data = folder / Path(task.inputs).name
    copy_beneath(input_dir, task.inputs, data)
    return data


def copy_baselines(kit: Path, plan, destination: Path) -> None:
    """The default ``stage_kit``: the kit's baselines as they are."""
    shutil.copytree(kit / "baselines", destination / "baselines",
                    ignore=shutil.ignore_patterns("__pycache__"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Kind:
    name: str = _field(str)
    # constants
    DEFAULT_SPEC: Path = _field(Path)
    EMBEDDED_ROOT: Path = _field(Path)
    TEMPLATES: Path = _field(Path)
    KIT: Path = _field(Path)
    BASELINE_RESULTS: Path = _field(Path)
    DEFAULT_WEIGHTS: Mapping = _field(Mapping)
    AGGREGATE_DESCRIPTION: str = _field(str)
    SCORING_DESCRIPTION: str = _field(str)
    EXAMPLE_BASELINE: str = _field(str)
    ZEROED_PUBLIC_ARRAYS: tuple = _field(tuple, ())
    RANKS_BY_AGGREGATE: bool = _field(bool, False)
    ENTRY: tuple = _field(tuple, DEFAULT_ENTRY)
    EPOCH_UNIT: str = _field(str, DEFAULT_EPOCH_UNIT)
    PROPORTION_METRICS: tuple = _field(tuple, ())
    # tasks
    task_type: Callable = _hook()
    prediction_stem: Callable = _hook()
    has_std: Callable = _hook(_no_std)
    std_description: Callable | None = _hook(None)    # required with has_std
    # program configs
    scoring_settings: Callable = _hook()
    ingestion_contract: Callable = _hook()
    # data
    input_file: Callable = _hook()
    stage_inputs: Callable = _hook()
    stage_reference: Callable = _hook()
    stage_public: Callable = _hook()
    has_public_references: Callable = _hook()
    task_problems: Callable = _hook(_no_problems)
    unconverged_reference_problems: Callable = _hook(_no_problems)
    test_rows: Callable = _hook(_rows_unknown)
    data_source: Callable = _hook(_source_unknown)
    # pages
    page_context: Callable = _hook()
    public_training: Callable | None = _hook(None)    # None: no figures of the training data
    # starting kit
    sample_results: Callable = _hook()
    sample_code_submission: Callable = _hook()
    stage_kit: Callable | None = _hook(None)          # None: copy_baselines from KIT
    stand_in_task: Callable | None = _hook(None)      # None: no stand-in of its own
    # organizers' tools
    reference_cli: Callable | None = _hook(None)      # None: no references of its own

    def __post_init__(self):
        _check(self, "kind.py")
        if self.has_std is not _no_std and self.std_description is None:
            raise KindDefinitionError(f"kind {self.name!r} (kinds/{self.name}/kind.py) gives "
                                      "has_std but no std_description: the sd columns it "
                                      "makes need a description")
        if self.stage_kit is None:
            object.__setattr__(self, "stage_kit", functools.partial(copy_baselines, self.KIT))

    @property
    def entry_file(self) -> str:
        return f"{self.ENTRY[0]}.py"

    @property
    def task_types(self) -> Mapping:
        """The kind's task types (``runtime.scoring.TaskType``), from its runtime."""
        return scoring_runtime(self.name).TASK_TYPES

    @property
    def times_epochs(self) -> bool:
        """Whether its ingestion times an epoch of its reference training (a budget in epochs)."""
        return ingestion_runtime(self.name).epoch_seconds is not None

    @property
    def scores_public_rows(self) -> bool:
        """Whether its scorer scores a prefix of a task's test rows (``public_rows``)."""
        return scoring_runtime(self.name).SCORES_PUBLIC_ROWS


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScoringRuntime:
    """The kind's ``runtime/scoring.py`` as the scoring program reads it."""
    name: str = _field(str)
    TASK_TYPES: Mapping = _field(Mapping)
    parse_settings: Callable = _hook()
    read_reference: Callable = _hook()
    read_submission: Callable = _hook()
    evaluate: Callable = _hook()
    cap: Callable = _hook(_no_cap)
    penalty_details: Callable = _hook(_no_details)
    submission_files: Callable = _hook()
    REPORT_INTRO: str = _field(str)
    STANDARD_ERROR: str = _field(str)
    task_summary: Callable = _hook()
    report_section: Callable = _hook()
    SCORES_PUBLIC_ROWS: bool = _field(bool, False)
    first_rows: Callable | None = _hook(None)
    first_submission_rows: Callable | None = _hook(None)

    def __post_init__(self):
        _check(self, "runtime/scoring.py")
        cut = [name for name in ("first_rows", "first_submission_rows")
               if getattr(self, name) is None]
        if self.SCORES_PUBLIC_ROWS and cut:
            raise KindDefinitionError(f"kind {self.name!r} (kinds/{self.name}/runtime/"
                                      f"scoring.py): SCORES_PUBLIC_ROWS needs {', '.join(cut)}")

    @staticmethod
    def has_std(settings) -> bool:
        """Whether a task's settings (what ``parse_settings`` made) give each metric an sd:
        only a kind whose references have replicates says so, by a true ``has_std``."""
        return bool(getattr(settings, "has_std", False))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Participant:
    """The kind's ``runtime/participant.py``: ``source`` is the file the ingestion stages for
    the child, which imports it there and reads ``SIGNATURE`` and ``call`` itself.
    ``HELPER_FILES`` names other files of the kind's ``runtime/`` staged beside it (the
    module imports them relatively, ``from . import layers``)."""
    name: str = _field(str)
    SIGNATURE: str = _field(str)
    call: Callable = _hook()
    source: Path = _field(Path)
    HELPER_FILES: tuple = _field(tuple, ())

    def __post_init__(self):
        _check(self, "runtime/participant.py")
        where = f"kind {self.name!r} (kinds/{self.name}/runtime/participant.py)"
        for helper in self.HELPER_FILES:
            if not isinstance(helper, str) or "/" in helper or not helper.endswith(".py") \
                    or not (self.source.parent / helper).is_file():
                raise KindDefinitionError(f"{where}: HELPER_FILES entry {helper!r} is not a "
                                          "file name beside it")

    def staged_files(self) -> dict[str, Path]:
        """File name in the child's runtime package -> the kind's file."""
        return {"participant.py": self.source} | {
            helper: self.source.parent / helper for helper in self.HELPER_FILES}


@dataclasses.dataclass(frozen=True, kw_only=True)
class IngestionRuntime:
    """The kind's ``runtime/ingestion.py`` as the ingestion program reads it, with the
    participant's side it stages for each task's child."""
    name: str = _field(str)
    output_bytes: Callable = _hook()
    check_output: Callable = _hook()
    stage_inputs: Callable = _hook(copy_inputs_file)
    units: Callable = _hook(_no_units)
    gate_problem: Callable = _hook(_no_gate_problem)
    epoch_seconds: Callable | None = _hook(None)      # None: no reference training to time
    participant: Participant = _field(Participant)

    def __post_init__(self):
        _check(self, "runtime/ingestion.py")


def _check(record, source: str) -> None:
    """Every required field present and every value of its type, or one error naming the
    kind, its file and each field at fault."""
    where = f"kind {record.name!r} (kinds/{record.name}/{source})"
    fields = dataclasses.fields(record)
    missing = [f.name for f in fields if getattr(record, f.name) is REQUIRED]
    if missing:
        raise KindDefinitionError(f"{where} lacks required hook(s): {', '.join(missing)}")
    wrong = [problem for problem in (_type_problem(f, getattr(record, f.name)) for f in fields)
             if problem]
    if wrong:
        raise KindDefinitionError(f"{where}: {'; '.join(wrong)}")


def _module_record(record_type, name: str, module, **made_here):
    """The record of one module (a runtime module's name, or the module itself): each field
    the module defines, the defaults for the optional ones it leaves out; a required one left
    out fails here, named."""
    if isinstance(module, str):
        module = runtime_module(name, module)
    provided = {f.name: getattr(module, f.name) for f in dataclasses.fields(record_type)
                if f.name != "name" and f.name not in made_here and hasattr(module, f.name)}
    return record_type(name=name, **provided, **made_here)


@functools.cache
def scoring_runtime(name: str) -> ScoringRuntime:
    """The record of a kind's runtime scoring module (``UnknownKind``, ``ImportError`` or
    ``KindDefinitionError`` when there is none to use)."""
    return _module_record(ScoringRuntime, name, "scoring")


@functools.cache
def ingestion_runtime(name: str) -> IngestionRuntime:
    """The record of a kind's runtime ingestion module, with its participant's side."""
    participant = runtime_module(name, "participant")
    return _module_record(IngestionRuntime, name, "ingestion", participant=_module_record(
        Participant, name, "participant", source=Path(participant.__file__)))


def _type_problem(field: dataclasses.Field, value) -> str | None:
    name, expected = field.name, field.metadata["type"]
    if value is None and field.default is None:       # an optional hook whose absence says so
        return None
    if expected is Callable:
        return None if callable(value) else f"{name} must be callable, found {value!r}"
    if expected is tuple and isinstance(value, tuple) and name == "ENTRY" \
            and not (len(value) == 2 and all(isinstance(part, str) for part in value)):
        return f"ENTRY must be (module, function), found {value!r}"
    if isinstance(value, expected):
        return None
    return f"{name} must be {expected.__name__}, found {type(value).__name__} {value!r}"


def load(name: str) -> Kind:
    """The record of a registered kind, made from its ``kind.py``'s names: every field of
    ``Kind`` the module defines under the field's own name, the defaults for the optional
    ones it leaves out (a required one left out fails here, named)."""
    return _module_record(Kind, name, importlib.import_module(f"{package(name)}.kind"))


class _Registry(Mapping):
    """Registered name -> record, each loaded on first use (importing this module imports no
    kind)."""

    def __getitem__(self, name: str) -> Kind:
        if name not in PACKAGES:
            raise KeyError(name)
        return _loaded(name)

    def __contains__(self, name) -> bool:
        return name in PACKAGES

    def __iter__(self) -> Iterator[str]:
        return iter(PACKAGES)

    def __len__(self) -> int:
        return len(PACKAGES)


@functools.cache
def _loaded(name: str) -> Kind:
    return load(name)


KINDS = _Registry()


def kind(name: str) -> Kind:
    """The record of the kind a spec or plan names; ``kinds.UnknownKind`` for any other."""
    package(name)               # raises UnknownKind, listing the known ones
    return KINDS[name]

"""The ingestion configuration the builder writes into the ingestion program.

Tasks (their input files, shapes and budgets) and the sandbox limits come from the
organizer spec through the builder, so no budget is typed twice. ``total_seconds`` is
what the phase's execution_time_limit must cover; the builder checks it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from runtime import rules
from runtime.formats.json_files import config_field, load_config_file
from runtime.worker_data import WorkerFolder, parse_worker_folder

CONFIG_NAME = "ingestion_config.json"
CONFIG_FORMAT = "ingestion-config/2"
# Per task on top of its budget and start-up allowance: staging the data, validation, writing,
# and the SIGTERM grace period (counted separately below).
OVERHEAD_SECONDS_PER_TASK = 5.0
# Each task's allowance for its start-up, apart from its budget: starting Python and the
# runtime, importing the participant's module, loading the task's data. A sub-second budget
# (budgets in epochs come out at 0.2-1.5 s) would otherwise be spent before their code runs,
# by more or less as the machine is more or less loaded. 30 s covers importing PyTorch or
# JAX from a cold disk on a busy worker; configs written before the allowance existed get it.
DEFAULT_STARTUP_SECONDS = 30.0
# How ``memory_bytes`` is enforced. RLIMIT_AS counts every reservation, and CUDA, JAX and
# PyTorch reserve far more address space than they touch, so GPU code cannot even start
# under it; the resident rule measures what the task's processes really hold in RAM instead.
ADDRESS_SPACE, RESIDENT = "address_space", "resident"
MEMORY_RULES = (ADDRESS_SPACE, RESIDENT)
RESIDENT_SAMPLE_SECONDS = 0.1
MEMORY_RULE_TEXT = {
    ADDRESS_SPACE: "address space, per process: counts what a process reserves, not only what "
                   "it uses, so CUDA, JAX or PyTorch, which reserve far more than they use, "
                   "cannot start under it",
    RESIDENT: "resident memory, summed over all your processes: host RAM actually used "
              "(anonymous and shared-memory pages; a page shared by several processes counts "
              f"in each), sampled every {RESIDENT_SAMPLE_SECONDS * 1000:.0f} ms, so a brief "
              "spike between samples is not caught; GPU memory is not limited by the ingestion "
              "(the device's own memory is the bound). Use the GPU from the process that runs "
              "your function: a process it starts cannot initialise CUDA (the sandbox lets a "
              "process name only its own threads, which CUDA does as it starts)",
}


# Files, folders and links a task may have in its working folder (and scratch folders) at once:
# each costs the disk walk and the removal after the task time, and empty files cost an inode
# but no disk space. Configs written before the limit existed get this.
DEFAULT_MAX_ENTRIES = 100_000


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Limits:
    memory_bytes: int            # RLIMIT_AS of the child, or its processes' resident sum
    max_file_bytes: int          # RLIMIT_FSIZE: one file
    disk_bytes: int              # all files in the task's working directory
    open_files: int              # RLIMIT_NOFILE
    processes: int               # RLIMIT_NPROC, threads included (only for a dedicated user)
    grace_seconds: float         # between SIGTERM and SIGKILL
    output_bytes: int            # stdout/stderr kept per stream: head + tail
    cores: int | None            # thread variables for the child; None: the machine's
    memory_rule: str = ADDRESS_SPACE     # one of MEMORY_RULES: how memory_bytes is enforced
    max_entries: int = DEFAULT_MAX_ENTRIES   # files and folders the task may create
    startup_seconds: float = DEFAULT_STARTUP_SECONDS   # per task, before its budget's clock


@dataclass(frozen=True)
class TaskSpec:
    name: str
    task_type: str               # one of the kind's task types
    inputs: str                  # the task's file in $input
    prediction_stem: str         # written as <stem>.npy into $output
    budget_seconds: float        # a rule's converted budget (runtime/rules/) replaces it
    contract: dict               # the kind's own: what its participant code and checks read
    # The competition rules' fields of this task, under their own names (runtime/rules/)
    rules: dict = field(default_factory=dict)


@dataclass(frozen=True)
class IngestionConfig:
    phase: str
    kind: str                    # the competition kind whose contract the tasks follow
    tasks: tuple[TaskSpec, ...]
    limits: Limits
    entry_module: str = "submission"
    entry_function: str = "predict"
    # The competition rules' fields of this phase, under their own names (runtime/rules/),
    # the tasks of their runs included
    rules: dict = field(default_factory=dict)
    # Where the input data is on the worker's data mount, when not in $input
    worker_input: WorkerFolder | None = None

    def total_seconds(self) -> float:
        """Worst case wall time of a whole ingestion run."""
        tasks = [task for run in rules.runs(self, None) for task in run.tasks]
        return worst_case_seconds([t.budget_seconds for t in tasks],
                                  self.limits.grace_seconds, self.limits.startup_seconds)


def gib_text(size: int) -> str:
    """One decimal, or two where one would misstate the limit (0.75 GiB is not 0.8)."""
    gib = size / 2**30
    return f"{gib:.1f} GiB" if abs(gib * 10 - round(gib * 10)) < 1e-9 else f"{gib:.2f} GiB"


def worst_case_seconds(budgets, grace_seconds: float, startup_seconds: float) -> float:
    """The longest an ingestion run of tasks with these budgets can take: the one formula the
    builder's checks and the spec's validation use too. A task run in units has one start-up
    allowance: a fresh process after a failed unit starts up within the task's budget."""
    return sum(budget + startup_seconds + grace_seconds + OVERHEAD_SECONDS_PER_TASK
               for budget in budgets)


def _field(raw: dict, key: str, kind, where: str):
    return config_field(raw, key, kind, where, ConfigError)


def parse_config(raw: dict, source: str = CONFIG_NAME) -> IngestionConfig:
    if raw.get("format") != CONFIG_FORMAT:
        raise ConfigError(f"{source}: format must be {CONFIG_FORMAT!r}, found {raw.get('format')!r}")
    limits_raw = _field(raw, "limits", dict, source)
    number = (int, float)
    limits = Limits(**{key: _field(limits_raw, key, int, f"{source}: limits") for key in
                       ("memory_bytes", "max_file_bytes", "disk_bytes", "open_files",
                        "processes", "output_bytes")},
                    grace_seconds=float(_field(limits_raw, "grace_seconds", number,
                                               f"{source}: limits")),
                    cores=limits_raw.get("cores"),
                    memory_rule=_memory_rule(limits_raw, f"{source}: limits"),
                    max_entries=_max_entries(limits_raw, f"{source}: limits"),
                    startup_seconds=_startup_seconds(limits_raw, f"{source}: limits"))
    tasks = _tasks(_field(raw, "tasks", list, source), f"{source}: tasks")
    if not tasks:
        raise ConfigError(f"{source}: no tasks")
    try:
        rule_fields = {**rules.config_fields(raw, source),
                       **rules.config_tasks(raw, source, _tasks)}
    except rules.RuleError as error:
        raise ConfigError(str(error)) from None
    return IngestionConfig(_field(raw, "phase", str, source), _field(raw, "kind", str, source),
                           tasks, limits,
                           raw.get("entry_module", "submission"), raw.get("entry_function", "predict"),
                           rule_fields, parse_worker_folder(raw.get("worker_input"),
                                                            f"{source}: worker_input", ConfigError))


def _memory_rule(limits_raw: dict, where: str) -> str:
    """Configs written before the rule existed have no key: they meant RLIMIT_AS."""
    rule = limits_raw.get("memory_rule", ADDRESS_SPACE)
    if rule not in MEMORY_RULES:
        raise ConfigError(f"{where}.memory_rule: expected one of {', '.join(MEMORY_RULES)}, "
                          f"found {rule!r}")
    return rule


def _max_entries(limits_raw: dict, where: str) -> int:
    value = limits_raw.get("max_entries", DEFAULT_MAX_ENTRIES)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{where}.max_entries: expected a positive integer, found {value!r}")
    return value


def _startup_seconds(limits_raw: dict, where: str) -> float:
    value = limits_raw.get("startup_seconds", DEFAULT_STARTUP_SECONDS)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise ConfigError(f"{where}.startup_seconds: expected a positive number of seconds, "
                          f"found {value!r}")
    return float(value)


def _tasks(raw: list, where: str) -> tuple[TaskSpec, ...]:
    tasks = []
    for index, task in enumerate(raw):
        at = f"{where}[{index}]"
        budget = float(_field(task, "budget_seconds", (int, float), at))
        if budget <= 0:
            raise ConfigError(f"{at}.budget_seconds: must be positive, found {budget}")
        try:
            fields = rules.task_fields(task, at)
        except rules.RuleError as error:
            raise ConfigError(str(error)) from None
        tasks.append(TaskSpec(_field(task, "name", str, at), _field(task, "task_type", str, at),
                              _field(task, "inputs", str, at),
                              _field(task, "prediction_stem", str, at),
                              budget, _field(task, "contract", dict, at), rules=fields))
    return tuple(tasks)


def load_config(path: Path) -> IngestionConfig:
    return load_config_file(path, parse_config,
                            "the builder writes it into the ingestion program", ConfigError)

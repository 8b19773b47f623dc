"""The organizer spec's keys, one record each: its schema, default, meaning and example.

Everything else is derived from ``KEYS``: the JSON schema ``load_spec`` validates with
(``SCHEMA``), the defaults it applies (``with_defaults``) and the reference page
(``bundle/spec_reference.py``), so adding a key is adding one record.
"""
from __future__ import annotations

import copy

from ingestion_program.ingest.config import (ADDRESS_SPACE, MEMORY_RULES, RESIDENT,
                                             RESIDENT_SAMPLE_SECONDS)
from ingestion_program.ingest.supervisor import MIN_BUDGET_SECONDS, POLL_SECONDS
from kinds.kind import KINDS

from . import competition_rules
from .datasets import SAFE_BUNDLE_BYTES, SEPARABLE, UUID_PATTERN
from .methodology import (GAP_STANDARD_ERRORS, IGNORE_KEY, MAX_FINAL_SUBMISSIONS, SHIFT_KEY,
                          UNSTATED_SHIFT, WARNING_IDS)
from .programs import DEFAULT_LIMITS
from .spec_key import MAPPING, NAMED, REQUIRED, TEXT, Key, number

DATE_PATTERN = r"^\d{4}-\d{2}-\d{2}( \d{2}:\d{2}(:\d{2})?)?$"
LEAK_OVERRIDE_KEY = "public_reference_tasks_allowed_in_code_phases"
# A task's key that accepts references the kind's own check found not converged.
UNCONVERGED_OVERRIDE_KEY = "accept_unconverged_references"
# A statement, not a label: a few words would not tell a reader why.
STATEMENT = {"type": "string", "minLength": 20}


def is_gpu_image(image: str) -> bool:
    """A GPU image by its tag (``codalab/codalab-legacy:gpu310``); a colon before the last
    slash is a registry's port, not a tag."""
    name = image.rsplit("/", 1)[-1]
    return ":" in name and "gpu" in name.split(":", 1)[1].lower()


def default_memory_rule(image: str) -> str:
    """RLIMIT_AS stops a CUDA context from being created, so GPU images get the resident rule."""
    return RESIDENT if is_gpu_image(image) else ADDRESS_SPACE


def _kind_weights() -> str:
    return "; ".join(f"`{name}`: " + ", ".join(f"{metric} {weight:g}" for metric, weight
                                               in KINDS[name].DEFAULT_WEIGHTS.items())
                     for name in sorted(KINDS))


LABEL = {"type": "string", "minLength": 1, "maxLength": 50}
DATE = {"type": "string", "pattern": DATE_PATTERN}
UUID = {"type": "string", "pattern": UUID_PATTERN.pattern}
TASK_LIST = {"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": True}
EXAMPLE_UUID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
EXAMPLE_SHA256 = "5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"

KEYS: dict[str, Key] = {
    "kind": Key({"enum": sorted(KINDS)},
                "The competition kind: what the competition is about (its tasks, data, "
                "participant contract, metrics and page text). A package under `kinds/`, "
                "registered in `kinds/__init__.py`."),
    "layout": Key({"enum": ["one", "per_phase"]},
                  "`one`: one competition holds every phase of the spec (one leaderboard for "
                  "all phases; one competition per track). `per_phase`: one competition per phase "
                  "(and track), as the 2021 competition ran.",
                  default="one", example="per_phase"),
    "slug": Key({"type": "string", "pattern": "^[a-z0-9][a-z0-9-]{1,60}$"},
                "Short name of the competition: lowercase letters, digits and hyphens. It names "
                "the bundle files in `dist/`."),
    "title": Key({"type": "string", "minLength": 1, "maxLength": 100},
                 "The competition's title, shown on the site and at the top of the overview page."),
    "description": Key({"type": "string", "maxLength": 1000},
                       "One or two sentences shown in the site's list of competitions.",
                       default=""),
    "organizers": Key(
        {"type": "array", "minItems": 1},
        "Who runs the competition, listed on the overview page; on Codabench the contacts "
        "that are e-mail addresses become the competition's contacts.",
        default=[], shown="none listed", keys={
            "name": Key(TEXT, "The organizer's name (a person, team or institution)."),
            "contact": Key(TEXT, "How to reach the organizer: an e-mail address or a web "
                                 "address.", default=None, shown="none")}),
    "logo": Key({"type": "string", "pattern": r"^[^/].*\.(png|jpg|jpeg)$"},
                "A PNG or JPEG image file, as a path relative to the spec's folder; "
                "it becomes the competition's logo.", default=None,
                shown="none (CodaLab: no logo; Codabench requires one: the build stops "
                      "without it)"),
    "docker_image": Key({"type": "string", "pattern": "^[0-9A-Za-z/.:-]+$"},
                        "The Docker image in which the platform's worker runs the ingestion and "
                        "scoring programs (and so the participants' code)."),
    # "per_task" is known only to be refused with its reason (spec.PER_TASK_REFUSED).
    "codabench_tasks": Key(
        {"enum": ["per_phase", "per_task"]},
        "How a phase's tasks become Codabench tasks. `per_phase`: one Codabench "
        "task runs all of them in one run, and the phase's "
        "execution_time_limit covers the sum of their budgets. `per_task` "
        "(one Codabench task, so one child submission, per task) is refused: "
        "Codabench's leaderboard rule keeps one child of each submission "
        "(Force_Last) or every earlier submission too (Force_Latest_Multiple), "
        "so no ranking holds every task (docs/platform/codabench_v2.md §3.10). "
        "Where the budgets need more than the default queue's 600 s, name a "
        "queue of your own (`codabench_queue`).", default="per_phase", example="per_phase"),
    "upload_separately": Key(
        {"type": "array", "items": {"enum": list(SEPARABLE)}, "uniqueItems": True},
        "Data zips the build writes next to the bundle instead of into it, for you to upload on "
        "the site on their own, named in competition.yaml by the key the site gives each: any of "
        "`input_data`, `reference_data`, `public_data`, `starting_kit`. For data too large for a "
        "bundle (both sites read a bundle whole; see `max_bundle_mib`). The first build writes "
        "the zips, prints how to upload each and the `dataset_keys` entries to fill in, and "
        "exits with status 3 without writing the bundle; once the keys are in the spec, the "
        "bundle names them, and `--check` runs on the local copies.",
        default=[], shown="none: all data inside the bundle",
        example=["input_data", "reference_data"]),
    "dataset_keys": Key(
        MAPPING, "The keys the sites gave the zips of `upload_separately`, keyed by the "
                 "zip's name without `.zip` (the build prints these entries).",
        default={}, shown="none: every zip of `upload_separately` waits for its key",
        example={"bdl-2021-codabench.evaluation_reference_data": {"key": EXAMPLE_UUID,
                                                                  "sha256": EXAMPLE_SHA256}},
        keys={"<dataset>": Key(
            MAPPING, "One uploaded zip: its key and the sha256 of the zip uploaded under it. "
                     "A build whose zip no longer has that sha256 (the data changed since the "
                     "upload) is refused.",
            default=None, example={"key": EXAMPLE_UUID, "sha256": EXAMPLE_SHA256}, keys={
                "key": Key(UUID, "The dataset's key as the site shows it (a UUID).",
                           example=EXAMPLE_UUID),
                "sha256": Key({"type": "string", "pattern": "^[0-9a-f]{64}$"},
                              "The sha256 of the zip uploaded under the key, as the build "
                              "printed it.", example=EXAMPLE_SHA256)})}),
    "max_bundle_mib": Key(
        number(exclusive=0),
        "The largest bundle the build writes, in MiB: CodaLab reads a bundle "
        "whole into memory at upload (G24) and Codabench's unpacking stalled "
        "on 344 MB of reference data; a larger bundle is refused with the "
        "data zips that could go to `upload_separately`.",
        default=SAFE_BUNDLE_BYTES / 2**20, example=500),
    "codabench_queue": Key(
        UUID, "A Codabench queue of your own, by its vhost UUID (the queue's page "
              "shows it): Codabench runs the competition there, where a phase's "
              "execution_time_limit is not capped at the default queue's 600 s, and "
              "the build's checks use the phase's limit. CodaLab v1.5 takes no queue "
              "in competition.yaml: choose it in the competition's editor after "
              "upload (the build's summary says so).",
        default=None, shown="the default queue (limits capped at 600 s on Codabench)",
        example=EXAMPLE_UUID),
    "on_worker": Key(
        {"type": "array", "items": {"enum": ["reference_data", "input_data"]},
         "uniqueItems": True},
        "Codabench only: data the bundle leaves out, kept on the workers of your own queue "
        "(`codabench_queue`, required) instead: `reference_data` (every phase's hidden "
        "references), `input_data` (the code phases' input data, for data too large for the "
        "site). A worker mounts its `HOST_DIRECTORY/data` read-only at `/app/data` in every "
        "container it starts, a submission's own one included, so the references are sealed "
        "with a key that only the scoring program holds; input data, which participant code "
        "reads anyway, is kept as it is. The build writes them, with a `SHA256SUMS` file and "
        "the copy steps, to the folder `<bundle>.worker_data` next to the bundle: copy it into "
        "the data folder of every worker of the queue. The programs check each file against "
        "the build's checksums before they use it, and `--check` mounts the local copy. "
        "CodaLab workers have no such mount: `--platform codalab` refuses the key.",
        default=[], shown="none: all data in the bundle (or uploaded apart)",
        example=["reference_data"]),
    "end_date": Key({"oneOf": [DATE, {"type": "null"}]},
                    "When the competition closes, in UTC. Must come after the last phase's "
                    "start. `null` or left out: no end date.",
                    default=None, shown="no end date"),
    "data_root": Key({"type": ["string", "null"]},
                     "The folder of the organizer's task files, as a path relative to the spec's "
                     "folder (layout: [organizer_data.md](organizer_data.md)); `null` or left "
                     "out: the kind's embedded tasks. `--data-root` on the command line "
                     "overrides it.",
                     default=None, shown="the kind's embedded tasks"),   # load_spec resolves it
    "tasks": Key(NAMED, "Every task of the competition, keyed by its name; each name needs a "
                        "task declaration `<task>/<task>_task.json` in the data root.", keys={
        "<task>": Key(MAPPING, "One task: the name is lowercase (`[a-z][a-z0-9_]{0,30}`).", keys={
            "budget_seconds": Key(
                number(exclusive=0, maximum=86400),
                "The participant's training time for this task in a code phase, in seconds, "
                "from the call of the participant's function (its start-up before that has "
                "`sandbox.startup_seconds`); the sandbox stops the participant's code at the "
                f"budget (plus `sandbox.grace_seconds`). At least {MIN_BUDGET_SECONDS:g} s: the "
                f"ingestion reads its clock every {POLL_SECONDS:g} s. Where the task's budget is "
                "stated in other units (a key below), the most the converted budget may be."),
            UNCONVERGED_OVERRIDE_KEY: Key(
                {"type": "boolean"},
                "Build with this task's references although the kind's own check finds that "
                "the runs that made them did not converge (BDL: a failed convergence gate in "
                "`<task>_hmc_diagnostics.json`). Without it such references are refused, "
                "naming the task and the failed check; with it the overview page says that the "
                "task's references did not pass the convergence gate, and which check failed.",
                default=False, shown="false: references that failed the check are refused",
                example=True),
            SHIFT_KEY: Key(
                STATEMENT,
                "How this task's data differ, on purpose, from those of the tasks participants "
                "develop on (the phases before the final one, or the public tasks of its own "
                "phase): the statement that silences the methodology warning "
                f"`{UNSTATED_SHIFT}` for this task (at least 20 characters).",
                default=None, shown="none: the task is taken to be drawn like the public ones",
                example="test images corrupted at five severities, unlike the clean "
                        "development digits")})}),
    # load_spec lays the weights given over the kind's (kinds/<kind>/kind.py DEFAULT_WEIGHTS).
    "metric_weights": Key(
        MAPPING, "Weights of the kind's metrics in the leaderboard's weighted loss; only "
                 "the metrics given are changed.",
        default={}, shown=lambda: "the kind's weights: " + _kind_weights(), keys={
            "<metric>": Key(number(minimum=0), "The weight of one of the kind's metrics (0 "
                                                "leaves it out of the weighted loss).",
                            default=None,
                            shown=lambda: f"the kind's weight for the metric ({_kind_weights()})")}),
    "phases": Key(NAMED, "The competition's phases, in the order they run (each starts after "
                         "the one before); see `layout`.", keys={
        "<phase>": Key(MAPPING, "One phase, keyed by its name (lowercase, "
                                "`[a-z][a-z0-9_]{0,30}`).", keys={
            "label": Key(LABEL, "The phase's name as participants see it."),
            "description": Key({"type": "string", "maxLength": 1000},
                               "One sentence about the phase, shown on the site.", default=""),
            "start": Key(DATE, "When the phase opens, in UTC."),
            "submission": Key(
                {"enum": ["results", "code"]},
                "What participants upload: `results` (prediction files, scored as they are) or "
                "`code` (training code that the ingestion program runs in the sandbox on each "
                "task, under its budget)."),
            "tasks": Key(TASK_LIST, "The tasks this phase scores, names from `tasks`."),
            "execution_time_limit": Key(
                number(minimum=1, integer=True),
                "The platform's wall-clock limit for one submission, in seconds. In a code phase "
                "it must cover the worst case: the tasks' budgets, the start-up allowance, grace "
                "and staging time per task, and `scoring_margin_seconds` (the spec check says "
                "how much is needed)."),
            "max_submissions": Key(
                number(minimum=1, integer=True),
                "How many submissions a participant may make in this phase in total.",
                default=100),
            "max_submissions_per_day": Key(
                number(minimum=1, integer=True),
                "How many submissions a participant may make in this phase per day; at most "
                "`max_submissions`.",
                default=lambda spec, phase: min(5, phase["max_submissions"]))})}),
    "tracks": Key(MAPPING, "Tracks: other task sets for the code phases, each built as its own "
                           "competition (`--track <track>`) with its own leaderboard.",
                  default={}, shown="no tracks", keys={
        "<track>": Key(MAPPING, "One track, keyed by its name.", default=None, keys={
            "label": Key(LABEL, "The track's name as participants see it."),
            "tasks": Key(TASK_LIST, "The track's tasks; each must be a task of a code phase.")})}),
    "sandbox": Key(MAPPING, "Limits of the sandbox in which the participants' code runs in a "
                            "code phase.", default={}, shown="the defaults of its keys", keys={
        # The defaults are the ingestion limits the builder uses, in the spec's units.
        "memory_gib": Key(number(exclusive=0, maximum=1024),
                          "Memory the participant's code may use, in GiB, enforced as "
                          "`sandbox.memory_limit` says.",
                          default=DEFAULT_LIMITS["memory_bytes"] / 2**30),
        "max_file_mib": Key(number(exclusive=0),
                            "Largest file the participant's code may write, in MiB.",
                            default=DEFAULT_LIMITS["max_file_bytes"] / 2**20),
        "disk_mib": Key(number(exclusive=0),
                        "Disk space the participant's code may fill, in MiB.",
                        default=DEFAULT_LIMITS["disk_bytes"] / 2**20),
        "grace_seconds": Key(number(minimum=0, maximum=60),
                             "Seconds past a task's budget before the participant's code is "
                             "killed (its last checkpoint counts).",
                             default=DEFAULT_LIMITS["grace_seconds"]),
        "startup_seconds": Key(
            number(exclusive=0, maximum=600),
            "Seconds each task's process may take to start, apart from the task's budget: "
            "starting Python, importing the participant's module, loading the task's data; the "
            "budget's clock starts when the participant's function is called. A start-up past "
            "it fails the task. A task run in units (PGDL) has one: a fresh process after a "
            "failed unit starts up within the budget. Counted once per task in the time-limit "
            "checks.", default=DEFAULT_LIMITS["startup_seconds"], example=60),
        "memory_limit": Key(
            {"enum": list(MEMORY_RULES)},
            "How `sandbox.memory_gib` is enforced. `address_space`: RLIMIT_AS on each process, "
            "which counts what a process reserves as well as what it uses; CUDA, JAX and "
            "PyTorch reserve far more than they use, so GPU code cannot start under it. "
            "`resident`: the ingestion sums the resident memory (anonymous and shared-memory "
            "pages, host RAM actually used) of all the task's processes every "
            f"{RESIDENT_SAMPLE_SECONDS * 1000:.0f} ms and kills the task above the limit; a "
            "brief spike between two samples is not caught, and GPU memory is not limited (the "
            "device's own memory is the bound).",
            default=lambda spec, sandbox: default_memory_rule(spec["docker_image"]),
            shown="`resident` when `docker_image` is a GPU image (its tag contains `gpu`, as "
                  "`codalab/codalab-legacy:gpu310`), else `address_space`",
            example="resident")}),
    "scoring_margin_seconds": Key(
        number(minimum=0),
        "Seconds of a code phase's `execution_time_limit` kept for scoring after the "
        "ingestion's worst case; the spec check and the bundle checks require it.", default=60),
    LEAK_OVERRIDE_KEY: Key(
        TASK_LIST,
        "Tasks allowed in both a results phase (whose references the kind publishes in that "
        "phase's public data) and a code phase (where the same references are hidden). Without "
        "this, such a spec is refused: the public bundle would give away the code phase's "
        "hidden answers.", default=[], example=["iris"]),
    IGNORE_KEY: Key(
        {"type": "object", "propertyNames": {"enum": list(WARNING_IDS)}},
        "Methodology warnings (docs/building.md) that do not apply to this competition, each "
        "by its id with the reason; the build prints the reason instead of the warning. The "
        f"ids: `{WARNING_IDS[0]}` (the final phase allows more than {MAX_FINAL_SUBMISSIONS} "
        f"submissions), `{WARNING_IDS[1]}` (the two best baselines of a phase are under "
        f"{GAP_STANDARD_ERRORS:g} standard errors apart), `{WARNING_IDS[2]}` (less time before "
        f"the final phase than in it), `{WARNING_IDS[3]}` (a hidden task drawn unlike the public "
        "ones, without its `tasks.<task>.distribution_shift`).",
        default={}, shown="none: every warning is printed", keys={
            "<warning>": Key(STATEMENT, "Why the warning does not apply (at least 20 "
                                        "characters).", default=None)}),
    "pages": Key(MAPPING, "The text of the competition's pages that is the organizer's own.",
                 keys={"overview": Key(TEXT, "The overview page's introduction: what the "
                                             "competition is about."),
                       "terms": Key(TEXT, "The terms and conditions page.")}),
}


def _add_rule_keys(keys: dict[str, Key]) -> None:
    """The competition rules' own keys (their ``SPEC_KEYS``), each where its rule puts it."""
    for where, added in competition_rules.spec_keys():
        holder = keys
        for name in filter(None, where.split(".")):
            holder = holder[name].keys
        clash = sorted(set(added) & set(holder))
        if clash:
            raise ValueError(f"a competition rule's SPEC_KEYS at {where!r} redefine {clash}")
        holder.update(added)


_add_rule_keys(KEYS)


def entry_name(keys: dict[str, Key]) -> str | None:
    """The ``<name>`` standing for any name in a mapping of names; None in a fixed mapping."""
    return next((name for name in keys if name.startswith("<")), None)


def json_schema(key: Key) -> dict:
    """The JSON schema of ``key``'s value, its keys included (unknown keys are refused)."""
    if not key.keys:
        return key.schema
    entry = entry_name(key.keys)
    if entry:
        mapping = {"type": "object", "additionalProperties": json_schema(key.keys[entry])}
        mapping.update({"minProperties": 1} if key.keys[entry].default is REQUIRED else {})
    else:
        mapping = {"type": "object",
                   "properties": {name: json_schema(sub) for name, sub in key.keys.items()},
                   "required": [name for name, sub in key.keys.items() if sub.default is REQUIRED],
                   "additionalProperties": False}
    if key.schema.get("type") == "array":
        return {**key.schema, "items": mapping}
    return {**key.schema, **mapping}


SCHEMA = json_schema(Key(MAPPING, "The organizer spec.", keys=KEYS))


def with_defaults(spec: dict) -> dict:
    """The spec (as the schema accepted it) with the default of every key it leaves out,
    in the records' order; a list's items are left as they are."""
    return filled(spec, KEYS, spec)


def filled(given: dict, keys: dict[str, Key], spec: dict) -> dict:
    entry = entry_name(keys)
    if entry:
        return {name: _with_keys(value, keys[entry], spec) for name, value in given.items()}
    mapping = {}
    for name, key in keys.items():
        if name in given:
            mapping[name] = _with_keys(given[name], key, spec)
        elif key.default is not REQUIRED and key.default is not None:
            value = key.default(spec, mapping) if callable(key.default) \
                else copy.deepcopy(key.default)
            mapping[name] = _with_keys(value, key, spec)
    return mapping


def _with_keys(value, key: Key, spec: dict):
    return filled(value, key.keys, spec) if key.keys and isinstance(value, dict) else value

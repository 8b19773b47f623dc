"""The organizer spec's reference, generated from the schema so that it cannot drift.

``python -m bundle.spec_reference > docs/spec_reference.md`` writes it;
``python -m bundle.spec_reference --check`` exits 1 when the committed file differs.

Every key path of ``bundle.spec.SCHEMA`` (``phases.<phase>.execution_time_limit``) gets its type
and constraints (read from the schema), whether it is required (the schema), its default (read
back from ``load_spec`` on a spec without the optional keys, so the values are the code's), an
example (from the default spec, ``bundle.spec.DEFAULT_SPEC``) and its meaning (``DOCS``
below). The generator raises when the schema has a key without a meaning, or ``DOCS`` a meaning
for a key the schema no longer has.
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from ingestion_program.ingest.config import RESIDENT_SAMPLE_SECONDS
from kinds.kind import KINDS

from .spec import (DATE_PATTERN, DEFAULT_SPEC, MIN_BUDGET_SECONDS, POLL_SECONDS, SCHEMA,
                   load_spec)

REPO = Path(__file__).resolve().parent.parent
REFERENCE_FILE = REPO / "docs" / "spec_reference.md"
COMMAND = "python -m bundle.spec_reference > docs/spec_reference.md"

# The name a mapping's entries get in a key path: phases.<phase>.label.
PLACEHOLDERS = {"tasks": "<task>", "phases": "<phase>", "tracks": "<track>",
                "dataset_keys": "<dataset>",
                "metric_weights": "<metric>"}


class ReferenceDrift(RuntimeError):
    """The schema and the descriptions in DOCS disagree."""


@dataclass(frozen=True)
class Doc:
    meaning: str                # "" where the schema gives the key a "description" itself
    # For an optional key: what applies when it is left out (a text, or read from the spec
    # load_spec returns for a spec without the optional keys).
    default: object = None
    # Only where the default spec has no value at this path.
    example: object = None


def _weights_default(spec) -> str:
    return "the kind's weights: " + "; ".join(
        f"`{name}`: " + ", ".join(f"{metric} {weight:g}" for metric, weight
                                  in KINDS[name].DEFAULT_WEIGHTS.items())
        for name in sorted(KINDS))


def _metric_default(spec) -> str:
    return "the kind's weight for the metric (" + "; ".join(
        f"`{name}`: " + ", ".join(f"{metric} {weight:g}" for metric, weight
                                  in KINDS[name].DEFAULT_WEIGHTS.items())
        for name in sorted(KINDS)) + ")"


def _first_phase(spec):
    return spec.phases[0]


DOCS: dict[str, Doc] = {
    "kind": Doc("The competition kind: what the competition is about (its tasks, data, "
                "participant contract, metrics and page text). A package under `kinds/`, "
                "registered in `kinds/__init__.py`."),
    "layout": Doc("`one`: one competition holds every phase of the spec (one leaderboard for "
                  "all phases; one competition per track). `per_phase`: one competition per phase "
                  "(and track), as the 2021 competition ran.",
                  default=lambda spec: f"`{spec.layout}`", example="per_phase"),
    "slug": Doc("Short name of the competition: lowercase letters, digits and hyphens. It names "
                "the bundle files in `dist/`."),
    "title": Doc("The competition's title, shown on the site and at the top of the overview page."),
    "description": Doc("One or two sentences shown in the site's list of competitions.",
                       default="empty"),
    "organizers": Doc("Who runs the competition, listed on the overview page; on Codabench the "
                      "contacts that are e-mail addresses become the competition's contacts.",
                      default="none listed"),
    "organizers[].name": Doc("The organizer's name (a person, team or institution)."),
    "organizers[].contact": Doc("How to reach the organizer: an e-mail address or a web address.",
                                default="none"),
    "logo": Doc("A PNG or JPEG image file, as a path relative to the spec's folder; "
                "it becomes the competition's logo.",
                default="none (CodaLab: no logo; Codabench requires one: the build stops "
                        "without it)"),
    "docker_image": Doc("The Docker image in which the platform's worker runs the ingestion and "
                        "scoring programs (and so the participants' code)."),
    "codabench_queue": Doc("A Codabench queue of your own, by its vhost UUID (the queue's page "
                           "shows it): Codabench runs the competition there, where a phase's "
                           "execution_time_limit is not capped at the default queue's 600 s, and "
                           "the build's checks use the phase's limit. CodaLab v1.5 takes no queue "
                           "in competition.yaml: choose it in the competition's editor after "
                           "upload (the build's summary says so).",
                           default="the default queue (limits capped at 600 s on Codabench)",
                           example="0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"),
    "codabench_tasks": Doc("How a phase's tasks become Codabench tasks. `per_phase`: one Codabench "
                           "task runs all of them in one run, and the phase's "
                           "execution_time_limit covers the sum of their budgets. `per_task` "
                           "(one Codabench task, so one child submission, per task) is refused: "
                           "Codabench's leaderboard rule keeps one child of each submission "
                           "(Force_Last) or every earlier submission too (Force_Latest_Multiple), "
                           "so no ranking holds every task (docs/platform/codabench_v2.md §3.10). "
                           "Where the budgets need more than the default queue's 600 s, name a "
                           "queue of your own (`codabench_queue`).", default="per_phase",
                           example="per_phase"),
    "upload_separately": Doc(
        "Data zips the build writes next to the bundle instead of into it, for you to upload on "
        "the site on their own, named in competition.yaml by the key the site gives each: any of "
        "`input_data`, `reference_data`, `public_data`, `starting_kit`. For data too large for a "
        "bundle (both sites read a bundle whole; see `max_bundle_mib`). The first build writes "
        "the zips, prints how to upload each and the `dataset_keys` entries to fill in, and "
        "exits with status 3 without writing the bundle; once the keys are in the spec, the "
        "bundle names them, and `--check` runs on the local copies.",
        default="none: all data inside the bundle", example=["input_data", "reference_data"]),
    "dataset_keys": Doc("The keys the sites gave the zips of `upload_separately`, keyed by the "
                        "zip's name without `.zip` (the build prints these entries).",
                        default="none: every zip of `upload_separately` waits for its key",
                        example={"bdl-2021-codabench.evaluation_reference_data": {
                            "key": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
                            "sha256": "5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"}}),
    "dataset_keys.<dataset>": Doc("One uploaded zip: its key and the sha256 of the zip uploaded "
                                  "under it. A build whose zip no longer has that sha256 (the "
                                  "data changed since the upload) is refused.",
                                  example={"key": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
                                           "sha256": "5f70bf18a086007016e948b04aed3b82103a36be"
                                                     "a41755b6cddfaf10ace3c6ef"}),
    "dataset_keys.<dataset>.key": Doc("The dataset's key as the site shows it (a UUID).",
                                      example="0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"),
    "dataset_keys.<dataset>.sha256": Doc("The sha256 of the zip uploaded under the key, as the "
                                         "build printed it.",
                                         example="5f70bf18a086007016e948b04aed3b82103a36bea4175"
                                                 "5b6cddfaf10ace3c6ef"),
    "max_bundle_mib": Doc("The largest bundle the build writes, in MiB: CodaLab reads a bundle "
                          "whole into memory at upload (G24) and Codabench's unpacking stalled "
                          "on 344 MB of reference data; a larger bundle is refused with the "
                          "data zips that could go to `upload_separately`.",
                          default=lambda spec: spec.max_bundle_bytes / 2**20, example=500),
    "end_date": Doc("When the competition closes, in UTC. Must come after the last phase's start. "
                    "`null` or left out: no end date.", default="no end date"),
    "data_root": Doc("The folder of the organizer's task files, as a path relative to the spec's "
                     "folder (layout: [organizer_data.md](organizer_data.md)); `null` or left out: "
                     "the kind's embedded tasks. `--data-root` on the command line overrides it.",
                     default="the kind's embedded tasks"),
    "tasks": Doc("Every task of the competition, keyed by its name; each name needs a task "
                 "declaration `<task>/<task>_task.json` in the data root."),
    "tasks.<task>": Doc("One task: the name is lowercase (`[a-z][a-z0-9_]{0,30}`)."),
    "tasks.<task>.budget_seconds": Doc(
        "The participant's training time for this task in a code phase, in seconds, from the "
        "call of the participant's function (its start-up before that has "
        "`sandbox.startup_seconds`); the sandbox stops the participant's code at the budget "
        f"(plus `sandbox.grace_seconds`). At least {MIN_BUDGET_SECONDS:g} s: the ingestion reads "
        f"its clock every {POLL_SECONDS:g} s. With `budget_epochs`, the most the converted "
        "budget may be."),
    "tasks.<task>.budget_epochs": Doc(
        "The budget in epochs of the kind's reference training (BDL: plain SGD on the declared "
        "model, as the 2021 rules stated it), instead of seconds: before the participant's code "
        "runs, the ingestion program times that training on the worker and converts, capped at "
        "`budget_seconds`, which is then the worst case the time limits are checked against. "
        "The run record, the log and the detailed results give the conversion.",
        default="none: the budget is `budget_seconds`", example=3000),
    "tasks.<task>.public_rows": Doc(
        "Score the task's first `public_rows` test rows for the leaderboard during the "
        "competition (the 2021 evaluation phase: CIFAR-10 10,000 of 50,000, UCI 100 of 256) "
        "and all rows for the final ranking. The full figures are computed for every "
        "submission and kept from participants in `private/full_scores.txt` of its scoring "
        "output, which only organizers can read (CodaLab v1.5: the private output; "
        "Codabench: the scoring output, which the phase hides), never in a leaderboard "
        "column: Codabench's submissions API shows every column, hidden ones too, to anyone. "
        "The detailed results and logs show the public part only. See `reveal_full_scores`.",
        default="none: the task is scored on all its rows", example=100),
    "tasks.<task>.accept_unconverged_references": Doc(
        "Build with this task's references although the kind's own check finds that the runs "
        "that made them did not converge (BDL: a failed convergence gate in "
        "`<task>_hmc_diagnostics.json`). Without it such references are refused, naming the "
        "task and the failed check; with it the overview page says that the task's references "
        "did not pass the convergence gate, and which check failed.",
        default="false: references that failed the check are refused", example=True),
    "reveal_full_scores": Doc(
        "Rebuild with `true` at the end of the competition: every task is then scored on all "
        "its rows, in the leaderboard's usual columns. Replace the phase's scoring program "
        "with the rebuilt one and re-run all submissions.",
        default="false", example=True),
    "metric_weights": Doc("Weights of the kind's metrics in the leaderboard's weighted loss; only "
                          "the metrics given are changed.", default=_weights_default),
    "metric_weights.<metric>": Doc("The weight of one of the kind's metrics (0 leaves it out of "
                                   "the weighted loss).", default=_metric_default),
    "phases": Doc("The competition's phases, in the order they run (each starts after the one "
                  "before); see `layout`."),
    "phases.<phase>": Doc("One phase, keyed by its name (lowercase, `[a-z][a-z0-9_]{0,30}`)."),
    "phases.<phase>.label": Doc("The phase's name as participants see it."),
    "phases.<phase>.description": Doc("One sentence about the phase, shown on the site.",
                                      default="empty"),
    "phases.<phase>.start": Doc("When the phase opens, in UTC."),
    "phases.<phase>.submission": Doc(
        "What participants upload: `results` (prediction files, scored as they are) or `code` "
        "(training code that the ingestion program runs in the sandbox on each task, under its "
        "budget)."),
    "phases.<phase>.tasks": Doc("The tasks this phase scores, names from `tasks`."),
    "phases.<phase>.execution_time_limit": Doc(
        "The platform's wall-clock limit for one submission, in seconds. In a code phase it must "
        "cover the worst case: the tasks' budgets, the start-up allowance, grace and staging time per task, and "
        "`scoring_margin_seconds` (the spec check says how much is needed)."),
    "phases.<phase>.max_submissions": Doc(
        "How many submissions a participant may make in this phase in total.",
        default=lambda spec: _first_phase(spec).max_submissions),
    "phases.<phase>.max_submissions_per_day": Doc(
        "How many submissions a participant may make in this phase per day; at most "
        "`max_submissions`.",
        default=lambda spec: _first_phase(spec).max_submissions_per_day),
    "phases.<phase>.gate": Doc(
        "An earlier code phase whose tasks a submission to this code phase runs first, under "
        "their budgets (PGDL's final phase rule); only if it completes every one of them does "
        "it run on this phase's tasks. Otherwise the submission fails on both platforms, and "
        "failed submissions do not count toward the limits. The gate's tasks are not scored "
        "here; `execution_time_limit` must cover them too. Not with `tracks`.",
        default="no gate", example="phase1"),
    "tracks": Doc("Tracks: other task sets for the code phases, each built as its own "
                  "competition (`--track <track>`) with its own leaderboard.", default="no tracks"),
    "tracks.<track>": Doc("One track, keyed by its name."),
    "tracks.<track>.label": Doc("The track's name as participants see it."),
    "tracks.<track>.tasks": Doc("The track's tasks; each must be a task of a code phase."),
    "sandbox": Doc("Limits of the sandbox in which the participants' code runs in a code phase.",
                   default="the defaults of its keys"),
    "sandbox.memory_gib": Doc("Memory the participant's code may use, in GiB, enforced as "
                              "`sandbox.memory_limit` says.",
                              default=lambda spec: spec.sandbox["memory_gib"]),
    "sandbox.memory_limit": Doc(
        "How `sandbox.memory_gib` is enforced. `address_space`: RLIMIT_AS on each process, "
        "which counts what a process reserves as well as what it uses; CUDA, JAX and PyTorch "
        "reserve far more than they use, so GPU code cannot start under it. `resident`: the "
        "ingestion sums the resident memory (anonymous and shared-memory pages, host RAM "
        "actually used) of all the task's processes every "
        f"{RESIDENT_SAMPLE_SECONDS * 1000:.0f} ms and kills the task above the limit; a brief "
        "spike between two samples is not caught, and GPU memory is not limited (the device's "
        "own memory is the bound).",
        default="`resident` when `docker_image` is a GPU image (its tag contains `gpu`, as "
                "`codalab/codalab-legacy:gpu310`), else `address_space`",
        example="resident"),
    "sandbox.max_file_mib": Doc("Largest file the participant's code may write, in MiB.",
                                default=lambda spec: spec.sandbox["max_file_mib"]),
    "sandbox.disk_mib": Doc("Disk space the participant's code may fill, in MiB.",
                            default=lambda spec: spec.sandbox["disk_mib"]),
    "sandbox.grace_seconds": Doc("Seconds past a task's budget before the participant's code is "
                                 "killed (its last checkpoint counts).",
                                 default=lambda spec: spec.sandbox["grace_seconds"]),
    "sandbox.startup_seconds": Doc(
        "Seconds each task's process may take to start, apart from the task's budget: starting "
        "Python, importing the participant's module, loading the task's data; the budget's "
        "clock starts when the participant's function is called. A start-up past it fails the "
        "task. A task run in units (PGDL) has one: a fresh process after a failed unit starts "
        "up within the budget. Counted once per task in the time-limit checks.",
        default=lambda spec: spec.sandbox["startup_seconds"], example=60),
    "scoring_margin_seconds": Doc(
        "Seconds of a code phase's `execution_time_limit` kept for scoring after the ingestion's "
        "worst case; the spec check and the bundle checks require it.",
        default=lambda spec: spec.scoring_margin_seconds),
    # Its meaning is the schema's own "description".
    "public_reference_tasks_allowed_in_code_phases": Doc("", default="none", example=["iris"]),
    "pages": Doc("The text of the competition's pages that is the organizer's own."),
    "pages.overview": Doc("The overview page's introduction: what the competition is about."),
    "pages.terms": Doc("The terms and conditions page."),
}


# --- walking the schema -------------------------------------------------------------------

@dataclass(frozen=True)
class Key:
    path: str
    schema: dict
    required: bool
    parent: str | None          # the path of the enclosing key, None at the top


def _children(path: str, schema: dict) -> list[Key]:
    """The keys directly below ``path``: properties, mapping entries, list items' keys."""
    prefix = f"{path}." if path else ""
    keys = []
    if schema.get("type") == "object" or "properties" in schema:
        required = set(schema.get("required", ()))
        for name, sub in schema.get("properties", {}).items():
            keys.append(Key(prefix + name, sub, name in required, path or None))
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            placeholder = PLACEHOLDERS.get(path.rsplit(".", 1)[-1], "<name>")
            keys.append(Key(prefix + placeholder, extra, schema.get("minProperties", 0) > 0,
                            path or None))
    if schema.get("type") == "array" and isinstance(schema.get("items"), dict) \
            and schema["items"].get("type") == "object":
        item = schema["items"]
        required = set(item.get("required", ()))
        for name, sub in item.get("properties", {}).items():
            keys.append(Key(f"{path}[].{name}", sub, name in required, path))
    return keys


def schema_keys(schema: dict = SCHEMA) -> list[Key]:
    """Every key path of the schema, depth first, in the schema's order."""
    keys = []

    def walk(path, sub):
        for key in _children(path, sub):
            keys.append(key)
            walk(key.path, key.schema)
    walk("", schema)
    return keys


def check_docs(keys: list[Key], docs: dict[str, Doc] = DOCS) -> None:
    paths = [key.path for key in keys]
    missing = [path for path in paths if path not in docs]
    stale = [path for path in docs if path not in paths]
    optional = [key.path for key in keys if not key.required and not key.path.endswith(">")
                and key.path in docs and docs[key.path].default is None]
    twice = [key.path for key in keys if key.path in docs and docs[key.path].meaning
             and key.schema.get("description")]
    blank = [key.path for key in keys if key.path in docs and not docs[key.path].meaning
             and not key.schema.get("description")]
    problems = ([f"{path}: in the schema but without a description in DOCS" for path in missing]
                + [f"{path}: described in the schema and in DOCS; leave DOCS' meaning empty"
                   for path in twice]
                + [f"{path}: no meaning, in DOCS or the schema" for path in blank]
                + [f"{path}: described in DOCS but no longer in the schema" for path in stale]
                + [f"{path}: optional but DOCS gives no default" for path in optional])
    if problems:
        raise ReferenceDrift("bundle/spec_reference.py is out of step with bundle/spec.py "
                             "SCHEMA:\n" + "\n".join(problems))


# --- what each column says ----------------------------------------------------------------

def _bounds(schema: dict) -> list[str]:
    parts = []
    for word, sign in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<=")):
        if word in schema:
            parts.append(f"{sign} {schema[word]:g}")
    return parts


def type_text(schema: dict) -> str:
    """The schema of one key, in words."""
    if "enum" in schema:
        return "one of " + ", ".join(f"`{value}`" for value in schema["enum"])
    if "oneOf" in schema:
        return " or ".join(type_text(option) for option in schema["oneOf"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(type_text({**schema, "type": one}) for one in kind)
    if kind == "string" and schema.get("pattern") == DATE_PATTERN:
        return "date, `YYYY-MM-DD[ HH:MM[:SS]]` (UTC)"
    if kind == "string":
        parts = ["text"]
        low, high = schema.get("minLength"), schema.get("maxLength")
        if low and high:
            parts.append(f"{low} to {high} characters")
        elif high:
            parts.append(f"at most {high} characters")
        elif low:
            parts.append("not empty" if low == 1 else f"at least {low} characters")
        if "pattern" in schema:
            parts.append(f"matching `{schema['pattern']}`")
        return ", ".join(parts)
    if kind in ("number", "integer"):
        return ", ".join([kind] + _bounds(schema))
    if kind == "null":
        return "`null`"
    if kind == "array":
        items = schema.get("items", {})
        what = "mappings" if items.get("type") == "object" else \
            type_text(items).replace("text", "texts", 1) if items else "values"
        parts = [f"list of {what}"]
        if schema.get("minItems"):
            parts.append(f"at least {schema['minItems']}")
        if schema.get("uniqueItems"):
            parts.append("no repeats")
        return ", ".join(parts)
    if kind == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            names = schema.get("propertyNames", {}).get("pattern")
            if extra.get("type") == "object":
                to = "mappings"
            elif extra.get("type") in ("number", "integer"):
                to = f"{extra['type']}s" + (f" ({', '.join(_bounds(extra))})" if _bounds(extra) else "")
            else:
                to = type_text(extra)
            parts = ["mapping of names" + (f" (`{names}`)" if names else "") + " to " + to]
            if schema.get("minProperties"):
                parts.append(f"at least {schema['minProperties']}")
            return ", ".join(parts)
        return "mapping"
    return f"`{json.dumps(schema, sort_keys=True)}`"


def _default_spec_without_optional(raw: dict) -> dict:
    """The default spec less every optional key (so load_spec applies its defaults)."""
    raw = copy.deepcopy(raw)

    def strip(value, schema):
        if not isinstance(value, dict) or "properties" not in schema:
            return value
        required = set(schema.get("required", ()))
        return {name: strip(item, schema["properties"][name]) for name, item in value.items()
                if name in required}
    top = strip(raw, SCHEMA)
    phase_schema = SCHEMA["properties"]["phases"]["additionalProperties"]
    top["phases"] = {name: strip(phase, phase_schema) for name, phase in raw["phases"].items()}
    return top


def _defaults_spec():
    """What load_spec returns for the default spec without its optional keys."""
    raw = yaml.safe_load(DEFAULT_SPEC.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "spec.yaml"
        path.write_text(yaml.safe_dump(_default_spec_without_optional(raw), sort_keys=False),
                        encoding="utf-8")
        return load_spec(path, data_root=KINDS[raw["kind"]].EMBEDDED_ROOT)


MISSING = object()


def _example_value(raw, path: str):
    """The value at ``path`` in the default spec (first entry of a mapping, first list item);
    MISSING where it has none."""
    value = raw
    for part in path.replace("[]", ".[]").split("."):
        if part == "[]":
            if not isinstance(value, list) or not value:
                return MISSING
            value = value[0]
        elif part.startswith("<"):
            if not isinstance(value, dict) or not value:
                return MISSING
            value = next(iter(value.values()))
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return MISSING
    return value


def _flow(value) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6, sort_keys=False,
                          allow_unicode=True).strip()
    return text.removesuffix("...").strip()


def example_text(raw, key: Key, has_children: bool) -> str:
    value = _example_value(raw, key.path)
    if value is MISSING:
        value = DOCS[key.path].example
        if value is None:
            raise ReferenceDrift(f"{key.path}: the default spec has no value here; give "
                                 "Doc(example=...) in bundle/spec_reference.py")
    if isinstance(value, str) and len(value) > 90:
        value = value[:87].rstrip() + " ..."
    text = _flow(value)
    if has_children and len(text) > 90 and isinstance(value, dict):
        return ", ".join(f"`{name}`" for name in value) + " (see the keys below)"
    if has_children and len(text) > 90 and isinstance(value, list):
        return f"{len(value)} entries (see the keys below)"
    return f"`{text}`"


def _default_text(key: Key, spec) -> str:
    default = DOCS[key.path].default
    if key.required or default is None:
        return "—"
    value = default(spec) if callable(default) else default
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"`{value:g}`"
    return str(value)


def _required_text(key: Key) -> str:
    if key.parent is None:
        return "yes" if key.required else "no"
    if key.path.endswith(">"):
        return "at least one" if key.required else "no"
    if not key.required:
        return "no"
    if key.path.startswith(key.parent + "[]"):
        return f"yes, in each `{key.parent}[]`"
    return f"yes, in each `{key.parent}`" if key.parent.endswith(">") else f"yes, in `{key.parent}`"


def meaning(key: Key) -> str:
    return DOCS[key.path].meaning or key.schema["description"]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_reference() -> str:
    keys = schema_keys()
    check_docs(keys)
    raw = yaml.safe_load(DEFAULT_SPEC.read_text(encoding="utf-8"))
    spec = _defaults_spec()
    parents = {key.parent for key in keys}
    spec_name = DEFAULT_SPEC.relative_to(REPO).as_posix()
    lines = [
        "# Organizer spec reference",
        "",
        f"<!-- Generated by `{COMMAND}` from `bundle/spec.py` (SCHEMA, load_spec) and",
        "     `bundle/spec_reference.py` (meanings); do not edit by hand. -->",
        "",
        "Every key of the organizer spec (the YAML file given to `build_bundle.py --config`). "
        f"Examples are taken from the default spec, [`{spec_name}`](../{spec_name}), where it has "
        "the key. "
        "Unknown keys are errors. `<task>`, `<phase>`, `<track>` and `<metric>` stand for a name "
        "the organizer chooses (or, for `<metric>`, one of the kind's metrics); `organizers[]` is "
        "each item of the list. Dates are UTC; a YAML date without quotes is accepted.",
        "",
        "| key | type | required | default | example |",
        "|---|---|---|---|---|",
    ]
    sections = []
    for key in keys:
        anchor = "".join(c for c in key.path.lower() if c.isalnum() or c in "-_")
        example = example_text(raw, key, key.path in parents)
        default = _default_text(key, spec)
        lines.append(f"| [`{key.path}`](#{anchor}) | {_cell(type_text(key.schema))} | "
                     f"{_cell(_required_text(key))} | {_cell(default)} | {_cell(example)} |")
        sections += ["", f"### {key.path}", "", meaning(key), "",
                     f"- type: {type_text(key.schema)}",
                     f"- required: {_required_text(key)}",
                     f"- default: {default}",
                     f"- example: {example}"]
    lines += ["", "## Keys", *sections, ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if docs/spec_reference.md is not what this generates")
    args = parser.parse_args(argv)
    text = render_reference()
    if args.check:
        committed = REFERENCE_FILE.read_text(encoding="utf-8") if REFERENCE_FILE.is_file() else ""
        if committed != text:
            shown = REFERENCE_FILE.relative_to(REPO) if REFERENCE_FILE.is_relative_to(REPO) \
                else REFERENCE_FILE
            print(f"{shown} is out of date; run: {COMMAND}", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

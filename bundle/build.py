"""One competition of a spec to one upload-ready bundle zip (CodaLab v1.5 or Codabench).

A competition holds one phase (``layout: per_phase``, as the 2021 competition ran) or all
phases of the spec (``layout: one``), with a track's tasks in its code phases. Per phase,
programs are assembled with their generated configs and data folders staged; the pages and
competition.yaml describe the whole competition; then the leakage check (every hidden file
against every public zip of the competition) and the emitted-bundle checks run on what was
written. A problem stops the build with the rule's name and fix.

Every failure is a BuildError (a task's files that cannot be read or staged included, named by
the organizer's file); a zip whose writing or checks fail is removed. The command line builds
into a temporary folder and moves the zips into ``--out`` only when all of them were built,
so a failed run leaves nothing new there.

Data may be far larger than memory: every nested zip is a file in a work folder inside the
output folder, written and read back member by member (zips.py, leakage.py), and the data zips
uploaded apart are moved from there next to the bundle.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

from kinds.kind import kind
from runtime.formats import RECORD_KEY_NAME

from . import competition_rules
from .rules import check_bundle
from .datasets import (SEPARABLE, Dataset, DatasetKeyError, oversize_problem,
                       separate, yaml_comments)
from .kit_check import check_kit_sample
from .leakage import PAGE_IMAGE, page_images, shown_test_inputs
from .leaderboard import competition_columns, written_keys
from .phase_data import leakage_problems, stage_input_data, stage_public_data, stage_reference_data
from .phase_plan import PhasePlan, code_variant, phase_plan, references_in_kit
from .platforms import DEFAULT_PLATFORM, Platform, platform as platform_named
from .programs import assemble_ingestion_program, assemble_scoring_program
from .render import guide_contexts, page_contexts, render_pages
from .spec import CompetitionSpec
from .starting_kit import stage_starting_kit
from .task_declarations import TaskDataError
from .worker_data import WorkerPart, folder_name, worker_files, worker_part, write_worker_folder
from .zips import (Content, content_sha256, content_size, folder_members, read_members,
                   write_zip, zip_members)

LARGE_MEMBER_BYTES = 100 * 2**20       # G24: bundles are unpacked in memory by the site
PHASE_FILES = ("scoring_program", "reference_data", "public_data", "starting_kit",
               "ingestion_program", "input_data")


class BuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class BuiltBundle:
    path: Path
    phases: tuple[str, ...]
    track: str | None
    tasks: tuple[str, ...]
    budgets: dict[str, float]
    members: tuple[tuple[str, int, str], ...]     # name, bytes, sha256
    warnings: tuple[str, ...]
    # Data zips written next to the bundle, to upload apart (their bytes are in those files)
    datasets: tuple[Dataset, ...] = ()
    # The data to copy onto the workers (spec key on_worker)
    worker_folder: Path | None = None

    @property
    def waiting_for_keys(self) -> list[Dataset]:
        """Datasets the spec has no key for yet: the bundle names stand-ins until then."""
        return [dataset for dataset in self.datasets if not dataset.key]


def bundle_name(spec: CompetitionSpec, phases: list[str] | str, track: str | None,
                platform: str = DEFAULT_PLATFORM) -> str:
    """<slug>-<phase>[-<track>] for one phase's competition, <slug>[-<track>] for all phases."""
    phases = [phases] if isinstance(phases, str) else list(phases)
    which = f"-{phases[0]}" if len(phases) == 1 and len(spec.phases) > 1 else ""
    return (f"{spec.slug}{which}" + (f"-{track}" if track else "")
            + platform_named(platform).bundle_suffix + ".zip")


def ingestion_limits(spec: CompetitionSpec) -> dict:
    sandbox = spec.sandbox
    return {"memory_bytes": int(sandbox["memory_gib"] * 2**30),
            "max_file_bytes": int(sandbox["max_file_mib"] * 2**20),
            "disk_bytes": int(sandbox["disk_mib"] * 2**20),
            "grace_seconds": float(sandbox["grace_seconds"]),
            "startup_seconds": float(sandbox["startup_seconds"]),
            "memory_rule": sandbox["memory_limit"]}


WORKER_STAGING = {"reference_data": stage_reference_data, "input_data": stage_input_data}


def _worker_parts(work: Path, plan: PhasePlan, spec: CompetitionSpec, bundle: str,
                  say: Callable[[str], None]) -> dict[str, WorkerPart]:
    """The phase's data that the spec keeps on the worker (``on_worker``), by kind."""
    parts = {}
    for data in spec.on_worker:
        if data == "input_data" and not plan.code_submission:
            continue                              # a results phase has no input data
        say(f"  staging {data} for the workers ...")
        try:
            folder = WORKER_STAGING[data](plan, work / data)
        except (ValueError, KeyError, OSError) as error:
            raise BuildError(f"staging {data} of phase {plan.name} failed: {error}") from error
        parts[data] = worker_part(folder, plan, bundle, data)
    return parts


def _zip_members(work: Path, plan: PhasePlan, spec: CompetitionSpec,
                 say: Callable[[str], None], platform: str,
                 guide: tuple[dict, dict | None],
                 kept: dict[str, WorkerPart] | None = None,
                 leaderboard: list | None = None) -> dict[str, Path]:
    """The nested zips of a phase (those it has), written in ``work``; ``guide``: its kit
    guide's context and the baseline table the pages show; ``kept``: its data kept on the
    worker instead of in zips; ``leaderboard``: the competition's columns (how it ranks)."""
    kept = kept or {}
    references, inputs = (kept[data].config_entry() if data in kept else None
                          for data in ("reference_data", "input_data"))
    steps = {"scoring_program": lambda d: assemble_scoring_program(plan, d, platform, references,
                                                                   leaderboard),
             "reference_data": lambda d: stage_reference_data(plan, d),
             "public_data": lambda d: stage_public_data(plan, d),
             "starting_kit": lambda d: check_kit_sample(stage_starting_kit(
                 plan, d, code_variant(spec, plan), ingestion_limits(spec), platform,
                 written_keys(plan), spec, *guide), say)}
    if plan.code_submission:
        steps |= {"ingestion_program":
                  lambda d: assemble_ingestion_program(
                      plan, d, ingestion_limits(spec),
                      platform_named(platform).record_key_in_program,
                      platform_named(platform).importer_key_in_program, inputs, platform),
                  "input_data": lambda d: stage_input_data(plan, d)}
    for data in kept:
        del steps[data]
    zips = {}
    for name in (name for name in PHASE_FILES if name in steps):
        say(f"  staging {name} ...")
        try:
            folder = steps[name](work / name)
        except (ValueError, KeyError, OSError) as error:   # FormatError is a ValueError
            raise BuildError(f"staging {name} of phase {plan.name} failed: {error}") from error
        zips[f"{name}.zip"] = write_zip(work / f"{name}.zip", folder_members(folder))
        if folder == work / name:
            shutil.rmtree(folder)             # zipped: large data is on disk once, not twice
    return zips


def _size_warnings(members: dict[str, Content]) -> list[str]:
    """Large members of a bundle under the refusal size (datasets.SAFE_BUNDLE_BYTES)."""
    return [f"{name} is {size / 2**20:.0f} MiB: the site unpacks bundles in memory "
            "(G24); upload large data apart (spec key upload_separately)"
            for name, content in members.items()
            if (size := content_size(content)) > LARGE_MEMBER_BYTES]


def _shown(spec: CompetitionSpec, phase_key: str, track_key: str | None):
    """The phase as the competition shows it: a code phase's label names the track."""
    phase = spec.phase(phase_key)
    track = track_key if phase.code_submission else None
    label = phase.label + (f" ({spec.track(track).label})" if track else "")
    return dataclasses.replace(phase, label=label[:50])


def baseline_results_file(spec: CompetitionSpec) -> Path | None:
    """The spec's table of baseline scores: one next to the spec wins; the kind's committed
    table is its default spec's only (another spec's tasks are not the ones it scored)."""
    definition, results_file = kind(spec.kind), spec.path.parent / "baseline_results.json"
    if not results_file.is_file() and (spec.path.resolve(), spec.data_root.resolve()) == (
            definition.DEFAULT_SPEC.resolve(), definition.EMBEDDED_ROOT.resolve()):
        results_file = definition.BASELINE_RESULTS
    return results_file if results_file.is_file() else None


def _baseline_results(spec: CompetitionSpec, given: dict | None) -> dict | None:
    results_file = baseline_results_file(spec)
    if given is None and results_file:
        return json.loads(results_file.read_text())
    return given


def _phase_members(work: Path, plans: list[PhasePlan], spec: CompetitionSpec,
                   say: Callable[[str], None], platform: str, guides: list[tuple], bundle: str):
    """Each phase's zips, named <phase>_<file>.zip when the competition holds several
    phases, the file keys of each phase as its yaml names them, and each phase's data kept on
    the worker (where the spec keeps any there)."""
    members, files, kept = {}, [], []
    for plan, guide in zip(plans, guides):
        prefix = f"{plan.name}_" if len(plans) > 1 else ""
        parts = _worker_parts(work / plan.name / "worker", plan, spec, bundle, say)
        zips = _zip_members(work / plan.name, plan, spec, say, platform, guide, parts,
                            competition_columns(plans))
        members.update({prefix + name: data for name, data in zips.items()})
        files.append({key: f"{prefix}{key}.zip" for key in PHASE_FILES if f"{key}.zip" in zips})
        kept.append(parts)
    return members, files, kept


def _hidden_zips(plans: list[PhasePlan], files: list[dict]) -> list[tuple[PhasePlan, str]]:
    """The reference data of every code phase, with its plan."""
    return [(plan, phase_files["reference_data"]) for plan, phase_files in zip(plans, files)
            if plan.code_submission]


def _public_apart(plan: PhasePlan, member: str) -> bool:
    """A member of the phase's reference data that the rules stage apart, made of public
    data only (a smoke test's references): the kit may hold the same bytes."""
    return any(member.startswith(f"{folder}/")
               for folder in competition_rules.public_tasks_apart(plan))


def _hidden_references(plans: list[PhasePlan], files: list[dict], members: dict) -> dict:
    """Every hidden reference of a code phase, by zip and member name."""
    return {f"{zip_name}:{name}": data for plan, zip_name in _hidden_zips(plans, files)
            for name, data in read_members(members[zip_name]).items()
            if not _public_apart(plan, name)}


def _leaks(plans: list[PhasePlan], files: list[dict], members: dict) -> list[str]:
    """Every hidden reference of a code phase against every public zip of the competition."""
    hidden = _hidden_references(plans, files, members)
    public = {part[key]: zip_members(members[part[key]]) for part in files
              for key in ("input_data", "public_data", "starting_kit") if key in part}
    zeroed = kind(plans[0].kind).ZEROED_PUBLIC_ARRAYS
    return leakage_problems(hidden, public, zeroed) if hidden else []


def _worker_hidden(plans: list[PhasePlan], files: list[dict], kept: list[dict[str, WorkerPart]],
                   members: dict[str, Content]) -> dict:
    """Every hidden reference of a phase whose kit does not publish them, kept on the worker
    or in the bundle. The record key is no reference: on Codabench the ingestion program
    carries it too, by design (record_key.py)."""
    hidden = {}
    for plan, phase_files, parts in zip(plans, files, kept):
        if references_in_kit(plan):
            continue
        if "reference_data" in parts:
            where, opened = parts["reference_data"].folder, parts["reference_data"].opened()
        else:
            where = phase_files["reference_data"]
            opened = read_members(members[where])
        hidden |= {f"{where}/{name}": data for name, data in opened.items()
                   if name != RECORD_KEY_NAME and not _public_apart(plan, name)}
    return hidden


def _worker_leaks(plans: list[PhasePlan], files: list[dict], kept: list[dict[str, WorkerPart]],
                  members: dict[str, Content]) -> list[str]:
    """Every hidden reference (``_worker_hidden``) against every file of the bundle, nested
    zips opened, and of the worker folder."""
    hidden = _worker_hidden(plans, files, kept, members)
    references = {phase_files.get("reference_data") for phase_files in files}
    everything = {"bundle": {name: data for name, data in members.items()
                             if not name.endswith(".zip")},
                  **{name: zip_members(data) for name, data in members.items()
                     if name.endswith(".zip") and name not in references},
                  # sealed files too: the check that sealing hid them
                  "worker folder": worker_files([p for parts in kept for p in parts.values()])}
    zeroed = kind(plans[0].kind).ZEROED_PUBLIC_ARRAYS
    return leakage_problems(hidden, everything, zeroed) if hidden else []


def _page_leaks(plans: list[PhasePlan], files: list[dict], kept: list[dict[str, WorkerPart]],
                members: dict[str, Content], pages: dict[str, str]) -> list[str]:
    """The pages' embedded images (bundle/data_examples.py) are public files too: read back
    into their bytes and pixels, they go through the checks of any public file against the
    hidden references the build's own check uses, and must be no test input of any phase
    (``leakage.shown_test_inputs``)."""
    images, problems = page_images({f"page {name}": html for name, html in pages.items()})
    if not images:
        return problems
    if any(kept):
        hidden = _worker_hidden(plans, files, kept, members)
    else:
        hidden = _hidden_references(plans, files, members)
    zeroed = kind(plans[0].kind).ZEROED_PUBLIC_ARRAYS
    problems += leakage_problems(hidden, images, zeroed) if hidden else []
    inputs = {}
    for plan, phase_files, parts in zip(plans, files, kept):
        if "input_data" in parts:
            where, opened = str(parts["input_data"].folder), parts["input_data"].opened()
        elif "input_data" in phase_files:
            where = phase_files["input_data"]
            opened = zip_members(members[where])
        else:
            continue
        # a smoke test's "test" rows are public training rows held out (public_tasks_apart)
        inputs[where] = {name: data for name, data in opened.items()
                         if not _public_apart(plan, name)}
    return problems + shown_test_inputs(images, inputs)


def phase_kit(spec: CompetitionSpec, phase_key: str, destination: Path, platform: str,
              code_plan: PhasePlan | None = None) -> Path:
    """The starting kit of ``phase_key``'s own competition, as the builder stages it, in
    ``destination``; ``code_plan``: what the kit's ingestion runs instead of the spec's
    (an organizer's local run with another budget)."""
    plan = phase_plan(spec, phase_key, None)
    results = _baseline_results(spec, None)
    contexts = page_contexts(spec, [_shown(spec, phase_key, None)], [plan],
                             competition_columns([plan]), spec.title, results, platform)
    return stage_starting_kit(plan, destination, code_plan or code_variant(spec, plan),
                              ingestion_limits(spec), platform, written_keys(plan), spec,
                              guide_contexts(contexts)[0], results)


def build_competition(spec: CompetitionSpec, phase_keys: list[str], track_key: str | None,
                      out_dir: Path, baseline_results: dict | None = None,
                      say: Callable[[str], None] = lambda message: None,
                      platform: str = DEFAULT_PLATFORM) -> BuiltBundle:
    """One bundle holding ``phase_keys`` (in the spec's order), code phases with the track's
    tasks."""
    site = platform_named(platform)
    if track_key and not any(spec.phase(key).code_submission for key in phase_keys):
        raise BuildError(f"--track applies to code phases; {', '.join(phase_keys)} take results")
    try:
        plans = [phase_plan(spec, key, track_key if spec.phase(key).code_submission else None)
                 for key in phase_keys]
    except TaskDataError as error:
        raise BuildError(str(error)) from None
    shown = [_shown(spec, key, track_key) for key in phase_keys]
    columns = competition_columns(plans)
    name = bundle_name(spec, phase_keys, track_key, platform)
    say(f"building {name}: {len(plans)} phase(s), "
        f"{len({t.name for plan in plans for t in plan.tasks})} task(s)")
    results = _baseline_results(spec, baseline_results)
    contexts = page_contexts(spec, shown, plans, columns, spec.title, results, platform)
    guides = [(guide, results) for guide in guide_contexts(contexts)]
    problem = site.spec_problem(spec) or site.column_problem(columns)
    if problem:
        raise BuildError(problem)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # Work in the output folder, not /tmp: data zips leave it by a rename, and a /tmp held in
    # memory (tmpfs) would hold the very data the build keeps out of memory.
    with tempfile.TemporaryDirectory(prefix=".bundle-", dir=out_dir) as work:
        members, files, kept = _phase_members(Path(work), plans, spec, say, platform, guides,
                                              name)
        parts = [part for phase_parts in kept for part in phase_parts.values()]
        _leakage_check(plans, files, kept, members, say)
        datasets = _separate(spec, name, files, members)
        pages = render_pages(contexts, kind(plans[0].kind).TEMPLATES)
        _page_leakage_check(plans, files, kept, members, pages, say)
        members.update(_documents(site, spec, shown, plans, columns, files, pages))
        members["competition.yaml"] = (yaml_comments(datasets).encode("utf-8")
                                       + members["competition.yaml"])
        oversize = oversize_problem(members, _separable(files, members), spec.max_bundle_bytes)
        if oversize:
            raise BuildError(oversize)
        path, datasets, worker_folder = _emit(out_dir, name, members, datasets, parts, spec,
                                              platform, say)
        listed = tuple((member, content_size(content), content_sha256(content))
                       for member, content in sorted(members.items()))
        warnings = (_size_warnings(members) + _worker_warnings(parts)
                    + site.release_notes(yaml.safe_load(members["competition.yaml"])))
    tasks = tuple(dict.fromkeys(t.name for plan in plans for t in plan.tasks))
    return BuiltBundle(path, tuple(phase_keys), track_key, tasks,
                       {t.name: t.budget_seconds for plan in plans for t in plan.tasks
                        if t.budget_seconds},
                       listed, tuple(warnings + site.build_warnings(spec, shown)),
                       tuple(datasets), worker_folder)


def _leakage_check(plans: list[PhasePlan], files: list[dict],
                   kept: list[dict[str, WorkerPart]], members: dict[str, Content],
                   say: Callable[[str], None]) -> None:
    if any(kept):
        say("  leakage check (every file of the bundle and of the worker folder) ...")
        leaks = _worker_leaks(plans, files, kept, members)
        if leaks:
            raise BuildError("leakage check failed (hidden data in a file others can read):\n  "
                             + "\n  ".join(leaks))
    elif any(plan.code_submission for plan in plans):
        say("  leakage check ...")
        leaks = _leaks(plans, files, members)
        if leaks:
            raise BuildError("leakage check failed (hidden data in a public zip):\n  "
                             + "\n  ".join(leaks))


def _page_leakage_check(plans: list[PhasePlan], files: list[dict],
                        kept: list[dict[str, WorkerPart]], members: dict[str, Content],
                        pages: dict[str, str], say: Callable[[str], None]) -> None:
    if not any(PAGE_IMAGE.search(html) for html in pages.values()):
        return
    say("  leakage check of the pages' images ...")
    leaks = _page_leaks(plans, files, kept, members, pages)
    if leaks:
        raise BuildError("leakage check failed (hidden or test data in a page's images):\n  "
                         + "\n  ".join(leaks))


def _emit(out_dir: Path, name: str, members: dict[str, Content], datasets: list[Dataset],
          parts: list[WorkerPart], spec: CompetitionSpec, platform: str,
          say: Callable[[str], None]) -> tuple[Path, list[Dataset], Path | None]:
    """The bundle, its data zips and worker folder written in ``out_dir`` and checked; all of
    them removed if anything fails. The data zips are moved there from the work folder."""
    path = out_dir / name
    placed = [dataclasses.replace(d, path=out_dir / d.file) for d in datasets]
    written = [path, *(d.path for d in placed)]
    worker_folder = out_dir / folder_name(name) if parts else None
    try:
        write_zip(path, members)
        for built, moved in zip(datasets, placed):
            shutil.move(built.path, moved.path)
        if parts:
            write_worker_folder(out_dir, folder_name(name), parts, spec.codabench_queue)
        say("  checking the emitted bundle ...")
        failures = check_bundle(path, platform, scoring_margin_seconds=spec.scoring_margin_seconds,
                                datasets={d.reference: d.path for d in placed})
    except BaseException:
        _remove(written, worker_folder)       # never a partial zip
        raise
    if failures:
        _remove(written, worker_folder)
        raise BuildError("the emitted bundle breaks platform rules:\n  " + "\n  ".join(
            f"[{f.rule}] {f.message} (fix: {f.fix})" for f in failures))
    return path, placed, worker_folder


# Checking a worker's copy reads every byte of it (sha256), before the first task runs and
# outside every budget; past this size the time it takes is worth saying.
WORKER_CHECK_WARNING_BYTES = 2**30


def _worker_warnings(parts: list[WorkerPart]) -> list[str]:
    return [f"{part.folder} holds {size / 2**30:.1f} GiB: the program that reads it checks "
            "every byte against the build's sha256 before it starts (about a second per GiB "
            "or more, on the worker's disk), outside the tasks' budgets: leave room for it in "
            "execution_time_limit"
            for part in parts
            if (size := part.size) > WORKER_CHECK_WARNING_BYTES]


def _remove(written: list[Path], worker_folder: Path | None) -> None:
    for done in written:
        done.unlink(missing_ok=True)
    if worker_folder is not None:
        shutil.rmtree(worker_folder, ignore_errors=True)


def _documents(site: Platform, spec, phases, plans, columns, files, pages) -> dict[str, bytes]:
    """competition.yaml, the pages and the logo as the site reads them."""
    return site.documents(spec, phases, plans, columns, files, pages)


def _separable(files: list[dict], members: dict[str, Content]) -> dict[str, str]:
    """The data zips still in the bundle that could be uploaded apart: member -> its kind."""
    return {part[kind]: kind for part in files
            for kind in SEPARABLE if part.get(kind) in members}


def _separate(spec: CompetitionSpec, name: str, files: list[dict],
              members: dict[str, Content]) -> list[Dataset]:
    try:
        return separate(files, members, name.removesuffix(".zip"), spec.upload_separately,
                        spec.dataset_keys)
    except DatasetKeyError as error:
        raise BuildError(f"{spec.path}: {error}") from None


def build_bundle(spec: CompetitionSpec, phase_key: str, track_key: str | None, out_dir: Path,
                 baseline_results: dict | None = None,
                 say: Callable[[str], None] = lambda message: None,
                 platform: str = DEFAULT_PLATFORM) -> BuiltBundle:
    """The competition of one phase (and track)."""
    return build_competition(spec, [phase_key], track_key, out_dir, baseline_results, say,
                             platform)


def competition_targets(spec: CompetitionSpec, phase: str = "all",
                        track: str | None = None) -> list[tuple[list[str], str | None]]:
    """The competitions to build: (phase keys, track). ``layout: one`` puts every phase in
    one competition (one per track, since a track is a phase's other task set); ``per_phase``
    builds one per phase and track. Naming a phase builds that phase's competition alone."""
    keys = [p.key for p in spec.phases]
    tracks = [track] if track else ([t.key for t in spec.tracks] or [None])
    if phase == "all" and spec.layout == "one":
        has_code = any(spec.phase(key).code_submission for key in keys)
        return [(keys, t) for t in (tracks if has_code else [None])]
    targets = []
    for key in (keys if phase == "all" else [phase]):
        code = spec.phase(key).code_submission
        targets += [([key], t) for t in (tracks if code else [None])]
    return targets

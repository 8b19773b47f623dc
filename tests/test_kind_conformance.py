"""Every registered kind conforms to the seam (what ramp-workflow's assert_submission does for
a problem): its records load (a required hook left out fails, named), its default competition
builds on both platforms, each phase's sample submission passes the dry run, its pages and kit
guide are filled, its programs' metadata is its own, and the core holds none of its words."""
import dataclasses
import functools
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

import build_bundle
import kinds
from bundle.build import bundle_name, competition_targets
from bundle.spec import load_spec
from kinds.kind import (KINDS, Kind, KindDefinitionError, ScoringRuntime, copy_inputs_file,
                        ingestion_runtime, kind, scoring_runtime)
from scoring_program.scorer.config import CONFIG_FORMAT, ConfigError, parse_config

from in_process_commands import run_main
from kit_guides import agreement_problems

REPO = Path(__file__).resolve().parents[1]
PLATFORMS = ("codalab", "codabench")
# The core: everything a kind plugs into. Docs, tests and benchmarks may name a kind.
CORE = ("build_bundle.py", "bundle", "ingestion_program", "scoring_program", "starting_kit",
        "runtime", "reference_data", "scripts", "kinds/__init__.py", "kinds/kind.py")
# Where a kind's optional parts may be asked about: its records, and the platforms' own code.
PROBES_ALLOWED = ("kinds/kind.py", "bundle/platforms/")
# What the builder and the programs call a kind, its runtime modules and their values.
KIND_PROBE = re.compile(r"\b(getattr|hasattr)\(\s*(kind|definition|runtime|KINDS|plan\.kind|"
                        r"contract|scoring|ingestion|participant|\w*settings|tasks\[)")
BDL_WORDS = re.compile(r"agreement|total.variation|wasserstein|\bhmc\b|posterior", re.IGNORECASE)
# "" : files without a suffix (a program's metadata) are read too
SOURCE_SUFFIXES = {".py", ".j2", ".yaml", ".json", ".md", ".sh", ""}
TEMPLATE_LEFTOVERS = re.compile(r"\{\{|\{%|\}\}|%\}")
# What a kind's sample submission scores in its default competition's dry run, where its
# tests hold it to a figure: label accuracy's nearest centroid really learns.
SAMPLE_SCORES_ABOVE = {"label_accuracy": ("wine_accuracy", 0.8)}


# ---- the record --------------------------------------------------------------------------

def _fields_of(record: Kind, *left_out: str) -> dict:
    return {field.name: getattr(record, field.name) for field in dataclasses.fields(Kind)
            if field.name not in left_out}


def test_a_kind_lacking_a_required_hook_fails_with_the_hook_named():
    with pytest.raises(KindDefinitionError) as raised:
        Kind(**_fields_of(kind("label_accuracy"), "stage_reference"))
    assert str(raised.value) == ("kind 'label_accuracy' (kinds/label_accuracy/kind.py) lacks "
                                 "required hook(s): stage_reference")


def test_a_registered_kind_lacking_hooks_fails_at_load_with_every_one_named(tmp_path,
                                                                            monkeypatch):
    """The conformance of a kind starts at its look-up: a package whose kind.py leaves two
    required hooks out is refused there, both named."""
    package = tmp_path / "broken_kind"
    package.mkdir()
    (package / "__init__.py").write_text("")
    names = "\n".join(f"{name} = SOURCE.{name}"
                      for name in _fields_of(kind("label_accuracy"), "name", "page_context",
                                             "stage_reference"))
    (package / "kind.py").write_text("from kinds.kind import kind\n"
                                     f"SOURCE = kind('label_accuracy')\n{names}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(kinds.KINDS, "broken", "broken_kind")
    with pytest.raises(KindDefinitionError, match=re.escape(
            "kind 'broken' (kinds/broken/kind.py) lacks required hook(s): stage_reference, "
            "page_context")):
        kind("broken")


@pytest.mark.parametrize("change, named", [
    ({"ENTRY": ("submission",)}, "ENTRY must be (module, function)"),
    ({"DEFAULT_SPEC": "default_spec.yaml"}, "DEFAULT_SPEC must be Path"),
    ({"page_context": {}}, "page_context must be callable"),
])
def test_a_hook_of_the_wrong_type_is_refused_with_its_name(change, named):
    with pytest.raises(KindDefinitionError, match=re.escape(named)):
        Kind(**{**_fields_of(kind("label_accuracy")), **change})


def test_optional_hooks_have_their_defaults():
    record = kind("label_accuracy")
    assert record.ENTRY == ("submission", "predict") and record.entry_file == "submission.py"
    assert record.ZEROED_PUBLIC_ARRAYS == () and record.RANKS_BY_AGGREGATE is False
    assert record.task_problems(None) == []
    assert record.stand_in_task is None and record.reference_cli is None
    assert callable(record.stage_kit)
    assert record.has_std(None) is False and record.std_description is None   # no sd columns


def test_sd_columns_need_their_description():
    """has_std is optional (no task has an sd column); a kind that gives it gives the
    description its columns carry, or is refused when its record is made."""
    fields = {**_fields_of(kind("label_accuracy")), "has_std": lambda task: True}
    with pytest.raises(KindDefinitionError, match=re.escape(
            "kind 'label_accuracy' (kinds/label_accuracy/kind.py) gives has_std but no "
            "std_description")):
        Kind(**fields)
    described = Kind(**{**fields, "std_description": lambda task, metric: "sd over chains"})
    assert described.has_std(None) and described.std_description(None, "m") == "sd over chains"


def test_kinds_maps_every_registered_name_and_an_unknown_one_is_refused():
    assert list(KINDS) == list(kinds.KINDS)
    assert all(KINDS[name].name == name for name in KINDS)
    with pytest.raises(kinds.UnknownKind, match="known: bdl2021"):
        kind("nope")


# ---- the runtime records: what the programs read ------------------------------------------

LABELS_RUNTIME = "kinds.label_accuracy.runtime"
RUNTIME_MODULES = {
    "scoring": f"from {LABELS_RUNTIME}.scoring import (TASK_TYPES, REPORT_INTRO, "
               "STANDARD_ERROR, parse_settings, read_reference, read_submission, evaluate, "
               "submission_files, task_summary)\n",
    "ingestion": f"from {LABELS_RUNTIME}.ingestion import output_bytes\n",
    "participant": f"from {LABELS_RUNTIME}.participant import SIGNATURE\n",
}


@pytest.fixture
def kind_missing_runtime_hooks(tmp_path, monkeypatch) -> str:
    """A registered kind whose runtime modules each leave a required hook out."""
    package = tmp_path / "hookless_kind"
    (package / "runtime").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "runtime" / "__init__.py").write_text("")
    for module, source in RUNTIME_MODULES.items():
        (package / "runtime" / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(kinds.KINDS, "hookless", "hookless_kind")
    return "hookless"


def test_a_runtime_module_lacking_a_required_hook_fails_at_load_with_it_named(
        kind_missing_runtime_hooks):
    name = kind_missing_runtime_hooks
    with pytest.raises(KindDefinitionError) as raised:
        scoring_runtime(name)
    assert str(raised.value) == ("kind 'hookless' (kinds/hookless/runtime/scoring.py) lacks "
                                 "required hook(s): report_section")
    with pytest.raises(KindDefinitionError, match=re.escape(
            "kind 'hookless' (kinds/hookless/runtime/participant.py) lacks required hook(s): "
            "call")):
        ingestion_runtime(name)


def test_a_kind_scoring_part_of_the_rows_must_say_how_to_cut_them(kind_missing_runtime_hooks,
                                                                    tmp_path, monkeypatch):
    scoring = tmp_path / "hookless_kind" / "runtime" / "scoring.py"
    scoring.write_text(RUNTIME_MODULES["scoring"] + "from kinds.label_accuracy.runtime.scoring "
                       "import report_section\nSCORES_PUBLIC_ROWS = True\n"
                       "def first_rows(task, reference, rows):\n    return task, reference\n")
    for module in [name for name in sys.modules if name.startswith("hookless_kind")]:
        monkeypatch.delitem(sys.modules, module)      # another test's import of the old text
    with pytest.raises(KindDefinitionError) as raised:
        scoring_runtime(kind_missing_runtime_hooks)
    assert str(raised.value) == ("kind 'hookless' (kinds/hookless/runtime/scoring.py): "
                                 "SCORES_PUBLIC_ROWS needs first_submission_rows")


def test_the_scorer_refuses_a_config_whose_kind_lacks_a_runtime_hook(kind_missing_runtime_hooks):
    config = {"format": CONFIG_FORMAT, "phase": "p",
              "kind": kind_missing_runtime_hooks, "tasks": [], "columns": []}
    with pytest.raises(ConfigError, match=r"kind: .*lacks required hook\(s\): report_section"):
        parse_config(config)


def test_optional_runtime_hooks_have_their_defaults(tmp_path):
    scoring, ingestion = scoring_runtime("label_accuracy"), ingestion_runtime("label_accuracy")
    assert scoring.SCORES_PUBLIC_ROWS is False and scoring.first_rows is None
    assert scoring.cap(None, None) is None and scoring.penalty_details() == {}
    assert ingestion.stage_inputs is copy_inputs_file and ingestion.epoch_seconds is None
    assert ingestion.units(None) == ((), 0.0) and ingestion.gate_problem(None, None) is None
    assert ingestion.participant.source == (REPO / "kinds" / "label_accuracy" / "runtime"
                                            / "participant.py")
    assert KINDS["label_accuracy"].times_epochs is False
    assert KINDS["bdl2021"].times_epochs and KINDS["bdl2021"].scores_public_rows


def test_settings_give_an_sd_only_where_the_kind_says_so():
    has_std = scoring_runtime("label_accuracy").has_std
    assert not has_std(object())
    assert has_std(dataclasses.make_dataclass("Replicated", [("has_std", bool, True)])())


def test_every_scoring_hook_is_described_once_where_the_core_uses_it():
    """runtime/scoring.py's docstring describes each field of ScoringRuntime (the hooks a
    kind's runtime/scoring.py gives); kinds/kind.py points there instead of naming them
    again, so a hook added to the record and not described fails here. The public-rows
    rule's flag is described with the kind records, where the rule's words may stand
    (test_competition_rules)."""
    import runtime.scoring
    described = set(re.findall(r"``(\w+)", runtime.scoring.__doc__))
    fields = {field.name for field in dataclasses.fields(ScoringRuntime)} - {
        "name", "SCORES_PUBLIC_ROWS"}
    assert fields - described == set()
    kind_doc = sys.modules[Kind.__module__].__doc__
    assert not {"read_reference", "read_submission", "evaluate", "penalty_details"} & set(
        re.findall(r"``(\w+)", kind_doc))


def test_importing_the_registry_loads_no_kind():
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, kinds.kind; "
                               "print(sorted(m for m in sys.modules if m.startswith('kinds.')))"],
        cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['kinds.kind']"


# ---- the seam's vocabulary ---------------------------------------------------------------

def core_files():
    for entry in CORE:
        path = REPO / entry
        files = [path] if path.is_file() else sorted(path.rglob("*"))
        yield from (f for f in files if f.is_file() and f.suffix in SOURCE_SUFFIXES
                    and "__pycache__" not in f.parts)


# A row of a package README's generated module table (scripts/module_index.py) repeats the
# first sentence of that module's docstring: it stands where the module stands.
MODULE_ROW = re.compile(r"^\| `([^`]+\.py)` \|")


def _lines(paths):
    for path in paths:
        relative = path.relative_to(REPO)          # once a file, not once a line
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            row = MODULE_ROW.match(line) if path.name == "README.md" else None
            where = (path.parent / row.group(1)).relative_to(REPO) if row else relative
            yield f"{where}:{number}", line


@functools.cache
def _core_lines() -> tuple[tuple[Path, tuple[tuple[str, str], ...]], ...]:
    """(file, its (where, line) pairs) for every file of the core, read once for the tests
    below, which each went over the whole core again (half a CPU second a pass)."""
    return tuple((path, tuple(_lines([path]))) for path in core_files())


def test_core_files_include_those_without_a_suffix():
    assert {REPO / "scoring_program" / "metadata",
            REPO / "ingestion_program" / "metadata"} <= set(core_files())


@pytest.mark.parametrize("name", sorted(KINDS))
def test_the_core_holds_none_of_a_kinds_words(name):
    """A kind's words: its metrics' names (and BDL's own, which its pages use)."""
    metrics = sorted({score.name for task_type in KINDS[name].task_types.values()
                      for score in task_type.score_types})
    words = re.compile(rf"\b({'|'.join(map(re.escape, metrics))})\b")
    hits = [f"{where}: {line.strip()}" for _, lines in _core_lines() for where, line in lines
            if words.search(line) or (name == "bdl2021" and BDL_WORDS.search(line))]
    assert not hits, "\n".join(hits)


def test_the_core_imports_no_kind_package():
    names = "|".join(re.escape(name) for name in KINDS)
    pattern = re.compile(rf"kinds\.({names})\b|kinds/({names})/")
    hits = [where for path, lines in _core_lines() if path.suffix == ".py"
            and path != REPO / "kinds" / "__init__.py"
            for where, line in lines if pattern.search(line)]
    assert not hits, hits


def test_no_core_code_probes_a_kind_outside_its_records():
    """Builder and programs alike read a kind through its records (``kinds/kind.py``)."""
    hits = [f"{where}: {line.strip()}" for path, lines in _core_lines()
            if path.suffix == ".py"
            and not path.relative_to(REPO).as_posix().startswith(PROBES_ALLOWED)
            for where, line in lines if KIND_PROBE.search(line)]
    assert not hits, "\n".join(hits)


def test_the_test_kind_is_its_package_and_one_registration_line():
    assert kinds.KINDS["label_accuracy"] == "kinds.label_accuracy"
    package = REPO / "kinds" / "label_accuracy"
    assert {p.name for p in package.iterdir()} >= {"kind.py", "runtime", "templates",
                                                    "default_spec.yaml"}


# ---- each kind's default competition, built and dry-run on both platforms -----------------

@dataclasses.dataclass(frozen=True)
class Built:
    kind: Kind
    platform: str
    spec: object
    folder: Path
    dry_runs: dict[str, str]          # bundle name -> what its dry run printed

    def bundles(self) -> dict[Path, list]:
        """Each bundle of the default competition, with the phases it holds (a code phase
        with its track's tasks)."""
        return {self.folder / bundle_name(self.spec, keys, track, self.platform):
                [_with_track(self.spec, key, track) for key in keys]
                for keys, track in competition_targets(self.spec)}

    def per_phase(self) -> dict[Path, list]:
        """One bundle for each phase: the first that holds it (a phase's tracks share its
        programs; their other task sets are the phase's business, not the kind's)."""
        chosen, covered = {}, set()
        for bundle, phases in self.bundles().items():
            if not {phase.key for phase in phases} <= covered:
                chosen[bundle] = phases
                covered |= {phase.key for phase in phases}
        return chosen


def _with_track(spec, key: str, track: str | None):
    """The phase as a bundle holds it: a code phase's label and tasks are its track's."""
    phase = spec.phase(key)
    if not (track and phase.code_submission):
        return phase
    return dataclasses.replace(phase, label=f"{phase.label} ({spec.track(track).label})"[:50],
                               tasks=spec.track(track).tasks)


def _passed(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def _dry_runs(stdout: str) -> dict[str, str]:
    """Each bundle's part of the command's output, from its "dry run of <zip> as" line on."""
    return {Path(part.split(" as ", 1)[0]).name: part
            for part in re.split(r"^dry run of ", stdout, flags=re.MULTILINE)[1:]}


@pytest.fixture(scope="module", params=[(name, platform) for name in sorted(KINDS)
                                        for platform in PLATFORMS], ids="-".join)
def built(request) -> Built:
    """The kind's default competition, built once a test run (built_bundles, which the other
    files running its kits share) and dry-run as the command line does (`--check` of each
    bundle, its main run in this process, in_process_commands.py: what is claimed is the dry
    run's finding, not a new interpreter's start, half a CPU second a bundle); each phase is
    dry-run once (not each track)."""
    name, platform = request.param
    record, spec = kind(name), load_spec(kind(name).DEFAULT_SPEC)
    folder = request.getfixturevalue("built_bundles")(record.DEFAULT_SPEC, platform)
    built = Built(record, platform, spec, folder, {})
    outputs = [_passed(run_main(build_bundle.main, "--check", bundle))
               for bundle in built.per_phase()]
    return Built(record, platform, spec, folder,
                 {bundle: part for output in outputs for bundle, part in _dry_runs(output).items()})


@pytest.mark.slow
def test_each_phases_sample_submission_passes_the_dry_run(built):
    for bundle, phases in built.per_phase().items():
        table = built.dry_runs[bundle.name]
        assert "dry run passed" in table
        assert table.split(" as ", 1)[1].startswith(
            "Codabench would run it" if built.platform == "codabench"
            else "CodaLab v1.5 would run it"), table[:300]
        for phase in phases:
            steps = ("ingestion", "scoring") if phase.code_submission else ("scoring",)
            for step in steps:
                assert re.search(rf"^{re.escape(phase.label)}.* +{step} .* ok$", table,
                                 re.MULTILINE), (phase.label, step, table)
        if built.kind.name in SAMPLE_SCORES_ABOVE:
            key, floor = SAMPLE_SCORES_ABOVE[built.kind.name]
            scores = [float(v) for v in re.findall(rf"{key}=([0-9.]+)", table)]
            assert scores and scores[-1] > floor, scores


def _competition(archive: zipfile.ZipFile) -> dict:
    return yaml.safe_load(archive.read("competition.yaml"))


def _page_files(competition: dict, platform: str) -> list[str]:
    if platform == "codabench":
        return [page["file"] for page in competition["pages"]]
    return list(competition["html"].values())


@pytest.mark.slow
def test_the_pages_are_there_and_filled(built):
    for bundle, phases in built.bundles().items():
        with zipfile.ZipFile(bundle) as archive:
            pages = {name: archive.read(name).decode() for name in
                     _page_files(_competition(archive), built.platform)}
        assert pages, bundle.name
        for name, text in pages.items():
            assert len(text.strip()) > 200, (bundle.name, name)
            assert not TEMPLATE_LEFTOVERS.search(text), (bundle.name, name)
        shown = " ".join(pages.values())
        missing = [task for phase in phases for task in phase.tasks if task not in shown]
        assert not missing, (bundle.name, missing)


def _members(archive: zipfile.ZipFile, suffix: str) -> list[str]:
    return [name for name in archive.namelist() if name.endswith(suffix)]


@pytest.mark.slow
def test_the_kit_guide_is_rendered_and_its_example_baseline_is_in_the_kit(built):
    for bundle in built.bundles():
        with zipfile.ZipFile(bundle) as archive:
            kits = {member: zipfile.ZipFile(archive.open(member)) for member in
                    _members(archive, "starting_kit.zip")}
            assert kits, bundle.name
            for member, kit in kits.items():
                names = kit.namelist()
                guide = kit.read("README.md").decode()
                assert guide.strip() and not TEMPLATE_LEFTOVERS.search(guide), member
                assert f"baselines/{built.kind.EXAMPLE_BASELINE}" in names, (member, names)
                assert built.kind.EXAMPLE_BASELINE in guide, member
        problems = agreement_problems(bundle)     # the guide as the pages and yaml state it
        assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_the_programs_metadata_is_the_kinds(built):
    """The description a platform shows for each program: the kind's words and entry file,
    never another kind's."""
    others = {KINDS[name].entry_file for name in KINDS} - {built.kind.entry_file}
    for bundle in built.bundles():
        with zipfile.ZipFile(bundle) as archive:
            for member in _members(archive, "_program.zip"):
                program = zipfile.ZipFile(archive.open(member))
                for name in ("metadata", "metadata.yaml"):
                    metadata = yaml.safe_load(program.read(name))
                    assert set(metadata) == {"command", "description"}, (member, name)
                text = yaml.safe_load(program.read("metadata"))["description"]
                if member.endswith("scoring_program.zip"):
                    assert text == built.kind.SCORING_DESCRIPTION, member
                else:
                    assert built.kind.entry_file in text, text
                    assert not any(other in text for other in others), text
                if built.kind.name != "bdl2021":
                    assert not BDL_WORDS.search(text), text


def test_a_participant_helper_file_must_be_a_file_beside_it(tmp_path):
    from kinds.kind import Participant
    source = tmp_path / "participant.py"
    source.write_text("")
    (tmp_path / "layers.py").write_text("")
    record = Participant(name="k", SIGNATURE="()", call=print, source=source,
                         HELPER_FILES=("layers.py",))
    assert record.staged_files() == {"participant.py": source, "layers.py": tmp_path / "layers.py"}
    for helper in ("missing.py", "../layers.py", "layers.txt"):
        with pytest.raises(KindDefinitionError, match=f"HELPER_FILES entry '{re.escape(helper)}'"):
            Participant(name="k", SIGNATURE="()", call=print, source=source,
                        HELPER_FILES=(helper,))
    assert ingestion_runtime("pgdl2020").participant.HELPER_FILES == ("layers.py",
                                                                       "frameworks.py")

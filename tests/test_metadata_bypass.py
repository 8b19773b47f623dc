"""A command hidden from the ingestion's check of a submission's metadata (issue: metadata bypass).

Both workers start the ``command`` of a submission's metadata beside the ingestion, outside its
sandbox, reading the file with loaders that build what tags ask for (codalab_v1.md §3.3:
``yaml.load`` of PyYAML 3.10; codabench_v2.md §3.4: ``yaml.FullLoader``). Each metadata below
hides its command from a plain reading (a tag makes ``yaml.safe_load`` fail, and an escape, an
alias, a merge or a byte order mark keeps the key out of sight of a search of the text), yet the
worker's loader finds it: each must be refused by the ingestion program, by the kit's
``submission_zip.py`` with the same reason, and shown by both platforms' dry runs.
"""
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from bundle.platforms import platform as platform_named
from bundle.platforms.worker import CODABENCH, CODALAB, CODE_METADATA, submission_metadata
from ingestion_program.ingest.submission_metadata import own_command_problem
from runtime.formats import read_record_key, read_run_record, signature_problem
from ingestion_harness import FAST_LABELS, needs_root, new_kind_run, prepare_kind, run_ingestion
from plans import per_phase_spec
from scoring_harness import image_python

REPO = Path(__file__).resolve().parents[1]
KIT = REPO / "starting_kit"
EVIL = "python3 evil.py"
TAGGED = f"!!python/str '{EVIL}'"      # a tag the safe loader cannot build, the full one can

# name -> (metadata bytes, the platforms whose worker reads the command from it)
BOTH = (CODALAB, CODABENCH)
BYPASSES = {
    "escaped key": (f'"comm\\x61nd": {TAGGED}\n', BOTH),
    "unicode-escaped key": (f'"\\u0063ommand": {TAGGED}\n', BOTH),
    "merge key": (f'<<: {{"comm\\x61nd": {TAGGED}}}\n', BOTH),
    "str tag on the key": (f'!!str "comm\\x61nd": {TAGGED}\n', BOTH),
    "explicit key": (f'? "comm\\u0061nd"\n: {TAGGED}\n', BOTH),
    "alias as a key": (f"description: &key command\n*key : {TAGGED}\n", BOTH),
    "merge of an alias": (f"description: &key command\n<<: {{*key : {TAGGED}}}\n", BOTH),
    "flow mapping at the root": (f'{{description: mine, "comm\\x61nd": {TAGGED}}}\n', BOTH),
    "indented root mapping": (f'  description: mine\n  "comm\\x61nd": {TAGGED}\n', BOTH),
    "byte order mark": (f"\ufeffcommand: {TAGGED}\n", BOTH),
    "duplicate keys": (f"command: ''\ndescription: mine\n\"comm\\x61nd\": {TAGGED}\n", BOTH),
    "line separator": (f"description: mine\u2028command: {TAGGED}\n", BOTH),
}
BYPASS_BYTES = {name: (text.encode("utf-8"), sites) for name, (text, sites) in BYPASSES.items()}
# PyYAML reads a UTF-16 file given as bytes, as CodaLab's Python 2 worker gives it; Codabench
# opens the file as UTF-8 text and fails on it.
BYPASS_BYTES["UTF-16 text"] = (f"command: {EVIL}\n".encode("utf-16"), (CODALAB,))

# Refused although PyYAML 6 finds no command: nothing proves them free of one.
UNPROVEN = {
    "a list": b"- command: python3 evil.py\n",
    "a single text": b"command\n",
    "a binary key": b"!!binary Y29tbWFuZA==: python3 evil.py\n",    # a str on Python 2
    "a tagged description": b"description: !!python/str mine\n",
    "an anchored description": b"description: &d mine\nnote: *d\n",
    "a key that is a list": b"? [command]\n: python3 evil.py\n",
    "two documents": b"description: mine\n---\ncommand: python3 evil.py\n",
    "Latin-1 bytes": "description: d\xe9j\xe0 vu\n".encode("latin-1"),
    "deep nesting": b"description: " + b"[" * 5000 + b"]" * 5000 + b"\n",
    "a large file": b"description: " + b"x" * 20_000 + b"\n",
}
HONEST = {
    "the kit's": CODE_METADATA,
    "description only": "description: my submission\n",
    "multi-line description": "description: >-\n  a long text that says: what it is\n  and more\n",
    "quoted description": 'description: "mine: v2 # not a comment"\n',
    "comments": "# my submission\ndescription: mine   # the second try\n\n# end\n",
    "empty": "",
    "lookalike key": "Command: python3 x.py\n",     # the workers look up 'command' exactly
}


def _folder(parent: Path, data: bytes, name: str = "metadata") -> Path:
    folder = parent / "submission"
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(data)
    return folder


@pytest.mark.parametrize("case", BYPASS_BYTES)
def test_the_worker_starts_the_command_of_each_bypass(tmp_path, case):
    """The case is real: the worker's loader (the model's FullLoader) finds the command."""
    data, sites = BYPASS_BYTES[case]
    folder = _folder(tmp_path, data)
    for site in sites:
        name, metadata = submission_metadata(folder, site)
        assert name == "metadata" and isinstance(metadata, dict), (site, metadata)
        assert metadata["command"] == EVIL, (site, metadata)


@pytest.mark.parametrize("case", BYPASS_BYTES)
@pytest.mark.parametrize("name", ["metadata", "metadata.yaml"])
def test_the_check_refuses_each_bypass(tmp_path, case, name):
    problem = own_command_problem(_folder(tmp_path, BYPASS_BYTES[case][0], name))
    assert problem and f"your submission's {name} " in problem, problem
    assert "outside its sandbox" in problem and "Keep only" in problem


@pytest.mark.parametrize("case", UNPROVEN)
def test_metadata_not_proven_free_of_a_command_is_refused(tmp_path, case):
    problem = own_command_problem(_folder(tmp_path, UNPROVEN[case]))
    assert problem and "cannot tell whether the platform finds a 'command:'" in problem, problem
    assert "Keep only lines 'key: value' in metadata" in problem


def test_a_metadata_folder_is_refused(tmp_path):
    (tmp_path / "metadata").mkdir()
    assert "is not a regular file" in own_command_problem(tmp_path)


@pytest.mark.parametrize("case", HONEST)
def test_honest_metadata_is_not_refused(tmp_path, case):
    folder = _folder(tmp_path, HONEST[case].encode("utf-8"))
    assert own_command_problem(folder) is None
    for site in BOTH:                      # and the worker starts nothing from it
        metadata = submission_metadata(folder, site)[1]
        assert not (isinstance(metadata, dict) and "command" in metadata)


def test_without_pyyaml_only_plain_lines_pass(tmp_path, monkeypatch):
    """An image without PyYAML: a line-by-line reading, which refuses what it cannot read."""
    monkeypatch.setitem(sys.modules, "yaml", None)          # import yaml raises ImportError
    for data, _ in BYPASS_BYTES.values():
        assert own_command_problem(_folder(tmp_path, data)), data
    for data in UNPROVEN.values():
        assert own_command_problem(_folder(tmp_path, data)), data
    for case in ("the kit's", "description only", "comments", "empty", "lookalike key"):
        assert own_command_problem(_folder(tmp_path, HONEST[case].encode())) is None, case
    folded = HONEST["multi-line description"].encode()
    assert "not plain text (line 1)" in own_command_problem(_folder(tmp_path, folded))


def test_the_kit_tool_refuses_with_the_ingestions_reason(tmp_path):
    sys.path[:0] = [str(KIT), str(REPO / "bundle" / "platforms")]
    try:
        from submission_zip import SubmissionLayoutError, make_zip
    finally:
        del sys.path[:2]
    for data, _ in [*BYPASS_BYTES.values(), *((d, ()) for d in UNPROVEN.values())]:
        folder = _folder(tmp_path, data)
        (folder / "submission.py").write_text(FAST_LABELS)
        with pytest.raises(SubmissionLayoutError) as refused:
            make_zip(folder, tmp_path / "out.zip", code=True, entry="submission.py")
        assert own_command_problem(folder) in str(refused.value)
        assert not (tmp_path / "out.zip").exists()
    for text in HONEST.values():
        if "Command" not in text:           # the worker model refuses other keys (G18)
            make_zip(_folder(tmp_path, text.encode()), tmp_path / "out.zip", code=True,
                     entry="submission.py")


# ---- The real ingestion program -----------------------------------------------------------

@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("metadata-bypass")
    prepare_kind(root, "label_accuracy")          # its code phase, evaluation
    return root


def _ingest(prepared: Path, tmp_path: Path, data: bytes, unprivileged: bool = False):
    run = new_kind_run(prepared, tmp_path, {"submission.py": FAST_LABELS})
    (run / "run" / "program" / "metadata").write_bytes(data)
    return run, run_ingestion(run, unprivileged=unprivileged)


def _assert_refused(run: Path, result) -> None:
    assert result.returncode == 4, result.stdout + result.stderr
    assert ("submission refused: Refused by the sandbox: your submission's metadata"
            in result.stderr), result.stderr
    output = run / "run" / "output"
    record = read_run_record(output / "ingestion_record.json")
    assert record.refused and "outside its sandbox" in record.refused
    assert signature_problem(output / "ingestion_record.json",
                             read_record_key(run / "hidden_ref")) is None
    assert not any(line.startswith("[") for line in result.stdout.splitlines()), "a task ran"


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("case", [*BYPASS_BYTES, "a list"])
def test_the_ingestion_refuses_each_bypass(prepared, tmp_path, case):
    data = BYPASS_BYTES[case][0] if case in BYPASS_BYTES else UNPROVEN[case]
    _assert_refused(*_ingest(prepared, tmp_path, data))


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("case", ["escaped key", "merge of an alias"])
def test_the_ingestion_without_capabilities_refuses_a_bypass(prepared, tmp_path, case):
    _assert_refused(*_ingest(prepared, tmp_path, BYPASS_BYTES[case][0], unprivileged=True))


@pytest.mark.slow
@needs_root
def test_the_ingestion_runs_code_with_honest_metadata(prepared, tmp_path):
    text = HONEST["multi-line description"] + HONEST["comments"]
    run, result = _ingest(prepared, tmp_path, text.encode())
    assert result.returncode == 0, result.stdout + result.stderr
    assert not read_run_record(run / "run" / "output" / "ingestion_record.json").refused


# ---- The dry run and the kit of a built bundle --------------------------------------------

STARTED = "import sys; print('STARTED BY THE WORKER', sys.argv[1:])\n"


@pytest.fixture(scope="module")
def bundles(built_bundles, tmp_path_factory) -> dict[str, Path]:
    """{platform: bundle zip} of label_accuracy's code phase, a bundle of its own (its default
    spec with one bundle per phase, built once a test run, conftest.py; read only)."""
    spec = per_phase_spec(tmp_path_factory.mktemp("per-phase-spec"))
    found = {site: list(built_bundles(spec, site).glob("*evaluation*.zip")) for site in BOTH}
    assert all(len(bundles) == 1 for bundles in found.values()), found
    return {site: bundles[0] for site, bundles in found.items()}


def _kit(bundle: Path, folder: Path) -> Path:
    with zipfile.ZipFile(bundle) as outer:
        outer.extract("starting_kit.zip", folder)
    with zipfile.ZipFile(folder / "starting_kit.zip") as kit:
        kit.extractall(folder / "kit")
    return folder / "kit"


def _bypass_zip(sample: Path, destination: Path) -> Path:
    """The kit's sample code submission with the escaped key's metadata and a script it runs."""
    with zipfile.ZipFile(sample) as source, zipfile.ZipFile(destination, "w") as copy:
        for member in source.namelist():
            if member not in ("metadata", "metadata.yaml"):
                copy.writestr(member, source.read(member))
        copy.writestr("metadata", "description: mine\n"
                      "\"comm\\x61nd\": !!python/str 'python3 $program/started.py $output'\n")
        copy.writestr("started.py", STARTED)
    return destination


@pytest.mark.slow
@pytest.mark.parametrize("site", BOTH)
def test_the_dry_run_starts_a_bypass_command_and_fails_it_as_the_ingestion(bundles, tmp_path,
                                                                           site):
    kit = _kit(bundles[site], tmp_path)
    submission = _bypass_zip(kit / "sample_code_submission.zip", tmp_path / "bypass.zip")
    steps = platform_named(site).dry_run(bundles[site], image_python(), submission)
    by_step = {step.step: step for step in steps}
    assert "has a 'command'" in by_step["submission"].detail
    if site == CODABENCH:                # v1.27 on starts no command of a submission (§3.4)
        assert "command" not in by_step
    else:
        command = by_step["command"]
        assert command.status == "failed" and "outside its sandbox" in command.detail
        assert "STARTED BY THE WORKER" in command.detail, command.detail
    ingestion = by_step["ingestion"]
    assert ingestion.status == "failed" and "submission refused" in ingestion.detail
    assert "your submission's metadata has a 'command:'" in ingestion.detail, ingestion.detail
    if site == CODABENCH:                # scored whatever the ingestion's exit status
        assert by_step["scoring"].status == "failed" and not by_step["scoring"].scores
    else:                                # a failed predict step is never scored
        assert "scoring" not in by_step


@pytest.mark.slow
def test_the_built_kits_tool_refuses_a_bypass_with_the_ingestions_reason(bundles, tmp_path):
    kit = _kit(bundles[CODABENCH], tmp_path)
    assert (kit / "programs" / "ingestion_program" / "ingest" / "submission_metadata.py").is_file()
    folder = _folder(tmp_path, UNPROVEN["a tagged description"])
    (folder / "submission.py").write_text(FAST_LABELS)
    made = subprocess.run([sys.executable, "submission_zip.py", str(folder), "out.zip"], cwd=kit,
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 1 and "nothing was written" in made.stderr, made.stderr
    assert own_command_problem(folder) in " ".join(made.stderr.split()), made.stderr
    assert "Traceback" not in made.stderr and not (kit / "out.zip").exists()


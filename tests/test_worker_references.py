"""Data kept on the organizer's Codabench workers (spec key on_worker): the sealed file format
of the references, the spec's and platform's refusals, and a code phase built with its
references and input data on the worker, checked for leaks file by file and dry-run through
the mounted folder, as well as with that folder missing or changed."""
import hashlib
import html
import io
import shutil
import subprocess
import zipfile

import pytest
import yaml

from bundle.build import _worker_leaks
from bundle.phase_plan import phase_plan
from bundle.spec import SpecError, load_spec
from bundle.worker_data import CHECKSUMS, WorkerPart, worker_part
from local_runs import REPO
from runtime.formats.sealed_files import BLOCK_BYTES, SealError, seal, unseal
from test_pages_browser import as_the_platform_shows_it, browser, escaping_problems  # noqa: F401
from test_pgdl_kind import build

PGDL_SPEC = REPO / "kinds" / "pgdl2020" / "default_spec.yaml"
QUEUE = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
PHASE = "phase1"


def spec_file(folder, name="spec.yaml", **keys):
    raw = yaml.safe_load(PGDL_SPEC.read_text())
    if raw.get("logo"):
        shutil.copyfile(PGDL_SPEC.parent / raw["logo"], folder / raw["logo"])
    raw.update(keys)
    path = folder / name
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def nested_files(data: bytes, where: str):
    """(where, bytes) of every file of a zip, nested zips opened too."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for name in archive.namelist():
            member = archive.read(name)
            yield f"{where}:{name}", member
            if name.endswith(".zip"):
                yield from nested_files(member, f"{where}:{name}")


# ---- the sealed file format ------------------------------------------------------------

def test_a_sealed_file_opens_only_with_its_key_under_its_name():
    key, other = bytes(range(32)), bytes(32)
    data = bytes(range(256)) * (BLOCK_BYTES // 128 + 3)          # several keystream blocks
    sealed = seal(key, "task/ref.npy", data)
    assert unseal(key, "task/ref.npy", sealed) == data
    assert seal(key, "task/ref.npy", data) == sealed             # rebuilds stay identical
    assert data[:4096] not in sealed and len(sealed) == len(data) + 40
    flipped = bytearray(sealed)
    flipped[-1] ^= 1
    for args in ((other, "task/ref.npy", sealed), (key, "task/other.npy", sealed),
                 (key, "task/ref.npy", bytes(flipped)), (key, "task/ref.npy", b"plain text")):
        with pytest.raises(SealError):
            unseal(*args)
    # the same bytes under two names seal differently (the name is part of the nonce)
    assert seal(key, "a", data)[40:] != seal(key, "b", data)[40:]


# ---- refusals --------------------------------------------------------------------------

def test_the_spec_needs_a_queue_of_ones_own_and_no_upload_apart(tmp_path):
    with pytest.raises(SpecError) as refused:
        load_spec(spec_file(tmp_path, on_worker=["reference_data", "input_data"],
                            upload_separately=["reference_data"]))
    assert "on_worker: needs codabench_queue" in str(refused.value)
    assert "reference_data cannot go both to your workers and to an upload apart" \
        in str(refused.value)


def test_codalab_refuses_the_key_and_writes_nothing(tmp_path):
    spec = spec_file(tmp_path, on_worker=["reference_data", "input_data"], codabench_queue=QUEUE)
    built = build("--config", str(spec), "--platform", "codalab", "--phase", PHASE,
                  "--out", str(tmp_path / "out"))
    assert built.returncode == 1
    assert "CodaLab workers mount no folder" in built.stderr and "build for Codabench" in built.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


# ---- a code phase kept on the worker -----------------------------------------------------

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The PGDL code phase built with its references on the worker (checked) and without."""
    folder = tmp_path_factory.mktemp("worker-references")
    kept = build("--config", str(spec_file(folder, on_worker=["reference_data", "input_data"],
                                           codabench_queue=QUEUE)),
                 "--phase", PHASE, "--out", str(folder / "kept"), "--check")
    assert kept.returncode == 0, kept.stdout[-3000:] + kept.stderr[-3000:]
    plain = build("--config", str(spec_file(folder, "plain.yaml", codabench_queue=QUEUE)),
                  "--phase", PHASE,
                  "--out", str(folder / "plain"))
    assert plain.returncode == 0, plain.stderr[-3000:]
    return folder, kept.stdout


def program_command(archive, program: str) -> str:
    with zipfile.ZipFile(io.BytesIO(archive.read(f"{program}.zip"))) as opened:
        return yaml.safe_load(opened.read("metadata.yaml"))["command"]


def test_the_bundle_holds_neither_and_the_dry_run_runs_and_scores_through_the_mount(built):
    folder, stdout = built
    (bundle,) = (folder / "kept").glob("*.zip")
    (worker,) = (folder / "kept").glob("*.worker_data")
    with zipfile.ZipFile(bundle) as archive:
        competition = yaml.safe_load(archive.read("competition.yaml"))
        evaluation = archive.read("pages/evaluation.html").decode()
        scoring = program_command(archive, "scoring_program")
        ingestion = program_command(archive, "ingestion_program")
        names = archive.namelist()
    assert all("reference_data" not in task and "input_data" not in task
               for task in competition["tasks"])
    assert "reference_data.zip" not in names and "input_data.zip" not in names
    assert scoring.endswith(" $input $output /app/data")
    assert ingestion.endswith(" $submission_program $hidden /app/data")
    # the input data as it is, the references sealed
    with zipfile.ZipFile(next((folder / "plain").glob("*.zip"))) as archive:
        inputs = dict(nested_files(archive.read("input_data.zip"), "input_data.zip"))
    kept_inputs = {f"input_data.zip:{p.relative_to(worker / PHASE / 'input_data').as_posix()}":
                   p.read_bytes() for p in (worker / PHASE / "input_data").rglob("*")
                   if p.is_file()}
    assert kept_inputs == inputs and inputs
    assert all(p.name.endswith(".sealed") for p in (worker / PHASE / "reference_data").iterdir())
    assert "never leaves the organizers' own machines" in html.unescape(evaluation)
    # the dry run read the sealed references (its record check needs the key among them)
    assert "scoring" in stdout and "scores: breast_cancer_mlp_cmi=" in stdout
    assert "dry run passed" in stdout and "sha256sum -c SHA256SUMS" in stdout
    # the checksums hold, and name every sealed file
    sums = subprocess.run(["sha256sum", "-c", CHECKSUMS], cwd=worker, capture_output=True,
                          text=True)
    assert sums.returncode == 0, sums.stdout + sums.stderr
    kept = [p for p in worker.rglob("*") if p.is_file() and p.name not in (CHECKSUMS, "README.txt")]
    assert sorted(p.relative_to(worker).as_posix() for p in kept) == \
        sorted(line.split("  ")[1] for line in (worker / CHECKSUMS).read_text().splitlines())


def test_no_reference_file_is_in_the_bundle_or_the_worker_folder_in_the_clear(built):
    """Independently of the build's own leakage check: every file of the plain build's
    reference data against every file of the kept build, nested zips opened."""
    folder, _ = built
    (plain,) = (folder / "plain").glob("*.zip")
    with zipfile.ZipFile(plain) as archive:
        references = dict(nested_files(archive.read("reference_data.zip"), "reference_data.zip"))
    hidden = {hashlib.sha256(data).hexdigest(): name for name, data in references.items()
              if not name.endswith("ingestion_record.key")}   # by design in the ingestion program
    assert hidden     # the zoo's configs with their generalization gaps
    (bundle,) = (folder / "kept").glob("*.zip")
    (worker,) = (folder / "kept").glob("*.worker_data")
    found = list(nested_files(bundle.read_bytes(), bundle.name))
    found += [(str(path), path.read_bytes()) for path in worker.rglob("*") if path.is_file()]
    assert len(found) > 50
    copies = [(where, hidden[hashlib.sha256(data).hexdigest()]) for where, data in found
              if hashlib.sha256(data).hexdigest() in hidden]
    assert copies == []
    # and no reference's bytes inside a bigger file
    for name, data in references.items():
        if len(data) >= 64 and not name.endswith(".key"):
            assert not [where for where, other in found if data in other], name


def test_the_leakage_check_finds_a_reference_put_in_a_public_zip(built, tmp_path):
    folder, _ = built
    spec = load_spec(folder / "spec.yaml")
    plan = phase_plan(spec, PHASE, None)
    references = tmp_path / "ref"
    references.mkdir()
    (references / "labels.csv").write_text("\n".join(str(i * 7 % 13) for i in range(40)))
    sealed = worker_part(references, plan, "x.zip", "reference_data")
    assert isinstance(sealed, WorkerPart) and sealed.key is not None
    kept = [{"reference_data": sealed}]
    assert _worker_leaks([plan], [{}], kept, {}) == []
    public = io.BytesIO()
    with zipfile.ZipFile(public, "w") as archive:
        archive.write(references / "labels.csv", "data/labels.csv")
    problems = _worker_leaks([plan], [{}], kept, {"public_data.zip": public.getvalue()})
    assert problems and "public_data.zip:data/labels.csv is a copy of hidden" in problems[0]
    # in the input data kept on the worker, where participant code reads it
    inputs = worker_part(references, plan, "x.zip", "input_data")
    problems = _worker_leaks([plan], [{}], [{"reference_data": sealed, "input_data": inputs}], {})
    assert problems and "worker folder:phase1/input_data/labels.csv is a copy of hidden" \
        in problems[0]


@pytest.mark.parametrize("damage", ["reference changed", "input changed", "missing"])
def test_a_worker_copy_that_is_not_the_builds_fails_the_submission_naming_the_file(
        built, tmp_path, damage):
    """A changed reference stops the scorer (the organizer's error); a changed input file or
    a missing folder makes the ingestion refuse the submission with the reason, so that
    nothing runs on data that is not the build's. Either way the submission fails and counts
    toward no limit."""
    folder, _ = built
    shutil.copytree(folder / "kept", tmp_path / "kept")
    (bundle,) = (tmp_path / "kept").glob("*.zip")
    (worker,) = (tmp_path / "kept").glob("*.worker_data")
    data = "reference_data" if damage == "reference changed" else "input_data"
    victim = sorted(p for p in (worker / PHASE / data).rglob("*") if p.is_file())[0]
    if damage == "missing":
        shutil.rmtree(worker)
    else:
        content = victim.read_bytes()
        victim.write_bytes(content[:-1] + bytes([content[-1] ^ 1]))
    checked = build("--check", str(bundle))
    said = checked.stdout + checked.stderr
    assert checked.returncode == 1 and "dry run FAILED" in said
    assert "the data on this worker is not the build's" in said
    if damage != "input changed":           # the scorer checks the references first
        assert "scoring stopped, the organizer must fix" in said
    if damage != "reference changed":
        assert ("submission refused: Did not start: the organizers must fix this "
                "competition's worker") in said
    if damage == "input changed":
        assert "not scored: the ingestion refused the submission" in said
    assert (f"{victim.name}: differs from the build" if damage != "missing"
            else f"{PHASE}/input_data: missing (no copy of the build's folder") in said
    assert damage != "missing" or f"{PHASE}/reference_data: missing (no copy" in said
    assert "sha256sum -c SHA256SUMS" in said


def test_the_evaluation_page_says_where_the_references_are_in_a_browser(built, browser,
                                                                       tmp_path):
    folder, _ = built
    (bundle,) = (folder / "kept").glob("*.zip")
    with zipfile.ZipFile(bundle) as archive:
        page = archive.read("pages/evaluation.html").decode()
    frame = tmp_path / "evaluation.html"
    frame.write_text(as_the_platform_shows_it(page, "Evaluation"), encoding="utf-8")
    text = browser.visit(frame.as_uri())
    assert "hidden reference data never leaves the organizers' own machines" in text
    assert "scored there only" in text and escaping_problems(text) == []


def test_a_rebuild_writes_the_same_bundle_and_worker_folder(built, tmp_path):
    """The sealing key comes from the build secret and the phase, and sealing is
    deterministic: a rebuild on the same machine replaces the folder with the same bytes."""
    folder, _ = built
    again = tmp_path / "again"
    shutil.copytree(folder / "kept", again)
    (worker,) = again.glob("*.worker_data")
    (worker / "stale.txt").write_text("from an older build")
    rebuilt = build("--config", str(folder / "spec.yaml"), "--phase", PHASE, "--out", str(again))
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    assert not (worker / "stale.txt").exists()

    def files(root):
        return {p.relative_to(root).as_posix(): p.read_bytes()
                for p in sorted(root.rglob("*")) if p.is_file()}
    assert files(again) == files(folder / "kept")


def test_a_large_kept_folder_is_named_with_the_time_its_check_takes(monkeypatch):
    import bundle.build as build_module
    part = WorkerPart("x.worker_data/phase1/input_data", {"a.npy": bytes(3000)})
    assert build_module._worker_warnings([part]) == []
    monkeypatch.setattr(build_module, "WORKER_CHECK_WARNING_BYTES", 2000)
    (warning,) = build_module._worker_warnings([part])
    assert warning.startswith("x.worker_data/phase1/input_data holds 0.0 GiB") \
        and "leave room for it in execution_time_limit" in warning


@pytest.mark.parametrize("kind, phase", [("bdl2021", ("evaluation", "--track", "light")),
                                         ("retina", ("final",))])
def test_every_kinds_code_phase_runs_and_scores_with_both_kept_on_the_worker(tmp_path, kind,
                                                                            phase):
    """Each kind stages its inputs from the mount as from $input (PGDL above)."""
    default = REPO / "kinds" / kind / "default_spec.yaml"
    raw = yaml.safe_load(default.read_text())
    shutil.copyfile(default.parent / raw["logo"], tmp_path / raw["logo"])
    raw.update(on_worker=["reference_data", "input_data"], codabench_queue=QUEUE)
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    built = build("--config", str(tmp_path / "spec.yaml"), "--phase", *phase,
                  "--out", str(tmp_path / "out"), "--check")
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert "dry run passed" in built.stdout and "\n                                 scores: " \
        in built.stdout
    (bundle,) = (tmp_path / "out").glob("*.zip")
    with zipfile.ZipFile(bundle) as archive:
        assert not {"input_data.zip", "reference_data.zip"} & set(archive.namelist())

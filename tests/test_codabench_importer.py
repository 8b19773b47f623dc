"""A v1.5 bundle through Codabench's v1.5 importer (unpackers/v1.py, codabench_v2.md §2): the
competition it becomes, every key it drops or changes named, and the dry run of the result on
Codabench's worker model (build_bundle.py --check --via-codabench-importer)."""
import datetime as dt
import io
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from bundle.platforms.codabench_importer import DEFAULT_IMAGE, imported
from kinds.kind import KINDS
from runtime.formats import RECORD_KEY_NAME, RECORD_NAME, RunRecord, read_run_record, write_run_record
from runtime.formats.run_record import codabench_layout, importer_key
from scoring_program.scorer.main import record_refusal

REPO = Path(__file__).resolve().parents[1]


def v15(**top) -> dict:
    board = {"label": "Results", "rank": 1}
    return {
        "title": "T", "html": {"overview": "overview.html", "terms": "terms.html"},
        "image": "logo.png", "competition_docker_image": "codalab/codalab-legacy:py312",
        "end_date": dt.datetime(2027, 12, 31),
        "force_submission_to_leaderboard": True,
        "phases": {
            2: {"phasenumber": 2, "label": "Final", "start_date": dt.datetime(2027, 6, 1),
                "scoring_program": "s2.zip", "reference_data": "r2.zip", "color": "blue"},
            1: {"phasenumber": 1, "label": "Development", "start_date": dt.datetime(2027, 1, 1),
                "max_submissions": 7, "scoring_program": "s1.zip", "reference_data": "r1.zip",
                "ingestion_program": "i1.zip", "input_data": "d1.zip", "starting_kit": "k1.zip"},
        },
        "leaderboard": {"leaderboards": {"results": board}, "columns": {
            "loss": {"leaderboard": board, "label": "Loss", "rank": 2, "sort": "asc",
                     "numeric_format": 4},
            "acc": {"leaderboard": board, "label": "Accuracy", "rank": 1},
            "average_rank": {"leaderboard": board, "label": "Average rank", "rank": 3,
                             "selection_default": 1,
                             "computed": {"operation": "Avg", "fields": "acc,loss"}}}},
        **top}


def test_the_importer_makes_one_task_per_phase_in_phase_number_order():
    competition, _ = imported(v15())
    assert [p["name"] for p in competition["phases"]] == ["Development", "Final"]
    assert [t["name"] for t in competition["tasks"]] == ["Development Task", "Final Task"]
    first = competition["tasks"][0]
    assert first["ingestion_program"] == "i1.zip" and first["scoring_program"] == "s1.zip"
    assert competition["phases"][0]["max_submissions"] == 7
    assert competition["phases"][1]["max_submissions"] == 100        # the importer's default
    assert competition["terms"] == "terms.html"
    assert competition["pages"] == [{"title": "overview", "file": "overview.html"}]


def test_every_change_is_named():
    competition, changes = imported(v15())
    text = "\n".join(changes)
    assert "force_submission_to_leaderboard: not read by the importer" in text
    assert "phases.2.color: not read by the importer" in text
    # a phase ends a day before the next starts; the last at the competition's end
    assert competition["phases"][0]["end"] == "2027-05-31 00:00:00"
    assert competition["phases"][1]["end"] == "2027-12-31 00:00:00"
    assert "phases.1: ends 2027-05-31 00:00:00, a day before the next phase starts" in text
    # the computed column is not converted; the first column by rank ranks
    assert [c["key"] for c in competition["leaderboards"][0]["columns"]] == ["acc", "loss"]
    assert "average_rank: its computed Avg is not converted" in text
    assert "ranks by acc (the first column by rank), not by average_rank" in text
    assert competition["leaderboards"][0]["submission_rule"] == "Add"
    assert "submission_rule Add (the importer sets none)" in text
    assert "code phases (Development)" in text and "the key derived for this importer" in text


def test_only_a_v15_yaml_goes_through_the_importer(tmp_path):
    from bundle.platforms.codabench_importer import importable
    assert importable(v15()) and importable(v15(version=1.5)) and not importable(v15(version=2))


def test_a_blank_image_becomes_the_importers_default():
    competition, changes = imported(v15(competition_docker_image=""))
    assert competition["docker_image"] == DEFAULT_IMAGE
    assert any(DEFAULT_IMAGE in change for change in changes)


def test_a_v18_parent_phase_is_dropped():
    raw = v15()
    raw["phases"][0] = {"phasenumber": 0, "label": "Parent", "is_parallel_parent": True,
                        "start_date": dt.datetime(2026, 12, 1)}
    competition, changes = imported(raw)
    assert [p["name"] for p in competition["phases"]] == ["Development", "Final"]
    assert any("v1.8 parent phase, Parent, is dropped" in change for change in changes)


def test_the_importer_key_signs_only_where_codabench_runs_the_scorer(tmp_path):
    """A v1.5 bundle's ingestion program carries a key derived for Codabench's importer (there
    the ingestion cannot read the hidden data). On CodaLab a submission's own container can
    read the ingestion program, so a record signed with that key is refused in CodaLab's
    layout and accepted in Codabench's; the phase's own key is accepted in both."""
    key = bytes(range(32))
    ref, res = tmp_path / "ref", tmp_path / "res"
    ref.mkdir()
    res.mkdir()
    (ref / RECORD_KEY_NAME).write_text(key.hex() + "\n")
    config = SimpleNamespace(record="signed_or_importer")

    def refusal(signing_key, on_codabench):
        write_run_record(res / RECORD_NAME, RunRecord({}, {}, {}), signing_key)
        return record_refusal(config, ref, res, read_run_record(res / RECORD_NAME), on_codabench)
    assert importer_key(key) != key
    assert refusal(key, False) is None and refusal(key, True) is None
    assert refusal(importer_key(key), True) is None
    assert "has a wrong signature" in refusal(importer_key(key), False)
    assert "has a wrong signature" in refusal(bytes(32), True)
    # A native Codabench bundle's scorer never takes the importer's key, in any layout.
    config = SimpleNamespace(record="signed")
    assert refusal(key, True) is None
    assert "has a wrong signature" in refusal(importer_key(key), True)
    assert "has a wrong signature" in refusal(importer_key(key), False)
    assert codabench_layout(tmp_path / "app" / "program", tmp_path / "app" / "input")
    assert not codabench_layout(tmp_path / "run" / "program", tmp_path / "run" / "input")
    assert not codabench_layout(tmp_path / "app" / "program", tmp_path / "x" / "app" / "input")


def quick_bdl_sample(bundle: Path, destination: Path) -> Path | None:
    """The kit's sample code zip of a BDL code bundle with the trivial baseline as its
    submission.py (None for a results phase's bundle): the sample, cyclical SGLD, trains for
    half of every task's 30 s budget (45 s of ingestion on the extended track here), and what
    it trains is not what the importer's dry run is about."""
    with zipfile.ZipFile(bundle) as outer:
        kit = zipfile.ZipFile(io.BytesIO(outer.read("starting_kit.zip")))
    if "sample_code_submission.zip" not in kit.namelist():
        return None
    trivial = (REPO / "kinds" / "bdl2021" / "kit" / "baselines" / "trivial.py").read_bytes()
    with zipfile.ZipFile(io.BytesIO(kit.read("sample_code_submission.zip"))) as sample, \
            zipfile.ZipFile(destination, "w") as quick:
        for name in sample.namelist():
            quick.writestr(name, trivial if name == "submission.py" else sample.read(name))
    return destination


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kinds_v15_bundle_through_the_importer(built_bundles, kind, tmp_path):
    """Every phase of each kind's v1.5 bundle runs and scores on Codabench as imported, code
    phases with the importer's key (the test above); the output names every change. The
    bundles are the run's shared build (conftest.py); each is dry-run by the command line,
    with the kit's sample, save BDL's code phases: its sample with the trivial baseline's
    training (quick_bdl_sample)."""
    bundles = sorted(built_bundles(KINDS[kind].DEFAULT_SPEC, "codalab").glob("*.zip"))
    assert bundles
    samples = [quick_bdl_sample(bundle, tmp_path / f"quick-{bundle.name}")
               if kind == "bdl2021" else None for bundle in bundles]
    assert kind != "bdl2021" or sum(sample is not None for sample in samples) == 2
    runs = [subprocess.run([sys.executable, str(REPO / "build_bundle.py"), "--check", str(bundle),
                            "--via-codabench-importer",
                            *(("--submission", str(sample)) if sample else ())],
                           cwd=REPO, capture_output=True, text=True, timeout=900)
            for bundle, sample in zip(bundles, samples)]
    result = SimpleNamespace(returncode=max(run.returncode for run in runs),
                             stdout="".join(run.stdout for run in runs),
                             stderr="".join(run.stderr for run in runs))
    output = result.stdout + result.stderr
    assert "as Codabench would import and run it" in output
    assert "Codabench's v1.5 importer (codabench_v2.md §2) drops or changes:" in output
    assert "submission_rule Add (the importer sets none)" in output
    rows = [(" ".join(cells[:-3]), cells[-3], cells[-1]) for cells in
            (line.split() for line in result.stdout.splitlines())
            if len(cells) > 3 and cells[-1] in ("ok", "failed", "timeout")]
    code_phases = {phase for phase, step, _ in rows if step == "ingestion"}
    scored = {phase: status for phase, step, status in rows if step == "scoring"}
    assert scored and set(scored) >= code_phases, rows
    assert set(scored.values()) == {"ok"}, output[-3000:]
    if code_phases:
        assert "signs its run record with the key derived for this importer" in output
    assert result.returncode == 0, output[-3000:]


@pytest.mark.parametrize("platform, accepted", [("codabench", False), ("codalab", True)])
def test_a_record_signed_with_the_importer_key_scores_only_in_a_v15_bundle(tmp_path, platform,
                                                                          accepted):
    """The attack: on a CodaLab server a submission's own command reads the v1.5 ingestion
    program's importer key and signs a record of its own making. Run in Codabench's layout by a
    native Codabench bundle's real scoring program, that record must be refused; only a v1.5
    bundle's scorer (which may run through the importer) takes it there."""
    from plans import embedded_phase
    from bundle.phase_data import stage_reference_data
    from bundle.programs import assemble_scoring_program
    from scoring_harness import image_python

    plan = embedded_phase("evaluation", code_submission=True)
    app = tmp_path / "app"
    assemble_scoring_program(plan, app / "program", platform=platform)
    stage_reference_data(plan, app / "input" / "ref")
    key = bytes.fromhex((app / "input" / "ref" / RECORD_KEY_NAME).read_text().strip())
    res = app / "input" / "res"
    res.mkdir()
    write_run_record(res / RECORD_NAME, RunRecord({}, {}, {}), importer_key(key))
    (app / "output").mkdir()
    result = subprocess.run([image_python(), "-I", str(app / "program" / "score.py"),
                             str(app / "input"), str(app / "output")],
                            cwd=app, capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output[-2000:]
    assert ("has a wrong signature" not in output) == accepted, output[-2000:]


def test_the_importer_drops_the_time_of_day_and_says_so():
    """get_datetime (unpackers/utils.py): a YAML timestamp is a date to it, made 00:00 of its
    day. Our v1.5 yaml writes timestamps, so a phase opening at noon opens at midnight, and
    the last phase closes at 00:00 of the end date; each such phase is named, old and new."""
    raw = v15(end_date=dt.datetime(2027, 12, 31, 23, 59, 59))
    raw["phases"][2]["start_date"] = dt.datetime(2027, 6, 1, 12, 30)
    competition, changes = imported(raw)
    assert [(p["start"], p["end"]) for p in competition["phases"]] == [
        ("2027-01-01 00:00:00", "2027-05-31 00:00:00"),
        ("2027-06-01 00:00:00", "2027-12-31 00:00:00")]
    text = "\n".join(changes)
    assert "phases.2 (Final): starts 2027-06-01 00:00:00, not 2027-06-01 12:30:00" in text
    assert "phases.2 (Final): ends 2027-12-31 00:00:00, not 2027-12-31 23:59:59" in text
    assert "on CodaLab it runs until the next phase starts, 2027-06-01 12:30:00" in text
    # a phase whose dates are midnight already is not named
    assert "phases.1 (Development): starts" not in text

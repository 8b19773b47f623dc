"""A PGDL ``.predict`` file is bounded by the zoo before it is parsed: a file larger than its
networks can need is refused from its size alone, and one with far more keys than networks is
refused once that many have been read, both through the real scorer with the file, its size
and the bound named. A normal file still scores and a duplicate key is still refused."""
import json
import re

import pytest

from bundle.phase_data import stage_reference_data
from bundle.phase_plan import phase_plan
from bundle.programs import assemble_scoring_program
from bundle.spec import load_spec
from kinds.kind import kind
from kinds.pgdl2020.runtime.formats import (PREDICT_EXTRA_KEYS, max_predict_bytes,
                                            read_model_configs)
from scoring_harness import new_run, read_scores, read_unscored, run_scoring
from scoring_program.scorer.main import NOTHING_SCORED


@pytest.fixture(scope="module")
def results_phase(tmp_path_factory):
    """The public phase's scoring program and references (one task, a zoo of 32 networks)."""
    root = tmp_path_factory.mktemp("pgdl-limits")
    plan = phase_plan(load_spec(kind("pgdl2020").DEFAULT_SPEC), "public", code_submission=False)
    assemble_scoring_program(plan, root / "program")
    stage_reference_data(plan, root / "ref")
    (task,) = plan.tasks
    return root, task.name, read_model_configs(next((root / "ref").glob("*model_configs.json")))


def _score(results_phase, tmp_path, text: str):
    root, task, _ = results_phase
    run = new_run(root, tmp_path / "run")
    (run / "input" / "res" / f"{task}.predict").write_text(text)
    result = run_scoring(run)
    return run, result, result.stdout + result.stderr


def _members(ids) -> list[str]:
    return [f'    "{model}": {k + 1.5}' for k, model in enumerate(ids)]


def _refused(run, result, log, task):
    """The phase's one task penalised with the worst values, no traceback."""
    assert result.returncode == NOTHING_SCORED and "Traceback" not in log, log[-3000:]
    scores = read_unscored(run)
    assert scores[f"{task}_cmi"] == 0.0 and scores[f"{task}_kendall_tau"] == -1.0


def test_a_file_larger_than_the_zoo_can_need_is_refused_unparsed(results_phase, tmp_path):
    _, task, zoo = results_phase
    bound = max_predict_bytes(len(zoo.ids))
    members = _members(zoo.ids)
    members.insert(1, members[0])                   # a duplicate key: what a parse would report
    filler = (f'    "stray_{k:07d}": 0.0' for k in range(bound // 20 + 1000))
    text = "{\n" + ",\n".join([*members, *filler]) + "\n}\n"
    assert len(text) > bound
    run, result, log = _score(results_phase, tmp_path, text)
    _refused(run, result, log, task)
    expected = (rf"task {task} penalised: Wrote invalid output: {task}\.predict: "
                rf"{len(text):,} bytes, far more than a \.predict file of {len(zoo.ids)} models "
                rf"can need \(at most {bound:,} bytes.*\); refused without reading it")
    assert re.search(expected, log), log[-3000:]
    assert "the same model" not in log              # never parsed: the duplicate went unseen


def test_a_file_of_many_short_keys_is_refused_at_the_key_limit(results_phase, tmp_path):
    _, task, zoo = results_phase
    limit = len(zoo.ids) + PREDICT_EXTRA_KEYS
    stray = [f'"s{k}":0' for k in range(3 * limit)]
    # under the size bound, and broken at its end: a whole parse would report the syntax
    text = "{" + ",".join([*_members(zoo.ids), *stray]) + ",}"
    assert len(text) < max_predict_bytes(len(zoo.ids))
    run, result, log = _score(results_phase, tmp_path, text)
    _refused(run, result, log, task)
    assert (f"task {task} penalised: Wrote invalid output: {task}.predict: more than "
            f"{limit:,} keys, for a task of {len(zoo.ids)} models (one key each); refused at "
            f"line 1 without reading further") in log, log[-3000:]
    assert "expected a model id" not in log


def test_a_normal_file_still_scores(results_phase, tmp_path):
    _, task, zoo = results_phase
    text = json.dumps({model: float(k) for k, model in enumerate(zoo.ids)}, indent=4)
    run, result, log = _score(results_phase, tmp_path, text)
    assert result.returncode == 0 and "penalised" not in log, log[-3000:]
    assert -1.0 <= read_scores(run)[f"{task}_kendall_tau"] <= 1.0


def test_a_duplicate_key_is_still_refused_naming_both_lines(results_phase, tmp_path):
    _, task, zoo = results_phase
    members = _members(zoo.ids)
    members.insert(1, members[0])
    run, result, log = _score(results_phase, tmp_path, "{\n" + ",\n".join(members) + "\n}\n")
    _refused(run, result, log, task)
    assert (f"{task}.predict: line 3: keys '{zoo.ids[0]}' and '{zoo.ids[0]}' are the same "
            f"model ({zoo.ids[0]}; the first is on line 2)") in log, log[-3000:]

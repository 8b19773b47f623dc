"""One rule for what a zoo's measures are, on both sides: the ingestion refuses the array the
code returns, and the scorer an uploaded .npy, for the same values and with the same words;
an infinite measure is refused by both (and by the .predict reader), a NaN is a network not
measured, which the scorer penalises."""
from types import SimpleNamespace

import numpy as np
import pytest

from kinds.pgdl2020.runtime.formats import write_predict
from kinds.pgdl2020.runtime.ingestion import check_output
from kinds.pgdl2020.runtime.scoring import TASK_TYPES, ZOO as ZOO_TASK, evaluate, read_submission
from runtime.formats import FormatError
from runtime.scoring import SubmissionError, TaskConfig

IDS = ["model_1", "model_2", "model_3"]
SETTINGS = SimpleNamespace(num_models=3, submission_stem="zoo")
TASK = TaskConfig("zoo", TASK_TYPES[ZOO_TASK], {}, None, SETTINGS)
CONTRACT = SimpleNamespace(contract={"model_ids": IDS})
ZOO = SimpleNamespace(ids=IDS)

BAD = {
    "infinite": (np.array([0.1, np.inf, 0.3]), "network model_2 got an infinite measure"),
    "negative infinite": (np.array([-np.inf, 0.2, np.inf]),
                          "network model_1 got an infinite measure"),
    "too few": (np.array([0.1, 0.2]), "expected 3 values (one per network), found 2"),
    "too many": (np.zeros((2, 2)), "expected 3 values (one per network), found 4"),
    "words": (np.array(["a", "b", "c"]), "not numbers ("),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_an_array_that_is_no_zoos_measures_is_refused_by_both_programs(tmp_path, case):
    values, problem = BAD[case]
    with pytest.raises(FormatError) as returned:
        check_output(values, CONTRACT)
    assert str(returned.value).startswith(f"measures: {problem}"), str(returned.value)
    np.save(tmp_path / "zoo.npy", values)
    with pytest.raises(SubmissionError) as uploaded:
        read_submission(TASK, tmp_path, ZOO)
    assert str(uploaded.value).startswith(f"zoo.npy: {problem}"), str(uploaded.value)
    assert str(uploaded.value).removeprefix("zoo.npy") == \
        str(returned.value).removeprefix("measures")


def test_an_infinite_measure_in_a_predict_file_is_refused_too(tmp_path):
    (tmp_path / "zoo.predict").write_text('{"model_1": 0.1, "model_2": Infinity, '
                                          '"model_3": 0.3}\n')
    with pytest.raises(SubmissionError, match="model_2: expected a finite number, found "
                                              "Infinity"):
        read_submission(TASK, tmp_path, ZOO)


def test_a_network_not_measured_passes_both_checks_and_the_scorer_penalises_the_task(tmp_path):
    values = np.array([0.1, np.nan, 0.3])
    checked, notes = check_output(values, CONTRACT)
    assert np.array_equal(checked, values, equal_nan=True)
    assert notes == ("1 of 3 networks have no measure",)
    np.save(tmp_path / "zoo.npy", values)
    read = read_submission(TASK, tmp_path, ZOO)
    assert np.array_equal(read, values, equal_nan=True)
    predict = tmp_path / "predict"              # PGDL's own marker of a network not measured
    predict.mkdir()
    write_predict(predict / "zoo.predict", IDS, [0.1, "EXCEEDED", 0.3])
    assert np.array_equal(read_submission(TASK, predict, ZOO), values, equal_nan=True)
    penalised = evaluate(TASK, ZOO, read, None)
    assert penalised.penalty.startswith("1 of 3 networks have no finite measure (model_2)"), \
        penalised.penalty


def test_finite_measures_pass_both_programs_unchanged(tmp_path):
    values = np.array([[0.5], [-2.0], [3e38]])
    checked, notes = check_output(values, CONTRACT)
    assert checked.tolist() == [0.5, -2.0, 3e38] and notes == ()
    np.save(tmp_path / "zoo.npy", values.astype(np.float32))
    assert read_submission(TASK, tmp_path, ZOO).tolist() == \
        np.array([0.5, -2.0, 3e38], np.float32).astype(np.float64).tolist()

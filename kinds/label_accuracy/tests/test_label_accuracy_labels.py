"""One rule for what a class label is, on both sides: the ingestion refuses the labels the code
returns, and the scorer a file's, for the same values; each names the place its own way."""
from types import SimpleNamespace

import numpy as np
import pytest

from kinds.label_accuracy.runtime.ingestion import check_output
from kinds.label_accuracy.runtime.labels import wrong_labels
from kinds.label_accuracy.runtime.scoring import read_submission
from runtime.formats import FormatError, write_matrix
from runtime.scoring import SubmissionError, TaskConfig

CLASSES = 3
SETTINGS = SimpleNamespace(n_test=5, num_classes=CLASSES, submission_stem="t_labels")
TASK = TaskConfig("t", None, {}, None, SETTINGS)
CONTRACT = SimpleNamespace(contract={"n_test": 5, "num_classes": CLASSES})


@pytest.mark.parametrize("bad", [2.5, -1.0, 3.0, 7.0, np.inf, -np.inf])
def test_a_value_that_is_no_class_label_is_refused_by_both_programs(tmp_path, bad):
    labels = np.array([0.0, 1.0, bad, 2.0, bad])
    assert wrong_labels(labels, CLASSES).tolist() == [2, 4]
    with pytest.raises(FormatError) as returned:
        check_output(labels, CONTRACT)
    assert str(returned.value) == f"labels: entry 2 is {labels[2]!r}; expected a class label 0..2"
    write_matrix(tmp_path / "t_labels.csv", labels.reshape(-1, 1))
    with pytest.raises(SubmissionError) as filed:
        read_submission(TASK, tmp_path, None)
    if np.isfinite(bad):
        assert str(filed.value) == (f"t_labels.csv: row 3 is {labels[2]!r}; expected a class "
                                    "label 0..2 (2 rows wrong)")
    else:       # the file's reader refuses it first, where it stands in the file
        assert str(filed.value) == (f"t_labels.csv, line 3, column 1: expected a finite number, "
                                    f"found '{bad}'")


def test_not_a_number_is_no_class_label():
    assert wrong_labels(np.array([0.0, np.nan, 1.0]), CLASSES).tolist() == [1]
    with pytest.raises(FormatError, match=r"labels: entry 1 is .*nan.*; expected a class label"):
        check_output(np.array([0.0, np.nan, 1.0, 2.0, 0.0]), CONTRACT)


def test_whole_class_labels_pass_both_programs(tmp_path):
    labels = np.array([0.0, 1.0, 2.0, 2.0, 0.0])
    checked, notes = check_output(labels, CONTRACT)
    assert checked.shape == (5, 1) and notes == ()
    write_matrix(tmp_path / "t_labels.csv", labels.reshape(-1, 1))
    assert read_submission(TASK, tmp_path, None).tolist() == [0, 1, 2, 2, 0]

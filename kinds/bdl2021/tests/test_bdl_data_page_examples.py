"""The data page's figures of BDL's public training data, in words: flat features, 8x8 images
(with example images) and a regression's range and mean. The figures of every kind's tasks,
and the examples and their leakage check, are tests/test_data_page_examples.py's."""
from bundle.data_examples import data_page_tasks
from test_data_page_examples import _plans


def test_figures_state_shapes_and_balances_in_words():
    """What a reader sees for a few of BDL's tasks: flat features, 8x8 images, a regression."""
    _, plans = _plans("bdl2021")
    summaries = {s["task"]: s for _, plan in plans for s in data_page_tasks([plan])[0]}
    assert summaries["iris"]["shape"] == "4 features" and summaries["iris"]["rows"] == 100
    assert summaries["digits_cnn"]["shape"] == "8 x 8 x 1 images"
    assert summaries["digits_cnn"]["examples"] and not summaries["digits"]["examples"]
    gap = summaries["diabetes_gap"]
    assert not gap["classification"] and gap["range"] and gap["mean"].startswith("0 ")

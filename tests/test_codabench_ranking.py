"""Codabench's avg_rank (release v1.29, leaderboards/ranking.py), as bundle/platforms/
codabench_site.py models it: the expected figures below are worked out by hand from the site's
rules, stated with each case (fractional ranks, desc columns negated, an entry without a
figure ranked n, several tasks' figures for one column summed, the mean rounded to the
column's precision, then the rows sorted by it)."""
import pytest

from bundle.platforms.codabench_site import average_rank_scores, fractional_ranks, rank_order


@pytest.mark.parametrize("values, ranks", [
    ([3.0, 1.0, 2.0], [3.0, 1.0, 2.0]),          # no ties: 1 for the smallest
    ([1.0, 1.0, 2.0], [1.5, 1.5, 3.0]),          # a tie shares the mean of ranks 1 and 2
    ([5.0, 5.0, 5.0], [2.0, 2.0, 2.0]),
    ([1.0, 2.0, 2.0], [1.0, 2.5, 2.5]),
    ([42.0], [1.0]),
])
def test_fractional_ranks(values, ranks):
    assert fractional_ranks(values) == ranks


# Columns: 0 and 1 higher-is-better accuracies of two tasks, 2 a lower-is-better error of a
# third, 3 a column no entry has a figure for (it takes no part).
SORTING = {0: "desc", 1: "desc", 2: "asc", 3: "asc", 9: "asc"}
ENTRIES = [
    {0: ["0.9"], 1: ["0.8"], 2: ["1.0"]},              # A
    {0: ["0.9"], 1: ["0.6"], 2: ["2.0"]},              # B: ties A on column 0
    {0: ["0.5"], 2: ["0.5"]},                          # C: no figure on column 1
    {0: ["0.7"], 1: ["0.8"], 2: ["1.5", "0.5"]},       # D: two tasks wrote column 2: 2.0
]
# column 0, negated: A, B tie at 1.5; D 3; C 4
# column 1 among A, B, D: A, D tie at 1.5; B 3; C, without a figure, n = 4
# column 2: C 1; A 2; B and D (2.0) tie at 3.5
# means: A (1.5 + 1.5 + 2) / 3 = 1.67, B (1.5 + 3 + 3.5) / 3 = 2.67, C (4 + 4 + 1) / 3 = 3.0,
#        D (3 + 1.5 + 3.5) / 3 = 2.67
EXPECTED = [1.67, 2.67, 3.0, 2.67]


def test_average_rank_on_a_leaderboard_with_ties_missing_figures_and_both_directions():
    assert average_rank_scores(ENTRIES, SORTING, [0, 1, 2, 3]) == EXPECTED


def test_a_column_index_the_leaderboard_lacks_is_skipped():
    assert average_rank_scores(ENTRIES, SORTING, [0, 1, 2, 7]) == EXPECTED


def test_the_mean_is_rounded_to_the_columns_precision():
    assert average_rank_scores(ENTRIES, SORTING, [0, 1, 2], precision=0) == [2.0, 3.0, 3.0, 3.0]


def test_an_entry_without_any_figure_ranks_last_on_every_column():
    entries = [*ENTRIES, {}]
    # five entries now: the new one is ranked 5 on columns 0 to 2, and C is 5 on column 1
    assert average_rank_scores(entries, SORTING, [0, 1, 2])[-1] == 5.0
    assert average_rank_scores(entries, SORTING, [0, 1, 2])[2] == round((4 + 5 + 1) / 3, 2)


def test_no_figures_at_all_give_no_value():
    assert average_rank_scores([{}, {}], SORTING, [0, 1]) == [None, None]


def test_a_figure_that_is_no_number_counts_as_none():
    entries = [{0: ["nan-ish"]}, {0: ["0.4"]}]
    assert average_rank_scores(entries, SORTING, [0]) == [2.0, 1.0]


def test_rows_are_sorted_by_the_ranking_column_ties_kept_in_order_missing_last():
    assert rank_order(EXPECTED, "asc") == [0, 1, 3, 2]          # B before D: a stable sort
    assert rank_order([None, 2.0, 1.0, 2.0], "asc") == [2, 1, 3, 0]
    assert rank_order([None, 2.0, 1.0, 2.0], "desc") == [1, 3, 2, 0]

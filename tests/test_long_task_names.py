"""A task name too long for Codabench's leaderboard columns (keys and titles of at most 36
characters, which each begin with the task's name) is refused before anything is staged, in
one line naming the spec's task key and how short it must be; found by the organizer-task
matrix (tests/organizer_matrix.py), whose first names were the cases' ids."""
from bundle.leaderboard import LeaderboardColumn
from bundle.platforms.codabench import PLATFORM


def _column(task: str, suffix: str, label: str) -> LeaderboardColumn:
    return LeaderboardColumn(f"{task}_{suffix}", f"{task} {label}", "desc", 4, "", "value", task)


def test_a_task_name_too_long_for_codabench_columns_names_the_task_key():
    task = "bdl_sequential_image_regre"
    columns = [_column(task, "w1", "W1 (2021 code)"), _column(task, "train_seconds", "training s")]
    problem = PLATFORM.column_problem(columns)
    assert problem is not None and "\n" not in problem
    assert problem.startswith(f"tasks.{task}: ")
    assert "'bdl_sequential_image_regre W1 (2021 code)' (41 characters;" in problem
    assert "at most 21 characters" in problem


def test_short_task_names_pass():
    assert PLATFORM.column_problem([_column("wine", "w1", "W1 (2021 code)")]) is None

"""`codabench-bundle new`: a spec and data folder per kind that validate (and, for the smallest
kind, build and dry-run); bad answers refused in one line with nothing written."""
from __future__ import annotations

import pytest

from bundle.cli import main
from bundle.new_competition import QUESTIONS
from bundle.spec import load_spec
from kinds import KINDS


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_new_writes_a_valid_spec_and_a_data_readme_for_every_kind(tmp_path, kind, capsys):
    folder = tmp_path / kind
    assert main(["new", str(folder), "--kind", kind, "--title", "A test", "--phases",
                 "warmup,middle,final", "--yes"]) == 0
    spec = load_spec(folder / "spec.yaml")
    assert spec.kind == kind and [p.key for p in spec.phases] == ["warmup", "middle", "final"]
    assert [p.code_submission for p in spec.phases] == [False, False, True]
    readme = (folder / "data" / "README.md").read_text()
    for task in spec.budgets:
        assert (folder / "data" / task).is_dir() and f"## `{task}/`" in readme


def test_each_question_is_one_record_with_type_default_and_help():
    assert [q.name for q in QUESTIONS] == ["kind", "title", "phases", "data_root"]
    assert all(q.help and q.default and callable(q.parse) for q in QUESTIONS)


@pytest.mark.parametrize("flags, expected", [
    (["--kind", "nope"], "expected one of " + ", ".join(sorted(KINDS))),
    (["--phases", "Dev,final"], "expected comma-separated names"),
    (["--phases", "a,a"], "expected each name once"),
    (["--title", "!!"], "expected words"),
])
def test_bad_answers_are_refused_in_one_line_and_nothing_is_written(tmp_path, capsys, flags,
                                                                    expected):
    assert main(["new", str(tmp_path / "c"), "--yes", *flags]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and expected in error and "Traceback" not in error
    assert not (tmp_path / "c").exists()


def test_a_folder_with_files_is_refused_and_left_as_it_was(tmp_path, capsys):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "spec.yaml").write_text("mine\n")
    assert main(["new", str(tmp_path / "c"), "--yes"]) == 2
    error = capsys.readouterr().err
    assert "exists and is not empty" in error and error.count("\n") == 1
    assert (tmp_path / "c" / "spec.yaml").read_text() == "mine\n"
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["spec.yaml"]


@pytest.mark.slow
def test_the_smallest_kind_builds_and_dry_runs_at_once(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["new", "comp", "--kind", "label_accuracy", "--yes"]) == 0
    assert main(["check", "--config", "comp/spec.yaml", "--phase", "all"]) == 0
    assert "dry run passed" in capsys.readouterr().out
    assert list((tmp_path / "dist").glob("*-codabench.zip"))

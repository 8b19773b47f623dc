"""The package READMEs' module tables are what the modules' docstrings say now
(scripts/module_index.py), and the generator notices a module added without a docstring."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import module_index  # noqa: E402


def test_the_committed_tables_are_current():
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "module_index.py"),
                             "--check"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_a_new_module_shows_in_the_table_with_its_first_sentence(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.py").write_text('"""Reads ``x.py`` files. More detail here."""\n')
    (tmp_path / "sub" / "b.py").write_text("x = 1\n")
    (tmp_path / "sub" / "c.py").write_text('"""Cells: a | b, <svg> tags.\n\nNot this."""\n')
    table = module_index.table(tmp_path)
    assert "| `a.py` | Reads ``x.py`` files. |" in table
    assert "| `sub/b.py` | (no docstring) |" in table
    assert "| `sub/c.py` | Cells: a \\| b, &lt;svg> tags. |" in table


def test_a_readme_without_the_markers_is_refused(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# x\n")
    try:
        module_index.indexed(readme, tmp_path)
    except SystemExit as error:
        assert "has no module table" in str(error)
    else:
        raise AssertionError("no refusal")

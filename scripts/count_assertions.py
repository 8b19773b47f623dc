"""Counts the checks written in the test files: `assert` statements plus `pytest.raises` calls
(as a context manager or a call), per file and in all, by reading each file's syntax tree (not
by running it). Used to show that a change to the tests keeps every check (issue 49 item 4):
run it before and after, and compare.

    python scripts/count_assertions.py [PATH ...]      default: tests/ and kinds/*/tests/
    python scripts/count_assertions.py --per-file
"""
import argparse
import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def counts(source: str) -> tuple[int, int]:
    """(assert statements, pytest.raises calls) in one file's source."""
    tree = ast.parse(source)
    asserts = sum(isinstance(node, ast.Assert) for node in ast.walk(tree))
    raises = sum(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                 and node.func.attr == "raises" and isinstance(node.func.value, ast.Name)
                 and node.func.value.id == "pytest" for node in ast.walk(tree))
    return asserts, raises


def test_files(paths: list[Path]) -> list[Path]:
    found = []
    for path in paths:
        found += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return [path for path in found if "__pycache__" not in path.parts]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--per-file", action="store_true")
    args = parser.parse_args(argv)
    paths = args.paths or [REPO / "tests", *sorted(REPO.glob("kinds/*/tests"))]
    total_asserts = total_raises = 0
    for path in test_files(paths):
        asserts, raises = counts(path.read_text())
        total_asserts += asserts
        total_raises += raises
        if args.per_file and asserts + raises:
            print(f"{asserts + raises:6d}  {asserts:6d} {raises:4d}  {path.resolve().relative_to(REPO)}")
    print(f"assert statements: {total_asserts}; pytest.raises: {total_raises}; "
          f"checks: {total_asserts + total_raises}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

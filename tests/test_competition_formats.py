"""Tests for runtime.formats on real files: round trips, files of real competitions' sizes and
layouts, and the wording of every rejection. A kind's own readers and writers (BDL's
probabilities, samples, chains and task inputs) are its own tests'
(kinds/bdl2021/tests/test_bdl_formats.py)."""

from pathlib import Path

import numpy as np
import pytest

from runtime.formats import FormatError, find_misplaced, read_matrix, write_matrix

RNG = np.random.default_rng(2021)


def error_message(function, *args, **kwargs) -> str:
    """The FormatError message `function` raises."""
    with pytest.raises(FormatError) as caught:
        function(*args, **kwargs)
    return str(caught.value)


def write_text(path: Path, text: str) -> Path:
    """Write `text` byte for byte (no newline translation)."""
    path.write_bytes(text.encode())
    return path


def read_probabilities(path, *, n_points: int | None = None,
                       n_classes: int | None = None) -> np.ndarray:
    """A matrix of one row per test point and one column per class, as a kind reads class
    probabilities (BDL's kit does so): the labels make a shape error say what rows and columns
    are, and with both sizes given the file's size is bounded before it is read."""
    return read_matrix(path, n_rows=n_points, n_cols=n_classes, row_label="test points",
                       col_label="classes")


def random_probs(n_points: int, n_classes: int) -> np.ndarray:
    """Rows that sum to one, like a softmax output."""
    logits = RNG.normal(size=(n_points, n_classes))
    return np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)


# --- round trips -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["m.csv", "m.txt", "m.npy", "M.CSV"])
def test_matrix_round_trip(tmp_path, name):
    matrix = RNG.normal(size=(17, 3))
    write_matrix(tmp_path / name, matrix)
    assert np.array_equal(read_matrix(tmp_path / name, n_rows=17, n_cols=3), matrix)


def test_write_matrix_is_exactly_savetxt_defaults(tmp_path):
    matrix = RNG.normal(size=(4, 3))
    write_matrix(tmp_path / "ours.csv", matrix)
    np.savetxt(tmp_path / "numpy.csv", matrix)
    assert (tmp_path / "ours.csv").read_bytes() == (tmp_path / "numpy.csv").read_bytes()


# --- real competitions' sizes and layouts (the 2021 BDL competition's) ------------------------

@pytest.mark.parametrize("n_points, n_classes", [(42_670, 2), (50_000, 10), (2_000, 7)])
def test_real_size_classification_files(tmp_path, n_points, n_classes):
    probs = random_probs(n_points, n_classes)
    np.savetxt(tmp_path / "probs.csv", probs)
    read = read_probabilities(tmp_path / "probs.csv", n_points=n_points, n_classes=n_classes)
    assert np.array_equal(read, probs)


def test_comma_separated_with_header_crlf_and_trailing_blank_lines(tmp_path):
    probs = random_probs(2_000, 7)
    header = ",".join(f"class_{c}" for c in range(7))
    rows = "".join(", ".join(repr(v) for v in row) + "\r\n" for row in probs)
    write_text(tmp_path / "probs.csv", header + "\r\n" + rows + "\r\n \r\n\r\n")
    read = read_probabilities(tmp_path / "probs.csv", n_points=2_000, n_classes=7)
    assert np.array_equal(read, probs)


@pytest.mark.parametrize("text, shape", [
    ("0.25 0.75\n", (1, 2)), ("1.5\n2.5\n3.5\n", (3, 1)), ("7\n", (1, 1)),
    ("a,b\n0.25,0.75\n", (1, 2)), ("\ufeff1,2\n3,4\n", (2, 2)), ("\n\n1\t2\n3\t4", (2, 2)),
])
def test_text_shapes_and_variants(tmp_path, text, shape):
    assert read_matrix(write_text(tmp_path / "m.txt", text)).shape == shape


def test_npy_matrix_of_integers_becomes_float64(tmp_path):
    np.save(tmp_path / "m.npy", np.arange(6).reshape(3, 2))
    read = read_matrix(tmp_path / "m.npy")
    assert read.dtype == np.float64 and read.shape == (3, 2)


# --- rejections: text ------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("", "is empty"), ("\n \n\r\n", "contains only blank lines"),
    ("p0,p1\n\n", "contains only a header (line 1)"),
])
def test_rejects_files_without_data(tmp_path, text, expected):
    message = error_message(read_matrix, write_text(tmp_path / "wine_probs.csv", text))
    assert "wine_probs.csv" in message and expected in message


@pytest.mark.parametrize("text, line, column, found", [
    ("0.1 0.9\n0.2 0.8\nabc 0.5\n", 3, 1, "found 'abc'"),
    ("0.1,0.2,0.7\n" * 16 + "0.1,0.2,abc\n", 17, 3, "found 'abc'"),
    ("h1,h2\n0.1, 0.9\n0.3,\n", 3, 2, "found an empty field"),
    ("0.1 0.9\n0.2;0.8\n", 2, 1, "found '0.2;0.8'"),
])
def test_rejects_non_numeric_tokens(tmp_path, text, line, column, found):
    message = error_message(read_matrix, write_text(tmp_path / "wine_probs.csv", text))
    assert message.startswith(f"{tmp_path / 'wine_probs.csv'}, line {line}, column {column}: ")
    assert "expected a number" in message and found in message


@pytest.mark.parametrize("token", ["nan", "NaN", "inf", "-Infinity", "1e999"])
def test_rejects_non_finite_values(tmp_path, token):
    path = write_text(tmp_path / "p.csv", f"0.1 0.9\n0.2 0.8\n0.5 {token}\n0.3 nan\n")
    message = error_message(read_matrix, path)
    assert f"p.csv, line 3, column 2: expected a finite number, found '{token}'" in message


def test_rejects_ragged_rows(tmp_path):
    path = write_text(tmp_path / "p.csv", "1 2 3\n4 5 6\n7 8 9\n1 2 3\n4 5\n")
    message = error_message(read_matrix, path)
    assert message == f"{path}: line 5 has 2 columns, expected 3 (as on line 1)"


def test_ragged_rows_count_lines_after_header_and_blank_lines(tmp_path):
    path = write_text(tmp_path / "p.csv", "\na,b\n1,2\n\n3,4,5\n")
    assert "line 5 has 3 columns, expected 2 (as on line 3)" in error_message(read_matrix, path)


def test_rejects_binary_content(tmp_path):
    path = tmp_path / "p.csv"
    path.write_bytes(b"0.1 0.9\n0.2 \x00\x00\n")
    message = error_message(read_matrix, path)
    assert "p.csv, line 2" in message and "NUL byte" in message


def test_rejects_invalid_utf8(tmp_path):
    path = tmp_path / "p.csv"
    path.write_bytes(b"0.1 0.9\n0.2 0.8\n\xff\xfe 0.5\n")
    message = error_message(read_matrix, path)
    assert "p.csv, line 3" in message and "not valid UTF-8" in message and "0xff" in message


def test_rejects_npy_saved_under_csv_name(tmp_path):
    np.save(tmp_path / "p.npy", np.ones((3, 2)))
    (tmp_path / "p.npy").rename(tmp_path / "p.csv")
    message = error_message(read_matrix, tmp_path / "p.csv")
    assert "p.csv" in message and ".npy file" in message


# --- rejections: shapes ----------------------------------------------------------------------

def test_rejects_wrong_number_of_rows(tmp_path):
    np.savetxt(tmp_path / "p.csv", np.ones((5, 3)))
    message = error_message(read_probabilities, tmp_path / "p.csv", n_points=6, n_classes=3)
    assert message == (f"{tmp_path / 'p.csv'}: wrong number of rows: expected 6 rows (test points) "
                       "x 3 columns (classes), found 5 rows x 3 columns")


def test_rejects_wrong_number_of_columns_with_only_columns_given(tmp_path):
    np.savetxt(tmp_path / "p.csv", np.ones((5, 3)))
    message = error_message(read_matrix, tmp_path / "p.csv", n_cols=4)
    assert "p.csv: wrong number of columns: expected 4 columns, found 5 rows x 3 columns" in message


def test_shape_error_points_out_a_transposed_submission(tmp_path):
    np.savetxt(tmp_path / "s.csv", np.zeros((100, 30)))  # S x N where N x S is wanted
    message = error_message(read_matrix, tmp_path / "s.csv", n_rows=30, n_cols=100,
                            row_label="test points", col_label="samples")
    assert "expected 30 rows (test points) x 100 columns (samples)" in message
    assert "found 100 rows x 30 columns (the file looks transposed)" in message


def test_shape_error_hints_at_numeric_header(tmp_path):
    write_text(tmp_path / "p.csv", "0,1\n0.5,0.5\n0.25,0.75\n")  # pandas to_csv(index=False)
    message = error_message(read_probabilities, tmp_path / "p.csv", n_points=2)
    assert "expected 2 rows (test points), found 3 rows x 2 columns" in message
    assert "column names" in message


# --- rejections: paths and extensions --------------------------------------------------------

def test_missing_file(tmp_path):
    message = error_message(read_matrix, tmp_path / "wine_probs.csv")
    assert message == f"{tmp_path / 'wine_probs.csv'}: file does not exist"


def test_missing_file_found_in_a_subfolder(tmp_path):
    (tmp_path / "submission").mkdir()
    np.savetxt(tmp_path / "submission" / "wine_probs.csv", np.ones((2, 2)))
    misplaced = tmp_path / "submission" / "wine_probs.csv"
    message = error_message(read_matrix, tmp_path / "wine_probs.csv")
    assert "does not exist" in message and f"found at {misplaced}" in message
    assert find_misplaced(tmp_path / "wine_probs.csv") == [misplaced]
    assert find_misplaced(tmp_path / "absent" / "x.csv") == []


def test_directory_instead_of_file(tmp_path):
    (tmp_path / "p.csv").mkdir()
    assert "is a directory" in error_message(read_matrix, tmp_path / "p.csv")


@pytest.mark.parametrize("name", ["p.xlsx", "p.json", "p.zip", "p.tsv", "p"])
def test_rejects_unknown_extensions(tmp_path, name):
    write_text(tmp_path / name, "1 2\n")
    message = error_message(read_matrix, tmp_path / name)
    assert name in message and "accepted: .csv, .txt, .npy" in message


# --- rejections: binary arrays ---------------------------------------------------------------

@pytest.mark.parametrize("array, expected", [
    (np.ones(3), "expected a 2-D array, found shape (3,)"),
    (np.array([["a", "b"]]), "expected a real numeric matrix, found dtype <U1"),
    (np.array([[1.0, 2.0], [3.0, np.nan]]), "index (1, 1) (0-based): expected a finite number"),
    (np.zeros((0, 3)), "matrix is empty"),
])
def test_rejects_bad_npy_matrices(tmp_path, array, expected):
    np.save(tmp_path / "m.npy", array)
    message = error_message(read_matrix, tmp_path / "m.npy")
    assert "m.npy" in message and expected in message


@pytest.mark.parametrize("content", ["pickled", "garbage", "broken zip", "truncated", "huge"])
def test_rejects_unreadable_npy(tmp_path, content):
    path = tmp_path / "m.npy"
    if content == "pickled":
        np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    elif content in ("garbage", "broken zip"):
        path.write_bytes(b"not an array at all" if content == "garbage" else b"PK\x03\x04...")
    else:  # cut short, or a header claiming terabytes that the file does not hold
        shape = (10**12, 10) if content == "huge" else (100, 10)
        with path.open("wb") as file:
            np.lib.format.write_array_header_1_0(
                file, {"descr": "<f8", "fortran_order": False, "shape": shape})
            file.write(b"\0" * 800)
    assert "m.npy: not a valid .npy file" in error_message(read_matrix, path)


# --- writer and caller errors ----------------------------------------------------------------

def test_writers_reject_wrong_shapes_and_names(tmp_path):
    with pytest.raises(ValueError, match="2-D"):
        write_matrix(tmp_path / "m.csv", np.ones(3))
    with pytest.raises(ValueError, match="extension"):
        write_matrix(tmp_path / "m.xlsx", np.ones((2, 2)))


# --- files far larger than their shape ---------------------------------------------------------

READ_AND_REPORT_MEMORY = """
import resource, sys
from runtime.formats import FormatError, read_matrix
try:
    read_matrix(sys.argv[1], n_rows=50, n_cols=3, row_label="test points", col_label="classes")
    print("read")
except FormatError as error:
    print("refused:", error)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _read_in_a_child(path: Path) -> tuple[str, int]:
    """What reading `path` as 50 x 3 probabilities says, and the child's peak memory."""
    import subprocess
    import sys
    result = subprocess.run([sys.executable, "-c", READ_AND_REPORT_MEMORY, str(path)],
                            capture_output=True, text=True, timeout=120,
                            cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0, result.stderr
    *message, peak = result.stdout.strip().splitlines()
    return "\n".join(message), int(peak)


def test_a_huge_file_is_refused_from_its_size_with_memory_bounded_by_the_expected_shape(tmp_path):
    """200 MB of valid numbers for a 50 x 3 matrix: refused before parsing; the reader's peak
    memory is that of reading a correct file (parsing it would need gigabytes)."""
    small = tmp_path / "iris_probs.csv"
    np.savetxt(small, random_probs(50, 3))
    huge = tmp_path / "huge" / "iris_probs.csv"
    huge.parent.mkdir()
    chunk = b"3.333333333333333148e-01 3.333333333333333148e-01 3.333333333333333148e-01\n" * 20000
    with open(huge, "wb") as stream:
        for _ in range(200 * 2**20 // len(chunk)):
            stream.write(chunk)
    said, peak = _read_in_a_child(huge)
    baseline_said, baseline_peak = _read_in_a_child(small)
    assert baseline_said == "read"
    assert said.startswith("refused:") and "refused without reading it" in said
    assert f"{huge.stat().st_size:,} bytes" in said and "50 rows (test points)" in said
    assert peak < 1.5 * baseline_peak, (peak, baseline_peak)


def test_too_many_short_rows_stop_the_reading_and_are_counted(tmp_path):
    """Within the size bound (short numbers) but 100x the rows: refused with the true count."""
    path = write_text(tmp_path / "p.csv", "1 0 0\n" * 5000)
    message = error_message(read_probabilities, path, n_points=50, n_classes=3)
    assert "wrong number of rows: expected 50 rows (test points)" in message
    assert "found 5000 rows x 3 columns" in message
    one_more = write_text(tmp_path / "q.csv", "a,b,c\n" + "1,0,0\n" * 51)
    assert "found 51 rows" in error_message(read_probabilities, one_more, n_points=50,
                                             n_classes=3)


def test_an_npy_far_larger_than_its_shape_is_refused_unread(tmp_path):
    np.save(tmp_path / "p.npy", np.full((20000, 3), 1 / 3))
    message = error_message(read_probabilities, tmp_path / "p.npy", n_points=50, n_classes=3)
    assert "refused without reading it" in message


def test_the_size_bound_leaves_room_for_every_accepted_text_format(tmp_path):
    """Full precision, a header, commas with spaces and CRLF line ends all fit."""
    from runtime.formats.matrix_files import max_matrix_bytes
    probs = random_probs(50, 3)
    rows = "".join(", ".join(f"{v:+.18e}" for v in row) + "\r\n" for row in probs)
    path = write_text(tmp_path / "p.csv", "class_0, class_1, class_2\r\n" + rows)
    assert path.stat().st_size < max_matrix_bytes(50, 3, ".csv") / 2
    assert read_probabilities(path, n_points=50, n_classes=3) == pytest.approx(probs)

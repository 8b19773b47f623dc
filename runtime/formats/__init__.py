"""Readers and writers for the files every kind shares (numeric matrices, JSON, the
ingestion's run record), with errors that say what is wrong where.

Standard library and numpy only: copied verbatim into the scoring and ingestion programs.
A kind's own file layouts live in its ``runtime/``.
"""

from .matrix_files import (MATRIX_EXTENSIONS, FormatError, describe_position, find_misplaced,
                           read_matrix, write_matrix)
from .run_record import (RECORD_KEY_NAME, RECORD_NAME, RunRecord, TaskRun,
                         file_digest, read_record_key, read_run_record, signature_problem,
                         write_run_record)

__all__ = [
    "FormatError", "find_misplaced", "describe_position", "read_matrix", "write_matrix",
    "MATRIX_EXTENSIONS",
    "RECORD_NAME", "RunRecord", "TaskRun", "read_run_record", "write_run_record",
    "RECORD_KEY_NAME", "file_digest", "read_record_key", "signature_problem",
]

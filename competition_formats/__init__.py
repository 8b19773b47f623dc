"""Readers and writers for the competition's data files, with errors that say what is wrong where.

Standard library and numpy only: copied verbatim into the scoring and ingestion programs.
"""

from .loader import (LAYOUTS, POINTS_BY_SAMPLES, SAMPLES_BY_POINTS, TASK_INPUT_KEYS, TaskInputs,
                     read_chain_probs, read_chain_samples, read_classification_probs,
                     read_regression_samples, read_task_inputs, write_chain_probs,
                     write_chain_samples, write_classification_probs, write_regression_reference,
                     write_regression_samples, write_task_inputs)
from .matrix_files import (MATRIX_EXTENSIONS, FormatError, describe_position, find_misplaced,
                           read_matrix, write_matrix)
from .run_record import (RECORD_KEY_NAME, RECORD_NAME, RunRecord, TaskRun, file_digest,
                         read_record_key, read_run_record, signature_problem, write_run_record)

__all__ = [
    "FormatError", "find_misplaced", "describe_position", "read_matrix", "write_matrix",
    "MATRIX_EXTENSIONS",
    "RECORD_NAME", "RunRecord", "TaskRun", "read_run_record", "write_run_record",
    "RECORD_KEY_NAME", "file_digest", "read_record_key", "signature_problem",
    "read_classification_probs", "write_classification_probs",
    "read_regression_samples", "write_regression_samples", "write_regression_reference",
    "POINTS_BY_SAMPLES", "SAMPLES_BY_POINTS", "LAYOUTS",
    "read_chain_probs", "read_chain_samples", "write_chain_probs", "write_chain_samples",
    "TaskInputs", "TASK_INPUT_KEYS", "read_task_inputs", "write_task_inputs",
]

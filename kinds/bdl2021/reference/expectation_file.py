"""A task's exact-posterior expectation as a file next to its references.

It depends on the references alone and costs seconds for a regression task (hundreds of
Wasserstein distances), so the generator writes it once (``<task>_exact_posterior_expectation
.json``) and the builder ships that file, recomputing only when it is missing, from an older
format, or made from other reference files than the ones now there (the file names their
digests).
"""
from __future__ import annotations

import json
from pathlib import Path

from runtime.formats import file_digest

from ..runtime.exact_posterior import (FILE_FORMAT, expectation_blocks, expectation_document,
                                       parse_expectation_document)
from ..runtime.formats import (SAMPLES_BY_POINTS, read_batch_means, read_chain_probs,
                               read_chain_samples, read_regression_samples)
from ..runtime.score_types import CLASSIFICATION
from .task_files import TaskFiles


def _sources(paths: TaskFiles) -> dict[str, str]:
    """The digests of the files the expectation is computed from."""
    sources = [paths.reference, paths.chain_reference]
    if paths.batch_means is not None and paths.batch_means.is_file():
        sources.append(paths.batch_means)
    return {path.name: file_digest(path) for path in sources}


def compute_expectation(paths: TaskFiles, submission_draws: int | None) -> dict:
    """The document, from the task's chain files (batch means where there are some)."""
    classification = paths.kind == CLASSIFICATION
    chains = (read_chain_probs(paths.chain_reference) if classification
              else read_chain_samples(paths.chain_reference))
    batches = (read_batch_means(paths.batch_means, n_points=chains.shape[1],
                                n_classes=chains.shape[2])
               if classification and paths.batch_means.is_file() else None)
    reference_draws = None if classification else read_regression_samples(
        paths.reference, layout=SAMPLES_BY_POINTS).shape[1]
    blocks, draws = expectation_blocks(paths.kind, chains, reference_draws, batches)
    document = expectation_document(paths.task, paths.kind, blocks, draws, submission_draws)
    return {**document, "computed_from": _sources(paths)}


def write_expectation(paths: TaskFiles, submission_draws: int | None) -> Path:
    path = paths.expectation
    path.write_text(json.dumps(compute_expectation(paths, submission_draws), indent=1) + "\n")
    return path


def task_expectation(paths: TaskFiles, submission_draws: int | None) -> dict:
    """The stored document where it is current and made from these very files, else a
    freshly computed one."""
    path = paths.expectation
    if path.is_file():
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
            parse_expectation_document(document, paths.task, paths.kind, path.name)
        except (OSError, ValueError):
            document = None
        if (document and document.get("format") == FILE_FORMAT
                and document.get("computed_from") == _sources(paths)):
            return document
    return compute_expectation(paths, submission_draws)

"""The exact-posterior expectation computes the metrics' per-row terms and Wasserstein
distances its own faster way inside its loops (buffers reused, the reference's argmax taken
once, |S - R| once for W1 and W2). Those must be the metrics' own numbers, bit for bit: the
builder writes them into the pages, and a metric changed in ``metrics.py`` must not leave a
stale copy here. Random inputs with ties, compared with the metrics' path."""
import numpy as np
import pytest

from kinds.bdl2021.runtime import exact_posterior, metrics


def probability_blocks(rng, count, rows, classes, ties):
    logits = rng.normal(size=(count, rows, classes))
    if ties:      # rows whose top classes tie, in the blocks and so in their average
        logits[:, : rows // 3, 1] = logits[:, : rows // 3, 0]
    probabilities = np.exp(logits)
    return probabilities / probabilities.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("count, rows, classes, ties", [
    (2, 5, 2, False), (8, 40, 3, True), (40, 60, 10, True), (11, 7, 130, False)])
def test_the_classification_loop_gives_the_metrics_numbers(count, rows, classes, ties,
                                                           monkeypatch):
    rng = np.random.default_rng(count * rows)
    blocks = probability_blocks(rng, count, rows, classes, ties)
    halves = np.zeros((33, count))
    for half in halves:
        half[rng.permutation(count)[: count // 2]] = 1
    widening = rng.uniform(0.5, 2.0, len(halves))
    fast = exact_posterior._classification_scores(blocks, halves, widening)
    monkeypatch.setattr(exact_posterior, "BUFFERED_TERMS", {})     # the score types' own terms
    plain = exact_posterior._classification_scores(blocks, halves, widening)
    for fast_part, plain_part in zip(fast, plain):
        assert fast_part.keys() == plain_part.keys()
        for name in plain_part:
            assert np.array_equal(fast_part[name], plain_part[name]), name


@pytest.mark.parametrize("rows, draws", [(1, 2), (17, 50), (150, 1000)])
def test_the_sorted_wasserstein_gives_the_metrics_numbers(rows, draws):
    rng = np.random.default_rng(rows)
    submission = rng.standard_t(3, size=(rows, draws))
    reference = rng.normal(size=(rows, draws))
    reference[:, ::7] = submission[:, ::7]                        # equal values, too
    # the loop's rows come sorted (the pool is sorted once per row)
    submission, reference = np.sort(submission, axis=1), np.sort(reference, axis=1)
    expected = [metrics.wasserstein2(submission, reference),
                metrics.wasserstein1(submission, reference)]
    assert exact_posterior._sorted_wasserstein(submission.copy(), reference, [2, 1]) == expected

"""PGDL's sample submission: the squared L2 norm of all the trained weights.

Every kernel and bias (and batch normalisation's gamma and beta); the moving statistics are
not trained and are left out. A larger norm predicts a larger generalisation gap.
Deterministic, numpy only.
"""
import numpy as np


def complexity(model, dataset):
    """Sum of the squares of every trained weight of ``model``."""
    return float(sum(np.sum(np.square(array, dtype=np.float64))
                     for array, trained in zip(model.weights, model.trainable) if trained))

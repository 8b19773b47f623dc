"""MC dropout (Gal and Ghahramani 2016): one network trained with dropout, kept on at test
time; the probability is the mean of the passes, the uncertainty its entropy."""
import numpy as np

from tabular_mlp import Network, entropy

DROPOUT = 0.2
PASSES = 50


def predict(task, x_train, y_train, x_test):
    network = Network(x_train, y_train, seed=0, dropout=DROPOUT)
    p = np.mean([network.probability(x_test, sample_dropout=True) for _ in range(PASSES)], axis=0)
    return p, entropy(p)

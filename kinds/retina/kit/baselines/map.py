"""MAP: one network trained with weight decay; the uncertainty is the entropy of its
probability (aleatoric only: the network does not know what it has not seen)."""
from tabular_mlp import Network, entropy


def predict(task, x_train, y_train, x_test):
    p = Network(x_train, y_train, seed=0).probability(x_test)
    return p, entropy(p)

"""Davies-Bouldin index of the network's penultimate representations, per class.

After Natekar and Sharma, "Representation Based Complexity Measures for Predicting
Generalization in Deep Learning" (the winning entry of the NeurIPS 2020 PGDL competition): a
network whose internal representations separate the classes into tight, distant clusters
generalises better. The representation is the output of the layer before the last layer with
weights (for a VGG-like network, the last hidden Dense layer; for Network in Network, the
features entering its last 1x1 convolution), flattened, on a fixed subset of the training data:

    c_k = mean of class k's representations,   S_k = mean_i ||r_i - c_k||  over class k
    DB  = (1/K) * sum_k max_{j != k} (S_k + S_j) / ||c_k - c_j||

over the K classes present in the subset. A large DB (classes that spread and overlap)
predicts a large gap. Deterministic, numpy only.
"""
import numpy as np

EXAMPLES = 2000
SEED = 0


def _subset(dataset, size, seed):
    if dataset.size <= size:
        return dataset.take(dataset.size)
    chosen = np.sort(np.random.default_rng(seed).choice(dataset.size, size=size, replace=False))
    return dataset.inputs[chosen], dataset.labels[chosen]


def _penultimate(model):
    """Index of the output this measure reads: the layer before the last layer with weights."""
    holding = [index for index, layer in enumerate(model.layers) if layer["weights"]]
    return holding[-1] - 1


def complexity(model, dataset):
    """Davies-Bouldin index of the classes' clusters in the penultimate representations."""
    x, y = _subset(dataset, EXAMPLES, SEED)
    index = _penultimate(model)
    if index < 0:
        features = np.asarray(x, np.float64).reshape(len(x), -1)    # one layer: the inputs
    else:
        features = model.activations(x)[index].reshape(len(x), -1).astype(np.float64)
    classes = np.unique(y)
    if len(classes) < 2:
        return 0.0
    centroids = np.stack([features[y == k].mean(axis=0) for k in classes])
    scatter = np.array([np.linalg.norm(features[y == k] - centroids[i], axis=1).mean()
                        for i, k in enumerate(classes)])
    distances = np.linalg.norm(centroids[:, None, :] - centroids[None, :, :], axis=2)
    np.fill_diagonal(distances, np.inf)
    ratios = (scatter[:, None] + scatter[None, :]) / np.maximum(distances, 1e-12)
    return float(ratios.max(axis=1).mean())

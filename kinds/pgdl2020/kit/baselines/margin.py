"""Spectrally-normalised margin: Bartlett's spectral complexity over the output margin.

After Bartlett, Foster and Telgarsky, "Spectrally-normalized margin bounds for neural networks",
NeurIPS 2017 (the complexity R_A of theorem 1.1), with the margin taken as the 10th percentile of
the training margins as in Jiang, Krishnan, Mobahi and Bengio, "Predicting the Generalization Gap
in Deep Networks with Margin Distributions", ICLR 2019, and Jiang et al., "Fantastic
Generalization Measures and Where to Find Them", ICLR 2020.

    margin_i = logit_{y_i}(x_i) - max_{j != y_i} logit_j(x_i)
    gamma    = 10th percentile of margin_i over a fixed subset of the training data
    R_A      = prod_i ||W_i||_2 * ( sum_i ||W_i - M_i||_{2,1}^{2/3} / ||W_i||_2^{2/3} )^{3/2}

over the kernels W_i of the Conv2D and Dense layers, with M_i the weights at initialisation
when the task gives them (else 0), ||.||_2 the spectral norm and ||.||_{2,1} the sum of the L2
norms of each unit's incoming weights. A convolution's kernel (kh, kw, in, out) is taken as
the (kh * kw * in, out) matrix of its im2col product, as Jiang et al. (2020) do. The measure is
log(R_A / gamma): a large product of norms at a small margin predicts a large gap. (The bound's
factors that are equal for all networks of a task, such as the norm of the data, are left out.)
If fewer than 90% of the subset are classified correctly, gamma is the 10th percentile of the
positive margins. Deterministic, numpy only.
"""
import numpy as np

EXAMPLES = 2000
PERCENTILE = 10
SEED = 0


def _subset(dataset, size, seed):
    if dataset.size <= size:
        return dataset.take(dataset.size)
    chosen = np.sort(np.random.default_rng(seed).choice(dataset.size, size=size, replace=False))
    return dataset.inputs[chosen], dataset.labels[chosen]


def _margins(model, x, y):
    logits = model.logits(x)
    rows = np.arange(len(y))
    true = logits[rows, y]
    others = logits.copy()
    others[rows, y] = -np.inf
    return true - others.max(axis=1)


def _matrix(kernel):
    """A kernel as the matrix its layer multiplies by: (fan in, units)."""
    kernel = np.asarray(kernel, np.float64)
    return kernel.reshape(-1, kernel.shape[-1])


def complexity(model, dataset):
    """log(R_A / gamma): Bartlett et al.'s spectral complexity over the 10th-percentile margin."""
    x, y = _subset(dataset, EXAMPLES, SEED)
    margins = _margins(model, x, y)
    gamma = np.percentile(margins, PERCENTILE)
    if gamma <= 0:
        positive = margins[margins > 0]
        gamma = np.percentile(positive, PERCENTILE) if positive.size else 1e-12
    gamma = max(float(gamma), 1e-12)
    initial = model.initial_weights
    log_product, total = 0.0, 0.0
    for k, name in enumerate(model.weight_names):
        if not name.endswith("/kernel"):
            continue
        kernel = _matrix(model.weights[k])
        spectral = max(float(np.linalg.norm(kernel, 2)), 1e-12)
        reference = _matrix(initial[k]) if initial is not None else 0.0
        two_one = float(np.linalg.norm(kernel - reference, axis=0).sum())
        log_product += np.log(spectral)
        total += (two_one / spectral) ** (2.0 / 3.0)
    return float(log_product + 1.5 * np.log(max(total, 1e-12)) - np.log(gamma))

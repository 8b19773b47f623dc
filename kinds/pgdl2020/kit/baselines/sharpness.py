"""Magnitude-aware PAC-Bayes flatness ("pacbayes.mag.flatness", 1 / sigma'^2).

After Jiang, Neyshabur, Mobahi, Krishnan and Bengio, "Fantastic Generalization Measures and
Where to Find Them", ICLR 2020 (section 7 and appendix C.2; sharpness and PAC-Bayes measures
after Keskar et al. 2017, Neyshabur et al. 2017 and Dziugaite and Roy 2017), one of the measures
that correlated best with the generalisation gap there.

Each trained weight w_i (kernels, biases, batch normalisation's gamma and beta; its moving
statistics are left as they are) is perturbed by u_i ~ N(0, sigma^2 w_i^2 + eps^2) (the noise scales with the
weight's magnitude). sigma' is the largest sigma for which the expected training error of the
perturbed network, over a few draws, stays within DEVIATION of the unperturbed error; it is
found by bisection in log sigma with the same random draws at every sigma (so the error grows
smoothly with sigma). A flat minimum tolerates large perturbations: the measure 1 / sigma'^2 is
small there, large at a sharp minimum.

Deterministic (fixed seeds) and fast: a fixed subset of the training data, a few draws, a short
search. numpy only.
"""
import numpy as np

EXAMPLES = 1000      # training examples the error is measured on (a fixed random subset)
DRAWS = 8            # Monte Carlo draws of the perturbation per sigma
DEVIATION = 0.1      # the allowed increase of the training error (Fantastic: 0.1)
EPSILON = 1e-3       # the noise floor for weights near zero
SIGMA_RANGE = (1e-3, 4.0)
STEPS = 14           # bisection steps in log sigma
SEED = 0


def _subset(dataset, size, seed):
    rng = np.random.default_rng(seed)
    if dataset.size <= size:
        return dataset.take(dataset.size)
    chosen = np.sort(rng.choice(dataset.size, size=size, replace=False))
    return dataset.inputs[chosen], dataset.labels[chosen]


def _expected_error(model, x, y, noises, sigma):
    errors = []
    for noise in noises:
        weights = [array if draw is None
                   else array + np.sqrt((sigma * array) ** 2 + EPSILON ** 2) * draw
                   for array, draw in zip(model.weights, noise)]
        errors.append(1.0 - model.with_weights(weights).accuracy(x, y))
    return float(np.mean(errors))


def complexity(model, dataset):
    """1 / sigma'^2, sigma' the largest magnitude-relative noise scale that raises the training
    error by at most DEVIATION."""
    x, y = _subset(dataset, EXAMPLES, SEED)
    rng = np.random.default_rng(SEED + 1)
    noises = [[rng.standard_normal(array.shape).astype(np.float32) if trained else None
               for array, trained in zip(model.weights, model.trainable)]
              for _ in range(DRAWS)]
    target = (1.0 - model.accuracy(x, y)) + DEVIATION
    low, high = np.log(SIGMA_RANGE[0]), np.log(SIGMA_RANGE[1])
    if _expected_error(model, x, y, noises, np.exp(high)) <= target:
        sigma = np.exp(high)                    # flat even at the largest scale tried
    elif _expected_error(model, x, y, noises, np.exp(low)) > target:
        sigma = np.exp(low)                     # sharp even at the smallest scale tried
    else:
        for _ in range(STEPS):
            middle = 0.5 * (low + high)
            if _expected_error(model, x, y, noises, np.exp(middle)) <= target:
                low = middle
            else:
                high = middle
        sigma = np.exp(low)
    return float(1.0 / sigma ** 2)

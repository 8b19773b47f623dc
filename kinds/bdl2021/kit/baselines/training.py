"""What the baselines share: the declared model's potential on a (mini)batch, an
initialisation, and the predictive of a set of parameter samples.

Numpy only, so it runs in the competition's image. ``declared_model`` is the task model
(the declared network, softmax or Gaussian likelihood, Gaussian prior) exactly as the HMC
reference used it; it and ``networks.py`` are copied next to this file when a submission is
packaged. Any declared network works: the tanh MLP, or a convolutional one (numpy computes
its gradient by reverse accumulation, ``networks.TapeOps``).
"""
import math
import time

import numpy as np

from declared_model import MLP, log_likelihood_and_output_grad, predictive_mean_and_scale, \
    predictive_probabilities, task_network

GRADIENT_ROWS = 128        # a declared network's rows per gradient evaluation (bounded memory)
TIMED_PASSES = 3           # passes timed to estimate a predictive's cost (the fastest counts)
# softplus(r) = 1 at r = log(e - 1): regression outputs start with unit noise scale.
UNIT_SCALE_RAW = math.log(math.e - 1)


def task_model(task):
    return task_network(task.model)


def task_model_and_inputs(task, x_train, x_test):
    """The declared network, and the training and test inputs as it reads them: what every
    baseline starts from, so none reads an example's shape its own way."""
    model = task_model(task)
    return model, declared_inputs(model, x_train), declared_inputs(model, x_test)


def declared_inputs(model, x):
    """Examples as the declared network reads them. The tanh MLP takes each example as its
    ``layer_sizes[0]`` values in a row, whatever shape they came in (the declaration allows
    images for an MLP; declared_model's MLP.prepare_inputs reads them so): a view, so mapped
    data is not loaded. Any other network reads its declared ``input_shape`` itself, a block of
    rows at a time (networks.Network.forward), so its inputs are left as they are."""
    if isinstance(model, MLP):
        return np.asarray(x).reshape(len(x), model.layer_sizes[0])
    return x


def potential_and_grad(model, likelihood, prior_variance, theta, x, y, scale=1.0):
    """U = -scale * log p(y | x, theta) - log p(theta); scale = N / batch size for minibatches.
    A declared network other than the MLP takes GRADIENT_ROWS rows at a time and sums: its
    convolutions' windows grow with the rows (ResNet-20 on 500 CIFAR images needed 4 GiB)."""
    rows = max(1, len(x)) if isinstance(model, MLP) else GRADIENT_ROWS
    log_lik, data_grad = 0.0, np.zeros_like(theta)
    with np.errstate(all="ignore"):
        for start in range(0, len(x), rows):
            output, vjp = model.output_and_vjp(theta, model.prepare_inputs(x[start:start + rows]))
            part, output_grad = log_likelihood_and_output_grad(likelihood, output,
                                                               y[start:start + rows])
            log_lik += part
            data_grad += vjp(output_grad)
        grad = -scale * data_grad + theta / prior_variance
    return -scale * log_lik + 0.5 * float(theta @ theta) / prior_variance, grad


def initial_parameters(model, likelihood, rng):
    """The network's initialisation (the MLP: weights N(0, 1/fan_in), zero biases); for
    regression a unit noise scale: the last parameter is the output bias of the scale."""
    theta = model.initial(rng)
    if likelihood == "gaussian":
        theta[-1] = UNIT_SCALE_RAW
    return theta


def predictive(task, model, samples, x_test, rng):
    """Model average of the parameter samples: mean probabilities, or draws of y.

    Regression draws use the samples round-robin: draw j comes from sample j mod S.
    """
    x_test = declared_inputs(model, x_test)
    if task.task_type == "classification":     # a running sum: no stack of S x N x C in memory
        total = np.zeros((len(x_test), task.num_classes))
        for theta in samples:
            total += predictive_probabilities(model, theta, x_test)
        return total / len(samples)
    means, scales = zip(*(predictive_mean_and_scale(model, theta, x_test) for theta in samples))
    which = np.arange(task.num_samples) % len(samples)
    noise = rng.standard_normal((task.num_samples, task.n_test))
    return (np.array(means)[which] + np.array(scales)[which] * noise).T


def training_deadline(task, share, predictive_seconds):
    """When training stops: after ``share`` of the time left, or sooner, so that what remains
    holds the final predictive (``predictive_seconds``, as estimated) twice over: on a large
    test set the predictive's passes are a fair part of a short budget."""
    left = task.time_left()
    return time.monotonic() + max(0.0, min(share * left, left - 2 * predictive_seconds))


def predictive_seconds(one_pass, passes, timings=TIMED_PASSES):
    """Seconds of a predictive of ``passes`` forward passes over the test set: the fastest of
    ``timings`` timed passes (``one_pass()``), times ``passes``. One timed pass was not
    enough: on a loaded machine the scheduler may stop the process for tens of milliseconds
    during it, and that pause, counted ``passes`` times over, came to more than a 5 s
    budget, so the baseline trained for one step. The fastest pass is still as slow as the
    load makes every pass; the checkpoints then time the whole predictive."""
    fastest = math.inf
    for _ in range(timings):
        started = time.monotonic()
        one_pass()
        fastest = min(fastest, time.monotonic() - started)
    return passes * fastest


def adam(potential_grad, theta, steps, learning_rate, deadline, clock):
    """Full-batch Adam on the potential, stopping early at the deadline."""
    first, second = np.zeros_like(theta), np.zeros_like(theta)
    for step in range(1, steps + 1):
        _, grad = potential_grad(theta)
        if not np.all(np.isfinite(grad)):
            break
        first = 0.9 * first + 0.1 * grad
        second = 0.999 * second + 0.001 * grad * grad
        theta = theta - learning_rate * (first / (1 - 0.9 ** step)) / (
            np.sqrt(second / (1 - 0.999 ** step)) + 1e-8)
        if clock() > deadline:
            break
    return theta

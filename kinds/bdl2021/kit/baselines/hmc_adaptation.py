"""What the two full-batch HMC baselines share (``hmc.py`` in numpy, ``torch_hmc.py`` in
PyTorch): the warm-up's windows, the step size's dual averaging and the draws' running
variances. Arithmetic only, so a position may be a numpy array or a torch tensor.

The warm-up reads the time through ``clock`` (the sampler's own ``time.monotonic``), so that a
test's virtual clock on the sampler's module (tests/virtual_clock.py) drives it too."""
import math

import numpy as np

# Warm-up windows, as shares of its time: step size only; first variances; variances again
# over a longer window; step size for the final mass matrix.
WARMUP_WINDOWS = (0.15, 0.25, 0.45, 0.15)
TARGET_ACCEPTANCE = 0.8


def warm_up(state, step, step_size, inverse_mass, deadline, clock):
    """The windows of WARMUP_WINDOWS, ending at ``deadline`` on ``clock``, each transition
    ``step(state, step_size, inverse_mass) -> (state, acceptance)``: (point, step size,
    inverse mass) to sample with."""
    started = clock()
    ends = started + (deadline - started) * np.cumsum(WARMUP_WINDOWS)
    for window, end in enumerate(ends):
        adaptation, moments = StepSizeAdaptation(step_size), RunningVariance()
        while clock() < end:
            state, acceptance = step(state, step_size, inverse_mass)
            step_size = adaptation.update(acceptance)
            moments.add(state.position)
        step_size = adaptation.final()
        if window in (1, 2) and moments.count > 2:
            inverse_mass = moments.regularised()
    return state, step_size, inverse_mass


class StepSizeAdaptation:
    """Dual averaging of log(step size) towards TARGET_ACCEPTANCE (Hoffman & Gelman 2014,
    Algorithm 5; Stan's constants gamma 0.05, t0 10, kappa 0.75, mu log(10 eps_0))."""

    def __init__(self, step_size):
        self.mu = math.log(10 * step_size)
        self.log_step = self.log_step_average = math.log(step_size)
        self.error_average, self.count = 0.0, 0

    def update(self, acceptance):
        self.count += 1
        weight = 1 / (self.count + 10)
        self.error_average += weight * (TARGET_ACCEPTANCE - acceptance - self.error_average)
        self.log_step = self.mu - math.sqrt(self.count) / 0.05 * self.error_average
        decay = self.count ** -0.75
        self.log_step_average = decay * self.log_step + (1 - decay) * self.log_step_average
        return math.exp(self.log_step)

    def final(self):
        return math.exp(self.log_step_average) if self.count else math.exp(self.log_step)


class RunningVariance:
    """Each coordinate's mean and variance over the draws so far (Welford's update), in the
    memory of two parameter vectors however many draws a window holds."""

    def __init__(self):
        self.count, self.mean, self.sum_of_squares = 0, 0.0, 0.0

    def add(self, position):
        self.count += 1
        delta = position - self.mean
        self.mean = self.mean + delta / self.count
        self.sum_of_squares = self.sum_of_squares + delta * (position - self.mean)

    def regularised(self):
        """The variances shrunk towards 1e-3 on few draws (Stan's regularisation):
        n / (n + 5) var + 1e-3 * 5 / (n + 5)."""
        return (self.sum_of_squares / (self.count + 5)) + 1e-3 * (5 / (self.count + 5))

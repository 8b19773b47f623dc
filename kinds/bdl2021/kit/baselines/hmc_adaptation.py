"""What the two full-batch HMC baselines share (``hmc.py`` in numpy, ``torch_hmc.py`` in
PyTorch): a chain's point and its accept step, the warm-up's windows, the step size's dual
averaging, the draws' running variances and the sampling loop with its checkpoints.
Arithmetic only, so a position may be a numpy array or a torch tensor.

Both loops read the time through ``clock`` (the sampler's own ``time.monotonic``), so that a
test's virtual clock on the sampler's module (tests/virtual_clock.py) drives them too."""
import math

import numpy as np


class Point:
    """A point of the chain: position, potential and its gradient."""

    def __init__(self, position, potential, gradient):
        self.position, self.potential, self.gradient = position, potential, gradient

    @classmethod
    def at(cls, position, potential_fn):
        return cls(position, *potential_fn(position))



def metropolis(state, proposal, energy_change, rng):
    """The accept step of a transition: (``proposal`` with probability min(1, exp(-energy
    change)), else ``state``; that probability). A non-finite energy change is rejected
    without a draw."""
    if not math.isfinite(energy_change):
        return state, 0.0
    acceptance = math.exp(min(0.0, -energy_change))
    return (proposal if rng.uniform() < acceptance else state), acceptance

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


def sample_until(deadline, state, step, draws, checkpoint, every, clock):
    """Transitions ``step(state) -> (state, acceptance)`` until ``deadline`` on ``clock``,
    starting none that the longest so far would carry past it (a transition's leapfrog steps
    are drawn anew, so the last one's time is no guide); every draw into ``draws``, whose
    predictive is checkpointed every ``every`` seconds. Returns the predictive: of the
    warm-up's last point where no transition fitted."""
    last_checkpoint = began = clock()
    longest = 0.0
    while began + longest < deadline:               # the next one, if it is the longest yet
        state, _ = step(state)
        draws.add(state.position)
        ended = clock()
        longest = max(longest, ended - began)
        if ended - last_checkpoint > every:
            checkpoint(draws.predictive())
            last_checkpoint = clock()
        began = clock()
    if not draws.count:                             # warm-up took the time: its last point
        draws.add(state.position)
    return draws.predictive()

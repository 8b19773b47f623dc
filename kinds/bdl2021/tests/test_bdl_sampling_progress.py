"""A single-host run of ``generate`` compiles every chain of a task into one program, which
used to say nothing between "compiling and sampling" and the end (minutes to hours on an
organizer's task). On a terminal the chains now report each transition from inside the
program to a bar with the count, rate and ETA (issue 53, item 3); piped, nothing is compiled
in for it and nothing extra is printed. Both samplers, on three device layouts; the draws
are the same with the bar as without.

JAX runs in child processes, as in ``test_bdl_reference_engine.py`` (why: its docstring)."""
from test_bdl_reference_engine import run_python

EVERY_LAYOUT = """
import io
import numpy as np, jax.numpy as jnp
from bundle.progress import Progress
from kinds.bdl2021.reference import fixed_hmc, nuts

def log_density(x):
    return -0.5 * jnp.sum(x ** 2)

starts = np.random.default_rng(0).normal(0, 1, (4, 3))
samplers = {"nuts": lambda **more: nuts.sample(log_density, starts, 3, 40, 60, **more),
            "hmc": lambda **more: fixed_hmc.sample(log_density, starts, 3, 40, 60, 1.0, **more)}
# NUTS with two chains on each of two devices; HMC with all four vectorised in one program
# (one chain a device counts as two on each does; the rows split over devices: the data-split
# test of test_bdl_reference_engine.py runs on a terminal). Two compilations each: 8 s.
for name, devices in (("nuts", 2), ("hmc", 1)):
    sample = samplers[name]
    shown = io.StringIO()
    bar = Progress(100, "t sampling", "transitions", stream=shown, force=True)
    with_bar = sample(devices=devices, progress=bar)
    bar.close()
    same = np.array_equal(with_bar.positions, sample(devices=devices).positions)
    print(name, devices, bar.done, same, shown.getvalue().splitlines()[-1].split("\\r")[-1])
"""


def test_each_sampler_counts_every_transition_once_and_draws_the_same():
    out = run_python(EVERY_LAYOUT, devices=2).splitlines()
    assert len(out) == 2, out
    for line in out:
        name, devices, done, same, shown = line.split(" ", 4)
        # 40 warm-up + 60 kept transitions of each chain, whatever the number of programs
        assert float(done) == 100 and same == "True", line
        assert shown.startswith("t sampling: 100 transitions of 100 transitions "
                                "[####################] 100%") and "ETA" in shown, line

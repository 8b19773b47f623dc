"""A single-host run of ``generate`` compiles every chain of a task into one program, which
used to say nothing between "compiling and sampling" and the end (minutes to hours on an
organizer's task). On a terminal the chains now report each transition from inside the
program to a bar with the count, rate and ETA (issue 53, item 3); piped, nothing is compiled
in for it and nothing extra is printed. The count on every device layout: here two chains a
device; one device and one chain a device in the closed-form tests of
``test_bdl_reference_engine.py`` (NUTS) and ``test_bdl_fixed_hmc.py`` (HMC); the rows split
over devices in the data-split test, which runs on a terminal.

JAX runs in child processes, as in ``test_bdl_reference_engine.py`` (why: its docstring)."""
from test_bdl_reference_engine import run_python

TWO_CHAINS_A_DEVICE = """
import io
import numpy as np, jax.numpy as jnp
from bundle.progress import Progress
from kinds.bdl2021.reference import nuts

def log_density(x):
    return -0.5 * jnp.sum(x ** 2)

def sample(**more):
    return nuts.sample(log_density, np.random.default_rng(0).normal(0, 1, (4, 3)), 3, 40, 60,
                       devices=2, **more)

shown = io.StringIO()
bar = Progress(100, "t sampling", "transitions", stream=shown, force=True)
with_bar = sample(progress=bar)
bar.close()
print(bar.done, np.array_equal(with_bar.positions, sample().positions),
      shown.getvalue().splitlines()[-1].split("\\r")[-1])
"""


def test_two_chains_on_each_device_count_every_transition_once_and_draw_the_same():
    """The layout the other tests leave out: 4 chains on 2 devices, a vectorised program of
    two chains each. The draws are the same with the bar compiled in as without."""
    done, same, shown = run_python(TWO_CHAINS_A_DEVICE, devices=2).splitlines()[-1].split(" ", 2)
    assert float(done) == 100 and same == "True"       # 40 warm-up + 60 kept transitions
    assert shown.startswith("t sampling: 100 transitions of 100 transitions "
                            "[####################] 100%") and "ETA" in shown, shown

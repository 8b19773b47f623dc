"""Small instances of the declared networks for the BDL network tests: a network, a
parameter vector near its initialisation and inputs of its shape."""
import numpy as np

from kinds.bdl2021.runtime.networks import Network


def example(spec, rows=3, seed=0):
    """(network, theta, x): theta jittered off the initialisation, so that no parameter (a
    bias, an FRN tau) sits exactly at a tie of max or relu; token ids for a CNN-LSTM."""
    network = Network(spec)
    rng = np.random.default_rng(seed)
    theta = network.initial(rng) + 0.05 * rng.standard_normal(network.num_parameters)
    if network.token_inputs:
        x = rng.integers(0, spec["vocabulary"], (rows, *network.input_shape))
    else:
        x = rng.standard_normal((rows, *network.input_shape))
    return network, theta, x

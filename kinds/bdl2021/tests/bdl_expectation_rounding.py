"""How far a recomputed exact-posterior expectation may be from the committed one: rounding.

The committed expectation files were made on another CPU. Each figure is a mean, standard
deviation or quantile over 400 splits of per-row metric terms, reached through a BLAS product
of 40 blocks (whose blocking and fused multiply-adds depend on the CPU and on OpenBLAS's core
type) and numpy reductions (whose SIMD width depends on the CPU's dispatch). Their rounding
differs by a few ulps: relative errors of the order of n eps (n the terms of a sum, at most a
few thousand: 1e-13), and an absolute one of up to an ulp of a probability (1.1e-16) per class
where a step is added to the reference and taken off again, summed over 10 classes at most
(1.1e-15). Found: 4.5e-16 relative, on breast_cancer's and wine's total variation with
OpenBLAS's Sandybridge kernels in place of its Zen ones (scripts/check_any_machine.sh --mode
dispatch; numpy's AVX2 and FMA3 loops turned off changed nothing). A real change (other
references, another method, seed or split count) moves them by 1e-6 or more.
"""
import pytest

EXPECTATION_RELATIVE = 1e-12
EXPECTATION_ABSOLUTE = 1e-15


def assert_same_document(found, committed, where="document"):
    """``found`` is ``committed`` but for rounding: the same keys, lengths, strings and
    integers; floats within EXPECTATION_RELATIVE (or EXPECTATION_ABSOLUTE near 0)."""
    if isinstance(committed, dict):
        assert isinstance(found, dict) and sorted(found) == sorted(committed), (where, found)
        for key in committed:
            assert_same_document(found[key], committed[key], f"{where}.{key}")
    elif isinstance(committed, list):
        assert isinstance(found, list) and len(found) == len(committed), (where, found)
        for index, (one, other) in enumerate(zip(found, committed)):
            assert_same_document(one, other, f"{where}[{index}]")
    elif isinstance(committed, float):
        assert found == pytest.approx(committed, rel=EXPECTATION_RELATIVE,
                                      abs=EXPECTATION_ABSOLUTE), (where, found, committed)
    else:
        assert found == committed and type(found) is type(committed), (where, found, committed)

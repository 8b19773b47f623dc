"""BDL 2021: approximate the Bayesian posterior predictive of a declared network, scored
against long HMC runs (agreement, total variation, Wasserstein). See ``kind.py``."""

# The kind's key in kinds.KINDS, here so that the reference tools name it without importing
# kind.py (which imports them).
NAME = "bdl2021"

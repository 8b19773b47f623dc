"""Retina: diagnosis with uncertainty under distribution shift (Band et al. 2021)."""

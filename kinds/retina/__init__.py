"""Retina: diabetic-retinopathy uncertainty benchmark (Band et al. 2021, Filos et al. 2019)."""

"""PGDL's embedded model zoos (small MLPs and convolutional networks trained on
scikit-learn's datasets, and their recipe) and the converter of PGDL's original files.

``python -m kinds.pgdl2020.reference.cli {generate,verify,convert}``; layout in ``zoo.py``.
"""

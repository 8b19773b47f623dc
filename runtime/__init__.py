"""The code both shipped programs share, in one home, copied into each program whole
(``bundle.programs.copy_shipped_code``, with the kinds' registry and records and the phase's
kind's ``runtime/``):

- ``formats/``: the files every kind reads or writes (matrices, JSON, the ingestion's signed
  run record, references sealed for the worker);
- ``worker_data.py``: data a phase keeps on the organizer's Codabench workers (spec key
  ``on_worker``): what the configs say of it and the check of a worker's copy;
- ``scoring.py``: the seam between the scoring program and a kind's ``runtime/scoring.py``
  (task and score types, results, penalties);
- ``report.py`` and ``svg_charts.py``: the HTML pieces and charts of the scoring report and
  the kinds' sections; ``disclosure.py``: what a chart of hidden rows may show (groups of at
  least MIN_ROWS rows on a coarse grid, rounded), which every kind's report follows;
- ``beneath.py``: opening the input data beneath a folder held open, never through a link
  (the ingestion's staging and the kinds' ``stage_inputs``);
- ``rules/``: the competition rules' worker side, one module per rule (the build side is
  ``bundle/competition_rules/``).

Standard library and the image's packages only (``requirements-image.txt``): this runs on the
platform's worker. A kind's own runtime lives in ``kinds/<kind>/runtime/``.
"""

"""CodaLab entry point: ``python3 $program/score.py $input $output``.

The builder assembles the program folder: this file, the ``scorer`` package, a copy of
``competition_formats`` and the generated ``scoring_config.json``.
"""
import sys
from pathlib import Path

PROGRAM_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(PROGRAM_DIR))

from scorer.main import main  # noqa: E402  (needs the path above)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], PROGRAM_DIR))

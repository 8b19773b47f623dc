"""CodaLab entry point: ``python3 $program/score.py $input $output``.

The builder assembles the program folder: this file, the ``scorer`` package, the shared
``runtime`` package, the kinds' registry with the phase's kind's runtime and the generated
``scoring_config.json``.
"""
import os
import sys
from pathlib import Path

# One BLAS thread: scoring does no heavy linear algebra, and a BLAS thread pool would make
# forking the parsing workers unsafe. Set before numpy is first imported.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

# Started isolated (python3 -I), so PYTHONDONTWRITEBYTECODE is not read: nothing is cached
# in the program's folder, which may be read-only and is compared before and after a run.
sys.dont_write_bytecode = True
PROGRAM_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(PROGRAM_DIR))

from scorer.main import main  # noqa: E402  (needs the path above)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], PROGRAM_DIR))

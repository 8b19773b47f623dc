"""Every command of CodaLab's default kits and of an organizer's kits runs as written
(test_guide_commands says how; these run in a file of their own so that the suite's workers
share the work)."""
import pytest

from test_custom_kit import custom  # noqa: F401  (the organizer's spec and data, a fixture)
from test_guide_commands import (every_command_of_a_default_kit_runs_as_written,
                                 run_every_guide_command)

pytestmark = pytest.mark.slow


# CodaLab's kits differ in their worker model and texts, not their commands: two kinds, a code
# phase with units and a gate (PGDL) and results and code phases (Retina).
@pytest.mark.parametrize("kind", ["pgdl2020", "retina"])
def test_every_command_of_codalabs_default_kits_runs_as_written(kind, tmp_path, built_bundles):
    every_command_of_a_default_kit_runs_as_written(kind, "codalab", tmp_path, built_bundles)


def test_every_command_of_an_organizers_kits_runs_as_written(custom, tmp_path,  # noqa: F811
                                                             built_bundles):
    spec_file, data = custom
    bundles = sorted(built_bundles(spec_file, data_root=data).glob("*.zip"))
    assert sorted(run_every_guide_command(bundles, tmp_path / "kits")) == ["final", "warmup"]

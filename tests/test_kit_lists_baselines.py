"""Every file of a starting kit's baselines folder is named in the kit's guide, for every
kind: a baseline the guide does not name is one participants never hear of (the PGDL guide
once left out davies_bouldin.py, the measure of PGDL 2020's winners)."""
import re

import pytest

from bundle.local_run import build_kit
from bundle.spec import load_spec
from kinds.kind import KINDS


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(KINDS))
def test_the_guide_names_every_file_of_the_kits_baselines_folder(name, tmp_path):
    spec = load_spec(KINDS[name].DEFAULT_SPEC)
    phase = next((p for p in spec.phases if p.code_submission), spec.phases[0])
    kit = build_kit(spec, phase.key, tmp_path / "kit")
    guide = (kit / "README.md").read_text(encoding="utf-8")
    shipped = sorted(path.name for path in (kit / "baselines").iterdir() if path.is_file())
    assert shipped
    unnamed = [file for file in shipped
               if not re.search(rf"\bbaselines/{re.escape(file)}\b", guide)]
    assert not unnamed, f"{name}: the guide never names baselines/" + ", baselines/".join(unnamed)

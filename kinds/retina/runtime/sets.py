"""The benchmark's evaluation sets and its fixed choices, which the scores and the report
both read (a leaf, so that neither imports the other): in-domain, shifted and joint rows; the
seed of the draw that balances the joint set; the screening standard the report marks."""
from __future__ import annotations

import numpy as np

SETS = ("in-domain", "shifted", "joint")
# RETINA's joint sets weigh the shifted rows as much as the in-domain rows: the draw that
# completes them is seeded, so a submission's score never depends on chance.
BALANCE_SEED = 0
NHS_SENSITIVITY, NHS_SPECIFICITY = 0.85, 0.80     # the UK screening standard RETINA marks


def set_mask(figures: dict, name: str) -> np.ndarray:
    shifted = figures["shifted"]
    return {"in-domain": ~shifted, "shifted": shifted, "joint": np.ones_like(shifted)}[name]

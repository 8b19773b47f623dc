"""The BDL data page names references as HMC only where HMC diagnostics came with them: an
organizer's own references without diagnostics are a model average of chains, sampled we do
not know how."""
import re

import pytest

from bundle.leaderboard import phase_columns
from bundle.phase_plan import phase_plan
from bundle.render import page_contexts, render_pages
from bundle.spec import DEFAULT_SPEC, load_spec
from kinds.bdl2021.kind import TEMPLATES
from test_custom_kit import custom  # noqa: F401  (the organizer's spec and data, a fixture)


def data_page(spec, phase: str) -> str:
    plan = phase_plan(spec, phase, None)
    contexts = page_contexts(spec, [spec.phase(phase)], [plan], phase_columns(plan),
                             spec.title, None)
    return " ".join(render_pages(contexts, TEMPLATES)["data.html"].split())


@pytest.mark.parametrize("phase", ["warmup", "final"])   # references public, then hidden
def test_references_without_diagnostics_are_not_called_hmc(custom, phase):  # noqa: F811
    spec_file, data = custom
    assert not list(data.rglob("*_hmc_diagnostics.json"))
    page = data_page(load_spec(spec_file, data), phase)
    assert "the reference predictive (model average of all chains" in page
    assert not re.search(r"\bHMC\b", page), page


def test_the_embedded_references_with_diagnostics_are_called_hmc():
    page = data_page(load_spec(DEFAULT_SPEC), "development")
    assert "HMC predictive (model average of all chains)" in page

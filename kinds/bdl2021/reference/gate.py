"""The convergence gate as a task's diagnostics file states it: each figure against its bar.

``references.py`` computes the figures and their bars when the chains are made; this reads them
back (the generator, ``verify`` and the build all judge references by it), so it imports
nothing heavy.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from runtime.formats import FormatError


@dataclass(frozen=True)
class GateCheck:
    """One figure of the convergence gate against its bar."""
    what: str
    value: float
    bar: float
    at_least: bool              # the figure must reach the bar (else stay at or under it)
    digits: int

    @property
    def passed(self) -> bool:   # NaN passes neither way
        return self.value >= self.bar if self.at_least else self.value <= self.bar

    def _relation(self) -> str:
        """The figure, how it stands to the bar, the bar."""
        holds = {True: ">=", False: "<="}[self.at_least]
        fails = {True: "<", False: ">"}[self.at_least]
        return f"{self.value:.{self.digits}f} {holds if self.passed else fails} {self.bar}"

    def failure(self) -> str:
        return f"{self.what} is {self._relation()}"

    def summary(self) -> str:
        return f"{self.what} {self._relation()}"


def gate_checks(diagnostics: dict) -> list[GateCheck]:
    """The figures the gate reads from a task's diagnostics: the reference-posterior standard
    (posteriordb's bar): rank-normalised split R-hat at most 1.01 and bulk and tail ESS at
    least 400 for every predictive quantity, the same for the potential energy, and no
    divergent transition after warm-up. A file without them (made by an older generator) is
    refused by ``read_diagnostics`` with the missing key named."""
    standard = diagnostics["reference_standard"]
    rhat, ess = standard["rhat_threshold"], standard["ess_minimum"]
    return [GateCheck("rank-normalised split R-hat of every predictive quantity (worst)",
                      standard["rhat_max"], rhat, False, 3),
            GateCheck("bulk ESS of every predictive quantity (least)",
                      standard["ess_bulk_min"], ess, True, 0),
            GateCheck("tail ESS of every predictive quantity (least)",
                      standard["ess_tail_min"], ess, True, 0),
            GateCheck("rank-normalised split R-hat of the potential energy",
                      standard["energy_rhat"], rhat, False, 3),
            GateCheck("bulk ESS of the potential energy", standard["energy_ess_bulk"], ess,
                      True, 0),
            GateCheck("tail ESS of the potential energy", standard["energy_ess_tail"], ess,
                      True, 0),
            GateCheck("divergent transitions after warm-up", standard["divergences"], 0,
                      False, 0)]


def gate_problems(name: str, diagnostics: dict) -> list[str]:
    """Why a task's chains fail the convergence gate, with the figures; none if they pass."""
    return [f"{name}: {check.failure()}" for check in gate_checks(diagnostics)
            if not check.passed]


def gate_summary(name: str, diagnostics: dict) -> str:
    """One line: every figure of the gate against its bar, and the verdict."""
    checks = gate_checks(diagnostics)
    verdict = "passed" if all(check.passed for check in checks) else "FAILED"
    return f"{name}: convergence gate {verdict}: " + "; ".join(c.summary() for c in checks)


def read_diagnostics(path: Path) -> dict:
    """A task's diagnostics file, holding what the gate reads; FormatError names the file."""
    try:
        diagnostics = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise FormatError(f"{path}: not a readable JSON file ({error})") from None
    try:
        gate_problems(path.name, diagnostics)
    except KeyError as error:
        raise FormatError(f"{path}: the convergence gate's figure {error} is missing (expected "
                          "the diagnostics `python -m reference_data generate` writes)") from None
    except (TypeError, ValueError, AttributeError) as error:
        raise FormatError(f"{path}: a figure of the convergence gate is not a number "
                          f"({error})") from None
    return diagnostics

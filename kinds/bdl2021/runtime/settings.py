"""A BDL task's settings in the scoring config: shapes, test blocks and reference files."""
from __future__ import annotations

from dataclasses import dataclass

from runtime.formats.json_files import config_field

from .score_types import CLASSIFICATION


@dataclass(frozen=True)
class Block:
    name: str
    start: int
    stop: int


@dataclass(frozen=True)
class TaskSettings:
    task_type: str
    n_test: int
    num_classes: int | None
    num_samples: int | None
    blocks: tuple[Block, ...]
    submission_stem: str           # res/<stem>.csv|.txt|.npy
    reference: str                 # files in ref/
    chain_reference: str | None
    test_labels: str | None
    exact_posterior_expectation: str | None   # JSON the builder precomputes (exact_posterior.py)

    @property
    def has_std(self) -> bool:
        """The sd columns are the spread over HMC chains: they need the per-chain reference."""
        return bool(self.chain_reference)


def _require(raw: dict, key: str, kind, where: str):
    return config_field(raw, key, kind, where, ValueError)


def parse_settings(task_type: str, raw: dict, where: str) -> TaskSettings:
    if "noise_ceiling" in raw:     # an old builder's config: its ceiling was not a ceiling
        raise ValueError(f"{where}.noise_ceiling: replaced by exact_posterior_expectation; "
                         "rebuild the bundle with this builder")
    n_test = _require(raw, "n_test", int, where)
    blocks = tuple(Block(b["name"], int(b["start"]), int(b["stop"]))
                   for b in _require(raw, "blocks", list, where))
    if not blocks or blocks[0].start != 0 or blocks[-1].stop != n_test or any(
            a.stop != b.start for a, b in zip(blocks, blocks[1:])):
        raise ValueError(f"{where}.blocks: must tile 0..{n_test} in order, found {blocks}")
    settings = TaskSettings(
        task_type=task_type, n_test=n_test, num_classes=raw.get("num_classes"),
        num_samples=raw.get("num_samples"), blocks=blocks,
        submission_stem=_require(raw, "submission_stem", str, where),
        reference=_require(raw, "reference", str, where),
        chain_reference=raw.get("chain_reference"), test_labels=raw.get("test_labels"),
        exact_posterior_expectation=raw.get("exact_posterior_expectation"))
    needed = "num_classes" if task_type == CLASSIFICATION else "num_samples"
    if not isinstance(getattr(settings, needed), int):
        raise ValueError(f"{where}.{needed}: expected an integer for a {task_type} task")
    return settings

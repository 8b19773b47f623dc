"""Where a task's files live and what they hold: one folder per task, names prefixed by task.

Names carry the task prefix so that the files of several tasks can sit side by side in one
flat bundle zip, as the 2021 competition's ``medmnist_probs.csv`` and ``uci_samples.csv`` did.

| file                         | content                                              | who sees it |
|------------------------------|------------------------------------------------------|-------------|
| <task>.npz                   | x_train, y_train, x_test, y_test (y_test all zeros)  | participants |
| <task>_probs.csv             | HMC BMA class probabilities, N x C, np.savetxt       | scorer (dev phase: public) |
| <task>_samples.csv           | HMC predictive draws of y, S x N (transposed)        | scorer |
| <task>_chain_probs.npy       | each chain's predictive, (K, N, C) float64           | scorer |
| <task>_chain_samples.npy     | each chain's draws of y, (K, S, N) float64           | scorer |
| <task>_batch_means.npy       | classification: each chain's predictive in 10 batches, (K, B, N, C) float32 | organizers only |
| <task>_reference_mcse.npy    | Monte Carlo standard error of the reference: (N, C), or (N, 2) for the mean and sd of y | scorer (dev phase: public) |
| <task>_exact_posterior_expectation.json | what an exact submission scores against the reference (``exact_posterior.py``) | scorer, pages |
| <task>_test_labels.csv       | the true y_test, N x 1                               | organizers only |
| <task>_task.json             | the task declaration: model, prior, split, blocks    | everyone |
| <task>_hmc_diagnostics.json  | step sizes, acceptance, R-hat, ESS, divergences      | everyone |
| <task>_parameters.npz        | optional: HMC parameter draws, one array per declared parameter, (chains, draws, *shape) | organizers only |

``all()`` lists what ``generate`` writes; the optional parameter draws come from organizers
who ran HMC elsewhere (as the 2021 organizers released theirs), so they are not among them.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_ROOT = Path(__file__).resolve().parent / "embedded"
MANIFEST_NAME = "manifest.json"
GENERATION_LOG_NAME = "generation_log.json"
# The log holds wall times, so it differs run to run; the manifest lists only what the
# seeds determine, and is then itself reproducible to the byte.
UNLISTED_IN_MANIFEST = (GENERATION_LOG_NAME,)


@dataclass(frozen=True)
class TaskFiles:
    folder: Path
    task: str
    kind: str

    def _path(self, suffix: str) -> Path:
        return self.folder / f"{self.task}{suffix}"

    @property
    def inputs(self) -> Path:
        return self._path(".npz")

    @property
    def reference(self) -> Path:
        return self._path("_probs.csv" if self.kind == "classification" else "_samples.csv")

    @property
    def chain_reference(self) -> Path:
        return self._path("_chain_probs.npy" if self.kind == "classification"
                          else "_chain_samples.npy")

    @property
    def batch_means(self) -> Path | None:
        return self._path("_batch_means.npy") if self.kind == "classification" else None

    @property
    def reference_mcse(self) -> Path:
        return self._path("_reference_mcse.npy")

    @property
    def expectation(self) -> Path:
        return self._path("_exact_posterior_expectation.json")

    @property
    def test_labels(self) -> Path:
        return self._path("_test_labels.csv")

    @property
    def declaration(self) -> Path:
        return self._path("_task.json")

    @property
    def diagnostics(self) -> Path:
        return self._path("_hmc_diagnostics.json")

    @property
    def parameters(self) -> Path:
        return self._path("_parameters.npz")

    def all(self) -> dict[str, Path]:
        paths = {"inputs": self.inputs, "reference": self.reference,
                 "chain_reference": self.chain_reference, "batch_means": self.batch_means,
                 "reference_mcse": self.reference_mcse, "expectation": self.expectation,
                 "test_labels": self.test_labels,
                 "declaration": self.declaration, "diagnostics": self.diagnostics}
        return {role: path for role, path in paths.items() if path is not None}


def task_files(root: Path, task: str, kind: str) -> TaskFiles:
    return TaskFiles(Path(root) / task, task, kind)

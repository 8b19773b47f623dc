"""The embedded default tasks: small real datasets shipped inside scikit-learn.

Each declaration states everything a participant must reproduce (data split, model,
likelihood, prior) and how its HMC reference is sampled. One task stands for each kind of
task of the NeurIPS 2021 competition:

| ours          | stands for                         | phase        |
|---------------|------------------------------------|--------------|
| breast_cancer | diabetic retinopathy (light track) | evaluation   |
| digits_shift  | CIFAR-10 + CIFAR-10-C blocks        | evaluation   |
| wine          | MedMNIST (dermamnist)              | evaluation   |
| diabetes_gap  | UCI-gap energy regression          | evaluation   |
| iris          | IMDB (public reference)            | development  |
| digits        | CIFAR-10 (public reference)        | development  |
| digits_cnn    | CIFAR-10 + CIFAR-10-C, declared CNN (public reference) | development |

``digits`` and ``digits_shift`` use different splits and different networks, so the public
development reference of ``digits`` does not reveal the hidden clean block of
``digits_shift`` (the 2021 competition likewise used ResNet-20 for its public CIFAR-10
reference and AlexNet for the hidden one). ``digits_cnn`` declares a convolutional network
(``networks.py``) on the digits as images, 8x8x1, with the same kind of corrupted test blocks:
the real competition's shape (a CNN on images under shift) at a size HMC samples here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# Regression submissions and references hold this many samples of y per test point,
# as the 2021 competition required (NUM_SAMPLES_REQUIRED = 1000).
REGRESSION_SAMPLES = 1000


@dataclass(frozen=True)
class HMCSettings:
    num_chains: int
    num_warmup: int
    num_samples: int          # kept per chain
    trajectory_length: float
    initial_step_size: float = 1e-3
    target_acceptance: float = 0.8
    max_num_steps: int = 1000


@dataclass(frozen=True)
class ShiftBlock:
    corruption: str
    severity: int

    @property
    def name(self) -> str:
        return f"{self.corruption}_{self.severity}"


@dataclass(frozen=True)
class TaskDeclaration:
    name: str
    phase: str                     # "development" (reference public) or "evaluation" (hidden)
    summary: str
    dataset: str                   # sklearn.datasets loader: load_<dataset>
    kind: str                      # "classification" or "regression"
    hidden_layers: tuple[int, ...]
    prior_variance: float
    hmc: HMCSettings
    split: str = "stratified"      # "stratified" random split, or "gap" (UCI-gap)
    test_fraction: float = 1 / 3
    gap_feature: str | None = None
    # "per_feature" for tabular data; "global" (one mean and std over all pixels, as image
    # pipelines normalise per channel) for images, where per-pixel scaling would blow up
    # noise on the near-constant border pixels.
    standardisation: str = "per_feature"
    shift_blocks: tuple[ShiftBlock, ...] = field(default_factory=tuple)
    seed: int = 0
    # A declared network other than the tanh MLP of ``hidden_layers`` (``networks.py``);
    # the inputs are then shaped (N, *network["input_shape"]).
    network: dict | None = None

    @property
    def likelihood(self) -> str:
        return "softmax" if self.kind == "classification" else "gaussian"


TASKS: tuple[TaskDeclaration, ...] = (
    TaskDeclaration(
        name="breast_cancer", phase="evaluation", dataset="breast_cancer",
        summary="Binary diagnosis (malignant/benign) from 30 features of digitised "
                "fine-needle aspirate images (Wisconsin); the light-track task.",
        kind="classification", hidden_layers=(16,), prior_variance=0.1,
        # A long warm-up: with 400 iterations the chains' potential energies had not yet
        # settled to one level (ESS of the energy 11 instead of ~40).
        hmc=HMCSettings(num_chains=4, num_warmup=1000, num_samples=1000, trajectory_length=6.0),
        seed=11),
    TaskDeclaration(
        name="digits_shift", phase="evaluation", dataset="digits",
        summary="Handwritten digits (8x8 images, 10 classes); the test set is the clean "
                "test images followed by corrupted copies at increasing severity.",
        kind="classification", hidden_layers=(32,), prior_variance=0.1,
        hmc=HMCSettings(num_chains=4, num_warmup=500, num_samples=750, trajectory_length=3.0),
        shift_blocks=(ShiftBlock("gaussian_noise", 2), ShiftBlock("gaussian_blur", 3),
                      ShiftBlock("pixel_shift", 4), ShiftBlock("contrast", 5)),
        standardisation="global", seed=12),
    TaskDeclaration(
        name="wine", phase="evaluation", dataset="wine",
        summary="Wine cultivar (3 classes) from 13 chemical measurements.",
        kind="classification", hidden_layers=(16,), prior_variance=0.2,
        hmc=HMCSettings(num_chains=4, num_warmup=1000, num_samples=1000, trajectory_length=2.0),
        seed=13),
    TaskDeclaration(
        name="diabetes_gap", phase="evaluation", dataset="diabetes",
        summary="Disease progression one year after baseline from 10 clinical variables; "
                "the middle third of patients by body-mass index is held out (gap split).",
        kind="regression", hidden_layers=(50,), prior_variance=0.1,
        hmc=HMCSettings(num_chains=4, num_warmup=500, num_samples=750, trajectory_length=2.0),
        split="gap", gap_feature="bmi", seed=14),
    TaskDeclaration(
        name="iris", phase="development", dataset="iris",
        summary="Iris species (3 classes) from 4 flower measurements.",
        kind="classification", hidden_layers=(16,), prior_variance=0.2,
        hmc=HMCSettings(num_chains=4, num_warmup=1000, num_samples=1000, trajectory_length=2.0),
        seed=15),
    TaskDeclaration(
        name="digits", phase="development", dataset="digits",
        summary="Handwritten digits (8x8 images, 10 classes), clean test set.",
        kind="classification", hidden_layers=(16, 16), prior_variance=0.2,
        hmc=HMCSettings(num_chains=4, num_warmup=500, num_samples=750, trajectory_length=2.0),
        standardisation="global", seed=16),
    TaskDeclaration(
        name="digits_cnn", phase="development", dataset="digits",
        summary="Handwritten digits as 8x8 images under a declared convolutional network; "
                "the test set is the clean test images followed by corrupted copies at "
                "increasing severity.",
        kind="classification", hidden_layers=(), prior_variance=0.2,
        hmc=HMCSettings(num_chains=4, num_warmup=500, num_samples=750, trajectory_length=2.0),
        shift_blocks=(ShiftBlock("gaussian_noise", 2), ShiftBlock("gaussian_blur", 3),
                      ShiftBlock("pixel_shift", 4), ShiftBlock("contrast", 5)),
        standardisation="global", seed=17,
        network={"type": "sequential", "input_shape": [8, 8, 1], "outputs": 10, "layers": [
            {"type": "conv", "channels": 8, "kernel": 3, "stride": 2, "padding": "same"},
            {"type": "activation", "name": "swish"},
            {"type": "flatten"}, {"type": "dense", "units": 10}]}),
)


def chosen_names(tasks_flag: str | None, default: list[str]) -> list[str]:
    """The task names a command's ``--tasks a,b`` gives, else ``default``."""
    return [name.strip() for name in tasks_flag.split(",") if name.strip()] if tasks_flag \
        else default


def task_by_name(name: str) -> TaskDeclaration:
    for task in TASKS:
        if task.name == name:
            return task
    raise KeyError(f"unknown task {name!r}; known tasks: {', '.join(t.name for t in TASKS)}")

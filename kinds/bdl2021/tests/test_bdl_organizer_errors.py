"""An organizer's BDL tasks with mistakes in their files end in one clear message (the file,
found, expected), exit 1, never a traceback, and nothing in --out: BDL's checks of its own
task files (kinds/bdl2021/organizer_checks.py), and the leak across bundles that only a kind
publishing references in a results phase can have. The builder's handling of a spec's and the
command line's mistakes is tests/test_organizer_errors.py's."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from test_organizer_errors import refused, run

REPO = Path(__file__).resolve().parents[3]
DEFAULT_SPEC = REPO / "kinds" / "bdl2021" / "default_spec.yaml"
# name: (task type, n_test, classes or samples)
TASKS = {"alpha": ("classification", 20, 3), "beta": ("regression", 15, 30),
         "gamma": ("classification", 12, 2)}
FEATURES, N_TRAIN = 3, 40


def write_task(root: Path, name: str, rng) -> None:
    kind, n_test, width = TASKS[name]
    folder = root / name
    folder.mkdir(parents=True)
    classification = kind == "classification"
    y_train = rng.integers(0, width, N_TRAIN) if classification else rng.normal(size=N_TRAIN)
    np.savez(folder / f"{name}.npz", x_train=rng.normal(size=(N_TRAIN, FEATURES)),
             y_train=y_train, x_test=rng.normal(size=(n_test, FEATURES)), y_test=np.zeros(n_test))
    declaration = {"name": name, "phase": "development", "kind": kind, "n_train": N_TRAIN,
                   "n_test": n_test, "input_shape": [FEATURES],
                   "test_blocks": [{"name": "clean", "start": 0, "stop": n_test}],
                   "model": {"type": "mlp", "activation": "tanh",
                             "layer_sizes": [FEATURES, 4, width if classification else 2]},
                   "likelihood": {"name": "softmax" if classification else "gaussian"},
                   "prior": {"distribution": "normal", "variance": 0.1}, "summary": name,
                   ("num_classes" if classification else "num_samples"): width}
    (folder / f"{name}_task.json").write_text(json.dumps(declaration, indent=1))
    if classification:
        np.savetxt(folder / f"{name}_probs.csv", rng.dirichlet(np.ones(width), size=n_test))
    else:
        np.savetxt(folder / f"{name}_samples.csv", rng.normal(size=(width, n_test)))   # S x N


def base_spec() -> dict:
    spec = yaml.safe_load(DEFAULT_SPEC.read_text())
    spec.update(slug="bdl-mistakes", layout="per_phase",      # one bundle per phase
                tasks={name: {"budget_seconds": 5} for name in TASKS},
                phases={"development": {"label": "Development", "start": "2027-01-10 00:00:00",
                                        "submission": "results", "tasks": ["alpha", "beta"],
                                        "execution_time_limit": 600},
                        "evaluation": {"label": "Evaluation", "start": "2027-04-01 00:00:00",
                                       "submission": "code", "tasks": ["gamma"],
                                       "execution_time_limit": 600}},
                tracks={})
    return spec


@pytest.fixture
def organizer(tmp_path):
    """(the spec's folder, the organizer's data root: three small BDL tasks)."""
    data = tmp_path / "data"
    rng = np.random.default_rng(0)
    for name in TASKS:
        write_task(data, name, rng)
    # Codabench, the default platform, requires the spec's logo next to it.
    logo = yaml.safe_load(DEFAULT_SPEC.read_text())["logo"]
    shutil.copyfile(DEFAULT_SPEC.parent / logo, tmp_path / logo)
    return tmp_path, data


# ---- BDL's task files -----------------------------------------------------------------------

def test_missing_inputs_file(organizer):
    tmp_path, data = organizer
    (data / "alpha" / "alpha.npz").unlink()
    refused(tmp_path, data, base_spec(), "tasks.alpha:", str(data / "alpha" / "alpha.npz"),
            "file does not exist", "x_train, y_train, x_test, y_test")


def test_missing_reference_file(organizer):
    tmp_path, data = organizer
    (data / "alpha" / "alpha_probs.csv").unlink()
    refused(tmp_path, data, base_spec(), str(data / "alpha" / "alpha_probs.csv"),
            "file does not exist", "N x C class probabilities")


def test_declaration_without_a_required_key(organizer):
    tmp_path, data = organizer
    path = data / "beta" / "beta_task.json"
    declaration = json.loads(path.read_text())
    del declaration["n_test"]
    path.write_text(json.dumps(declaration))
    refused(tmp_path, data, base_spec(), str(path), "missing required key(s) n_test")


def test_n_test_not_matching_the_inputs(organizer):
    tmp_path, data = organizer
    path = data / "alpha" / "alpha_task.json"
    declaration = json.loads(path.read_text())
    declaration.update(n_test=25, test_blocks=[{"name": "clean", "start": 0, "stop": 25}])
    path.write_text(json.dumps(declaration))
    refused(tmp_path, data, base_spec(), f"{data / 'alpha' / 'alpha.npz'}: x_test has 20 rows",
            "declares n_test = 25")


def test_reference_of_the_wrong_shape_is_refused_at_build_time(organizer):
    tmp_path, data = organizer
    path = data / "alpha" / "alpha_probs.csv"
    np.savetxt(path, np.full((20, 2), 0.5))
    output = refused(tmp_path, data, base_spec(), f"{path}: wrong shape",
                     "20 (test points) x 3 (classes)", "found 20 x 2")
    assert "looks transposed" not in output


def test_transposed_regression_reference(organizer):
    tmp_path, data = organizer
    path = data / "beta" / "beta_samples.csv"
    np.savetxt(path, np.random.default_rng(1).normal(size=(15, 30)))      # N x S, not S x N
    refused(tmp_path, data, base_spec(), str(path), "found 15 x 30", "looks transposed")


# ---- leakage across bundles ----------------------------------------------------------------

def test_task_public_in_a_results_phase_and_hidden_in_a_code_phase(organizer):
    """BDL's kit publishes a results phase's references (label_accuracy publishes none, so
    no such leak arises there)."""
    tmp_path, data = organizer
    spec = base_spec()
    spec["phases"]["development"]["tasks"] = ["alpha", "gamma"]
    refused(tmp_path, data, spec, "phases.evaluation.tasks: 'gamma' is also scored in the "
                                  "results phase phases.development",
            "public_reference_tasks_allowed_in_code_phases")
    spec["public_reference_tasks_allowed_in_code_phases"] = ["gamma"]
    code, output, zips = run(tmp_path, data, spec)
    assert code == 0, output

"""What the BDL pages say: the values its templates (``templates/kind_*.html.j2``) and its kit's
guide (``kit/README.md.j2``, under ``guide``) show.

Decisions are made here; the templates hold the prose and only loop.
"""
from __future__ import annotations

import re

import numpy as np

from markupsafe import Markup, escape

from bundle.competition_rules.public_rows import public_part
from kinds.baseline_table import failed, failed_cell, failed_note
from .organizer_checks import convergence_failures
from .reference.task_files import DEFAULT_ROOT
from .runtime.declared_model import task_network
from .runtime.exact_posterior import BATCHES_PER_CHAIN, COVERAGE, SPLITS
from .runtime.report import decimals_showing, expectation_text
from .runtime.score_types import CLASSIFICATION, REGRESSION, TASK_TYPES
from .tasks import files, has_public_references, has_std, prediction_stem

# Metric definitions as participants read them. They are plain text (Unicode symbols, never HTML
# entities) in which `_{...}` marks a subscript; formula_html turns them into markup. Writing them
# as HTML source here and handing that to an autoescaping template is what once showed
# participants "&Sigma;<sub>i</sub>" literally: the template escaped the markup a second time.
FORMULAS = {
    "agreement": "(1/N) Σ_{i} 1[argmax_{c} p(c|x_{i}) = argmax_{c} p_{HMC}(c|x_{i})]; "
                 "ties go to the lowest class index",
    "total_variation": "(1/N) Σ_{i} ½ Σ_{c} |p(c|x_{i}) - p_{HMC}(c|x_{i})|",
    "w2": "(1/N) Σ_{i} W_{2}(your samples of y_{i}, HMC samples of y_{i}), with W_{2} the root mean "
          "squared gap between sorted samples (quantile matching for unequal counts)",
    "w1": "(1/N) Σ_{i} W_{1}, the mean absolute gap between sorted samples: what the 2021 "
          "competition's code computed under the name W2",
}
_SUBSCRIPT = re.compile(r"_\{([^{}]*)\}")


def formula_html(text: str) -> Markup:
    """A FORMULAS entry as HTML: every piece of text escaped exactly once, `_{x}` as <sub>x</sub>.

    The result is Markup, so the autoescaping template inserts it as it is; any other string
    in a page context stays plain text and is escaped by the template (once).
    """
    pieces = _SUBSCRIPT.split(text)          # text, subscript, text, subscript, ..., text
    return Markup("").join(Markup("<sub>{}</sub>").format(piece) if odd else escape(piece)
                           for odd, piece in ((i % 2 == 1, p) for i, p in enumerate(pieces)))


def example_shape(declaration: dict) -> tuple:
    """One example's shape: as declared, else as the declared network reads it."""
    return tuple(declaration.get("input_shape") or task_network(declaration["model"]).input_shape)


def public_training(task):
    """The data page's figures: the training rows of the task's public inputs file (x_train,
    y_train); images where one example is (H, W, C)."""
    from kinds.kind import PublicTraining
    from .runtime.formats import read_task_inputs
    inputs = read_task_inputs(files(task).inputs, mapped=True, check_values=False)
    shape = example_shape(task.declaration)
    x_train = inputs.x_train
    images = len(shape) == 3 and shape[-1] in (1, 3)
    return PublicTraining(
        source=f"{files(task).inputs.name} (x_train, y_train)", input_shape=shape,
        targets=np.asarray(inputs.y_train).ravel(), target="class" if
        task.task_type == CLASSIFICATION else "y",
        classification=task.task_type == CLASSIFICATION,
        images=(lambda rows: np.asarray(x_train[rows]).reshape(len(rows), *shape))
        if images else None)


def model_text(model: dict) -> str:
    """The declared network in a few words, with its parameter count."""
    network = task_network(model)
    return f"{network.describe()} ({network.num_parameters} parameters)"


def _task_rows(plan, phase) -> list[dict]:
    rows = []
    for task in plan.tasks:
        d = task.declaration
        rows.append({
            "name": task.name, "phase": phase.label, "kind": task.task_type,
            "sizes": f"{d['n_train']} / {d['n_test']}",
            "predict": (f"{d['num_classes']} class probabilities"
                        if task.task_type == CLASSIFICATION else f"{d['num_samples']} samples of y"),
            "model": model_text(d["model"]),
            "prior_variance": f"{d['prior']['variance']:g}",
            "budget": (task.budget_text() if phase.code_submission and task.budget_seconds
                       else "-"),
            "summary": d.get("summary", ""),
            # the build refuses these unless the spec accepts them (accept_unconverged_references)
            "unconverged": "; ".join(convergence_failures(task))})
    return rows


def _formats(types: set[str], public_references: bool) -> list[str]:
    """The file formats a participant of this phase meets: only its types of task, and the
    reference layouts only where the references can be downloaded."""
    lines = []
    if CLASSIFICATION in types:
        lines.append("class probabilities: N rows of C numbers, space or comma separated "
                     "(np.savetxt writes the canonical form), a header row allowed, or .npy")
    if REGRESSION in types:
        lines.append("regression samples: N rows of S samples of y" + (
            "; the references are stored transposed, S x N, as in the 2021 competition"
            if public_references else ""))
    if public_references:
        lines.append("per-chain references (.npy): (chains, N, C) or (chains, S, N)")
    return lines


def _reference_words(paths) -> tuple[str, str]:
    """(the sampler's name, as the data page calls the references): HMC only where the
    references came with HMC diagnostics; an organizer's references without them are named
    for what they are, a model average of chains, whatever made them."""
    if paths.diagnostics.is_file():
        return "HMC", "HMC predictive (model average of all chains)"
    return ("reference", "the reference predictive (model average of all chains, as the "
            "organizers sampled it; no sampler diagnostics came with it)")


def _data_rows(plan, phase) -> list[dict]:
    rows = []
    for task in plan.tasks:
        d, paths = task.declaration, files(task)
        sampler, reference = _reference_words(paths)
        width = d.get("num_classes") or d.get("num_samples")
        classification = task.task_type == CLASSIFICATION
        predictive_shape = (f"{d['n_test']} x {width}" if classification
                            else f"{width} x {d['n_test']} (samples x points)")
        public = "public data" + (", input data" if phase.code_submission else "")
        rows.append({"task": task.name, "file": paths.inputs.name,
                     "content": "x_train, y_train, x_test, y_test (y_test all zeros)",
                     "shape": f"x: {d['n_train']}+{d['n_test']} x "
                              f"{'x'.join(map(str, example_shape(d)))}",
                     "where": public})
        rows.append({"task": task.name, "file": paths.declaration.name,
                     "content": "the declaration: model, likelihood, prior, split, test blocks",
                     "shape": "JSON", "where": "public data"})
        if phase.code_submission:
            # The scorer's copy is hidden; its file name and format are of no use to anyone.
            rows.append({"task": task.name, "file": "(not downloadable)",
                         "content": reference,
                         "shape": predictive_shape, "where": "hidden, read by the scoring program"})
            continue
        # A results phase publishes its references (kind.stage_public).
        rows.append({"task": task.name, "file": paths.reference.name,
                     "content": reference,
                     "shape": predictive_shape, "where": "public data"})
        if paths.chain_reference.is_file():
            rows.append({"task": task.name, "file": paths.chain_reference.name,
                         "content": f"each {sampler} chain's own predictive",
                         "shape": ("chains x " + predictive_shape if classification
                                   else f"chains x {width} x {d['n_test']}"),
                         "where": "public data"})
        if paths.reference_mcse.is_file():
            rows.append({"task": task.name, "file": paths.reference_mcse.name,
                         "content": ("the Monte Carlo standard error of each reference "
                                     "probability" if classification else
                                     "the Monte Carlo standard error of the reference's mean "
                                     "and standard deviation of y at each test point"),
                         "shape": predictive_shape if classification else f"{d['n_test']} x 2",
                         "where": "public data"})
    return rows


def baseline_cell(metric: dict) -> str:
    """A baseline's figure with its standard error, where its table has one (a table made
    before they were measured has none), with enough decimals that the error shows: a
    near-exact baseline's TV of 0.00059 ± 0.00008 is not 0.001 ± 0.000."""
    error = metric.get("se")
    decimals = decimals_showing(error, 3)
    return f"{metric['value']:.{decimals}f}" + (
        f" ± {error:.{decimals}f}" if error is not None else "")


def expectation_cell(expected: dict) -> str:
    """The exact-posterior line of a baseline table, with its 95% range where the table has
    one (tables made before it was estimated from batches have only a value)."""
    return expectation_text(expected["value"], expected.get("interval"), 3)


def _baseline_table(plan, results: dict | None) -> dict:
    if not results or not any(task.name in results["tasks"] for task in plan.tasks):
        return {"note": "Baseline results are not available for these tasks.", "header": [],
                "rows": []}
    methods = results["methods"]
    header = ["task", "metric", *methods.values(), "exact-posterior expectation"]
    rows, shown = [], []
    for task in plan.tasks:
        entry = results["tasks"].get(task.name)
        if not entry:
            continue
        shown += [entry["methods"][method] for method in methods]
        for metric, expected in entry["exact_posterior_expectation"].items():
            cells = [failed_cell(row) if failed(row) else baseline_cell(row["metrics"][metric])
                     for row in (entry["methods"][method] for method in methods)]
            rows.append([task.name, metric, *cells, expectation_cell(expected)])
    budgets = sorted({results["budgets"][task.name] for task in plan.tasks
                      if task.name in results.get("budgets", {})})
    epochs = sorted({results.get("epochs", {}).get(task.name) for task in plan.tasks})
    if len(epochs) == 1 and epochs[0] is not None:
        trained = (f"trained with a budget of {epochs[0]:g} epochs of plain SGD per task, timed "
                   "on the organizers' machine")
    elif len(budgets) == 1:
        trained = f"trained with a {budgets[0]:g} s budget per task"
    else:
        trained = "trained with each task's budget"
    if not plan.code_submission:
        trained += " on the organizers' machine (this phase takes prediction files)"
    if any(public_part(task) for task in plan.tasks):
        trained += ("; a task scored on a public part shows that part's figures, as the "
                    "leaderboard does")
    return {"note": f"Baselines of the starting kit, {trained}; ± is one standard error (over "
                    "the test rows and the HMC chains, as the detailed results give it); the "
                    "exact-posterior expectation is what an exact sampler's "
                    "submission is expected to score against this finite HMC reference, and "
                    "the range after it holds such a submission's score 95% of the time (not a "
                    "bound: a submission may land on either side of it by chance)."
                    + failed_note(shown),
            "header": header, "rows": rows}


def _results_example(task) -> str:
    if task.task_type == CLASSIFICATION:
        return (f"import numpy as np\nnp.savetxt('{task.name}_probs.csv', probabilities)"
                "  # N x C, rows sum to 1")
    return f"import numpy as np\nnp.savetxt('{task.name}_samples.csv', samples)  # N x S"


def page_context(plan, phase, baseline_results: dict | None) -> dict:
    """Everything the kind's templates show, for this phase's plan."""
    types = {task.task_type for task in plan.tasks}
    return {
        "tasks": _task_rows(plan, phase),
        "metrics": [{"name": t.label, "formula": formula_html(FORMULAS[t.name]),
                     "better": "higher" if t.higher_is_better else "lower"}
                    for name in sorted(types) for t in TASK_TYPES[name].score_types],
        "data_files": _data_rows(plan, phase),
        "formats": _formats(types, public_references=not phase.code_submission),
        "baselines": _baseline_table(plan, baseline_results),
        "results_example": _results_example(plan.tasks[0]),
        "prediction_files": [task["prediction_file"] for task in kit_guide(plan)["tasks"]],
        # our embedded tasks are standardised with training statistics; an organizer's own
        # data is as they prepared it, so the page promises nothing about it
        "standardised": all(_embedded(task) for task in plan.tasks),
        "guide": kit_guide(plan),
        "expectation": _expectation_text(),
    }


def _expectation_text() -> dict:
    """How the exact-posterior expectation is made, in the figures the code uses."""
    return {"method": f"It is estimated from the reference's own draws, cut into "
                      f"{BATCHES_PER_CHAIN} consecutive batches per HMC chain: in each of "
                      f"{SPLITS} random halves of the batches, the reference is scored against "
                      "the mean of half of them (for regression, draws of one half against "
                      "draws of the other, at the submission's and the reference's sizes); the "
                      "range also carries the uncertainty of the error's size estimated from "
                      "the batches.",
            "coverage": f"{COVERAGE:.0%}"}


def _embedded(task) -> bool:
    return task.folder.resolve().parent == DEFAULT_ROOT.resolve()


BASELINES = (("Deep ensemble", "deep_ensemble.py",
              "10 MAP solutions of the declared posterior from random starts, averaged; a "
              "checkpoint after each member"),
             ("MultiSWAG", "multi_swag.py",
              "5 independent SGD runs, each a diagonal Gaussian of its iterates (SWAG), sampled "
              "and averaged: a multi-modal approximation like the 2021 winners'"),
             ("Cyclical SGLD", "sgld.py",
              "minibatch Langevin dynamics with a cosine step size; samples from the end of each "
              "cycle; a checkpoint per cycle"),
             ("SGHMC", "sghmc.py",
              "stochastic-gradient Hamiltonian Monte Carlo with friction, thinned samples; a "
              "checkpoint every 2000 steps"),
             ("Full-batch HMC", "hmc.py",
              "Hamiltonian Monte Carlo on all training rows, the reference's kind of sampler: "
              "step size and a diagonal mass matrix adapted in warm-up, then every draw "
              "averaged; it uses 90% of the budget (stopping costs nothing) and checkpoints "
              "every 2 s"),
             ("Mean-field VI", "mean_field_vi.py",
              "a diagonal Gaussian fitted by the reparameterisation trick from a MAP start; "
              "periodic checkpoints"),
             ("MC dropout", "mc_dropout.py",
              "dropout on the hidden units, weight decay from the declared prior, 100 stochastic "
              "passes averaged"),
             ("Trivial", "trivial.py",
              "uniform probabilities, or samples from the prior predictive: the floor"))


def _kit_task(task) -> dict:
    """One task as the kit's guide shows it (the plan's declaration; no figure of our own)."""
    d = task.declaration
    classification = task.task_type == CLASSIFICATION
    width = d["num_classes"] if classification else d["num_samples"]
    blocks = [block["name"] for block in d.get("test_blocks", ())]
    return {"name": task.name, "task_type": task.task_type, "n_train": d["n_train"],
            "n_test": d["n_test"], "input_shape": " x ".join(map(str, example_shape(d))),
            "what": (f"probabilities of {width} classes" if classification
                     else f"{width} samples of y per test point"),
            "shape": f"{d['n_test']} x {width}",
            "prediction_file": f"{prediction_stem(task)}.csv",
            "budget": task.budget_text() if task.budget_seconds else "-",
            "summary": d.get("summary", ""),
            "blocks": ", ".join(f"`{b}`" for b in blocks) if len(blocks) > 1 else ""}


def kit_guide(plan) -> dict:
    """What the kit's guide (README.md.j2) shows of this phase plan besides the pages' facts;
    the pages' context carries it (``guide``)."""
    types = {task.task_type for task in plan.tasks}
    return {"tasks": [_kit_task(task) for task in plan.tasks],
            "classification": CLASSIFICATION in types,
            "regression": any(t != CLASSIFICATION for t in types),
            "references_public": not plan.code_submission
            and all(has_public_references(task) for task in plan.tasks),
            "has_std": any(has_std(task) for task in plan.tasks),
            "baselines": [{"label": label, "file": file, "idea": idea}
                          for label, file, idea in BASELINES]}

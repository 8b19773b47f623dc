"""The platforms a bundle is built for: one object per site, looked up by its name.

Each platform's module (``codalab.py``: CodaLab Competitions v1.5; ``codabench.py``: Codabench,
``version: 2``) holds one ``Platform`` object, which owns everything that differs between the
sites: the bundle's name, its competition.yaml and member layout, the texts and facts the build
prints or the pages show, the worker's ``$variables``, its model of the worker (the dry run) and
what the rules read. The core asks that object and branches on no platform name.

The registry maps a name to its module, imported on first use (as ``kinds/__init__.py`` does):
the platform modules use the builder's modules, which look platforms up here.
Adding a platform: its module, defining ``PLATFORM``, and one line in ``PLATFORMS``
(every step: ``docs/extending.md``).

What the object owns, in four groups:

- the bundle: its name's suffix, ``documents`` (competition.yaml, dumped from a dict with
  PyYAML's safe dumper, never quoted by hand; the pages and logo laid out as the site reads
  them), ``spec_problem`` (what the site requires of the spec), the leaderboard columns as
  the site holds them, the ranking note;
- its texts and facts: where to upload, how to reveal full scores, who can reach the signing
  key (``record_key_in_program``), GPU and queue warnings, dataset upload steps, the docker
  image key and default, the timeout message, what the dry run does not reproduce;
- the worker: ``worker_variables(program, root)``, the one table of ``$variables`` the dry run
  uses and the program rules allow (``command_variables``), and ``dry_run``, its model of the
  worker (shared steps: ``bundle/dry_run.py``);
- what the bundle rules read: the yaml member (``pick_yaml``), which rule owns an unreadable
  zip or yaml, the program zips the yaml names. A rule names its platforms
  (``@rule(..., "codabench")``, ``bundle/rules/framework.py``).

``worker.py``, the model of both workers, is copied into every starting kit, where
``run_local.py`` and ``submission_zip.py`` import it as a sibling. So it keeps its own site
names (its ``PLATFORMS``), and the kit's tools ask it instead of naming a site. The scan of
``tests/test_platforms.py`` for branches on a site's name covers ``starting_kit/`` too.
"""
from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from pathlib import Path

# name (build_bundle.py --platform, kit.json, the rules' platform filter) -> module
PLATFORMS = {
    "codalab": "bundle.platforms.codalab",
    "codabench": "bundle.platforms.codabench",
}
CODALAB, CODABENCH = "codalab", "codabench"
DEFAULT_PLATFORM = CODABENCH


class UnknownPlatform(ValueError):
    pass


def platform(name: str) -> "Platform":
    """The platform object registered under ``name``."""
    if name not in PLATFORMS:
        raise UnknownPlatform(f"unknown platform {name!r}, expected one of {tuple(PLATFORMS)}")
    return importlib.import_module(PLATFORMS[name]).PLATFORM


def platform_of(competition: dict) -> "Platform":
    """The platform whose competition.yaml ``competition`` is (the first that claims it)."""
    return next(site for site in map(platform, PLATFORMS) if site.writes(competition))


class Platform(ABC):
    """One site. Attributes are its facts and texts; methods what it builds, checks and runs."""
    name: str
    title: str                 # as the dry run names it: "CodaLab v1.5"
    bundle_suffix: str         # before ".zip" in the bundle's file name
    upload_where: str          # where the organizer uploads a bundle
    image_key: str             # the competition.yaml key naming the docker image
    default_image: str         # the image where the yaml names none
    reveal_text: str           # how to rank on all test rows at the end
    signing_text: str          # who can reach the key that signs the ingestion's record ({secret})
    gpu_workers: str           # how a submission reaches a GPU worker
    hidden_figures_text: str   # the evaluation page: where the figures kept from participants go
    timeout_message: str       # the worker's words for a step over its time limit ({limit})
    record_rule: str           # the scorer's rule for a code phase's run record
    record_key_in_program: bool    # the ingestion program carries the record key
    # it carries the key derived for Codabench's importer of v1.5 bundles instead
    importer_key_in_program: bool = False
    not_reproduced: tuple[str, ...]    # what the dry run does not reproduce, past the image
    # The rules that own the failures of opening a bundle (their names are the ones each
    # platform's checker has always used: tests and build messages show them).
    zip_rule: str              # the zip cannot be opened
    yaml_rule: str             # the YAML is missing or does not parse into a mapping
    files_rule: str            # a member a key names is missing
    missing_yaml: str          # the site's failure when it finds no YAML
    # Where its workers mount a host folder of the organizer's in every container, if any
    # (spec key on_worker keeps the hidden references there, sealed, and input data)
    worker_data_mount: str | None = None
    worker_references_text: str = ""   # the evaluation page, where they are kept there
    # The pages and guides: what the site makes of a code zip's metadata file, and of a zip of
    # prediction files sent to a code phase (the worker model: worker.py's SiteWorker)
    code_zip_rule: str
    prediction_files_in_code_phase: str
    # The pages: what the worker makes of a code phase's execution time limit, where it is
    # not what the limit says (Codabench's worker does not stop a run at it)
    execution_limit_text: str = ""

    # ---- building ---------------------------------------------------------------------

    def spec_problem(self, spec) -> str | None:
        """What the site requires that the spec lacks."""
        return None

    def column_problem(self, columns: list) -> str | None:
        """A leaderboard column the site cannot hold, named by the spec key that makes it."""
        return None

    @abstractmethod
    def documents(self, spec, phases, plans, columns, files, pages) -> dict[str, bytes]:
        """competition.yaml, the pages and the logo, as bundle members."""

    def leaderboard_columns(self, columns: list) -> list:
        """The leaderboard columns as the site holds them."""
        return columns

    def ranking_note(self, columns: list) -> str:
        """What the evaluation page adds where the site cannot rank as the spec says."""
        return ""

    def release_notes(self, competition: dict) -> list[str]:
        """What the built or checked bundle's yaml (parsed) needs of the site's release, which
        the build and ``--check`` print: a server older than that refuses it."""
        return []

    def build_warnings(self, spec, phases) -> list[str]:
        """What the organizer should know about the bundle on this site."""
        return ([warning for phase in phases for warning in self.phase_warnings(phase, spec)]
                + self._gpu_warnings(spec))

    def phase_warnings(self, phase, spec) -> list[str]:
        return []

    def names_gpu_queue(self, spec) -> bool:
        """Whether the spec already sends submissions to workers the organizer chose."""
        return False

    def _gpu_warnings(self, spec) -> list[str]:
        """A GPU image is not a GPU: the queue's workers decide."""
        if not spec.gpu_image or self.names_gpu_queue(spec):
            return []
        return [f"docker_image {spec.docker_image} is a GPU image, but {self.gpu_workers}"]

    def after_upload_notes(self, spec) -> list[str]:
        """The last lines of the build's summary: what to set on the site by hand."""
        return []

    def worker_recipe(self, spec, bundle_name: str, promised: list[str]) -> str | None:
        """The site's compute worker settings for a spec whose submissions run on the
        organizer's own workers, quoting the pages' ``promised`` lines about the machine
        (``bundle/worker_recipe.py`` writes them next to the bundle); None where there are none."""
        return None

    def worker_recipe_notes(self, spec) -> list[str]:
        """What no setting of the site's worker sets, which that organizer sees to instead."""
        return []

    @abstractmethod
    def dataset_upload_step(self, dataset) -> str:
        """How to upload one dataset zip apart and find its key."""

    # ---- the worker -------------------------------------------------------------------

    @abstractmethod
    def worker_variables(self, program: str, folders) -> dict[str, Path | str]:
        """The ``$variables`` the worker replaces in ``program``'s command (``scoring_program``
        or ``ingestion_program``), with their values in the run's ``folders``."""

    def command_variables(self, program: str) -> frozenset[str]:
        """The names (without ``$``) the worker replaces in ``program``'s command."""
        return frozenset(name.lstrip("$") for name in self.worker_variables(program, Path("/")))

    @abstractmethod
    def dry_run(self, bundle_zip: Path, python: str, submission_zip: Path | None = None,
                datasets: dict[str, Path] | None = None) -> list:
        """Run the bundle as the site's worker would, phase by phase (``bundle/dry_run.py``);
        ``datasets``: key -> local copy of each dataset the yaml names by key."""

    # ---- what the rules read ----------------------------------------------------------

    @abstractmethod
    def writes(self, competition: dict) -> bool:
        """Whether ``competition`` (a parsed competition.yaml) is this site's form."""

    @abstractmethod
    def pick_yaml(self, names: list[str]) -> str | None:
        """The member the site reads as competition.yaml."""

    @abstractmethod
    def program_zips(self, bundle, programs: tuple[str, ...]) -> list[tuple[str, str]]:
        """(where, member) of each distinct program zip the bundle's yaml names."""

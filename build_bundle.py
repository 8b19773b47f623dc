"""Build upload-ready Codabench (the default) or CodaLab v1.5 bundles from an organizer spec, and
dry-run them.

A spec with layout "one" (the default) gives one competition holding every phase (one per
track); "per_phase" gives one per phase and track. Naming a --phase builds that phase alone.

examples (phase and track names of the default spec):
  python build_bundle.py --phase all                       every competition of the default spec
  python build_bundle.py --phase evaluation --track light  one bundle: dist/<slug>-evaluation-light.zip
  python build_bundle.py --phase evaluation --check        build it, then run it as the worker would
  python build_bundle.py --check dist/x.zip                dry-run an existing bundle
  python build_bundle.py --check dist/x.zip --submission my.zip   ... with a participant's zip
  python build_bundle.py --config my_spec.yaml --data-root /data/bdl --phase all
  python build_bundle.py --platform codalab --phase all --check   CodaLab v1.5 bundles (a
      self-hosted CodaLab server, or Codabench's v1.5 importer)
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

import yaml

from bundle import competition_rules
from bundle.build import BuildError, baseline_results_file, build_competition, competition_targets
from bundle.worker_data import copy_steps
from bundle.worker_recipe import recipe_path, write_worker_recipe
from bundle.rules import check_bundle
from bundle.datasets import keys_block, local_copies
from bundle.dry_run import StepResult, not_checked, table
from bundle.methodology import methodology_report, report_lines
from bundle.platforms import DEFAULT_PLATFORM, PLATFORMS, Platform, platform, platform_of
from bundle.platforms import codabench_importer
from bundle.record_key import secret_path
from bundle.spec import DEFAULT_SPEC, SpecError, load_spec
from bundle.zips import content_sha256

REPO = Path(__file__).resolve().parent
IMAGE_PYTHON = REPO / ".venv-image" / "bin" / "python"


WAITING_FOR_KEYS = 3


class UsageError(Exception):
    """A bad argument: exit 2."""


def _spec_keys(argv: list[str]) -> tuple[str, str]:
    """The phases and tracks of the spec named by --config (or the default), for --help: read
    from its YAML without validating it (help shows even for a spec with mistakes)."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--config", type=Path, default=DEFAULT_SPEC)
    known, _ = early.parse_known_args(argv)
    try:
        raw = yaml.safe_load(known.config.read_text(encoding="utf-8"))
        phases = ", ".join(str(key) for key in raw["phases"])
        tracks = ", ".join(str(key) for key in (raw.get("tracks") or {})) or "none in this spec"
    except Exception:       # noqa: BLE001 - help must show even for an unreadable spec
        return f"the phase keys of {known.config}", f"the track keys of {known.config}"
    return phases, tracks


def _parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    given = sys.argv[1:] if argv is None else argv
    phases, tracks = (_spec_keys(given) if any(a in ("-h", "--help") for a in given)
                      else ("its phase keys", "its track keys"))
    parser.add_argument("--phase", default=None,
                        help=f"a phase key of the --config spec ({phases}) or 'all'")
    parser.add_argument("--track", default=None,
                        help=f"a track key of the --config spec ({tracks}); code phases only; "
                             "default: every track of the phase, or none")
    parser.add_argument("--config", type=Path, default=DEFAULT_SPEC,
                        help=f"organizer spec (default: {DEFAULT_SPEC.relative_to(REPO)})")
    parser.add_argument("--data-root", type=Path, default=None,
                        help="folder of the organizer's task files in the 2021 formats, one "
                             "folder per task (docs/organizer_data.md); default: the spec's")
    parser.add_argument("--out", type=Path, default=REPO / "dist", help="output folder (dist/)")
    parser.add_argument("--platform", choices=tuple(PLATFORMS), default=DEFAULT_PLATFORM,
                        help="codabench (default): Codabench, version 2, where competitions "
                             "run now (the public CodaLab server has taken no submissions since "
                             "2025-12-31); codalab: CodaLab v1.5, for a self-hosted CodaLab "
                             "server or Codabench's v1.5 importer")
    parser.add_argument("--check", nargs="?", const=True, default=None, metavar="ZIP",
                        help="dry-run the bundles just built, or the given bundle zip")
    parser.add_argument("--via-codabench-importer", action="store_true",
                        help="with --check of a CodaLab v1.5 bundle: dry-run it as Codabench "
                             "imports it (its v1.5 importer), naming every key the importer "
                             "drops or changes")
    parser.add_argument("--submission", type=Path, default=None, metavar="ZIP",
                        help="with --check: dry-run this submission zip instead of the kit's sample")
    return parser


def _targets(spec, phase: str, track: str | None) -> list[tuple[list[str], str | None]]:
    keys = [p.key for p in spec.phases]
    if phase != "all" and phase not in keys:
        raise UsageError(f"unknown phase {phase!r}; the spec {spec.path} has "
                         f"{', '.join(keys)} (or 'all')")
    if track and track not in {t.key for t in spec.tracks}:
        raise UsageError(f"unknown track {track!r}; the spec {spec.path} has "
                         f"{', '.join(t.key for t in spec.tracks) or 'no tracks'}")
    return competition_targets(spec, phase, track)


def _zip_usage_problem(given: Path, what: str) -> str | None:
    if not given.exists():
        return f"{given}: {what} not found"
    if not given.is_file() or not zipfile.is_zipfile(given):
        return f"{given}: {what} is not a zip file"
    with zipfile.ZipFile(given) as archive:
        if not [name for name in archive.namelist() if not name.endswith("/")]:
            return (f"{given}: {what} is an empty zip; expected the prediction files (or the "
                    "code, submission.py) at its root")
    return None


def _competition(zip_path: Path) -> dict:
    """The bundle's competition.yaml, or an empty mapping where it has none that parses (its
    checks report that)."""
    with zipfile.ZipFile(zip_path) as bundle:
        try:
            comp = yaml.safe_load(bundle.read("competition.yaml"))
        except (KeyError, yaml.YAMLError):
            return {}
    return comp if isinstance(comp, dict) else {}


def _image(zip_path: Path, site: Platform) -> str:
    """The docker image the bundle's yaml names (the platform's default where it names none)."""
    image = _competition(zip_path).get(site.image_key)
    return image if isinstance(image, str) else site.default_image


def _local_datasets(zip_path: Path) -> tuple[dict[str, Path], list[str]]:
    """The local copy of each dataset the bundle's yaml names by key (its comments name the
    file, next to the bundle, and its sha256), and what is wrong with them."""
    with zipfile.ZipFile(zip_path) as bundle:
        try:
            text = bundle.read("competition.yaml").decode("utf-8", "replace")
        except KeyError:
            return {}, []
    found, problems = {}, []
    for key, (file, sha256) in local_copies(text).items():
        local = zip_path.parent / file
        if not local.is_file():
            problems.append(f"dataset {key}: its local copy {local} is missing (the dry run "
                            "runs the data from the copy written next to the bundle)")
        elif content_sha256(local) != sha256:
            problems.append(f"dataset {key}: {local} is not the zip the bundle was built with "
                            f"(sha256 {sha256[:16]}...): rebuild")
        else:
            found[key] = local
    return found, problems


def _check(zip_path: Path, margin: float, submission: Path | None = None,
           via_importer: bool = False) -> bool:
    python = str(IMAGE_PYTHON if IMAGE_PYTHON.exists() else sys.executable)
    site = platform_of(_competition(zip_path))
    if via_importer and not codabench_importer.importable(_competition(zip_path)):
        raise UsageError(f"--via-codabench-importer: {zip_path} is a {site.title} bundle, not "
                         "a CodaLab v1.5 one")
    how = "Codabench would import and run it" if via_importer else f"{site.title} would run it"
    print(f"\ndry run of {zip_path} as {how} (programs run with {python}):")
    datasets, dataset_problems = _local_datasets(zip_path)
    for problem in dataset_problems:
        print(f"  {problem}", file=sys.stderr)
    if datasets:
        print(f"  data uploaded apart, read from the local copies: "
              f"{', '.join(path.name for path in datasets.values())}")
    failures = check_bundle(zip_path, site.name, scoring_margin_seconds=margin,
                            datasets=datasets)
    for failure in failures:
        print(f"  rule {failure.rule}: {failure.message} (fix: {failure.fix})", file=sys.stderr)
    try:
        if via_importer:
            results, changes = codabench_importer.dry_run(zip_path, python, submission, datasets)
            print("Codabench's v1.5 importer (codabench_v2.md §2) drops or changes:")
            for change in changes:
                print(f"  - {change}")
            site = platform("codabench")
        else:
            results = site.dry_run(zip_path, python, submission, datasets)
    except Exception as error:      # noqa: BLE001 - a bundle too broken to run is a finding
        results = [StepResult("(bundle)", "dry run", 0.0, "failed",
                              f"could not run the bundle: {type(error).__name__}: {error}")]
    print(table(results))
    bad = [r for r in results if r.status != "ok"]
    for result in bad:
        print(f"\n{result.phase} / {result.step}: {result.status}\n{result.detail}", file=sys.stderr)
    print("not reproduced by this dry run (check these on the platform):")
    image = (codabench_importer.imported(_competition(zip_path))[0]["docker_image"]
             if via_importer else _image(zip_path, site))
    for line in not_checked(site, image):
        print(f"  - {line}")
    for note in site.release_notes(_competition(zip_path)):
        print(f"note: {note}")
    ok = not failures and not bad and not dataset_problems
    print(f"dry run {'passed' if ok else 'FAILED'}: {len(results)} step(s), "
          f"{len(failures)} rule failure(s)")
    return ok


def _summary(built: list, out: Path, platform_name: str, spec) -> None:
    site = platform(platform_name)
    print(f"\n{len(built)} bundle(s) written to {os.path.relpath(out)}:")
    for bundle in built:
        print(f"  {bundle.path.name}  {bundle.path.stat().st_size / 2**20:.1f} MiB")
        for dataset in bundle.datasets:
            print(f"    names by key {dataset.key} the data uploaded apart as {dataset.file}")
        if bundle.worker_folder:
            print(f"    its data for the workers is in {os.path.relpath(bundle.worker_folder)}"
                  " (not in the bundle): before uploading,")
            for step in copy_steps(bundle.worker_folder.name, spec.codabench_queue):
                print(f"    - {step}")
        if recipe_path(bundle.path).is_file():      # written by this build, or removed by it
            print(f"    worker recipe: {recipe_path(bundle.path).name} (the .env of the queue's "
                  "workers: paste the queue's broker URL into it; docs/building.md)")
            for note in site.worker_recipe_notes(spec):
                print(f"    not set by the worker: {note}")
    print(f"upload each on {site.upload_where}")
    print("after upload: open the competition's pages, then submit the starting kit's sample "
          "submission (starting_kit.zip) to each phase and see its row on the leaderboard")
    if competition_rules.withholds_figures(spec):
        print(site.reveal_text)
    # who can sign a code phase's ingestion record (docs/sandbox.md, bundle/programs.py)
    if any(phase.code_submission for phase in spec.phases):
        print(site.signing_text.format(secret=secret_path()))
    for note in site.after_upload_notes(spec):
        print(note)


def _waiting_summary(pending: list, out: Path, platform: str, spec) -> None:
    """What to do before bundles whose data is uploaded apart can be written."""
    datasets = [d for bundle in pending for d in bundle.waiting_for_keys]
    print(f"\n{len(datasets)} dataset zip(s) to upload apart, written to {os.path.relpath(out)}:")
    for dataset in datasets:
        print(f"  {dataset.file}  {dataset.size / 2**20:.1f} MiB  sha256 {dataset.sha256}")
        print(f"    {dataset.upload_step(platform)}")
    print(f"then add their keys to {spec.path} and build again:\ndataset_keys:")
    print(keys_block(datasets))
    print("not written yet (they name the data by its key): "
          + ", ".join(bundle.path.name for bundle in pending))


def _moved(folder: Path | None, out: Path) -> Path | None:
    """A bundle's worker folder, moved into --out in place of its previous build's."""
    if folder is None:
        return None
    final = out / folder.name
    if final.exists():
        shutil.rmtree(final)
    shutil.move(str(folder), str(final))
    return final


def _place(built: Path, target: Path) -> None:
    """A data zip from the staging folder into --out: a hard link where the file system
    allows (a copy of many GB costs minutes and the space twice), a copy elsewhere. The
    staging copy stays, next to a bundle that waits for its keys."""
    target.unlink(missing_ok=True)
    try:
        os.link(built, target)
    except OSError:
        shutil.copyfile(built, target)


def _build(args, spec, staging: Path) -> tuple[int, list, list]:
    """Build every target into ``staging``; move the zips into --out only when all of them
    were built, so a failed run leaves nothing new there. A bundle whose data uploaded apart
    has no key yet stays in ``staging`` (its checks run there); its dataset zips go to --out."""
    targets = _targets(spec, args.phase or "all", args.track)
    built = []
    for phases, track in targets:
        try:
            built.append(build_competition(spec, phases, track, staging, say=print,
                                           platform=args.platform))
        except BuildError as error:
            print(f"build failed: {error}", file=sys.stderr)
            print(f"nothing was written to {args.out}", file=sys.stderr)
            return 1, [], []
    args.out.mkdir(parents=True, exist_ok=True)
    ready, pending = [], []
    for bundle in built:
        for dataset in bundle.datasets:
            _place(staging / dataset.file, args.out / dataset.file)
        if bundle.waiting_for_keys:
            pending.append(bundle)
            continue
        final = args.out / bundle.path.name
        shutil.move(str(bundle.path), str(final))
        ready.append(dataclasses.replace(bundle, path=final,
                                         worker_folder=_moved(bundle.worker_folder, args.out)))
        write_worker_recipe(spec, final, bundle.phases, args.platform)
    for bundle in ready + pending:
        digest = content_sha256(bundle.path)
        print(f"{'wrote' if bundle in ready else 'built (waiting for dataset keys)'} "
              f"{os.path.relpath(bundle.path) if bundle in ready else bundle.path.name}  "
              f"sha256 {digest}")
        print(f"  phase {', '.join(bundle.phases)}"
              + (f", track {bundle.track}" if bundle.track else "") + ": tasks "
              + ", ".join(f"{t} ({bundle.budgets[t]:g} s)" if t in bundle.budgets else t
                          for t in bundle.tasks))
        for name, size, member_digest in bundle.members:
            print(f"  {size:>10,d}  {member_digest[:16]}  {name}")
        for dataset in bundle.datasets:
            print(f"  {dataset.size:>10,d}  {dataset.sha256[:16]}  {dataset.file} (apart)")
        for warning in bundle.warnings:
            print(f"  warning: {warning}")
    return 0, ready, pending


def _methodology(spec) -> None:
    """The competition's design checks (bundle/methodology.py): what they measured, what the
    spec ignores and why, then their warnings, none of which stops the build."""
    warnings, notes = report_lines(methodology_report(spec, baseline_results_file(spec)))
    print("\nmethodology checks (docs/building.md, \"Methodology warnings\"):")
    for line in notes:
        print(line)
    for line in warnings:
        print(line, file=sys.stderr)


def _main(argv: list[str] | None) -> int:
    args = _parser(argv).parse_args(argv)
    if args.submission and not args.check:
        raise UsageError("--submission goes with --check")
    if args.via_codabench_importer and not args.check:
        raise UsageError("--via-codabench-importer goes with --check")
    if args.submission:
        problem = _zip_usage_problem(args.submission, "the submission")
        if problem:
            raise UsageError(problem)
    if isinstance(args.check, str) and args.phase is None:
        problem = _zip_usage_problem(Path(args.check), "the bundle to check")
        if problem:
            raise UsageError(problem)
        return 0 if _check(Path(args.check), 60.0, args.submission,
                           args.via_codabench_importer) else 1
    try:
        spec = load_spec(args.config, args.data_root)
    except SpecError as error:
        print(f"the spec is not valid:\n{error}", file=sys.stderr)
        return 1
    for warning in spec.warnings:
        print(f"warning: {spec.path}: {warning}", file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".building-", dir=args.out.parent) as staging:
        status, ready, pending = _build(args, spec, Path(staging))
        if status:
            return status
        if ready:
            _summary(ready, args.out, args.platform, spec)
        if pending:
            _waiting_summary(pending, args.out, args.platform, spec)
        _methodology(spec)
        if args.check and not all(_check(b.path, spec.scoring_margin_seconds, args.submission,
                                         args.via_codabench_importer)
                                  for b in ready + pending):
            return 1
    return WAITING_FOR_KEYS if pending else 0


def main(argv: list[str] | None = None) -> int:
    """Exit codes: 0 success; 1 a spec or data error, a failed build or check; 2 a usage
    error (bad arguments; --check or --submission on a missing file or a non-zip); 3 the
    dataset zips to upload apart were written, and the bundles wait for their keys."""
    try:
        return _main(argv)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; nothing was written", file=sys.stderr)
        return 1
    except Exception as error:      # noqa: BLE001 - never a traceback for the organizer
        if os.environ.get("BUILD_BUNDLE_DEBUG"):
            raise
        print(f"error: {type(error).__name__}: {error} (an unexpected failure: set "
              "BUILD_BUNDLE_DEBUG=1 for the traceback and report it)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

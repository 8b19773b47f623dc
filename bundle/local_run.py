"""An organizer's local run: a phase's starting kit built as the builder builds it, then that
kit's own ``run_local.py``, so the run is the one participants get and nothing is assembled a
second way.

  python -m bundle.local_run --phase evaluation --baseline deep_ensemble --budget 4
  python -m bundle.local_run --config my_spec.yaml --phase final --code my_submission/ \\
      --score-hidden --out run/

The kit is built in --out/kit for --platform and the run is kept in --out (default: a
temporary folder), with the spec's budgets (--budget: seconds for every task instead). Where
the kind publishes the phase's references, the kit holds them and code is scored on them;
--score-hidden stages hidden ones too (organizers only: a kit a participant downloads never
holds them). Exit status: the kit's run_local's (2 for a spec or phase that does not exist).

The kinds' organizer scripts (``kinds/*/kit/baseline_results.py``, ``sensitivity.py``) build
their kits with ``build_kit`` and run them with ``run_kit``.
"""
from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from kinds.baseline_table import stopped_by_failures
from kinds.kind import kind

from .build import phase_kit
from .phase_data import stage_reference_data
from .phase_plan import code_variant, phase_plan, with_budget
from .platforms import DEFAULT_PLATFORM, PLATFORMS
from .spec import DEFAULT_SPEC, CompetitionSpec, SpecError, load_spec

KIT_RUN_LOCAL = "run_local.py"
KIT_REFERENCES = Path("data") / "reference"     # where the kit's run_local looks for them
SCORING_OUTPUT = Path("scoring") / "run" / "output"    # in a run's folder, once scored
# Ctrl-C, kill and a closed terminal: passed on to the kit's run_local, which stops the code
STOPPING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP")
                         if hasattr(signal, name))


class LocalRunError(RuntimeError):
    """A local run gave nothing to read; the message says why."""


def organizer_spec(config: Path | None = None, data_root: Path | None = None) -> CompetitionSpec:
    """The spec an organizer's run follows (the default competition's unless ``config``)."""
    return load_spec(Path(config) if config else DEFAULT_SPEC,
                     Path(data_root) if data_root else None)


def baselines_spec(config: Path | None, data_root: Path | None, kind: str) -> CompetitionSpec:
    """The spec a kind's kit/baseline_results.py runs on: a bad spec ends the script with one
    ``error:`` line per problem (the spec's file and key), and a spec of another kind with one
    naming that kind's script, never a traceback."""
    try:
        spec = organizer_spec(config, data_root)
    except SpecError as error:
        raise SystemExit("\n".join(f"error: {line}" for line in str(error).splitlines())) \
            from None
    if spec.kind != kind:
        raise SystemExit(f"error: {spec.path}: kind: {spec.kind}; this script runs the {kind} "
                         f"baselines (for this spec: kinds/{spec.kind}/kit/baseline_results.py)")
    return spec


def write_baseline_table(out: Path, collect, markdown, keep_going: bool = False) -> int:
    """A baselines script's end: the table ``collect()`` makes written to ``out`` (the file the
    builder reads) and printed; a run that scored nothing ends in one error line, one in which
    a baseline failed a task in one per failure, unless ``keep_going``
    (kinds/baseline_table.py)."""
    try:
        table = collect()
    except LocalRunError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if stopped_by_failures(table, keep_going):
        return 1
    out.write_text(json.dumps(table, indent=1) + "\n")
    print(f"\nwritten to {out}\n\n{markdown(table)}")
    return 0


def build_kit(spec: CompetitionSpec, phase: str | None, destination: Path,
              platform: str = DEFAULT_PLATFORM, budget_seconds: float | None = None,
              hidden_references: bool = False) -> Path:
    """``phase``'s starting kit (None: the spec's first phase) in ``destination``, with the
    phase's references where the kit has none but the kind publishes them (a code phase's
    kit leaves them out, an organizer's run scores on them) or ``hidden_references``: its
    run_local then scores on them."""
    phase = phase or spec.phases[0].key
    if phase not in {p.key for p in spec.phases}:
        raise LocalRunError(f"unknown phase {phase!r}; the spec has "
                            f"{', '.join(repr(p.key) for p in spec.phases)}")
    plan = phase_plan(spec, phase, None)
    code_plan = code_variant(spec, plan)
    shutil.rmtree(destination, ignore_errors=True)      # a kit of an earlier run
    if budget_seconds is not None:
        code_plan = with_budget(code_plan, budget_seconds)
    kit = phase_kit(spec, phase, Path(destination), platform, code_plan)
    published = all(kind(plan.kind).has_public_references(task) for task in plan.tasks)
    if (hidden_references or published) and not (kit / KIT_REFERENCES).is_dir():
        stage_reference_data(plan, kit / KIT_REFERENCES)
    return kit


def run_kit(kit: Path, work: Path, code: Path | str | None = None,
            results: Path | str | None = None, log: Path | None = None) -> int:
    """The kit's run_local.py on ``code`` or ``results``, run in the kit's folder as a
    participant types it (so ``baselines/<file>.py`` names the kit's copy); its output goes to
    ``log`` when given, else here. Returns its exit status; a scored run leaves its output in
    ``work``/``SCORING_OUTPUT``."""
    flag, source = ("--code", code) if code is not None else ("--results", results)
    command = [sys.executable, KIT_RUN_LOCAL, flag, str(source), "--out", str(Path(work).absolute())]
    if log is None:
        return _run_passing_stops(command, kit)
    with open(log, "w", encoding="utf-8") as written:
        return _run_passing_stops(command, kit, stdout=written, stderr=subprocess.STDOUT)


def _run_passing_stops(command: list[str], kit: Path, **streams) -> int:
    """The kit's run_local, with a stopping signal sent to this process passed on to it: it
    stops the code it runs and removes what it staged. It runs in a process group of its own,
    so that a terminal's Ctrl-C reaches it once, through here. Once it has stopped, this
    process gets the signal as it would have without waiting (KeyboardInterrupt, or the
    default end). Before, a ``kill`` of this command left the kit's run and the code going."""
    process = subprocess.Popen(command, cwd=kit, process_group=0, **streams)
    received: list[int] = []

    def pass_on(number, _frame):
        received.append(number)
        if process.poll() is None:
            process.send_signal(number)

    # handlers can only be set from the main thread (a caller may run this in another)
    in_main = threading.current_thread() is threading.main_thread()
    previous = {number: signal.signal(number, pass_on)
                for number in (STOPPING_SIGNALS if in_main else ())}
    try:
        returncode = process.wait()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    if received:
        signal.raise_signal(received[0])
    return returncode


def scored_details(work: Path, what: str, log: Path | None = None) -> dict:
    """The detailed results of a run in ``work``; a run that scored nothing raises, with the
    end of its log."""
    details = Path(work) / SCORING_OUTPUT / "detailed_results.json"
    if details.is_file():
        return json.loads(details.read_text(encoding="utf-8"))
    tail = log.read_text(encoding="utf-8")[-3000:] if log and log.is_file() else ""
    raise LocalRunError(f"{what}: nothing was scored" + (f"; run_local's log:\n{tail}" if tail
                                                        else ""))


def baseline_details(kit: Path, work: Path, baseline: str, what: str) -> dict:
    """The detailed results of the kit's ``baselines/<baseline>.py`` run in ``kit``, its log in
    ``work/run_local.log``; a run that is not scored as intended is noted (failed or penalised
    tasks are still scored), one that scored nothing raises."""
    Path(work).mkdir(parents=True, exist_ok=True)
    log = Path(work) / "run_local.log"
    if run_kit(kit, work, code=f"baselines/{baseline}.py", log=log) != 0:
        print(f"  note: {what}: {error_line(log)}", file=sys.stderr)
    return scored_details(work, what, log)


def error_line(log: Path) -> str | None:
    """The first ``error:`` line of a kit run's log: why it would not be scored as intended."""
    for line in log.read_text(encoding="utf-8").splitlines():
        if line.startswith("error: "):
            return line.removeprefix("error: ")
    return None


def _absolute(path: Path | None) -> Path | None:
    """The kit's run_local runs in the kit's folder: a path typed here must keep its meaning."""
    return path.absolute() if path is not None else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bundle.local_run", description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 2)[2], formatter_class=argparse.RawDescriptionHelpFormatter)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--code", type=Path, help="submission zip or folder, or a .py file")
    what.add_argument("--baseline", help="a baseline of the kit, by name (baselines/<name>.py)")
    what.add_argument("--results", type=Path, help="zip or folder of prediction files")
    parser.add_argument("--config", type=Path, default=None,
                        help="the organizer spec (default: the default competition's)")
    parser.add_argument("--data-root", type=Path, default=None,
                        help="the folder of the spec's task files (default: the spec's)")
    parser.add_argument("--phase", default=None, help="which phase (default: the spec's first)")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds for every task instead of the spec's budgets")
    parser.add_argument("--platform", choices=tuple(PLATFORMS), default=DEFAULT_PLATFORM,
                        help="whose kit to build, hence whose rules to apply")
    parser.add_argument("--score-hidden", action="store_true",
                        help="score code against the phase's hidden references too "
                             "(organizers: baseline tables)")
    parser.add_argument("--out", type=Path,
                        help="keep the kit and the run here (default: a temporary folder)")
    args = parser.parse_args(argv)
    try:
        spec = organizer_spec(args.config, args.data_root)
    except (SpecError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    out = (args.out or Path(tempfile.mkdtemp(prefix="local-run-"))).absolute()
    try:
        kit = build_kit(spec, args.phase, out / "kit", args.platform, args.budget,
                        args.score_hidden)
    except LocalRunError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"built the {args.platform} kit of phase {args.phase or spec.phases[0].key} in {kit}"
          + (", with its hidden references (never give this kit out)"
             if args.score_hidden else ""), flush=True)
    code = f"baselines/{args.baseline}.py" if args.baseline else _absolute(args.code)
    try:
        return run_kit(kit, out, code=code, results=_absolute(args.results))
    except KeyboardInterrupt:           # the kit's run_local stopped first and said so
        return 128 + signal.SIGINT


if __name__ == "__main__":
    sys.exit(main())

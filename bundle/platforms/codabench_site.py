"""What the Codabench site, not its worker, does with a scored submission: what people other
than the competition's organizers can read of it (codabench_v2.md §3.9), and which child
submissions its leaderboard keeps (§3.10). Modelled on codalab/codabench c7dbc756; the dry
run holds each bundle to both.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

SCORES_API = "GET /api/submissions/?phase="


def stored_scores(scores: dict, leaderboard_keys: list[str]) -> dict:
    """src/apps/api/views/submissions.py, upload_submission_scores: a key that names a column
    of the phase's leaderboard is stored, hidden column or not; any other is skipped."""
    return {key: value for key, value in scores.items() if key in set(leaderboard_keys)}


def readable_by_others(phase: dict, competition: dict) -> dict[str, bool]:
    """What a user who is neither staff nor an organizer (competitions/models.py,
    Competition.user_has_admin_permission) reads of a finished submission on the leaderboard.

    - scores: api/views/submissions.py, SubmissionViewSet.get_queryset hands every finished
      leaderboard submission to anonymous users, and api/serializers/submissions.py,
      SubmissionSerializer lists all its scores: no hidden-column filter, no hide_* flag;
    - logs: SubmissionFilesSerializer.get_logs, unless hide_output;
    - scoring output: SubmissionFilesSerializer.get_scoring_result, unless hide_output or
      hide_score_output;
    - detailed results: SubmissionViewSet.get_detail_result, whenever the competition
      enables them (to anyone once it is published), whatever the hide flags.
    """
    hide_output = phase.get("hide_output") is True
    return {"scores": True, "logs": not hide_output,
            "scoring output": not (hide_output or phase.get("hide_score_output") is True),
            "detailed results": competition.get("enable_detailed_results") is True}


def hidden_figure_leaks(phase: dict, competition: dict, leaderboard_keys: list[str],
                        output: Path, log: str, hidden_keys: list[str]) -> list[str]:
    """Where a figure the organizers keep (``hidden_keys``) would reach someone else, given
    the scoring step's output folder and log."""
    if not hidden_keys:
        return []
    readable, problems = readable_by_others(phase, competition), []
    scores_file = output / "scores.json"
    scores = json.loads(scores_file.read_text()) if scores_file.is_file() else {}
    public = sorted(set(stored_scores(scores, leaderboard_keys)) & set(hidden_keys))
    if public:
        problems.append(f"{', '.join(public)}: stored in leaderboard columns, which {SCORES_API} "
                        "shows to anyone, hidden or not")
    private = [str(path.relative_to(output)) for path in sorted(output.rglob("*"))
               if path.is_file() and path.name not in ("scores.json", "scores.txt")
               and any(key in path.read_text(errors="replace") for key in hidden_keys)]
    if private and readable["scoring output"]:
        problems.append(f"{', '.join(private)}: in the scoring output, which participants "
                        "download unless the phase sets hide_score_output")
    shown = {"logs": log, "detailed results": _text(output / "detailed_results.html")}
    for what, text in shown.items():
        named = [key for key in hidden_keys if key in text]
        if readable[what] and named:
            problems.append(f"the scoring {what} name {', '.join(named)}, and others read them")
    return problems


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.is_file() else ""


# ---- The leaderboard's submission rule: src/apps/leaderboards/strategies.py ---------------

@dataclass
class Submission:
    id: int
    owner: str
    parent: int | None = None
    task: str | None = None
    scores: dict = field(default_factory=dict)
    has_children: bool = False
    on_leaderboard: bool = False
    finished: bool = False


@dataclass
class Phase:
    """One phase's submissions and its leaderboard's rule and ranking column."""
    rule: str
    primary: tuple[str, str] = ("", "desc")          # key, sorting
    submissions: list[Submission] = field(default_factory=list)

    def submit(self, owner: str, tasks: list[str]) -> list[Submission]:
        """A submission; with several tasks, a parent with one child per task (§3.1).
        Returns what the worker scores: the children, or the submission itself."""
        parent = self._new(owner, has_children=len(tasks) > 1)
        if len(tasks) == 1:
            parent.task = tasks[0]
            return [parent]
        return [self._new(owner, parent=parent.id, task=task) for task in tasks]

    def _new(self, owner: str, **fields) -> Submission:
        self.submissions.append(Submission(len(self.submissions) + 1, owner, **fields))
        return self.submissions[-1]

    def upload_scores(self, submission: Submission, scores: dict) -> None:
        """api/views/submissions.py, upload_submission_scores: the scores go to the child
        (and its parent), then the rule runs on the child alone. The worker has set the child
        Finished just before, and a parent is Finished once all its children are
        (competitions/models.py, Submission.check_child_submission_statuses)."""
        submission.scores.update(scores)
        submission.finished = True
        if submission.parent:
            parent = self._get(submission.parent)
            parent.finished = all(c.finished for c in self._children(parent))
        rule = STRATEGIES.get(self.rule)
        if rule:
            rule(self, submission)

    def _get(self, pk: int) -> Submission:
        return next(s for s in self.submissions if s.id == pk)

    def _children(self, parent: Submission) -> list[Submission]:
        return [s for s in self.submissions if s.parent == parent.id]

    def summed(self, submission: Submission, key: str) -> float | None:
        """A column's Sum over a submission's scores: a parent holds all its children's."""
        held = self._children(submission) if submission.has_children else [submission]
        values = [s.scores[key] for s in held if key in s.scores]
        return sum(values) if values else None

    def _clear(self, owner: str) -> None:
        for submission in self.submissions:
            if submission.owner == owner:
                submission.on_leaderboard = False

    def _put(self, submission: Submission) -> None:
        """BaseModeStrategy.update_submission: a parent puts its children, not itself."""
        for chosen in self._children(submission) if submission.has_children else [submission]:
            chosen.on_leaderboard = True

    def rows(self) -> list[list[Submission]]:
        """api/views/competitions.py, get_leaderboard: the leaderboard's childless
        submissions, one row per owner and parent (or the submission itself)."""
        rows: dict[tuple, list[Submission]] = {}
        for s in self.submissions:
            if s.on_leaderboard and not s.has_children:
                rows.setdefault((s.owner, s.parent or s.id), []).append(s)
        return list(rows.values())


def _force_last(phase: Phase, submission: Submission) -> None:
    """LastestModeStrategy: every submission of the owner in the phase leaves the
    leaderboard, the just-scored one's siblings too (codabench issue #2211), then it goes on."""
    phase._clear(submission.owner)
    phase._put(submission)


def _force_best(phase: Phase, submission: Submission) -> None:
    """BestModeStrategy: among the owner's finished submissions (parents too, which hold
    their children's scores) the one whose summed ranking column is best goes on; among
    equals the real code compares the other columns, here the earliest wins."""
    phase._clear(submission.owner)
    key, sorting = phase.primary
    sign = -1 if sorting == "desc" else 1
    candidates = [(sign * value, s.id, s) for s in phase.submissions
                  if s.owner == submission.owner and s.finished
                  and (value := phase.summed(s, key)) is not None]
    phase._put(min(candidates, key=lambda c: c[:2])[2])


# AllModeStrategy puts the child on and takes nothing off; the Add rules are manual.
STRATEGIES = {"Force_Last": _force_last, "Force_Best": _force_best,
              "Force_Latest_Multiple": lambda phase, submission: phase._put(submission)}


def leaderboard_problem(rule: str, primary: tuple[str, str], tasks: list[str],
                        scores: dict[str, dict]) -> str | None:
    """What the leaderboard shows of a participant who submitted twice, each submission
    scored on every task with ``scores`` (task -> its scores, in the worker's order), or
    None where it shows one row holding every task of one submission."""
    phase = Phase(rule, primary)
    for _ in range(2):
        for child in phase.submit("participant", tasks):
            phase.upload_scores(child, scores.get(child.task, {}))
    rows = phase.rows()
    if len(rows) != 1:
        return (f"submission_rule {rule} leaves {len(rows)} rows of one participant's two "
                "submissions on the leaderboard (leaderboards/strategies.py), not one")
    shown = [s.task for s in rows[0]]
    if sorted(shown) != sorted(tasks):
        why = ("each child's score upload takes its siblings off (codabench issue #2211)"
               if rule == "Force_Last" else "the rule puts one child on, not its parent")
        return (f"submission_rule {rule} leaves only task(s) {', '.join(shown)} of the "
                f"submission's {len(tasks)} on the leaderboard: {why} "
                "(leaderboards/strategies.py)")
    return None


# ---- avg_rank: the average of ranks the site computes as it serves a leaderboard ------------
# leaderboards/ranking.py (release v1.29, 2026-06-18; migration 0010_alter_column_computation
# adds the choice), taken from codalab/codabench at 70f08ef.

AVERAGE_RANK_COMPUTATION = "avg_rank"


def fractional_ranks(values: list[float]) -> list[float]:
    """Rank 1 for the smallest; tied values share the mean of the ranks they span
    (``[1, 1, 2]`` -> ``[1.5, 1.5, 3]``)."""
    positions: dict[float, list[int]] = {}
    for rank, value in enumerate(sorted(values), start=1):
        positions.setdefault(value, []).append(rank)
    return [sum(positions[value]) / len(positions[value]) for value in values]


def _column_score(scores: list) -> float | None:
    """An entry's figure for one column: the sum of its numeric scores from all the phase's
    tasks (several tasks writing one key add up), None when none is a number."""
    numbers = []
    for score in scores:
        try:
            numbers.append(float(score))
        except (TypeError, ValueError):
            continue
    return sum(numbers) if numbers else None


def average_rank_scores(entries: list[dict[int, list]], sorting: dict[int, str],
                        indexes: list[int], precision: int = 2) -> list[float | None]:
    """The ``avg_rank`` column's value for each leaderboard entry, in order.

    ``entries``: per entry, {column index: the scores the phase's tasks uploaded for it};
    ``sorting``: each column's ``asc``/``desc``; ``indexes``: the column's
    ``computation_indexes``. For each of those columns that some entry has a figure for, the
    entries with a figure are ranked among themselves (``desc`` columns negated, so the
    highest ranks 1; ties share the mean rank) and an entry without one gets rank n, the
    number of entries; the value is the mean of an entry's ranks, rounded to ``precision``.
    None (no value shown) where no column had a figure."""
    count = len(entries)
    per_column = []
    for index in indexes:
        if index not in sorting:
            continue
        figures = [_column_score(entry.get(index, [])) for entry in entries]
        scored = [i for i, figure in enumerate(figures) if figure is not None]
        if not scored:
            continue
        sign = -1.0 if sorting[index] == "desc" else 1.0
        ranks = dict(zip(scored, fractional_ranks([sign * figures[i] for i in scored])))
        per_column.append([ranks.get(i, float(count)) for i in range(count)])
    if not per_column:
        return [None] * count
    return [round(sum(ranks[i] for ranks in per_column) / len(per_column), precision)
            for i in range(count)]


def rank_order(values: list[float | None], sorting: str) -> list[int]:
    """The entries' order on the leaderboard when ``values`` are its ranking column's: ascending
    for ``asc``, else descending, ties in their given order, entries without a value last."""
    missing = float("inf") if sorting == "asc" else float("-inf")
    keyed = [missing if value is None else value for value in values]
    return sorted(range(len(values)), key=lambda i: keyed[i], reverse=sorting != "asc")

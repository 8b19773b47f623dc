"""bundle.rules, CodaLab: a minimal valid bundle passes, and each mutation trips exactly its rule.

Also the registry both platforms share: every rule described, one registry for both.
"""
import io
import json
import zipfile

import pytest

import bundle.rules.programs as programs
import bundle.rules.python_version  # noqa: F401 - registered whether or not rules/ imports it
from bundle.rules import BOTH, CODABENCH, CODALAB, check_bundle, rules_for
from bundle.rules import RULES as REGISTRY

RULES = {name: r.description for name, r in rules_for(CODALAB).items()}

COMPETITION_YAML = """\
title: Test Challenge
description: Bundle checks fixture
image: logo.png
has_registration: false
force_submission_to_leaderboard: true
enable_detailed_results: true
competition_docker_image: codalab/codalab-legacy:py312
end_date: 2027-06-30 23:59:59
html:
  overview: overview.html
  evaluation: evaluation.html
  terms: terms.html
  data: data.html
  faq: faq.html
phases:
  1:
    phasenumber: 1
    label: Development
    description: Upload predictions
    start_date: 2027-01-10 00:00:00
    max_submissions_per_day: 5
    is_scoring_only: true
    execution_time_limit: 300
    scoring_program: scoring_program.zip
    reference_data: reference_data_1.zip
    color: green
  2:
    phasenumber: 2
    label: Evaluation
    start_date: 2027-03-01 00:00:00
    max_submissions: 5
    is_scoring_only: false
    execution_time_limit: 600
    scoring_program: scoring_program.zip
    ingestion_program: ingestion_program.zip
    reference_data: reference_data_2.zip
    input_data: input_data_2.zip
    starting_kit: starting_kit.zip
    color: blue
leaderboard:
  leaderboards:
    Results: &RESULTS
      label: Results
      rank: 1
  columns:
    wine_agreement:
      leaderboard: *RESULTS
      label: wine agreement
      rank: 1
      sort: desc
      numeric_format: 4
    iris_agreement:
      leaderboard: *RESULTS
      label: iris agreement
      rank: 2
      sort: desc
      numeric_format: 4
    weighted_loss:
      leaderboard: *RESULTS
      label: Weighted loss
      rank: 3
      sort: asc
      numeric_format: 4
    average_rank:
      leaderboard: *RESULTS
      label: Average rank
      rank: 4
      sort: asc
      numeric_format: 2
      selection_default: 1
      computed:
        operation: Avg
        fields: wine_agreement, iris_agreement
"""
SCORING_METADATA = ("command: python3 $program/score.py $input $output\n"
                    "description: Scores predictions\n")
INGESTION_METADATA = ("command: python3 -I $ingestion_program/ingestion.py $input $output "
                      "$ingestion_program $submission_program $hidden\n"
                      "description: Runs the participant's code\n")
KEYS = ["wine_agreement", "iris_agreement", "weighted_loss"]


def scoring_config(keys=KEYS):
    return json.dumps({"format": "scoring-config/1", "phase": "evaluation", "tasks": [],
                       "columns": [{"key": k, "statistic": "value"} for k in keys]})


def ingestion_config(budget=30.0):
    return json.dumps({"format": "ingestion-config/1", "phase": "evaluation",
                       "tasks": [{"name": "wine", "budget_seconds": budget},
                                 {"name": "iris", "budget_seconds": budget}],
                       "limits": {"grace_seconds": 2.0, "memory_bytes": 2**32}})


def valid_members() -> dict:
    """Member name -> text, bytes, or a dict (a nested zip)."""
    return {
        "competition.yaml": COMPETITION_YAML,
        "logo.png": b"\x89PNG\r\n",
        "overview.html": "<h1>Overview</h1>",
        "evaluation.html": "<p>Évaluation: agreement, W2</p>",
        "terms.html": "<p>Terms</p>",
        "data.html": "<p>Data</p>",
        "faq.html": '<img src="{{ ASSET_BASE_URL }}/fig.png">',
        "assets/fig.png": b"png",
        "scoring_program.zip": {"metadata": SCORING_METADATA, "score.py": "print()\n",
                                "scoring_config.json": scoring_config()},
        "ingestion_program.zip": {"metadata": INGESTION_METADATA, "ingestion.py": "print()\n",
                                  "ingestion_config.json": ingestion_config()},
        "reference_data_1.zip": {"wine_reference.npy": b"0", "iris_reference.npy": b"0"},
        "reference_data_2.zip": {"wine_reference.npy": b"0", "iris_reference.npy": b"0"},
        "input_data_2.zip": {"wine_inputs.npz": b"0", "iris_inputs.npz": b"0"},
        "starting_kit.zip": {"starting_kit/README.md": "kit\n"},
    }


def zip_bytes(members: dict) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, zip_bytes(content) if isinstance(content, dict) else content)
    return buffer.getvalue()


def build(tmp_path, mutate=None):
    members = valid_members()
    if mutate is not None:
        members = mutate(members) or members
    path = tmp_path / "bundle.zip"
    path.write_bytes(zip_bytes(members))
    return path


def edit(old, new, member="competition.yaml", inside=None, count=1):
    """Replace text in a member (of the nested zip ``inside``); the old text must be there."""
    def mutate(members):
        holder = members[inside] if inside else members
        assert old in holder[member], old
        holder[member] = holder[member].replace(old, new, count)
    return mutate


def put(member, content, inside=None):
    def mutate(members):
        (members[inside] if inside else members)[member] = content
    return mutate


def drop(member, inside=None):
    def mutate(members):
        del (members[inside] if inside else members)[member]
    return mutate


def rename(old, new):
    def mutate(members):
        members[new] = members.pop(old)
    return mutate


def chain(*mutations):
    def mutate(members):
        for mutation in mutations:
            members = mutation(members) or members
        return members
    return mutate


ANY = None   # other rules may fail as well (the mutation cascades)

# (id, mutation, rule that must fail, text its message must contain, other rules that fail too)
MUTATIONS = [
    ("wrapping-folder", lambda m: {f"bdl/{k}": v for k, v in m.items()}, "zip-structure",
     "bdl/", ANY),
    ("macosx", put("__MACOSX/._overview.html", b"x"), "zip-structure", "__MACOSX", ()),
    ("nested-pycache", put("__pycache__/x.pyc", b"", inside="scoring_program.zip"),
     "zip-structure", "scoring_program.zip::__pycache__/x.pyc", ()),
    ("dot-slash", put("./notes.txt", "x"), "zip-structure", "./notes.txt", ()),
    ("backslash", put("assets\\fig2.png", b"png"), "zip-structure", "Windows", ()),
    ("dotdot", put("../evil.txt", "x"), "zip-structure", "../evil.txt", ()),
    ("ds-store-in-data", put(".DS_Store", b"", inside="reference_data_1.zip"), "zip-structure",
     "reference_data_1.zip::.DS_Store", ()),
    ("two-yaml", put("extra.yaml", "a: 1\n"), "single-root-yaml", "extra.yaml", ()),
    ("yml", rename("competition.yaml", "competition.yml"), "single-root-yaml",
     "competition.yml", ANY),
    ("yaml-syntax", put("competition.yaml", "title: [unclosed\n"), "yaml-parses",
     "competition.yaml", ANY),
    ("yaml-list", put("competition.yaml", "- a\n- b\n"), "yaml-parses", "expected a mapping", ANY),
    ("duplicate-key", edit("has_registration: false\n", "has_registration: false\ntitle: Again\n"),
     "yaml-parses", "'title'", ()),
    ("image-null", edit("image: logo.png", "image: null"), "top-level-keys", "image", ()),
    ("unknown-top-key", edit("has_registration:", "sponsor: ACME\nhas_registration:"),
     "top-level-keys", "'sponsor'", ()),
    ("admin-names", edit("has_registration:", "admin_names: bob\nhas_registration:"),
     "top-level-keys", "admin_names", ()),
    ("queue", edit("has_registration:", "queue: fast\nhas_registration:"), "top-level-keys",
     "queue", ()),
    ("long-title", edit("title: Test Challenge", "title: " + "x" * 101), "top-level-keys",
     "title", ()),
    ("no-data-page", edit("  data: data.html\n", ""), "html-pages", "'data'", ()),
    ("missing-page-file", drop("evaluation.html"), "html-pages", "evaluation.html", ()),
    ("script", put("overview.html", "<p>x</p><SCRIPT>alert(1)</SCRIPT>"), "html-pages",
     "overview.html", ()),
    ("not-utf8", put("terms.html", "Évaluation".encode("latin-1")), "html-pages", "terms.html",
     ()),
    ("reserved-extra-page", edit("  faq: faq.html", "  Overview: faq.html"), "html-pages",
     "Overview", ()),
    ("missing-asset", drop("assets/fig.png"), "html-pages", "fig.png", ()),
    ("input-data-null", edit("input_data: input_data_2.zip", "input_data: null"), "phases",
     "input_data", ()),
    ("unknown-phase-key", edit("    phasenumber: 2\n",
                               "    phasenumber: 2\n    end_date: 2027-05-01 00:00:00\n"),
     "phases", "end_date", ()),
    ("phasenumber-gap", edit("phasenumber: 2", "phasenumber: 3"), "phases", "phasenumber", ()),
    ("no-start-date", edit("    start_date: 2027-01-10 00:00:00\n", ""), "phases", "start_date",
     ()),
    ("color", edit("color: green", "color: red"), "phases", "red", ()),
    ("management-mode", edit("color: blue", "color: blue\n    leaderboard_management_mode: hide"),
     "phases", "leaderboard_management_mode", ()),
    ("zero-per-day", edit("max_submissions_per_day: 5", "max_submissions_per_day: 0"), "phases",
     "max_submissions_per_day", ()),
    ("long-label", edit("label: Development", "label: " + "D" * 51), "phases", "label", ()),
    ("bool-as-string", edit("is_scoring_only: true", "is_scoring_only: 'yes'"), "phases",
     "is_scoring_only", ()),
    ("phases-list", chain(edit("  1:\n    phasenumber: 1", "  - phasenumber: 1"),
                          edit("  2:\n    phasenumber: 2", "  - phasenumber: 2")),
     "phases", "mapping", ANY),
    ("quoted-start", edit("start_date: 2027-03-01 00:00:00", 'start_date: "2027-03-01"'),
     "dates-unquoted-and-increasing", "start_date", ()),
    ("decreasing-dates", edit("start_date: 2027-03-01 00:00:00", "start_date: 2026-12-01"),
     "dates-unquoted-and-increasing", "phases.2.start_date", ()),
    ("end-before-last-start", edit("end_date: 2027-06-30 23:59:59", "end_date: 2027-02-01"),
     "dates-unquoted-and-increasing", "end_date", ()),
    ("quoted-end", edit("end_date: 2027-06-30 23:59:59", "end_date: '2027-06-30 23:59:59'"),
     "dates-unquoted-and-increasing", "end_date", ()),
    ("no-reference-data", edit("    reference_data: reference_data_1.zip\n", ""), "phase-files",
     "reference_data", ()),
    ("uppercase-zip", chain(edit("program: scoring_program.zip", "program: Scoring.ZIP", count=2),
                            rename("scoring_program.zip", "Scoring.ZIP")),
     "phase-files", "Scoring.ZIP", ()),
    ("missing-input-zip", drop("input_data_2.zip"), "phase-files", "input_data_2.zip", ()),
    ("ingestion-scoring-only", edit("is_scoring_only: false", "is_scoring_only: true"),
     "phase-files", "is_scoring_only", ()),
    ("code-phase-without-ingestion", edit("is_scoring_only: true", "is_scoring_only: false"),
     "phase-files", "is_scoring_only", ()),
    ("wrapped-reference", put("reference_data_1.zip", {"ref/wine_reference.npy": b"0"}),
     "phase-files", "ref/", ()),
    ("double-space", edit("python3 $program", "python3  $program", "metadata",
                          "scoring_program.zip"), "program-metadata", "double space", ()),
    ("metadata-author", edit("description:", "author: bob\ndescription:", "metadata",
                             "scoring_program.zip"), "program-metadata", "author", ()),
    ("shell-and", edit(" $hidden\n", " $hidden && echo done\n", "metadata",
                       "ingestion_program.zip"), "program-metadata", "&", ()),
    ("hidden-in-scoring", edit("$input $output\n", "$input $output $hidden\n", "metadata",
                               "scoring_program.zip"), "program-metadata", "$hidden", ()),
    ("braced-variable", edit("$input $output\n", "${input} $output\n", "metadata",
                             "scoring_program.zip"), "program-metadata", "'$'", ()),
    ("ingestion-not-isolated", edit("python3 -I $ingestion", "python3 $ingestion", "metadata",
                                    "ingestion_program.zip"), "program-metadata", "without -I",
     ()),
    ("metadata-not-yaml", put("metadata", "command: [python3\n", inside="ingestion_program.zip"),
     "program-metadata", "ingestion_program.zip::metadata", ()),
    ("block-command", edit("command: python3 $program/score.py $input $output\n",
                           "command: |\n  python3 $program/score.py $input $output\n",
                           "metadata", "scoring_program.zip"),
     "program-metadata", "several lines", ()),
    ("metadata-in-folder", put("scoring_program.zip", {"scoring/metadata": SCORING_METADATA,
                                                       "scoring/score.py": "print()\n"}),
     "program-metadata", "scoring/metadata", {"scoring-keys"}),
    ("label-colon-space", edit("label: wine agreement", "label: 'Score: wine'"), "leaderboard",
     "Score: wine", ()),
    ("avg-desc", edit("sort: asc\n      numeric_format: 2", "sort: desc\n      numeric_format: 2"),
     "leaderboard", "sort", ()),
    ("fields-list", edit("fields: wine_agreement, iris_agreement",
                         "fields: [wine_agreement, iris_agreement]"), "leaderboard", "fields", ()),
    ("fields-unknown", edit("fields: wine_agreement, iris_agreement",
                            "fields: wine_agreement, wine_w2"), "leaderboard", "wine_w2", ()),
    ("avg-lowercase", edit("operation: Avg", "operation: avg"), "leaderboard", "'avg'", ()),
    ("two-top-selection", edit("label: wine agreement\n",
                               "label: wine agreement\n      selection_default: 1\n"),
     "leaderboard", "selection_default", ()),
    ("no-selection-default", edit("      selection_default: 1\n", ""), "leaderboard",
     "selection_default is 0", ()),
    ("group-label-g17", chain(
        edit("  columns:\n", "  column_groups:\n    agreement:\n      label: 'Agreement #1'\n"
                             "  columns:\n"),
        edit("label: wine agreement\n", "label: wine agreement\n"
                                        "      column_group: {label: 'Agreement #1'}\n")),
     "leaderboard", "Agreement #1", ()),
    ("unknown-group", edit("label: wine agreement\n",
                           "label: wine agreement\n      column_group: {label: Nope}\n"),
     "leaderboard", "Nope", ()),
    ("sorting-typo", edit("rank: 2\n      sort: desc", "rank: 2\n      sorting: desc"),
     "leaderboard", "sorting", ()),
    ("numeric-format-zero", edit("rank: 3\n      sort: asc\n      numeric_format: 4",
                                 "rank: 3\n      sort: asc\n      numeric_format: 0"),
     "leaderboard", "numeric_format", ()),
    ("board-label-mismatch", edit("leaderboard: *RESULTS\n      label: iris agreement",
                                  "leaderboard: {label: Resluts}\n      label: iris agreement"),
     "leaderboard", "Resluts", ()),
    ("bad-column-key", edit("    weighted_loss:", "    weighted-loss:"), "leaderboard",
     "weighted-loss", {"scoring-keys"}),
    ("docker-underscore", edit("codalab/codalab-legacy:py312", "codalab/codalab_legacy:py312"),
     "docker-image", "codalab_legacy", ()),
    ("docker-missing", edit("competition_docker_image: codalab/codalab-legacy:py312\n", ""),
     "docker-image", "competition_docker_image", ()),
    ("time-limit-small", edit("execution_time_limit: 600", "execution_time_limit: 100"),
     "time-limit", "is 100 s but ingestion_program.zip needs 194 s", ()),
    ("time-limit-string", edit("execution_time_limit: 300", "execution_time_limit: '300'"),
     "time-limit", "execution_time_limit", ()),
    ("no-ingestion-config", drop("ingestion_config.json", inside="ingestion_program.zip"),
     "time-limit", "ingestion_config.json", ()),
    ("mapped-over-address-space", put("ingestion_config.json", json.dumps({
        "format": "ingestion-config/1", "phase": "evaluation",
        "tasks": [{"name": "wine", "budget_seconds": 30.0,
                   "contract": {"mapped_bytes": 5 * 2**30}}],
        "limits": {"grace_seconds": 2.0, "memory_bytes": 2**32, "memory_rule": "address_space"}}),
        inside="ingestion_program.zip"), "mapped-data-memory",
     "task wine maps 5.00 GiB of data, over its address-space limit of 4.00 GiB", ()),
    ("scoring-missing-key", put("scoring_config.json", scoring_config(KEYS[:2]),
                                inside="scoring_program.zip"), "scoring-keys", "weighted_loss",
     ()),
    ("scoring-extra-key", put("scoring_config.json", scoring_config(KEYS + ["wine_w2"]),
                              inside="scoring_program.zip"), "scoring-keys", "wine_w2", ()),
    ("scoring-duplicate-key", put("scoring_config.json", scoring_config(KEYS + KEYS[:1]),
                                  inside="scoring_program.zip"), "scoring-keys", "twice", ()),
    ("gpu-image-python-3-11", chain(
        edit("codalab/codalab-legacy:py312", "codalab/codalab-legacy:gpu310"),
        put("clock.py", "import datetime\nUTC = datetime.UTC\n", inside="ingestion_program.zip")),
     "python-version", "ingestion_program.zip::clock.py:2: datetime.UTC is new in Python 3.11",
     ()),
]


def test_valid_bundle_passes(tmp_path):
    assert check_bundle(build(tmp_path), CODALAB) == []


VALID_VARIANTS = [
    ("date-only-and-utc-offset", chain(
        edit("start_date: 2027-01-10 00:00:00", "start_date: 2027-01-10"),
        edit("start_date: 2027-03-01 00:00:00", "start_date: 2027-03-01T00:00:00+02:00"))),
    ("mrr-desc", chain(edit("operation: Avg", "operation: MRR"),
                       edit("sort: asc\n      numeric_format: 2",
                            "sort: desc\n      numeric_format: 2"))),
    ("column-group", chain(
        edit("  columns:\n", "  column_groups:\n    agreement:\n      label: Agreement\n"
                             "  columns:\n"),
        edit("label: wine agreement\n", "label: wine agreement\n"
                                        "      column_group: {label: Agreement}\n"))),
    ("merge-key-override", edit("leaderboard: *RESULTS\n      label: iris agreement\n",
                                "<<: {leaderboard: *RESULTS, label: x}\n"
                                "      label: iris agreement\n")),
    ("page-in-subfolder", chain(edit("faq: faq.html", "faq: pages/faq.html"),
                                rename("faq.html", "pages/faq.html"))),
    ("tmp-and-shared", edit("$input $output\n", "$input $output $tmp $shared\n", "metadata",
                            "scoring_program.zip")),
    ("no-end-date", edit("end_date: 2027-06-30 23:59:59\n", "")),
    ("gpu-image", edit("codalab/codalab-legacy:py312", "codalab/codalab-legacy:gpu310")),
]


@pytest.mark.parametrize("mutate", [v[1] for v in VALID_VARIANTS],
                         ids=[v[0] for v in VALID_VARIANTS])
def test_valid_variants_pass(tmp_path, mutate):
    assert check_bundle(build(tmp_path, mutate), CODALAB) == []


@pytest.mark.parametrize("mutate, rule, needle, others",
                         [m[1:] for m in MUTATIONS], ids=[m[0] for m in MUTATIONS])
def test_mutation_fails_its_rule(tmp_path, mutate, rule, needle, others):
    failures = check_bundle(build(tmp_path, mutate), CODALAB)
    rules = {failure.rule for failure in failures}
    assert rule in rules, failures
    assert any(needle in f.message for f in failures if f.rule == rule), failures
    if others is not ANY:
        assert rules == {rule, *others}, failures
    assert all(f.message and f.fix for f in failures)


def test_every_rule_has_a_mutation():
    assert {m[2] for m in MUTATIONS} == set(RULES)
    assert all(isinstance(text, str) and text for text in RULES.values())


def test_corrupt_yaml_reports_instead_of_raising(tmp_path):
    failures = check_bundle(build(tmp_path, put("competition.yaml", "title: [unclosed\nphases: {")),
                            CODALAB)
    by_rule = {failure.rule: failure for failure in failures}
    assert "yaml-parses" in by_rule and "competition.yaml" in by_rule["yaml-parses"].message
    blocked = set(RULES) - {"zip-structure", "single-root-yaml", "yaml-parses"}
    assert blocked <= set(by_rule)
    assert all(by_rule[name].message.startswith("not checked") for name in blocked)


def test_not_a_zip(tmp_path):
    path = tmp_path / "bundle.zip"
    path.write_bytes(b"not a zip")
    assert [f.rule for f in check_bundle(path, CODALAB)] == ["zip-structure"]


def test_crashing_rule_does_not_hide_the_others(tmp_path, monkeypatch):
    def boom(*args):
        raise RuntimeError("boom")
    monkeypatch.setattr(programs, "_command_problems", boom)
    failures = check_bundle(build(tmp_path, edit("color: green", "color: red")), CODALAB)
    assert {f.rule for f in failures} == {"program-metadata", "phases"}
    assert any("crashed" in f.message and "boom" in f.message for f in failures)


def test_scoring_margin_is_part_of_the_time_limit(tmp_path):
    path = build(tmp_path)
    assert check_bundle(path, CODALAB, scoring_margin_seconds=466) == []
    failures = check_bundle(path, CODALAB, scoring_margin_seconds=467)
    assert [f.rule for f in failures] == ["time-limit"] and "601 s" in failures[0].message


def test_every_registered_rule_has_a_description_and_a_fix():
    for name, registered in REGISTRY.items():
        assert registered.name == name and registered.platforms, name
        assert registered.description.strip() and registered.fix.strip(), name
        assert set(registered.platforms) <= set(BOTH), name


def test_both_platforms_draw_their_rules_from_one_registry():
    codalab, codabench = rules_for(CODALAB), rules_for(CODABENCH)
    assert codalab and codabench
    assert {**codalab, **codabench} == REGISTRY          # nothing runs outside the registry
    assert all(REGISTRY[name] is r for name, r in [*codalab.items(), *codabench.items()])
    assert all(name.startswith("v2-") for name in codabench)
    assert not any(name.startswith("v2-") for name in codalab)
    # One check, registered once per platform under the name each has always used.
    assert codalab["zip-structure"].find is codabench["v2-zip"].find


def test_unknown_platform_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown platform"):
        check_bundle(build(tmp_path), "codalab-v2")

"""A competition rule is a frozen record (``BuildRule``, ``WorkerRule``), one field per hook, so
that a hook given under a wrong name fails at import instead of being ignored: the record refuses
a name that is no field and a hook that is no function, the registries refuse two rules of one
name and a field given without the one it is required with, and each rule module's own names
are its record's (a function defined under a misspelled hook's name, which the record does not
name, is found here).

A rule module's public names are the hooks and constants its ``RULE`` names, and those another
module uses (what the two halves share, such as a statistic's name, or a helper the core or a
test calls); any other name of its own starts with an underscore."""
import ast
import dataclasses
import importlib
import re
import types
from pathlib import Path

import pytest

import bundle.competition_rules as build_registry
import runtime.rules as worker_registry
from bundle.competition_rules.records import BuildRule
from runtime.rules.records import RuleDefinitionError, WorkerRule, registered, registered_modules

REPO = Path(__file__).resolve().parents[1]
SIDES = [(build_registry, BuildRule), (worker_registry, WorkerRule)]
CONSTANT = re.compile(r"^[A-Z][A-Z0-9_]*$")
# Modules of the packages that are not rules: the registries, the records, shared helpers.
NOT_RULES = {"__init__", "records", "held_tasks"}


def _defined(source: str) -> dict[str, str]:
    """The public names a module's top level binds, by what they are (``function`` or
    ``constant``): its functions and its UPPER_CASE assignments, not its classes nor the names
    it imports, nor ``RULE`` itself."""
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[node.name] = "function"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name) and CONSTANT.match(name.id):
                        found[name.id] = "constant"
    return {name: what for name, what in found.items()
            if not name.startswith("_") and name != "RULE"}


def _unnamed(source: str, namespace: dict, rule) -> list[str]:
    """The public functions and constants a module defines that its record does not name: a
    function is named when a field holds it, a constant when the field of its name does."""
    values = vars(rule)
    return sorted(name for name, what in _defined(source).items()
                  if not (any(value is namespace[name] for value in values.values())
                          if what == "function" else values.get(name) is namespace[name]))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _dotted(node) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _uses(module: str, path: Path) -> set[str]:
    """The names of ``module`` the file at ``path`` uses: imported from it, or read as
    attributes of it (``from runtime.rules import smoke_test``; ``smoke_test.MARKER``)."""
    package, short = module.rsplit(".", 1)
    here = _module_name(path).split(".")
    here = here if path.name == "__init__.py" else here[:-1]
    used, aliases = set(), set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = here[:len(here) - node.level + 1] if node.level else []
            target = ".".join(base + [node.module] if node.module else base)
            for alias in node.names:
                if target == module:
                    used.add(alias.name)
                elif target == package and alias.name == short:
                    aliases.add(alias.asname or short)
        elif isinstance(node, ast.Import):
            aliases |= {alias.asname or alias.name for alias in node.names
                        if alias.name == module}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _dotted(node.value) in aliases:
            used.add(node.attr)
    return used


@pytest.fixture(scope="module")
def python_files() -> list[Path]:
    skipped = {".venv", ".venv-image", "build", "dist", "node_modules", ".git"}
    return [path for path in REPO.rglob("*.py")
            if not skipped & set(path.relative_to(REPO).parts)]


def _used_elsewhere(module: str, own: Path, files: list[Path]) -> set[str]:
    short = module.rsplit(".", 1)[1]
    return {name for path in files if path != own and short in path.read_text(encoding="utf-8")
            for name in _uses(module, path)}


def _rule_modules(registry):
    return [(rule, importlib.import_module(f"{registry.__name__}.{rule.name}"))
            for rule in registry.RULES]


@pytest.mark.parametrize("registry, record_type", SIDES, ids=["build", "worker"])
def test_each_registered_rule_is_its_modules_record(registry, record_type):
    folder = Path(registry.__file__).parent
    with_rule = sorted(path.stem for path in folder.glob("*.py") if path.stem not in NOT_RULES)
    assert sorted(rule.name for rule in registry.RULES) == with_rule
    for rule, module in _rule_modules(registry):
        assert type(rule) is record_type and module.RULE is rule, rule.name


@pytest.mark.parametrize("registry", [build_registry, worker_registry], ids=["build", "worker"])
def test_a_rule_modules_public_names_are_its_records_or_used_elsewhere(registry, python_files):
    problems = []
    for rule, module in _rule_modules(registry):
        own = Path(module.__file__)
        unnamed = _unnamed(own.read_text(encoding="utf-8"), vars(module), rule)
        stray = sorted(set(unnamed) - _used_elsewhere(module.__name__, own, python_files))
        problems += [f"{module.__name__}.{name}" for name in stray]
    assert not problems, (
        "defined in a rule module, named by no field of its RULE and used by no other module "
        f"(a hook under a misspelled name, or a helper to start with an underscore): {problems}")


MISSPELLED = '''
def spec_values(raw):
    return {}
def spec_problem(raw, data_root):
    return []
SPEC_KEYS = {}
NOT_CHECKD = ("the misspelled constant",)
def _helper():
    return None
RULE = BuildRule(name="typo", spec_values=spec_values, SPEC_KEYS=SPEC_KEYS)
'''


def test_the_check_finds_a_hook_the_record_does_not_name():
    module = types.ModuleType("typo")
    module.BuildRule = BuildRule
    exec(MISSPELLED, vars(module))
    assert _unnamed(MISSPELLED, vars(module), module.RULE) == ["NOT_CHECKD", "spec_problem"]


def test_the_check_reads_the_names_another_module_uses(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    (tmp_path / "pkg").mkdir()
    user = tmp_path / "pkg" / "user.py"
    user.write_text("from runtime.rules.smoke_test import MARKER\n"
                    "from runtime.rules import gate as g\n"
                    "def f():\n    from . import sibling\n    return g.runs, sibling.X\n")
    assert _uses("runtime.rules.smoke_test", user) == {"MARKER"}
    assert _uses("runtime.rules.gate", user) == {"runs"}
    assert _uses("pkg.sibling", user) == {"X"}


@pytest.mark.parametrize("record_type", [BuildRule, WorkerRule])
def test_a_name_that_is_no_field_fails_when_the_record_is_made(record_type):
    with pytest.raises(TypeError, match="unexpected keyword argument 'extra_task'"):
        record_type(name="typo", extra_task=lambda plan: ())


@pytest.mark.parametrize("record_type, field", [(BuildRule, "spec_values"),
                                                (WorkerRule, "task_fields")])
def test_a_hook_that_is_no_function_fails_when_the_record_is_made(record_type, field):
    with pytest.raises(RuleDefinitionError, match=rf"rule 'typo': {field} must be a function"):
        record_type(name="typo", **{field: "spec_values"})
    with pytest.raises(RuleDefinitionError, match="needs a name"):
        record_type(name="")


def test_a_constant_of_the_wrong_type_fails_when_the_record_is_made():
    with pytest.raises(RuleDefinitionError, match="COLUMN_STATISTICS must be a tuple"):
        WorkerRule(name="typo", COLUMN_STATISTICS="std")
    with pytest.raises(RuleDefinitionError, match="NOT_CHECKED must be a tuple"):
        BuildRule(name="typo", NOT_CHECKED="a line")


@pytest.mark.parametrize("given, missing", [
    ({"COLUMN_STATISTICS": ("tag",)}, "column_value"),
    ({"PRIVATE_STATISTICS": {"tag_full": "value"}}, "PRIVATE_OUTPUT"),
])
def test_a_field_without_the_one_it_is_required_with_fails_registration(given, missing):
    rule = WorkerRule(name="tags", **given)        # made: the record alone cannot tell
    with pytest.raises(RuleDefinitionError, match=rf"rule 'tags': gives \w+ but no {missing}"):
        registered(*worker_registry.RULES, rule)
    completed = dataclasses.replace(rule, **{missing: "tag" if missing.isupper()
                                             else (lambda statistic, result, metric: 0.0)})
    assert registered(*worker_registry.RULES, completed)[-1] is completed


@pytest.mark.parametrize("registry", [build_registry, worker_registry], ids=["build", "worker"])
def test_two_rules_of_one_name_fail_registration(registry):
    with pytest.raises(RuleDefinitionError, match="registered twice under one name: gate"):
        registered(*registry.RULES, registry.RULES[0].__class__(name="gate"))


def test_a_registry_line_names_a_module_whose_rule_has_its_name(tmp_path, monkeypatch):
    """A registry registers each rule by its module's name on one line: a module without a
    ``RULE``, or whose rule is named otherwise, fails at import, naming the module."""
    package = tmp_path / "trial_rules"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tags.py").write_text("from runtime.rules.records import WorkerRule\n"
                                     "RULE = WorkerRule(name='tags')\n")
    (package / "misnamed.py").write_text("from runtime.rules.records import WorkerRule\n"
                                         "RULE = WorkerRule(name='tags')\n")
    (package / "bare.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(tmp_path)
    (tags,) = registered_modules("trial_rules", "tags")
    assert tags.name == "tags"
    with pytest.raises(RuleDefinitionError, match="trial_rules.misnamed holds the rule 'tags'"):
        registered_modules("trial_rules", "misnamed")
    with pytest.raises(RuleDefinitionError, match="trial_rules.bare makes no RULE"):
        registered_modules("trial_rules", "bare")
    with pytest.raises(RuleDefinitionError, match="registered twice under one name: tags"):
        registered_modules("trial_rules", "tags", "tags")


def test_the_registries_hold_what_registration_checked():
    for registry, _ in SIDES:
        assert registered(*registry.RULES) == registry.RULES


def test_no_rule_or_registry_looks_a_hook_up_by_its_name():
    """Fields are read as fields: ``hasattr``/``getattr`` would pass over a misspelled one."""
    found = [f"{path.relative_to(REPO)}:{number}" for folder in ("bundle/competition_rules",
                                                                  "runtime/rules")
             for path in sorted((REPO / folder).glob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\b(hasattr|getattr)\(", line)]
    assert not found, found

"""A competition rule is its two modules and one line in each registry: a rule added by
registration alone (no core file changed) gets its spec key checked and documented, its values
through the phase plan into both programs' configs, read back by the worker's configs, and its
fact onto the phase's page.

The rule lives only in this test, so it runs in a fresh interpreter: the spec's schema gathers
the rules' keys when it is imported."""
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LABELS_SPEC = REPO / "kinds" / "label_accuracy" / "default_spec.yaml"

# A rule that tags a task with a short text, which the pages and both programs carry.
SCRIPT = r'''
import importlib, json, sys, types
from pathlib import Path
sys.path.insert(0, REPO)
import yaml

BUILD = """
from bundle.competition_rules.records import BuildRule
from bundle.spec_key import Key
SPEC_KEYS = {"tasks.<task>": {"tag": Key({"type": "string", "maxLength": 20},
                                         "A short tag shown with the task.", default=None,
                                         shown="none", example="vision")}}
def spec_values(raw):
    return {"tags": {name: task["tag"] for name, task in raw["tasks"].items() if "tag" in task}}
def spec_problems(raw, data_root, load_task):
    return [f"tasks.{name}.tag: {task['tag']!r} is upper case" for name, task in raw["tasks"].items()
            if task.get("tag", "").isupper()]
def plan_task(spec, name, spec_budgets):
    return {"tag": spec.rules["tags"].get(name)}
def ingestion_task_entries(task):
    return {"tag": task.rules["tag"]} if task.rules["tag"] else {}
def scoring_task_entries(task):
    return {"tag": task.rules["tag"]} if task.rules["tag"] else {}
def phase_facts(plan, budget_facts):
    tagged = [f"{t.name}: {t.rules['tag']}" for t in plan.tasks if t.rules["tag"]]
    return [("Task tags", "; ".join(tagged))] if tagged else []
RULE = BuildRule(name="tags", SPEC_KEYS=SPEC_KEYS, spec_values=spec_values,
                 spec_problems=spec_problems, plan_task=plan_task,
                 ingestion_task_entries=ingestion_task_entries,
                 scoring_task_entries=scoring_task_entries, phase_facts=phase_facts)
"""
WORKER = """
from runtime.rules.records import WorkerRule
def task_fields(raw_task, where):
    return {"tag": raw_task.get("tag")}
def scoring_task_fields(raw_task, where):
    return {"tag": raw_task.get("tag")}
RULE = WorkerRule(name="tags", task_fields=task_fields, scoring_task_fields=scoring_task_fields)
"""

def module(name, source):
    made = types.ModuleType(name)
    exec(source, made.__dict__)
    return made

import bundle.competition_rules as build_rules
import runtime.rules as worker_rules
from runtime.rules.records import registered
if REGISTER:
    build_rules.RULES = registered(*build_rules.RULES, module("bundle.competition_rules.tags", BUILD).RULE)
    worker_rules.RULES = registered(*worker_rules.RULES, module("runtime.rules.tags", WORKER).RULE)
import bundle.spec_schema, bundle.spec
importlib.reload(bundle.spec_schema)
spec_module = importlib.reload(bundle.spec)
from bundle.phase_plan import phase_plan
from bundle.programs import ingestion_config, scoring_config
from bundle.leaderboard import phase_columns
from bundle.render import page_contexts
from bundle.spec_reference import render_reference
from ingestion_program.ingest.config import parse_config as parse_ingestion
from scoring_program.scorer.config import parse_config as parse_scoring

raw = yaml.safe_load(Path(SPEC).read_text())
raw["tasks"]["iris"]["tag"] = TAG
Path(OUT, "spec.yaml").write_text(yaml.safe_dump(raw))
Path(OUT, raw["logo"]).write_bytes((Path(SPEC).parent / raw["logo"]).read_bytes())
found = {}
try:
    spec = spec_module.load_spec(Path(OUT, "spec.yaml"))
except spec_module.SpecError as error:
    print(json.dumps({"refused": error.problems}))
    sys.exit(0)
plan = phase_plan(spec, "evaluation")
ingestion = parse_ingestion(ingestion_config(plan))
scoring = parse_scoring(scoring_config(plan))
contexts = page_contexts(spec, [spec.phase("evaluation")], [plan], phase_columns(plan), spec.title,
                         None)
print(json.dumps({
    "spec": spec.rules["tags"],
    "plan": {t.name: t.rules["tag"] for t in plan.tasks},
    "ingestion": {t.name: t.rules["tag"] for t in ingestion.tasks},
    "scoring": {t.name: t.rules["tag"] for t in scoring.tasks},
    "facts": [fact for context in contexts.values() if isinstance(context, dict)
              for phase in context.get("phases", []) for fact in phase.get("facts", [])],
    "reference": "tasks.<task>.tag" in render_reference()}, default=str))
'''


def run_rule(tmp_path: Path, register: bool, tag: str = "vision") -> dict:
    code = (f"REPO, SPEC, OUT, REGISTER, TAG = {str(REPO)!r}, {str(LABELS_SPEC)!r}, "
            f"{str(tmp_path)!r}, {register!r}, {tag!r}\n" + SCRIPT)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_rule_added_by_registration_alone_reaches_every_stage(tmp_path):
    found = run_rule(tmp_path, register=True)
    assert found["spec"] == {"iris": "vision"}
    assert found["plan"] == found["ingestion"] == found["scoring"] == {"iris": "vision",
                                                                       "wine": None}
    assert any("iris: vision" in json.dumps(fact) for fact in found["facts"]), found["facts"]
    assert found["reference"]


def test_the_rules_spec_check_speaks_for_its_key(tmp_path):
    found = run_rule(tmp_path, register=True, tag="VISION")
    assert found["refused"] == ["tasks.iris.tag: 'VISION' is upper case"]


def test_without_its_registration_the_key_is_unknown(tmp_path):
    found = run_rule(tmp_path, register=False)
    assert any("tasks.iris" in problem and "tag" in problem for problem in found["refused"]), found


def _rule_state_reads(tree) -> list[tuple[int, str]]:
    """Each ``<x>.rules["name"]`` and ``<x>.rules.get("name")`` in a module, with its line."""
    import ast
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            holder, key = node.value, node.slice
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "get" and node.args):
            holder, key = node.func.value, node.args[0]
        else:
            continue
        if (isinstance(holder, ast.Attribute) and holder.attr == "rules"
                and isinstance(key, ast.Constant) and isinstance(key.value, str)):
            found.append((node.lineno, key.value))
    return found


def test_only_a_rule_reads_its_state_by_name():
    """A rule's values sit in the core's records under the rule's own names; only the rule's
    modules read them so (others ask the rule: ``public_rows.public_part(task)``), so that a
    rule can change what it keeps without a kind or the core knowing."""
    import ast
    from test_import_cycles import product_modules
    rule_folders = (REPO / "bundle" / "competition_rules", REPO / "runtime" / "rules")
    outside = [f"{path.relative_to(REPO)}:{line}: rules[{key!r}]"
               for path in product_modules().values()
               if not any(path.is_relative_to(folder) for folder in rule_folders)
               for line, key in _rule_state_reads(ast.parse(path.read_text(encoding="utf-8")))]
    assert outside == []
    inside = [key for folder in rule_folders for path in folder.glob("*.py")
              for _, key in _rule_state_reads(ast.parse(path.read_text(encoding="utf-8")))]
    assert "public_rows" in inside          # the walk finds the reads it is there to find

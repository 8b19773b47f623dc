"""No product module imports, at load, a module that imports it back (issue 51): an import
cycle makes the order modules load in matter, and a rule or kind module that imports the
core calling it is no longer a leaf one can read alone. Found by reading the modules' syntax
trees, so the check itself imports nothing. Imports inside functions (deferred to a call) close
cycles too, read the same way, and none is left: a rule is handed what it needs of the core
that calls it through its hook's arguments (issue 51, item 1)."""
import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("bundle", "runtime", "kinds", "ingestion_program", "scoring_program",
           "reference_data", "starting_kit")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def product_modules() -> dict[str, Path]:
    return {module_name(path): path for top in PRODUCT for path in (REPO / top).rglob("*.py")
            if "tests" not in path.relative_to(REPO).parts}


def load_time_imports(name: str, path: Path, known: set[str], anywhere: bool = False) -> set[str]:
    """The product modules ``name`` imports while it loads: its top-level statements (and the
    ``if``/``try`` blocks among them), not its functions' bodies; ``anywhere``: those too."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for statement in ast.parse(path.read_text(encoding="utf-8")).body:
        nodes = (ast.walk(statement) if anywhere or isinstance(statement, (ast.If, ast.Try))
                 else [statement])
        for node in nodes:
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names if alias.name in known}
            elif isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                target = ".".join(base + [node.module] if node.module else base)
                for alias in node.names:
                    submodule = f"{target}.{alias.name}"
                    if submodule in known:
                        found.add(submodule)
                    elif target in known:
                        found.add(target)
    return found - {name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_the_check_finds_a_cycle_and_a_relative_import():
    """The check itself, on modules written here: a relative import closes a loop of three."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    modules = product_modules()
    assert "bundle.phase_plan" in load_time_imports(
        "bundle.build", modules["bundle.build"], set(modules))


def test_no_product_module_imports_one_that_imports_it_back():
    modules = product_modules()
    graph = {name: load_time_imports(name, path, set(modules)) for name, path in modules.items()}
    assert cycles(graph) == []


def test_imports_inside_functions_close_no_cycle_either():
    modules = product_modules()
    graph = {name: load_time_imports(name, path, set(modules), anywhere=True)
             for name, path in modules.items()}
    assert cycles(graph) == []

"""The kit's versions report (starting_kit/versions.py), against the plain ways of finding the
same things: every node of every module walked (ast.walk, as the builder reads a kit's imports)
for the imports, and
importlib.metadata.packages_distributions() for which distribution provides a module. The
kit finds both more cheaply (imports are statements, so only statement blocks are walked;
only the image's distributions are read), and must find exactly the same."""
import importlib.metadata
import importlib.util
import random
import textwrap
from pathlib import Path

import pytest

from bundle.kit_requirements import _imports_of_source

REPO = Path(__file__).resolve().parents[1]


def _versions():
    spec = importlib.util.spec_from_file_location("kit_versions",
                                                  REPO / "starting_kit" / "versions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


versions = _versions()
PROVIDERS = importlib.metadata.packages_distributions()      # read once: a fifth of a second


def every_node_imports(source: str) -> set[str]:
    """The builder's reading of a file's imports (bundle/kit_requirements.py), which walks
    every node: the kit's must agree with it."""
    return set(_imports_of_source(source))


def test_imports_nested_in_every_kind_of_block_are_found(tmp_path):
    (tmp_path / "nested.py").write_text(textwrap.dedent("""\
        import a1, a2.sub as x
        from b1.sub import y
        from . import relative
        from .c1 import relative_too
        text = "import not_an_import"
        class K:
            import d1
            def method(self):
                def inner():
                    from e1 import z
                return lambda: __import__("not_a_statement")
        async def f():
            async with g() as h:
                import f1
            async for i in h:
                pass
            else:
                import f2
        try:
            import g1
        except ImportError:
            import g2
        else:
            import g3
        finally:
            import g4
        try:
            pass
        except* ValueError:
            import g5
        while True:
            break
        else:
            import h1
        for j in []:
            pass
        else:
            import h2
        if text:
            import i1
        elif text:
            import i2
        else:
            import i3
        with open(__file__) as k:
            import j1
        match text:
            case "x":
                import k1
            case _:
                import k2
        """))
    (tmp_path / "broken.py").write_text("import l1\ndef (:\n")    # the ingestion reports it
    found = versions.imported_modules([tmp_path])
    assert found == {"a1", "a2", "b1", "d1", "e1", "f1", "f2", "g1", "g2", "g3", "g4", "g5",
                     "h1", "h2", "i1", "i2", "i3", "j1", "k1", "k2"}
    assert found == every_node_imports((tmp_path / "nested.py").read_text())


def test_every_python_file_of_the_repository_gives_the_imports_of_a_full_walk():
    files = sorted(path for folder in ("bundle", "ingestion_program", "scoring_program",
                                       "runtime", "kinds", "starting_kit", "tests", "scripts")
                   for path in (REPO / folder).rglob("*.py"))
    assert len(files) > 200
    for path in files:
        assert versions.imported_modules([path]) == every_node_imports(path.read_text()), path


def test_the_image_distributions_found_are_those_packages_distributions_finds():
    """Over random sets of the modules installed here (and a few no distribution provides),
    both ways name the same distributions of the image: pyyaml for yaml, scikit-learn for
    sklearn, matplotlib for mpl_toolkits."""
    wanted = versions.image_versions(REPO / "requirements-image.txt")
    providers = PROVIDERS

    def by_every_distribution(modules: set[str]) -> list[str]:
        found = {dist.lower() for module in modules for dist in providers.get(module, ())}
        found |= {module.lower().replace("_", "-") for module in modules}
        return sorted(name for name in wanted if name in found)

    assert versions._distributions_of({"yaml", "sklearn"}, wanted) == ["pyyaml", "scikit-learn"]
    modules = sorted(providers) + ["os", "json", "torch_not_here", "mpl_toolkits", "_yaml"]
    rng = random.Random(49)
    for _ in range(300):
        chosen = set(rng.sample(modules, rng.randint(0, 12)))
        assert versions._distributions_of(chosen, wanted) == by_every_distribution(chosen), \
            chosen


@pytest.mark.parametrize("name", ["numpy", "pyyaml", "scikit-learn", "no-such-distribution"])
def test_a_distributions_modules_are_those_packages_distributions_names(name):
    expected = {module for module, dists in PROVIDERS.items()
                if name in (dist.lower() for dist in dists)}
    assert versions._top_level_modules(name) == expected

"""Programs on a GPU image: every .py file of the scoring and ingestion programs must run on
the image's Python, 3.10 for ``codalab/codalab-legacy:gpu310`` (CUDA 12.4.1, Ubuntu 20.04),
while the project and the default image use 3.12.

No 3.10 interpreter is at hand at build time, so the check is static. vermin (its tables of
what each Python version added: modules, names, keywords, syntax, PEP 701 f-strings) finds
what needs a Python newer than 3.10; the file must also parse as 3.10
(``ast.parse(feature_version=(3, 10))``), which catches the type parameters of a function that
vermin does not name, and it must import only the standard library, the program's own packages
and what the image installs (the Dockerfile's packages; numpy alone where the image is not
known here), which is not vermin's question.

vermin 1.9.2, run on every entry of the tables this module held before it (159 names, modules,
methods and keywords) and on its tests, misses a few things that ``_Supplement`` keeps:
starred subscripts and ``*args: *Ts`` (PEP 646), the regular-expression syntax of 3.11
(atomic groups, possessive quantifiers), ``add_note``/``__notes__`` on an exception whose
type it cannot see, and the new built-in exceptions where they are neither raised, called
nor caught (``issubclass(kind, BaseExceptionGroup)``, as in 3.12's own contextlib). (It also
misses ``enum``'s boundary constants, ``os.CLONE_*``, ``asyncio.Timeout``,
``logging.getHandlerByName``/``getHandlerNames``, ``dataclass(weakref_slot=)`` and
``statistics.correlation(method=)``: rare enough in programs that no table is kept for them.)
vermin names each feature once per file, at one of its lines.

A name reached through ``getattr(module, "name", None)`` is not flagged: that is the way to
use something newer where it exists.
"""
from __future__ import annotations

import ast
import re
import sys
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

import vermin
from vermin.formats import ParsableFormat

from ..spec import is_gpu_image
from .framework import CODABENCH, CODALAB, Bundle, CannotCheck, Problem, rule

TARGET = (3, 10)
TARGET_TEXT = "Python 3.10"
PROGRAMS = ("scoring_program", "ingestion_program")

# Standard-library modules that 3.10 has and later versions removed (so this checker's own
# interpreter may not list them).
MODULES_REMOVED = {"asynchat", "asyncore", "distutils", "imp", "smtpd", "aifc", "audioop", "cgi",
                   "cgitb", "chunk", "crypt", "imghdr", "mailcap", "msilib", "nis", "nntplib",
                   "ossaudiodev", "pipes", "sndhdr", "spwd", "sunau", "telnetlib", "uu",
                   "xdrlib", "lib2to3"}
REPLACEMENTS = {
    "datetime.UTC": "datetime.timezone.utc",
    "tomllib": "a TOML reader the image installs, or JSON",
    "hashlib.file_digest": "hashlib.sha256() fed the file in chunks",
    "contextlib.chdir": "os.chdir() in try/finally",
    "enum.StrEnum": "class Name(str, enum.Enum)",
    "itertools.batched": "itertools.islice() in a loop",
    "os.unshare": "ctypes: libc.unshare(0x40000000) for CLONE_NEWNET",
    "math.cbrt": "math.copysign(abs(x) ** (1 / 3), x)",
    "math.exp2": "2.0 ** x",
    "typing.Self": "a TypeVar bound to the class, or the class name as a string",
    "asyncio.TaskGroup": "asyncio.gather()",
    "asyncio.timeout": "asyncio.wait_for()",
    "f-strings (PEP 701)": "an expression without the string's own quote, a backslash or a "
                           "comment inside the braces (or a variable set before the f-string)",
}
ALWAYS_THERE = frozenset({"numpy"})      # every image the programs target: they need it
# Import names of what each known GPU image installs: its Dockerfile's packages
# (codalab/codalab-dockers, Dockerfiles/Dockerfile-gpu310) and the ones they bring along.
IMAGE_PACKAGES = {
    "codalab/codalab-legacy:gpu310": frozenset({
        "numpy", "scipy", "sklearn", "pandas", "matplotlib", "mpl_toolkits", "seaborn", "yaml",
        "imutils", "cv2", "torch", "tensorflow", "keras", "tqdm", "psutil", "h5py", "Cython",
        "pyximport", "IPython", "ipykernel", "jupyter", "notebook", "PIL", "joblib",
        "threadpoolctl", "dateutil", "pytz", "google", "typing_extensions", "jinja2",
        "packaging", "sympy", "networkx", "filelock", "fsspec", "triton", "ml_dtypes"}),
}
# What vermin misses (see the module's docstring): exception notes on a receiver of any name,
# and the regular-expression syntax of 3.11 in a pattern that one of these functions compiles.
BUILTINS_ADDED = {"ExceptionGroup": "3.11", "BaseExceptionGroup": "3.11",
                  "PythonFinalizationError": "3.13"}
METHODS_ADDED = {"add_note": "3.11 (BaseException.add_note)",
                 "__notes__": "3.11 (BaseException.__notes__)"}
RE_FUNCTIONS = {"compile", "search", "match", "fullmatch", "split", "findall", "finditer", "sub",
                "subn"}
RE_ADDED = {"ATOMIC_GROUP": "atomic groups (?>...)",
            "POSSESSIVE_REPEAT": "possessive quantifiers (*+, ++, ?+, {m,n}+)"}
# One line of vermin's parsable output: path:line:column:py2:py3:what (path left out here).
VERMIN_LINE = re.compile(r"<unknown>:(?P<line>\d*):\d*:[^:]*:(?P<version>[\d.]+):(?P<what>.+)\Z")
# vermin names a module or a member as "'datetime.UTC' member", a keyword as "'f(keyword)'".
VERMIN_NAME = re.compile(r"'(?P<name>[^']+)'(?: member| module)?\Z")


@dataclass(frozen=True)
class Finding:
    line: int
    what: str
    fix: str = "write it the Python 3.10 way, or reach it with getattr(module, 'name', None)"


@lru_cache(maxsize=1)
def stdlib_modules() -> frozenset[str]:
    """Top-level standard-library modules of Python 3.10."""
    newer = {module for module, (_, py3) in vermin.MOD_REQS(vermin.Config()).items()
             if "." not in module and py3 is not None and py3 > TARGET}
    return frozenset((set(sys.stdlib_module_names) | MODULES_REMOVED) - newer)


def image_packages(image: str) -> frozenset[str]:
    return IMAGE_PACKAGES.get(image, ALWAYS_THERE)


def source_findings(source: str, allowed_imports: frozenset[str] | None = None
                    ) -> list[Finding]:
    """What keeps ``source`` from running on Python 3.10; ``allowed_imports``: the top-level
    modules it may import besides the standard library (None: imports are not checked)."""
    try:
        tree = ast.parse(source, feature_version=TARGET)
    except SyntaxError as error:
        return [Finding(error.lineno or 0, f"{TARGET_TEXT} cannot parse it: {error.msg}",
                        "use the syntax of Python 3.10")]
    found = _vermin_findings(source)
    found += [finding for finding in _Supplement(tree).findings if finding not in found]
    if allowed_imports is not None:
        found += _import_findings(tree, allowed_imports)
    return sorted(found, key=lambda finding: finding.line)


def _vermin_config() -> vermin.Config:
    config = vermin.Config()
    config.set_format(ParsableFormat())      # one line per finding, with its line number
    config.add_target(TARGET, exact=False)   # "3.10-": whatever needs more is a violation
    config.set_only_show_violations(True)
    config.set_eval_annotations(True)        # 3.10 evaluates them (without the __future__)
    config.set_parse_comments(False)         # a "# novm" comment must not silence the rule
    return config


def _vermin_findings(source: str) -> list[Finding]:
    visitor = vermin.visit(source, _vermin_config())
    if not isinstance(visitor, vermin.SourceVisitor):
        return []          # vermin could not parse what ast.parse did: it has nothing to add
    findings = []
    for line in visitor.output_text().splitlines():
        match = VERMIN_LINE.match(line)
        if match is None:
            continue                         # a summary or a note without a version
        named = VERMIN_NAME.match(match["what"])
        what = named["name"] if named else match["what"]
        how = REPLACEMENTS.get(what)
        finding = Finding(int(match["line"] or 0), f"{what} is new in Python {match['version']}")
        findings.append(Finding(finding.line, finding.what, f"use {how} instead") if how
                        else finding)
    return findings


class _Supplement(ast.NodeVisitor):
    """What vermin misses: PEP 646 stars, exception groups and notes, the regular expressions
    of 3.11."""

    def __init__(self, tree: ast.AST):
        self.findings: list[Finding] = []
        self.re_names = _names_for_re(tree)
        self.own_names = _bound_names(tree)
        self.visit(tree)

    def _add(self, node: ast.AST, what: str) -> None:
        self.findings.append(Finding(getattr(node, "lineno", 0), what))

    def visit_Subscript(self, node: ast.Subscript) -> None:
        elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if any(isinstance(element, ast.Starred) for element in elements):
            self._add(node, "a starred expression in a subscript (x[*a]) is new in Python 3.11")
        self.generic_visit(node)

    def visit_arguments(self, node: ast.arguments) -> None:
        if node.vararg and isinstance(node.vararg.annotation, ast.Starred):
            self._add(node.vararg, "a starred *args annotation is new in Python 3.11")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in BUILTINS_ADDED and isinstance(node.ctx, ast.Load) \
                and node.id not in self.own_names:
            self._add(node, f"{node.id} is new in Python {BUILTINS_ADDED[node.id]}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in METHODS_ADDED and isinstance(node.ctx, ast.Load):
            self._add(node, f".{node.attr} is new in Python {METHODS_ADDED[node.attr]}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if _called_name(node.func, self.re_names) and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            pattern = node.args[0].value
            for feature in sorted(_regex_features(pattern)):
                self._add(node, f"the pattern {pattern!r} uses {feature}, new in Python 3.11")
        self.generic_visit(node)


def _bound_names(tree: ast.AST) -> set[str]:
    """Names the file defines, assigns or imports itself (its own ExceptionGroup is no builtin)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
    return names


def _names_for_re(tree: ast.AST) -> dict[str, str]:
    """Local name -> what it is in ``re``: "" for the module itself, else the function."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update({alias.asname or alias.name: "" for alias in node.names
                          if alias.name == "re"})
        elif isinstance(node, ast.ImportFrom) and node.module == "re" and node.level == 0:
            names.update({alias.asname or alias.name: alias.name for alias in node.names})
    return names


def _called_name(function: ast.AST, re_names: dict[str, str]) -> bool:
    """Whether ``function`` is one of ``re``'s functions that compile their first argument."""
    if isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name):
        return re_names.get(function.value.id) == "" and function.attr in RE_FUNCTIONS
    return isinstance(function, ast.Name) and re_names.get(function.id) in RE_FUNCTIONS


def _regex_features(pattern: str) -> set[str]:
    """Regular-expression syntax 3.10's ``re`` refuses, read from this Python's parser."""
    parser = getattr(re, "_parser", None)
    if parser is None:
        return set()          # 3.10 itself: its re.compile is the judge, not us
    try:
        parsed = parser.parse(pattern)
    except re.error:
        return set()
    found: set[str] = set()
    _walk_regex(parsed, found)
    return found


def _walk_regex(value, found: set[str]) -> None:
    if isinstance(value, (list, tuple)) or type(value).__name__ == "SubPattern":
        for item in value:
            if isinstance(item, tuple) and item and str(item[0]) in RE_ADDED:
                found.add(RE_ADDED[str(item[0])])
            _walk_regex(item, found)


def _guarded_imports(tree: ast.AST) -> set[int]:
    """Imports inside ``try: ... except ImportError`` (or a broader except): optional ones."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
            guarded |= {id(inner) for statement in node.body for inner in ast.walk(statement)}
    return guarded


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return handler.type is None or any(getattr(name, "id", None) in (
        "ImportError", "ModuleNotFoundError", "Exception", "BaseException") for name in names)


def _import_findings(tree: ast.AST, allowed: frozenset[str]) -> list[Finding]:
    guarded, stdlib, findings = _guarded_imports(tree), stdlib_modules(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        else:
            continue
        for module in modules:
            top = module.split(".")[0]
            if top not in stdlib and top not in allowed and id(node) not in guarded:
                findings.append(Finding(node.lineno, f"imports {module}, which is neither the "
                                                     "standard library nor installed in the image",
                                        "use the standard library or a package the image has, "
                                        "or import it inside try/except ImportError"))
    return findings


def program_findings(archive: zipfile.ZipFile, packages: frozenset[str]
                     ) -> Iterator[tuple[str, Finding]]:
    """(file, finding) for every .py file of a program zip; its own top-level packages and
    modules may be imported besides ``packages`` and the standard library."""
    names = archive.namelist()
    own = {name.split("/")[0].removesuffix(".py") for name in names if name.endswith(".py")}
    for name in sorted(n for n in names if n.endswith(".py")):
        try:
            source = archive.read(name).decode("utf-8")
        except UnicodeDecodeError as error:
            yield name, Finding(0, f"is not UTF-8 ({error})", "save it as UTF-8")
            continue
        for finding in source_findings(source, packages | own):
            yield name, finding


def _program_zips(bundle: Bundle) -> list[tuple[str, str]]:
    """(where, member) of each distinct program zip the competition's YAML names."""
    return bundle.platform.program_zips(bundle, PROGRAMS)


def _image(bundle: Bundle) -> str | None:
    image = bundle.comp.get(bundle.platform.image_key)
    return image if isinstance(image, str) else None


@rule("python-version", "on a GPU image (its tag says gpu) every .py file of the programs runs "
      "on the image's Python 3.10: syntax, f-strings, standard-library names and imports",
      "make the file Python 3.10 code", CODALAB)
@rule("v2-python-version", "on a GPU image (its tag says gpu) every .py file of the programs "
      "runs on the image's Python 3.10: syntax, f-strings, standard-library names and imports",
      "make the file Python 3.10 code", CODABENCH)
def check_python_version(bundle: Bundle) -> Iterator[Problem]:
    image = _image(bundle)
    if image is None or not is_gpu_image(image):
        return
    packages, seen = image_packages(image), set()
    for where, member in _program_zips(bundle):
        if member in seen:
            continue
        seen.add(member)
        try:
            archive = bundle.nested(member)
        except CannotCheck as error:
            yield f"{where} not checked: {error}"
            continue
        for name, finding in program_findings(archive, packages):
            yield (f"{member}::{name}:{finding.line}: {finding.what} (the image {image} runs "
                   f"{TARGET_TEXT})", finding.fix)

"""Programs on a GPU image: every .py file of the scoring and ingestion programs must run on
the image's Python, 3.10 for ``codalab/codalab-legacy:gpu310`` (CUDA 12.4.1, Ubuntu 20.04),
while the project and the default image use 3.12.

No 3.10 interpreter is at hand at build time, so the check is static: the file must parse as
3.10 (``ast.parse(feature_version=(3, 10))``: ``except*``, type parameters, ``type`` aliases),
its f-strings must keep 3.10's rules (no quote of the enclosing string, backslash or comment
inside a replacement field: PEP 701, which ``feature_version`` does not check), it must not
use standard-library modules, names, keywords or regular-expression syntax added after 3.10,
and it must import only the standard library, the program's own packages and what the image
installs (the Dockerfile's packages; numpy alone where the image is not known here).

A name reached through ``getattr(module, "name", None)`` is not flagged: that is the way to
use something newer where it exists.
"""
from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
import zipfile
from dataclasses import dataclass
from typing import Iterator

from ..spec import is_gpu_image
from .framework import CODABENCH, CODALAB, Bundle, CannotCheck, Problem, rule

TARGET = (3, 10)
TARGET_TEXT = "Python 3.10"
PROGRAMS = ("scoring_program", "ingestion_program")

# Standard-library modules that appeared after 3.10, and those 3.10 has that later versions
# removed (so this checker's own interpreter does not list them).
MODULES_ADDED = {"tomllib": "3.11", "wsgiref.types": "3.11", "dbm.sqlite3": "3.13",
                 "annotationlib": "3.14", "compression": "3.14", "string.templatelib": "3.14",
                 "concurrent.interpreters": "3.14"}
MODULES_REMOVED = {"asynchat", "asyncore", "distutils", "imp", "smtpd", "aifc", "audioop", "cgi",
                   "cgitb", "chunk", "crypt", "imghdr", "mailcap", "msilib", "nis", "nntplib",
                   "ossaudiodev", "pipes", "sndhdr", "spwd", "sunau", "telnetlib", "uu",
                   "xdrlib", "lib2to3"}


def _names(version: str, *names: str) -> dict[str, str]:
    return dict.fromkeys(names, version)


# module -> name -> the version that added it
NAMES_ADDED: dict[str, dict[str, str]] = {
    "builtins": {**_names("3.11", "ExceptionGroup", "BaseExceptionGroup"),
                 **_names("3.13", "PythonFinalizationError")},
    "datetime": _names("3.11", "UTC"),
    "typing": {**_names("3.11", "Self", "Never", "LiteralString", "assert_never", "reveal_type",
                        "Required", "NotRequired", "TypeVarTuple", "Unpack", "assert_type",
                        "clear_overloads", "get_overloads", "dataclass_transform"),
               **_names("3.12", "override", "TypeAliasType"),
               **_names("3.13", "ReadOnly", "TypeIs", "NoDefault", "get_protocol_members",
                        "is_protocol")},
    "enum": {**_names("3.11", "StrEnum", "ReprEnum", "EnumCheck", "FlagBoundary", "verify",
                      "member", "nonmember", "global_enum", "show_flag_values", "EnumType",
                      "CONFORM", "EJECT", "KEEP", "STRICT", "UNIQUE", "CONTINUOUS",
                      "NAMED_FLAGS"), **_names("3.13", "EnumDict")},
    "hashlib": _names("3.11", "file_digest"),
    "contextlib": _names("3.11", "chdir"),
    "asyncio": {**_names("3.11", "TaskGroup", "timeout", "timeout_at", "Runner", "Barrier",
                         "BrokenBarrierError", "Timeout"),
                **_names("3.12", "eager_task_factory", "create_eager_task_factory"),
                **_names("3.13", "QueueShutDown")},
    "itertools": _names("3.12", "batched"),
    "math": {**_names("3.11", "cbrt", "exp2"), **_names("3.12", "sumprod"),
             **_names("3.13", "fma")},
    "operator": _names("3.11", "call"),
    "logging": {**_names("3.11", "getLevelNamesMapping"),
                **_names("3.12", "getHandlerByName", "getHandlerNames")},
    "inspect": {**_names("3.11", "getmembers_static"),
                **_names("3.12", "markcoroutinefunction", "BufferFlags")},
    "sys": {**_names("3.11", "exception"),
            **_names("3.12", "monitoring", "last_exc", "activate_stack_trampoline",
                     "deactivate_stack_trampoline", "is_stack_trampoline_active"),
            **_names("3.13", "_is_gil_enabled")},
    "os": {**_names("3.11", "login_tty"),
           **_names("3.12", "unshare", "setns", "listdrives", "listmounts", "listvolumes",
                    "CLONE_FILES", "CLONE_FS", "CLONE_NEWCGROUP", "CLONE_NEWIPC", "CLONE_NEWNET",
                    "CLONE_NEWNS", "CLONE_NEWPID", "CLONE_NEWTIME", "CLONE_NEWUSER",
                    "CLONE_NEWUTS", "CLONE_SIGHAND", "CLONE_SYSVSEM", "CLONE_THREAD",
                    "CLONE_VM"),
           **_names("3.13", "process_cpu_count", "grantpt", "posix_openpt", "ptsname",
                    "unlockpt", "timerfd_create", "timerfd_settime", "timerfd_gettime")},
    "os.path": {**_names("3.12", "splitroot", "isjunction"), **_names("3.13", "isreserved")},
    "locale": _names("3.11", "getencoding"),
    "random": _names("3.12", "binomialvariate"),
    "statistics": _names("3.13", "kde", "kde_random"),
    "types": _names("3.12", "get_original_bases"),
    "collections.abc": _names("3.12", "Buffer"),
    "http": _names("3.11", "HTTPMethod"),
    "calendar": _names("3.12", "Month", "Day"),
    "copy": _names("3.13", "replace"),
    "warnings": _names("3.13", "deprecated"),
    "base64": _names("3.13", "z85encode", "z85decode"),
    "glob": _names("3.13", "translate"),
    "queue": _names("3.13", "ShutDown"),
    "pathlib": _names("3.13", "UnsupportedOperation"),
    "threading": _names("3.12", "setprofile_all_threads", "settrace_all_threads"),
    "re": {**_names("3.11", "NOFLAG"), **_names("3.13", "PatternError")},
    "unittest": _names("3.11", "enterModuleContext"),
    "uuid": _names("3.14", "uuid6", "uuid7", "uuid8"),
}
# Methods of objects whose type a static check cannot see (Path.walk, exception notes):
# flagged on anything that is not a module (os.walk and ast.walk are old).
METHODS_ADDED = {"walk": "3.12 (Path.walk)", "is_junction": "3.12 (Path.is_junction)",
                 "with_segments": "3.12 (PurePath.with_segments)",
                 "full_match": "3.13 (PurePath.full_match)", "from_uri": "3.13 (Path.from_uri)",
                 "add_note": "3.11 (BaseException.add_note)",
                 "__notes__": "3.11 (BaseException.__notes__)",
                 "get_identifiers": "3.11 (string.Template.get_identifiers)"}
# Modules whose function of that name is old: os.walk, ast.walk, pkgutil.walk_packages...
MODULES_WITH_OLD_NAMESAKES = {"os", "ast", "os.path"}
# (function or method name, keyword) -> the version that added the keyword
KEYWORDS_ADDED = {("rmtree", "onexc"): "3.12", ("TemporaryDirectory", "delete"): "3.12",
                  ("NamedTemporaryFile", "delete_on_close"): "3.12",
                  ("glob", "include_hidden"): "3.11", ("iglob", "include_hidden"): "3.11",
                  ("glob", "case_sensitive"): "3.12", ("rglob", "case_sensitive"): "3.12",
                  ("ZipFile", "metadata_encoding"): "3.11", ("dataclass", "weakref_slot"): "3.11",
                  ("relative_to", "walk_up"): "3.12", ("fmean", "weights"): "3.11",
                  ("Popen", "process_group"): "3.11", ("correlation", "method"): "3.12",
                  ("nextafter", "steps"): "3.12", ("batched", "strict"): "3.13",
                  ("add_argument", "deprecated"): "3.13"}
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
RE_FUNCTIONS = {"compile", "search", "match", "fullmatch", "split", "findall", "finditer", "sub",
                "subn"}
RE_ADDED = {"ATOMIC_GROUP": "atomic groups (?>...)",
            "POSSESSIVE_REPEAT": "possessive quantifiers (*+, ++, ?+, {m,n}+)"}


@dataclass(frozen=True)
class Finding:
    line: int
    what: str
    fix: str = "write it the Python 3.10 way, or reach it with getattr(module, 'name', None)"


def stdlib_modules() -> frozenset[str]:
    """Top-level standard-library modules of Python 3.10."""
    added = {name for name in MODULES_ADDED if "." not in name}
    return frozenset((set(sys.stdlib_module_names) | MODULES_REMOVED) - added)


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
    found = _fstring_findings(source) + _NameScan(tree).findings
    if allowed_imports is not None:
        found += _import_findings(tree, allowed_imports)
    return sorted(found, key=lambda finding: finding.line)


def _added_text(dotted: str, version: str) -> str:
    return f"{dotted} is new in Python {version}"


def _replacement(dotted: str) -> str | None:
    how = REPLACEMENTS.get(dotted)
    return f"use {how} instead" if how else None


class _NameScan(ast.NodeVisitor):
    """Module aliases, then every dotted name, call keyword and regular expression."""

    def __init__(self, tree: ast.AST):
        self.findings: list[Finding] = []
        self.aliases: dict[str, str] = {}
        self.bound: set[str] = set()
        for node in ast.walk(tree):
            self._learn(node)
        self.visit(tree)

    def _learn(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                self.aliases[name] = alias.name if alias.asname else name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.bound.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            self.bound.add(node.id)

    def _flag(self, node: ast.AST, dotted: str, version: str) -> None:
        finding = Finding(getattr(node, "lineno", 0), _added_text(dotted, version))
        how = _replacement(dotted)
        self.findings.append(Finding(finding.line, finding.what, how) if how else finding)

    def _dotted(self, node: ast.AST) -> str | None:
        """``dt.UTC`` -> ``datetime.UTC`` when ``dt`` is an imported module or name."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.aliases:
            return None
        return ".".join([self.aliases[node.id], *reversed(parts)])

    def _check_dotted(self, node: ast.AST, dotted: str) -> bool:
        """Flags the first part of ``a.b.c`` that is newer than 3.10: a module or a name."""
        parts = dotted.split(".")
        for index in range(1, len(parts) + 1):
            prefix, module = ".".join(parts[:index]), ".".join(parts[:index - 1])
            version = MODULES_ADDED.get(prefix) or NAMES_ADDED.get(module, {}).get(parts[index - 1])
            if version:
                self._flag(node, prefix, version)
                return True
        return False

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_dotted(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module and not self._check_dotted(node, node.module):
            for alias in node.names:
                self._check_dotted(node, f"{node.module}.{alias.name}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = self._dotted(node)
        if dotted is not None and self._check_dotted(node, dotted):
            return
        receiver = self._dotted(node.value)
        if node.attr in METHODS_ADDED and isinstance(node.ctx, ast.Load) \
                and receiver not in MODULES_WITH_OLD_NAMESAKES:
            self.findings.append(Finding(node.lineno, f".{node.attr} is new in Python "
                                                      f"{METHODS_ADDED[node.attr]}"))
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        version = NAMES_ADDED["builtins"].get(node.id)
        if version and isinstance(node.ctx, ast.Load) and node.id not in self.bound \
                and node.id not in self.aliases:
            self._flag(node, node.id, version)

    def visit_Call(self, node: ast.Call) -> None:
        name = (node.func.attr if isinstance(node.func, ast.Attribute)
                else getattr(node.func, "id", None))
        for keyword in node.keywords:
            version = KEYWORDS_ADDED.get((name, keyword.arg))
            if version:
                self.findings.append(Finding(node.lineno, f"{name}({keyword.arg}=...) is new "
                                                          f"in Python {version}"))
        if self._dotted(node.func) in {f"re.{f}" for f in RE_FUNCTIONS} and node.args:
            self._regex(node, node.args[0])
        self.generic_visit(node)

    def _regex(self, node: ast.Call, pattern: ast.AST) -> None:
        if isinstance(pattern, ast.Constant) and isinstance(pattern.value, str):
            for feature in sorted(_regex_features(pattern.value)):
                self.findings.append(Finding(node.lineno, f"the pattern {pattern.value!r} uses "
                                                          f"{feature}, new in Python 3.11"))

    def visit_Subscript(self, node: ast.Subscript) -> None:
        elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if any(isinstance(element, ast.Starred) for element in elements):
            self.findings.append(Finding(node.lineno, "a starred expression in a subscript "
                                                      "(x[*a]) is new in Python 3.11"))
        self.generic_visit(node)

    def visit_arguments(self, node: ast.arguments) -> None:
        if node.vararg and isinstance(node.vararg.annotation, ast.Starred):
            self.findings.append(Finding(node.vararg.lineno, "a starred *args annotation is new "
                                                             "in Python 3.11"))
        self.generic_visit(node)


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


def _fstring_findings(source: str) -> list[Finding]:
    """PEP 701 (3.12) let a replacement field hold the string's own quote, a backslash, a
    comment or a line break of a one-line string; 3.10 ends the string there or refuses it."""
    if not hasattr(tokenize, "FSTRING_START"):
        return []            # an older tokenizer: ast.parse has refused such f-strings already
    findings, stack = [], []          # stack: [quote, braces open] of each f-string entered
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return []
    for token in tokens:
        problem = _fstring_problem(token, stack)
        if problem and not any(f.line == token.start[0] for f in findings):
            findings.append(Finding(token.start[0], f"this f-string {problem}, which Python "
                                                    "3.10 does not allow (PEP 701 is 3.12)",
                                    "move the expression out of the f-string into a variable"))
        _track_fstring(token, stack)
    return findings


def _track_fstring(token: tokenize.TokenInfo, stack: list) -> None:
    if token.type == tokenize.FSTRING_START:
        stack.append([token.string.lstrip("rRfFbBuU"), 0])
    elif token.type == tokenize.FSTRING_END and stack:
        stack.pop()
    elif token.type == tokenize.OP and stack and token.string in "{}":
        stack[-1][1] += 1 if token.string == "{" else -1


def _fstring_problem(token: tokenize.TokenInfo, stack: list) -> str | None:
    """Whether ``token`` breaks 3.10's rules for the f-strings whose replacement field it is in:
    every enclosing one but the innermost, which counts only while a field of it is open."""
    if not stack:
        return None
    inner_literal = token.type == tokenize.FSTRING_MIDDLE or stack[-1][1] == 0
    enclosing = stack[:-1] if inner_literal else stack
    for quote, _ in enclosing:
        if quote in token.string:
            return f"reuses its quote {quote} inside a replacement field"
        if "\\" in token.string:
            return "has a backslash inside a replacement field"
        if token.type == tokenize.COMMENT:
            return "has a comment inside a replacement field"
        if token.type in (tokenize.NL, tokenize.NEWLINE) and len(quote) == 1:
            return "breaks a line inside a replacement field of a one-line string"
    return None


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

"""The programs on a GPU image run Python 3.10 (codalab/codalab-legacy:gpu310): the static
checker of bundle/rules/python_version.py on bad and good sources, and as a bundle rule."""
import io
import shutil
import zipfile
from pathlib import Path

import pytest
import yaml

import bundle.rules.python_version  # noqa: F401 - registers the rule before the builds below
from bundle.build import build_bundle
from bundle.rules import check_bundle
from bundle.rules.codalab_yaml import program_members
from bundle.rules.framework import Bundle
from bundle.rules.python_version import image_packages, source_findings, stdlib_modules
from bundle.spec import load_spec

REPO = Path(__file__).resolve().parents[1]
LABELS_SPEC = REPO / "kinds" / "label_accuracy" / "default_spec.yaml"
GPU_IMAGE = "codalab/codalab-legacy:gpu310"

# Each is refused on its own; the text is part of what the finding says.
BAD = [
    ("import tomllib", "tomllib is new in Python 3.11"),
    ("import tomllib  # novm", "tomllib is new in Python 3.11"),   # vermin's opt-out is off
    ("import datetime as dt\nnow = dt.datetime.now(dt.UTC)", "datetime.UTC is new in Python 3.11"),
    ("from datetime import UTC", "datetime.UTC is new in Python 3.11"),
    ("from typing import Self", "typing.Self is new in Python 3.11"),
    ("import typing\ndef f() -> typing.Never: ...", "typing.Never is new in Python 3.11"),
    ("from typing import LiteralString, assert_never", "typing.LiteralString is new"),
    ("from typing import NotRequired", "typing.NotRequired is new in Python 3.11"),
    ("import enum\nclass Colour(enum.StrEnum):\n    RED = 'red'",
     "enum.StrEnum is new in Python 3.11"),
    ("import hashlib\nhashlib.file_digest(open('f', 'rb'), 'sha256')",
     "hashlib.file_digest is new in Python 3.11"),
    ("from contextlib import chdir", "contextlib.chdir is new in Python 3.11"),
    ("import asyncio\nasync def f():\n    async with asyncio.TaskGroup() as group:\n        pass",
     "asyncio.TaskGroup is new in Python 3.11"),
    ("raise ExceptionGroup('x', [ValueError()])", "ExceptionGroup is new in Python 3.11"),
    ("try:\n    pass\nexcept* ValueError:\n    pass", "Python 3.10 cannot parse it"),
    ("from itertools import batched", "itertools.batched is new in Python 3.12"),
    ("import math\nx = math.cbrt(8.0)", "math.cbrt is new in Python 3.11"),
    ("import math\nx = math.exp2(3.0)", "math.exp2 is new in Python 3.11"),
    ("from pathlib import Path\nfor top, dirs, files in Path('.').walk():\n    pass",
     "pathlib.Path.walk is new in Python 3.12"),
    ("from pathlib import Path\nroot = Path('.')\nfor top, dirs, files in root.walk():\n    pass",
     "pathlib.Path.walk is new in Python 3.12"),
    ("import os\nos.unshare(os.CLONE_NEWNET)", "os.unshare is new in Python 3.12"),
    ("import os.path\nos.path.splitroot('/a')", "os.path.splitroot is new in Python 3.12"),
    ("def first[T](items: list[T]) -> T:\n    return items[0]", "Python 3.10 cannot parse it"),
    ("type Pair = tuple[int, int]", "Python 3.10 cannot parse it"),
    ("x = {'a': 1}\ny = f\"{x[\"a\"]}\"", "f-strings (PEP 701) is new in Python 3.12"),
    ("y = f'{chr(10).join([\"a\\\\n\"])}'", "f-strings (PEP 701) is new in Python 3.12"),
    ("y = f'{1 # one\n}'", "f-strings (PEP 701) is new in Python 3.12"),
    ("import shutil\nshutil.rmtree('x', onexc=print)",
     "shutil.rmtree(onexc) is new in Python 3.12"),
    ("import tempfile\ntempfile.TemporaryDirectory(delete=False)",
     "tempfile.TemporaryDirectory(delete) is new in Python 3.12"),
    ("import re\nre.compile(r'a++')", "possessive quantifiers"),
    ("import re\nre.search('(?>ab)c', 'abc')", "atomic groups"),
    ("from re import fullmatch as whole\nwhole('a*+', 'aa')", "possessive quantifiers"),
    ("x = y[*z]", "a starred expression in a subscript"),
    ("def f(*args: *Ts):\n    pass", "a starred *args annotation"),
    ("try:\n    pass\nexcept BaseExceptionGroup:\n    pass",
     "BaseExceptionGroup is new in Python 3.11"),
    ("def caught(kind):\n    return issubclass(kind, BaseExceptionGroup)",
     "BaseExceptionGroup is new in Python 3.11"),
    ("import typing\nclass Box[T]:\n    pass", "Python 3.10 cannot parse it"),
    ("try:\n    pass\nexcept ValueError as error:\n    error.add_note('why')",
     ".add_note is new in Python 3.11"),
    ("import sys\ne = sys.exception()", "sys.exception is new in Python 3.11"),
    ("import operator\noperator.call(print)", "operator.call is new in Python 3.11"),
    ("import torchvision", "imports torchvision, which is neither the standard library nor"),
]

GOOD = [
    "import os\nfor top, dirs, files in os.walk('.'):\n    pass",
    "import ast\nnodes = list(ast.walk(ast.parse('1')))",
    "import datetime as dt\nnow = dt.datetime.now(dt.timezone.utc)",
    "x = {'a': 1}\ny = f'{x[\"a\"]}' + f\"\"\"{x[\"a\"]}\"\"\" + f'{x[\"a\"]!r:>{10}}'",
    "import os\nunshare = getattr(os, 'unshare', None)",
    "try:\n    import tomli\nexcept ImportError:\n    tomli = None",
    "class ExceptionGroup(Exception):\n    pass\nraise ExceptionGroup('mine')",
    "class ExceptionGroup(Exception):\n    pass\nkinds = (ExceptionGroup, ValueError)",
    "from runtime.formats import file_digest\nfile_digest('x')",
    "import numpy as np\nimport torch\nimport tensorflow as tf\nimport yaml",
    "import re\nre.compile(r'a+b*(?:c)')",
    "import asyncio\nasync def f():\n    await asyncio.gather()",
    "import distutils.version",
    "match 3:\n    case 3:\n        pass",
    "with (open('a') as a, open('b') as b):\n    pass",
]

ALLOWED = image_packages(GPU_IMAGE) | {"runtime"}


@pytest.mark.parametrize("source, expected", BAD)
def test_a_file_that_python_3_10_cannot_run_is_refused(source, expected):
    findings = source_findings(source, ALLOWED)
    assert any(expected in finding.what for finding in findings), findings
    assert all(finding.line >= 1 for finding in findings)


@pytest.mark.parametrize("source", GOOD)
def test_what_python_3_10_runs_passes(source):
    assert source_findings(source, ALLOWED) == []


def test_findings_name_the_line_and_say_what_to_use_instead():
    [finding] = source_findings("import datetime\n\nstamp = datetime.UTC\n", ALLOWED)
    assert finding.line == 3 and "datetime.timezone.utc" in finding.fix


def test_the_standard_library_is_3_10s():
    modules = stdlib_modules()
    assert {"distutils", "imp", "asyncore", "json", "os"} <= modules
    assert "tomllib" not in modules


def test_an_image_not_known_here_is_trusted_with_numpy_only():
    assert image_packages("myorg/bdl:gpu-cuda12") == frozenset({"numpy"})
    assert {"torch", "tensorflow", "numpy", "yaml"} <= image_packages(GPU_IMAGE)


def gpu_spec(tmp_path: Path, image: str = GPU_IMAGE) -> Path:
    raw = yaml.safe_load(LABELS_SPEC.read_text())
    raw["docker_image"] = image
    shutil.copyfile(LABELS_SPEC.parent / raw["logo"], tmp_path / raw["logo"])
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return tmp_path / "spec.yaml"


def _program_zip_members(path: Path, platform: str) -> list[str]:
    with zipfile.ZipFile(path) as archive:
        opened = Bundle(archive, platform, 60.0)
        if platform == "codalab":
            return [member for _, member in program_members(opened, "ingestion_program")]
        return [task["ingestion_program"] for task in opened.comp["tasks"]]


def with_file_added(path: Path, member: str, name: str, text: str) -> Path:
    """A copy of the bundle whose nested zip ``member`` also holds ``name``."""
    out = path.with_name("tampered-" + path.name)
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == member:
                buffer = io.BytesIO()
                with zipfile.ZipFile(io.BytesIO(data)) as inner, \
                        zipfile.ZipFile(buffer, "w") as rewritten:
                    for entry in inner.infolist():
                        rewritten.writestr(entry, inner.read(entry))
                    rewritten.writestr(name, text)
                data = buffer.getvalue()
            target.writestr(item, data)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("platform", ["codalab", "codabench"])
def test_the_shipped_programs_pass_and_a_3_11_file_fails_the_bundle(platform, tmp_path):
    built = build_bundle(load_spec(gpu_spec(tmp_path)), "evaluation", None, tmp_path / "out",
                         platform=platform)       # the build's own checks ran the rule
    assert check_bundle(built.path, platform) == []
    member = _program_zip_members(built.path, platform)[0]
    bad = with_file_added(built.path, member, "ingest/clock.py",
                          "import datetime\nSTARTED = datetime.datetime.now(datetime.UTC)\n")
    failures = [f for f in check_bundle(bad, platform) if "python-version" in f.rule]
    assert [f.rule for f in failures] == ["python-version" if platform == "codalab"
                                          else "v2-python-version"]
    assert failures[0].message == (f"{member}::ingest/clock.py:2: datetime.UTC is new in Python "
                                   f"3.11 (the image {GPU_IMAGE} runs Python 3.10)")
    assert "datetime.timezone.utc" in failures[0].fix


@pytest.mark.slow
@pytest.mark.parametrize("platform", ["codalab", "codabench"])
def test_the_rule_leaves_other_images_alone(platform, tmp_path):
    built = build_bundle(load_spec(gpu_spec(tmp_path, "codalab/codalab-legacy:py312")),
                         "evaluation", None, tmp_path / "out", platform=platform)
    member = _program_zip_members(built.path, platform)[0]
    bad = with_file_added(built.path, member, "ingest/clock.py",
                          "import datetime\nSTARTED = datetime.datetime.now(datetime.UTC)\n")
    assert [f for f in check_bundle(bad, platform) if "python-version" in f.rule] == []

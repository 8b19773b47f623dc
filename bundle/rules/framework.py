"""The rule framework: failures, the opened bundle, the registry and ``check_bundle``.

A rule is a generator of problems registered with ``@rule(name, description, fix, platforms)``;
a problem is a message (the rule's fix applies) or a ``(message, fix)`` pair. The registry
turns them into ``CheckFailure``s and never lets a rule raise: ``CannotCheck`` (an input the
rule needs is missing or unreadable) becomes a "not checked" failure of that rule, any other
exception a "crashed" one, so one broken rule never hides the others.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import json
import zipfile
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Callable, Iterator

import yaml

from ..platforms import CODABENCH, CODALAB, PLATFORMS, platform as platform_named
from ..zips import nested_zip

# every platform: a rule's filter names those it runs on
BOTH = tuple(PLATFORMS)
REZIP = "zip the folder's contents with Python zipfile, skipping junk (G1, G2)"


@dataclass(frozen=True)
class CheckFailure:
    rule: str        # short stable name, a key of RULES
    message: str     # what is wrong, naming the member/key/value
    fix: str         # how to fix it


class CannotCheck(Exception):
    """A rule's input is missing or unreadable: reported as a failure of that rule."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that records duplicate mapping keys (both sites silently keep the last)."""

    def __init__(self, stream):
        super().__init__(stream)
        self.duplicates: list[tuple[object, int]] = []

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):             # before merge keys are flattened
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, (str, int, float, dt.date)):
                    if key in seen:
                        self.duplicates.append((key, key_node.start_mark.line + 1))
                    seen.add(key)
        return super().construct_mapping(node, deep)


class Bundle:
    """What the rules read: member names, the YAML as the platform picks it, nested zips;
    ``platform`` is the site's object (``bundle/platforms/``)."""

    def __init__(self, archive: zipfile.ZipFile, platform: str, margin: float,
                 datasets: dict[str, Path | bytes] | None = None):
        self.archive, self.platform, self.margin = archive, platform_named(platform), margin
        self.names = archive.namelist()
        # Local copies of the data the yaml names by key (uploaded apart), by that key: files
        # (or bytes), opened only when a rule reads them
        self.datasets = dict(datasets or {})
        self._opened = contextlib.ExitStack()
        self.yaml_name = self.platform.pick_yaml(self.names)
        self.spec, self.yaml_error, self.duplicates = None, None, []
        self._nested: dict[str, zipfile.ZipFile] = {}
        if self.yaml_name is None:
            self.yaml_error = self.platform.missing_yaml
            return
        try:
            loader = _Loader(archive.read(self.yaml_name))
            try:
                self.spec, self.duplicates = loader.get_single_data(), loader.duplicates
            finally:
                loader.dispose()
        except Exception as error:      # noqa: BLE001 - any read or parse error is a finding
            self.yaml_error = f"{type(error).__name__}: {error}"

    @property
    def comp(self) -> dict:
        if not isinstance(self.spec, dict):
            raise CannotCheck(f"competition.yaml did not parse into a mapping "
                              f"(see {self.platform.yaml_rule})")
        return self.spec

    def read(self, member: str) -> bytes:
        return self.archive.read(member)

    def nested(self, member: str) -> zipfile.ZipFile:
        """The member as an open zip, cached; CannotCheck when it is absent or not a zip."""
        if member not in self._nested:
            if member not in self.names and member not in self.datasets:
                raise CannotCheck(f"member {member!r} is not in the bundle "
                                  f"(see {self.platform.files_rule})")
            try:
                self._nested[member] = self._opened.enter_context(self._open_nested(member))
            except zipfile.BadZipFile as error:
                raise CannotCheck(f"member {member!r} is not a valid zip ({error})") from None
        return self._nested[member]

    def read_json(self, member: str, name: str) -> dict:
        archive = self.nested(member)
        if name not in archive.namelist():
            raise CannotCheck(f"{member} has no {name} at its root")
        try:
            config = json.loads(archive.read(name))
        except ValueError as error:
            raise CannotCheck(f"{member}::{name} is not valid JSON ({error})") from None
        if not isinstance(config, dict):
            raise CannotCheck(f"{member}::{name} is not a JSON object")
        return config

    def _open_nested(self, member: str):
        local = self.datasets.get(member)
        if isinstance(local, bytes):
            return zipfile.ZipFile(BytesIO(local))
        if local is not None:
            return zipfile.ZipFile(local)
        return nested_zip(self.archive, member)

    def close(self) -> None:
        self._opened.close()


def is_int(value) -> bool:
    """YAML's true is a Python int; neither site takes it for a number."""
    return isinstance(value, int) and not isinstance(value, bool)


Problem = str | tuple[str, str]          # a message (the rule's default fix) or (message, fix)
Find = Callable[[Bundle], Iterator[Problem]]


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    fix: str
    platforms: tuple[str, ...]
    find: Find

    def run(self, bundle: Bundle) -> list[CheckFailure]:
        failures = []
        try:
            for problem in self.find(bundle):
                message, how = (problem, self.fix) if isinstance(problem, str) else problem
                failures.append(CheckFailure(self.name, message, how))
        except CannotCheck as error:
            failures.append(CheckFailure(self.name, f"not checked: {error}",
                                         "fix the failure it names, then check again"))
        except Exception as error:  # noqa: BLE001 - a crash must not hide the other rules
            failures.append(CheckFailure(self.name, f"the check crashed: "
                                         f"{type(error).__name__}: {error}", self.fix))
        return failures


RULES: dict[str, Rule] = {}      # every rule of every platform, in registration order


def rule(name: str, description: str, fix: str, platforms: str | tuple[str, ...] = CODALAB):
    """Register a generator of problems; stack two to give one check a name per platform."""
    platforms = (platforms,) if isinstance(platforms, str) else tuple(platforms)
    unknown = set(platforms) - set(PLATFORMS)
    if unknown or not platforms:
        raise ValueError(f"rule {name!r}: platforms {platforms}, expected some of {BOTH}")

    def register(find: Find) -> Find:
        if name in RULES:
            raise ValueError(f"rule {name!r} is registered twice")
        RULES[name] = Rule(name, description, fix, platforms, find)
        return find
    return register


def rules_for(platform: str) -> dict[str, Rule]:
    """The registered rules a platform runs, by name, in registration order."""
    if platform not in PLATFORMS:
        raise ValueError(f"unknown platform {platform!r}, expected one of {BOTH}")
    return {name: r for name, r in RULES.items() if platform in r.platforms}


def check_bundle(path: Path, platform: str, scoring_margin_seconds: float = 60.0,
                 datasets: dict[str, Path | bytes] | None = None) -> list[CheckFailure]:
    """Every failure of the platform's rules on the bundle zip at ``path``; empty means valid.
    ``datasets``: local copies of data the yaml names by key, checked as if they were members."""
    rules = rules_for(platform)
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as error:
        owner = platform_named(platform).zip_rule
        return [CheckFailure(owner, f"{path}: not a readable zip ({error})", REZIP)]
    with archive:
        bundle = Bundle(archive, platform, scoring_margin_seconds, datasets)
        try:
            return [failure for r in rules.values() for failure in r.run(bundle)]
        finally:
            bundle.close()

"""The key that signs the ingestion record (``runtime/formats/run_record.py``).

A code phase's scorer accepts only a record its ingestion signed, so a zip of prediction files
made without running the code cannot pass for a run. The key must therefore be unknown to
participants, even to one who rebuilds the embedded default competition from this repository:
it is an HMAC of the phase under a secret made once, at random, on the organizer's machine
(``BUNDLE_RECORD_SECRET`` names another file). The same secret gives the same key, so a
rebuild stays byte-identical; another machine's build signs with another key.

Where each platform lets the ingestion read the key, and no container of the participant's can,
is each platform object's ``record_key_in_program`` (``bundle/platforms/``).
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from runtime.formats import RECORD_KEY_NAME
from runtime.formats.run_record import importer_key

SECRET_VARIABLE = "BUNDLE_RECORD_SECRET"
SECRET_BYTES = 32


class SecretError(ValueError):
    """The secret file exists but is not one this tool wrote."""


def secret_path() -> Path:
    if os.environ.get(SECRET_VARIABLE):
        return Path(os.environ[SECRET_VARIABLE])
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return config / "codalab-bundle" / "record-secret"


def _read_secret(path: Path) -> bytes:
    text = path.read_text(encoding="ascii", errors="replace").strip()
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        secret = b""
    if len(secret) != SECRET_BYTES:
        raise SecretError(f"{path}: expected {2 * SECRET_BYTES} hexadecimal digits (the secret "
                          "that signs ingestion records); remove the file to make a new one, "
                          "then rebuild and upload every bundle again")
    return secret


def _create_secret(path: Path) -> None:
    """Written under a temporary name and linked into place, so two builds at once agree on
    one secret and none ever reads a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as stream:
        stream.write(secrets.token_hex(SECRET_BYTES) + "\n")
    try:
        os.link(temporary, path)
    except FileExistsError:
        pass                    # another build made it first: use theirs
    finally:
        os.unlink(temporary)


def build_secret() -> bytes:
    path = secret_path()
    if not path.exists():
        _create_secret(path)
    return _read_secret(path)


def record_key(plan) -> str:
    """HMAC-SHA256 of the phase (kind, name, tasks) under the build secret, in hex."""
    phase = "\0".join(("ingestion-record-key/2", plan.kind, plan.name,
                       *sorted(task.name for task in plan.tasks)))
    return hmac.new(build_secret(), phase.encode("utf-8"), hashlib.sha256).hexdigest()


def write_record_key(folder: Path, plan, for_importer: bool = False) -> Path:
    """``for_importer``: the key derived for Codabench's importer of v1.5 bundles."""
    key = record_key(plan)
    if for_importer:
        key = importer_key(bytes.fromhex(key)).hex()
    path = Path(folder) / RECORD_KEY_NAME
    path.write_text(key + "\n", encoding="ascii")
    return path

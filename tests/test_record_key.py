"""The key that signs the ingestion record comes from a secret made on the organizer's machine
(issue 24, item 5): nobody can rebuild it from the repository, and a rebuild with the same
secret gives the same key."""
import os

import pytest

from bundle.record_key import SECRET_VARIABLE, SecretError, record_key
from plans import embedded_phase


@pytest.fixture
def secret_file(tmp_path, monkeypatch):
    path = tmp_path / "config" / "record-secret"
    monkeypatch.setenv(SECRET_VARIABLE, str(path))
    return path


def test_a_secret_is_made_once_private_and_reused(secret_file):
    plan = embedded_phase("evaluation", code_submission=True)
    first = record_key(plan)
    assert secret_file.is_file() and secret_file.stat().st_mode & 0o077 == 0
    assert record_key(plan) == first
    assert os.listdir(secret_file.parent) == [secret_file.name]     # no temporary left


def test_another_secret_or_another_phase_gives_another_key(secret_file, monkeypatch, tmp_path):
    evaluation = embedded_phase("evaluation", code_submission=True)
    development = embedded_phase("development", code_submission=True)
    mine = record_key(evaluation)
    assert record_key(development) != mine
    monkeypatch.setenv(SECRET_VARIABLE, str(tmp_path / "someone-else"))
    assert record_key(evaluation) != mine


def test_a_damaged_secret_is_named_and_not_replaced(secret_file):
    secret_file.parent.mkdir(parents=True)
    secret_file.write_text("not hex\n")
    with pytest.raises(SecretError, match=str(secret_file)):
        record_key(embedded_phase("evaluation", code_submission=True))
    assert secret_file.read_text() == "not hex\n"

"""Issue 28 #6: the signing keys are not in the store: a key file made on first start (0600, in the data
directory) or GRADER_SECRET_KEY; a scan of the SQLite file finds none of them."""

from __future__ import annotations

import os
import stat

import pytest

from harness.core.errors import UsageError
from harness.service.keys import SECRET_KEY_ENV, server_key
from harness.service.settings import Settings


def test_embedded_mode_makes_a_0600_key_file_once_and_keeps_it_out_of_the_database(tmp_path, monkeypatch):
    monkeypatch.delenv(SECRET_KEY_ENV, raising=False)
    monkeypatch.delenv("GRADER_KEY_FILE", raising=False)
    from harness.service.server import build

    settings = Settings.resolve(tmp_path / "data")
    app, store = build(settings)          # the app (session key) and the webhook sender (webhook key)
    store.dispose()
    key_file = settings.data_dir / "secret.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    master = key_file.read_text().strip()
    keys = [master, server_key(settings.data_dir, "webhook"), server_key(settings.data_dir, "session")]
    assert app.state.secret == keys[2] and len(set(keys)) == 3
    assert server_key(settings.data_dir, "webhook") == keys[1]         # the file is reused, not remade
    blob = b"".join(p.read_bytes() for p in settings.data_dir.glob("grader.db*"))
    assert blob and all(k.encode() not in blob for k in keys)


def test_the_environment_key_wins_and_a_weak_or_open_key_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(SECRET_KEY_ENV, "k" * 40)
    a = server_key(tmp_path, "webhook")
    assert not (tmp_path / "secret.key").exists()
    monkeypatch.setenv(SECRET_KEY_ENV, "short")
    with pytest.raises(UsageError):
        server_key(tmp_path, "webhook")
    monkeypatch.delenv(SECRET_KEY_ENV)
    f = tmp_path / "shared.key"
    f.write_text("k" * 40 + "\n")
    os.chmod(f, 0o644)
    monkeypatch.setenv("GRADER_KEY_FILE", str(f))
    with pytest.raises(UsageError, match="readable by others"):
        server_key(tmp_path, "webhook")
    os.chmod(f, 0o600)
    assert server_key(tmp_path, "webhook") == a       # the same master key, from a file

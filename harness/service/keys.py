"""The server's signing keys (webhook HMAC, session/CSRF), never in the store: a master key from the
environment (``GRADER_SECRET_KEY``), or a key file (``GRADER_KEY_FILE``; default ``<data-dir>/secret.key``,
created on first start with mode 0600). Each purpose's key is derived from the master key, so one secret serves
every purpose and a leaked derived key says nothing of the others. Several API processes on one shared store
must be given the same master key (the environment or one key file)."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from harness.service.grading import UsageError

SECRET_KEY_ENV = "GRADER_SECRET_KEY"
KEY_FILE_ENV = "GRADER_KEY_FILE"
KEY_FILE_NAME = "secret.key"
MIN_LENGTH = 32


def key_file(data_dir: Path) -> Path:
    return Path(os.environ.get(KEY_FILE_ENV) or Path(data_dir) / KEY_FILE_NAME).expanduser()


def _read_or_create(path: Path) -> str:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
    st = path.stat()
    if st.st_mode & 0o077:
        raise UsageError(f"{path} is readable by others (mode {st.st_mode & 0o777:o}); chmod 600 it")
    return path.read_text(encoding="utf-8").strip()


def master_key(data_dir: Path) -> str:
    key = os.environ.get(SECRET_KEY_ENV)
    if not key:
        path = key_file(data_dir)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = _read_or_create(path)
    if len(key) < MIN_LENGTH:
        raise UsageError(f"the secret key is {len(key)} characters; at least {MIN_LENGTH} are needed "
                        "(generate one: python -c 'import secrets; print(secrets.token_hex(32))')")
    return key


def server_key(data_dir: Path, purpose: str) -> str:
    """The key for one purpose ("webhook", "session"): hex HMAC-SHA256(master, purpose)."""
    return hmac.new(master_key(data_dir).encode(), b"attention-grader/" + purpose.encode(), hashlib.sha256).hexdigest()

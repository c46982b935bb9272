"""The worker's own scripts, compiled once and kept: a local worker starts without compiling them (issue 27).

A local worker runs from copies of worker.py and wire.py (and the zygote's scripts) on a fresh tmpfs, with ``-B``:
with no bytecode beside them, every worker compiled both from source (~7 ms of a cold worker's start, on the path a
one-shot grade waits for). The host now writes beside each copy the file Python's import would have cached,
``__pycache__/NAME.TAG.pyc``, as a *checked hash-based* .pyc (PEP 552): it is used only while the source's hash
matches it, else the source is compiled as before. ``import wire`` checks it itself; mount_setup.py checks the
worker's (the script it runs in place) the same way.

The compiled bytes are kept in the user's cache folder (beside the oracle's answers), keyed by the interpreter's
cache tag and the source's SHA-256: the first start after an install compiles them, later ones read ~60 KB. When
that folder cannot be written, they are kept in this process only.
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import sys
import threading
from pathlib import Path

from harness.core.answers import answers_dir

HASH_CHECKED = (0b11).to_bytes(4, "little")  # PEP 552 flags: hash-based, check the source
KEEP = 24  # files kept in the cache folder: the scripts of a few versions (~60 KB each)
_memo: dict[tuple[str, str], bytes] = {}
_lock = threading.Lock()


def cache_dir() -> Path:
    return answers_dir().parent / "bytecode"


def pyc_name(name: str) -> str:
    """``wire.py`` -> ``wire.cpython-311.pyc``: where import looks for it, in ``__pycache__`` beside the source."""
    return f"{name.rsplit('.', 1)[0]}.{sys.implementation.cache_tag}.pyc"


def valid(data: bytes, source: bytes) -> bool:
    """``data`` is a checked hash-based .pyc of ``source`` for this interpreter, and its code loads."""
    if data[:4] != importlib.util.MAGIC_NUMBER or data[4:8] != HASH_CHECKED:
        return False
    if data[8:16] != importlib.util.source_hash(source):
        return False
    try:
        marshal.loads(memoryview(data)[16:])
    except (ValueError, EOFError, TypeError):
        return False
    return True


def compiled(name: str, source: bytes) -> bytes:
    """The checked hash-based .pyc of ``source`` (a script called ``name``): from this process's memo, the cache
    folder, or compiled now (and kept in both)."""
    key = (name, hashlib.sha256(source).hexdigest())
    with _lock:
        data = _memo.get(key)
        if data is not None:
            return data
        path = cache_dir() / f"{name}-{sys.implementation.cache_tag}-{key[1][:32]}.pyc"
        try:
            data = path.read_bytes()
        except OSError:
            data = None
        if data is None or not valid(data, source):
            code = compile(source, name, "exec", dont_inherit=True)
            data = (importlib.util.MAGIC_NUMBER + HASH_CHECKED + importlib.util.source_hash(source)
                    + marshal.dumps(code))
            _keep(path, data)
        _memo[key] = data
        return data


def _keep(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp.write_bytes(data)
        os.replace(tmp, path)  # whole or absent, whoever reads it meanwhile
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass
        return
    _prune(path.parent)


def _prune(folder: Path) -> None:
    """Keep the KEEP most recently written files: every edit of a script (or an upgrade) adds one, never read again
    once its source has changed. Run only when a file was added (a first start after a change)."""
    try:
        kept = sorted(folder.glob("*.pyc"), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return
    for old in kept[KEEP:]:
        try:
            old.unlink()
        except OSError:
            pass


def copy_scripts(src: Path, names, dst: str) -> None:
    """Copy the scripts ``names`` from ``src`` into the folder ``dst``, each with its bytecode in
    ``dst/__pycache__``."""
    cache = os.path.join(dst, "__pycache__")
    os.mkdir(cache)
    for name in names:
        source = (src / name).read_bytes()
        with open(os.path.join(dst, name), "wb") as f:
            f.write(source)
        with open(os.path.join(cache, pyc_name(name)), "wb") as f:
            f.write(compiled(name, source))

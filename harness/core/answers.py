"""The oracle's answers, kept: a float64 reference output depends only on the case it is computed for, never on
the candidate, so the answers for the cases every grade repeats (the shape sweep of a seed, the large cases) are
computed once and then read back.

Two levels, both keyed by a digest of the case's own arrays and values (what the oracle sees, after any fitting
to the candidate's module) plus the oracle's code version (the sources of the modules that compute it, and the
NumPy version): the same key can only ever name the same answer.

- in this process, a bounded memo (:data:`MEMO_ENTRIES`): what a long-lived grading process uses where its grades
  repeat a seed (`grade batch`). `grade serve` draws a fresh seed for every submission and keeps none
  (:class:`use_memo`): it computes each answer without hashing the case;
- on disk, :func:`answers_dir` (``$GRADER_CACHE_DIR/answers``, else ``~/.cache/attention-grader/answers``),
  for the one-shot CLI. Only when :func:`use_disk` allows it: the grading engine allows it only while the
  worker cannot see the host's files (the Docker sandbox, or the local one with its mount namespace, which
  also hides this folder by name: harness/sandbox/local.py). An answer file is the hidden oracle's output for
  hidden inputs, and a worker that could write there could plant the answer its own wrong output needs.

A read that fails (a missing, partial or foreign file) is a miss: the answer is computed again. At most
:data:`DISK_ENTRIES` files are kept in all (old code versions' and other seeds' included); past that, the least
recently used half is removed before the next write (each file is small: the sweep's wire budget bounds them).
"""

from __future__ import annotations

import collections
import hashlib
import os
import threading
from pathlib import Path
from typing import Callable

MEMO_ENTRIES = 512
DISK_ENTRIES = 4000
CACHE_ENV = "GRADER_CACHE_DIR"

_memo: collections.OrderedDict[str, object] = collections.OrderedDict()
_lock = threading.Lock()
_state = threading.local()
_counts: dict[str, int] = {}


def answers_dir() -> Path:
    base = os.environ.get(CACHE_ENV)
    root = Path(base) if base else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "attention-grader"
    return root / "answers"


class _ThreadFlag:
    """A per-thread setting for the block of a ``with``, restored after it."""

    name, default = "", False

    def __init__(self, allowed: bool):
        self.allowed = allowed

    def __enter__(self):
        self.saved = getattr(_state, self.name, self.default)
        setattr(_state, self.name, self.allowed)
        return self

    def __exit__(self, *exc):
        setattr(_state, self.name, self.saved)


class use_disk(_ThreadFlag):
    """``with use_disk(True): ...`` — answers computed in this thread within the block may be kept on and read
    from disk (the grading engine's choice, per grade: see the module's docstring)."""

    name, default = "disk", False


class use_memo(_ThreadFlag):
    """``with use_memo(False): ...`` — answers computed in this thread within the block are neither looked up nor
    kept at all (:func:`keeping` says so to the callers, which then compute without a key): the service's choice,
    whose fresh seed per submission means no answer of a grade is ever asked for again."""

    name, default = "memo", True


def keeping() -> bool:
    """Whether answers are kept in this thread now (see :class:`use_memo`): when not, a caller computes its answer
    directly, without the digest of the case that would only key it."""
    return getattr(_state, "memo", True)


def digest(version: str, arrays: dict, values: tuple = ()) -> str:
    """A key for the answer to a case: its arrays (name, dtype, shape and bytes, in name order), its other values
    and the version of the code that answers. SHA-256, not BLAKE2b: OpenSSL computes it with the CPU's SHA
    instructions (x86's SHA-NI, ARMv8's), ~1.7 GB/s on this machine against BLAKE2b's ~0.9, and the large cases'
    arrays are hundreds of kilobytes. Keys are its first 40 hex digits."""
    h = hashlib.sha256()
    h.update(version.encode())
    h.update(repr(values).encode())
    for name in sorted(arrays):
        a = arrays[name]
        if a is None:
            h.update(f"|{name}:None".encode())
            continue
        import numpy as np

        a = np.ascontiguousarray(a)
        h.update(f"|{name}:{a.dtype.str}:{a.shape}".encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()[:40]


def code_version(*files: str | os.PathLike) -> str:
    """The version of an oracle: its modules' sources and the NumPy version (float64 results may move with it)."""
    import numpy as np

    h = hashlib.blake2b(digest_size=8)
    h.update(np.__version__.encode())
    for f in files:
        h.update(Path(f).read_bytes())
    return h.hexdigest()


def remembered(key: str, compute: Callable[[], object]):
    """The answer for ``key``: from the memo, else from disk (where allowed), else ``compute()`` — kept in the memo
    and (where allowed) on disk. Answers are NumPy arrays; the caller must not modify the one it gets."""
    with _lock:
        if key in _memo:
            _memo.move_to_end(key)
            _count("memo")
            return _memo[key]
    disk = getattr(_state, "disk", False)
    value = _read(key) if disk else None
    if value is None:
        value = compute()
        _count("computed")
        if disk:
            _write(key, value)
    else:
        _count("disk")
    try:
        value.setflags(write=False)
    except (AttributeError, ValueError):
        pass
    with _lock:
        _memo[key] = value
        while len(_memo) > MEMO_ENTRIES:
            _memo.popitem(last=False)
    return value


def remembered_parts(key: str, n: int, compute: Callable[[], tuple]) -> tuple:
    """:func:`remembered` for an answer of ``n`` arrays (kept one file each); one part missing computes them all."""
    done: list = []

    def part(i: int):
        if not done:
            done.append(tuple(compute()))
        return done[0][i]

    return tuple(remembered(f"{key}-{i}", lambda i=i: part(i)) for i in range(n))


def counts() -> dict[str, int]:
    """How answers were found so far in this process: ``memo``, ``disk``, ``computed`` (for benchmarks/tests)."""
    return dict(_counts)


def forget() -> None:
    """Empty the in-process memo (tests)."""
    with _lock:
        _memo.clear()
        _counts.clear()


def _count(what: str) -> None:
    _counts[what] = _counts.get(what, 0) + 1


def _path(key: str) -> Path:
    return answers_dir() / key[:2] / f"{key}.npy"


def _read(key: str):
    import numpy as np

    try:
        with open(_path(key), "rb") as f:
            value = np.load(f, allow_pickle=False)
            os.utime(f.fileno())  # recently used: the last to be pruned (_prune)
            return value
    except (OSError, ValueError, EOFError):
        return None


_written = {"checked": False, "full": False}


def _write(key: str, value) -> None:
    import numpy as np

    path = _path(key)
    try:
        if not _written["checked"]:
            _written["checked"] = True
            _written["full"] = _prune(answers_dir())
        if _written["full"]:
            return
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        with open(tmp, "wb") as f:
            np.save(f, np.asarray(value), allow_pickle=False)
        os.replace(tmp, path)
    except OSError:
        return


def _prune(root: Path) -> bool:
    """Once per process, before its first write: past :data:`DISK_ENTRIES` files, the least recently used (written or read) are
    removed until half that many are left (old code versions' answers, other seeds'), so that the answers of the
    code and seeds in use are written again. True when the folder could not be brought under the cap."""
    if not root.is_dir():
        return False
    files = [(f.stat().st_mtime, f.path) for d in os.scandir(root) if d.is_dir(follow_symlinks=False)
             for f in os.scandir(d.path) if f.is_file(follow_symlinks=False)]
    if len(files) < DISK_ENTRIES:
        return False
    files.sort()
    left = len(files)
    for _, path in files[:len(files) - DISK_ENTRIES // 2]:
        try:
            os.unlink(path)
            left -= 1
        except FileNotFoundError:  # another process pruned it first
            left -= 1
        except OSError:
            continue
    return left >= DISK_ENTRIES

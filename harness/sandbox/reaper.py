"""What a used worker leaves behind, waited for and removed on one background thread: its exit, its pipes, its
cgroup, its folder. A report is ready once the worker has been sent its kill; it does not wait for the kernel to
tear the process down (a few ms: its address space, its namespaces). :func:`drain` waits for all of it, and runs
at exit, so a one-shot grade still leaves nothing behind.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from typing import Callable

_executor = None   # concurrent.futures.ThreadPoolExecutor, started by the first later()
_pending: set = set()
_lock = threading.Lock()


def later(job: Callable[[], object]) -> None:
    """Run ``job`` on the reaper's thread; here and now when the interpreter is shutting down (the thread is
    gone then). A job may hand on more work with later() itself."""
    import concurrent.futures  # here, not at the top: a one-shot grade starts its worker before it needs this

    global _executor
    with _lock:
        try:
            if _executor is None:
                _executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="reaper")
                atexit.register(drain)
            future = _executor.submit(_run, job)
        except RuntimeError:   # cannot schedule new futures after interpreter shutdown
            future = None
        else:
            _pending.add(future)
    if future is None:
        job()
        return
    future.add_done_callback(_done)


def _run(job: Callable[[], object]) -> None:
    """A job whose cleanup fails is logged (best effort, as it always was: a leftover cgroup or folder is swept
    by the next start), never lost without a word."""
    try:
        job()
    except Exception as exc:
        import logging

        logging.getLogger("grader.reaper").warning("cleaning up after a used worker failed: %s: %s",
                                                   type(exc).__name__, exc)


def _done(future) -> None:
    with _lock:
        _pending.discard(future)


def drain(timeout: float = 10.0) -> bool:
    """Wait until every job handed to :func:`later` is done, those they handed on included; whether all are
    (what is left after ``timeout``: a cgroup the next start's sweep removes)."""
    import concurrent.futures

    deadline = time.monotonic() + timeout
    while True:
        with _lock:
            pending = [f for f in _pending if not f.done()]
        if not pending:
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        concurrent.futures.wait(pending, remaining)


def _forget() -> None:  # a forked child has no reaper thread: it starts its own if it needs one
    global _executor, _pending, _lock
    _executor, _pending, _lock = None, set(), threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)

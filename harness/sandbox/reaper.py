"""What a used worker leaves behind, waited for and removed on one background thread: its exit, its pipes, its
cgroup, its folder. A report is ready once the worker has been sent its kill; it does not wait for the kernel to
tear the process down (a few ms: its address space, its namespaces). :func:`drain` waits for all of it, and runs
at exit (for at most :data:`EXIT_WAIT_S`), so a one-shot grade still leaves nothing behind.

The thread is a daemon: the interpreter's exit does not join it without a bound (a job stuck on a pipe would hold
the process forever, and a process that is closing only takes note of SIGTERM). What is still undone after the
wait at exit is a leftover the next start's sweep removes.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Callable

EXIT_WAIT_S = 10.0

_cond = threading.Condition()
_jobs: list = []          # waiting for the thread, in order
_pending = 0              # handed to later() and not finished
_thread: threading.Thread | None = None
_closing = False          # the wait at exit is over: later() runs its job in the caller


def later(job: Callable[[], object]) -> None:
    """Run ``job`` on the reaper's thread (in order); here and now once the process is past its wait at exit. A
    job may hand on more work with later() itself."""
    global _thread, _pending
    with _cond:
        inline = _closing
        if not inline:
            if _thread is None:
                _thread = threading.Thread(target=_loop, daemon=True, name="reaper")
                _thread.start()
                atexit.register(_at_exit)
            _jobs.append(job)
            _pending += 1
            _cond.notify_all()
    if inline:
        _run(job)


def _loop() -> None:
    global _pending
    while True:
        with _cond:
            _cond.wait_for(lambda: _jobs)
            job = _jobs.pop(0)
        try:
            _run(job)
        finally:
            with _cond:
                _pending -= 1
                _cond.notify_all()


def _run(job: Callable[[], object]) -> None:
    """A job whose cleanup fails is logged (best effort, as it always was: a leftover cgroup or folder is swept
    by the next start), never lost without a word."""
    try:
        job()
    except Exception as exc:
        import logging

        logging.getLogger("grader.reaper").warning("cleaning up after a used worker failed: %s: %s",
                                                   type(exc).__name__, exc)


def drain(timeout: float = EXIT_WAIT_S) -> bool:
    """Wait until every job handed to :func:`later` is done, those they handed on included; whether all are
    (what is left after ``timeout``: a cgroup the next start's sweep removes)."""
    with _cond:
        return _cond.wait_for(lambda: _pending == 0, timeout)


def _at_exit() -> None:
    global _closing
    drain(EXIT_WAIT_S)
    with _cond:
        _closing = True


def _forget() -> None:  # a forked child has no reaper thread: it starts its own if it needs one
    global _cond, _jobs, _pending, _thread, _closing
    _cond, _jobs, _pending, _thread, _closing = threading.Condition(), [], 0, None, False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)

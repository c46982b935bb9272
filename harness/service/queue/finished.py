"""Wakes the requests that wait for a submission (``POST /v1/submissions?wait=S``) as soon as this process has
graded it, instead of at their next look at the store.

Only a wake-up: the waiting request still reads the row from the store (the truth) and keeps looking at it on
its own schedule, so a submission graded elsewhere (`grade worker` processes on a broker) is seen as before."""

from __future__ import annotations

import asyncio
import contextlib
import threading


class Finished:
    def __init__(self):
        self._lock = threading.Lock()
        self._waiters: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}

    def notify(self, submission_id: str) -> None:
        """From any thread: the submission's grading attempt ended here (done, failed, or back to queued)."""
        with self._lock:
            waiters = list(self._waiters.get(submission_id, ()))
        for loop, event in waiters:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:   # that request's loop is closed: nobody is waiting any more
                pass

    @contextlib.contextmanager
    def watch(self, submission_id: str):
        """In a coroutine: an :class:`asyncio.Event` set when :meth:`notify` names ``submission_id``."""
        entry = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._waiters.setdefault(submission_id, []).append(entry)
        try:
            yield entry[1]
        finally:
            with self._lock:
                left = [w for w in self._waiters.get(submission_id, ()) if w is not entry]
                if left:
                    self._waiters[submission_id] = left
                else:
                    self._waiters.pop(submission_id, None)

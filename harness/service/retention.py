"""The service purges rounds whose retention period ended, by itself: a daemon thread that runs the purge at
start and then every GRADER_RETENTION_INTERVAL_S seconds (default 3600; 0 turns it off)."""

from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger("grader.retention")


class Retention:
    def __init__(self, store, settings=None):
        self.store = store
        self.interval = float(os.environ.get("GRADER_RETENTION_INTERVAL_S", "3600"))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.interval > 0:
            self._thread = threading.Thread(target=self._run, name="grader-retention", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        from harness.service.store import review

        while not self._stop.is_set():
            try:
                for summary in review.purge_expired(self.store):
                    log.info("retention: purged a round (%s)", summary)
            except Exception:   # the store briefly down: the next run tries again
                log.exception("retention purge failed")
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

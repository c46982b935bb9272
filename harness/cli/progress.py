"""Progress of one grading run, for `grade run`: which test is running and for how long.

The engine reports each test as it starts through ``grade(progress=callback)``
(:class:`harness.grading.progress.SuiteProgress`); :class:`RunProgress` shows it: on a terminal a live status line on stderr
(rewritten in place, erased at the end); otherwise (CI logs, pipes) nothing at all unless a test runs for long,
then one plain line every ``interval`` seconds naming it, so a hang is never silent and a healthy run adds no
lines to a log.
"""

from __future__ import annotations

import os
import threading
import time

INTERVAL_S = 10.0  # plain (non-terminal) output: a line once a test has run this long, then again every interval


class RunProgress:
    """Shows progress events on ``stream``: live on a terminal, sparse periodic lines otherwise."""

    def __init__(self, stream, *, live: bool | None = None, interval: float | None = None, label: str = "grading"):
        self.stream, self.label = stream, label
        self.live = stream.isatty() if live is None else live
        if interval is None:
            try:
                interval = float(os.environ.get("GRADER_PROGRESS_INTERVAL_S", INTERVAL_S))
            except ValueError:
                interval = INTERVAL_S
        self.interval = interval
        self.lock = threading.Lock()
        self.current: tuple[int, int, str] | None = None
        self.t_run = self.t_test = time.monotonic()
        self.next_plain = 0.0
        self.width, self.last = 0, ""
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None

    # the engine's callback
    def __call__(self, index: int, total: int, test_id: str | None) -> None:
        with self.lock:
            self.current = None if test_id is None else (index, total, test_id)
            self.t_test = time.monotonic()
            self.next_plain = self.t_test + self.interval
        if test_id is None:
            self.close()
        elif self.thread is None:
            self.thread = threading.Thread(target=self._tick, name="grade-progress", daemon=True)
            self.thread.start()

    def _tick(self) -> None:
        period = 0.2 if self.live else min(1.0, self.interval / 4)
        while not self.stop_event.wait(period):
            self.render()

    def render(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self.lock:
            if self.current is None:
                return
            index, total, test_id = self.current
            if self.live:
                text = (f"{self.label}: test {index}/{total} {test_id} ({now - self.t_test:.0f} s; "
                        f"{now - self.t_run:.0f} s in all)")[:120]
                if text != self.last:
                    pad = max(0, self.width - len(text))
                    self.width, self.last = len(text), text
                    self._write("\r" + text + " " * pad)
            elif now >= self.next_plain:
                self.next_plain = now + self.interval
                self._write(f"{self.label}: test {index}/{total} {test_id} still running after "
                            f"{now - self.t_test:.0f} s\n")

    def close(self) -> None:
        self.stop_event.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=2)
        with self.lock:
            self.current = None
            if self.live and self.width:
                self._write("\r" + " " * self.width + "\r")
                self.width, self.last = 0, ""

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

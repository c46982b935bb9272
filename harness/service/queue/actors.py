"""The Dramatiq actors — one per queue (interactive, bulk, ci), the same function — and the context they grade
in: the store, the settings, a grading process per worker thread, the busy count and the heartbeat row that the
workers page shows. `grade worker` and the embedded mode of `grade serve` run exactly this code."""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading

from harness.service.queue.broker import PRIORITY, QUEUES, Broker
from harness.service.queue.pool import ProcessRunner, grade_submission

log = logging.getLogger("grader.actors")


def new_worker_id(prefix: str = "") -> str:
    host = socket.gethostname()[:30]
    return f"{prefix}{host}:{os.getpid()}:{secrets.token_hex(3)}"[:64]


class WorkerContext:
    """Everything an actor needs, for one process. ``runner_factory`` makes the grading runner of a thread."""

    def __init__(self, store, settings, broker: Broker, *, owner: str, kind: str, concurrency: int,
                 queues=QUEUES, metrics=None, runner_factory=None, on_graded=None):
        """``on_graded(submission_id)``: called after each grading attempt here ends (queue/finished.py)."""
        self.store, self.settings, self.broker, self.metrics = store, settings, broker, metrics
        self.on_graded = on_graded
        self.owner, self.kind, self.concurrency, self.queues = owner, kind, concurrency, tuple(queues)
        self._runner_factory = runner_factory or (lambda: ProcessRunner(settings.data_dir))
        self._local = threading.local()
        self._runners: list = []
        self._lock = threading.Lock()
        self.busy = 0
        self.graded = 0
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self.last_beat_ok = False

    # -- the actor's body --------------------------------------------------------------------------------
    def runner(self):
        r = getattr(self._local, "runner", None)
        if r is None:
            r = self._runner_factory()
            self._local.runner = r
            with self._lock:
                self._runners.append(r)
        return r

    def _drop_runner(self) -> None:
        r = getattr(self._local, "runner", None)
        if r is not None:
            self._local.runner = None
            try:
                r.close()
            except Exception:  # pragma: no cover
                pass
            with self._lock:
                if r in self._runners:
                    self._runners.remove(r)

    MAX_LEASE_WAITS = 20

    def grade(self, submission_id: str, again=None) -> str | None:
        """Grade it if it is claimable. When another grader holds a live lease on it (a message delivered
        again while its first grader may still be alive — or may have just died), ``again(delay_ms, waits)``
        sends the message once more for when that lease ends: the Redis broker's redelivery then completes by
        itself, without waiting for the reconciler."""
        from dramatiq.middleware import CurrentMessage

        message = CurrentMessage.get_current_message()
        self.broker.release(Broker.key_of(message))
        with self._lock:
            self.busy += 1
        try:
            status = grade_submission(self.store, self.settings, submission_id, self.runner(), owner=self.owner,
                                      metrics=self.metrics)
        except BaseException:
            # a time limit or a store outage interrupted the runner mid-conversation: never reuse it
            self._drop_runner()
            raise
        finally:
            with self._lock:
                self.busy -= 1
        if status is not None and self.on_graded is not None:
            self.on_graded(submission_id)
        if status is not None:
            with self._lock:
                self.graded += 1
        elif again is not None:
            self._wait_for_lease(submission_id, again, (message.options.get("lease_waits", 0) if message else 0))
        return status

    def _wait_for_lease(self, submission_id: str, again, waits: int) -> None:
        from harness.service.store.repository import now

        row = self.store.get(submission_id)
        if row is None or row["status"] != "running" or row["lease_owner"] == self.owner or row["lease_until"] is None:
            return
        if waits >= self.MAX_LEASE_WAITS:
            return      # the reconciler remains the backstop
        left = (row["lease_until"] - now()).total_seconds()
        again(int(max(0.0, left) * 1000) + 500, waits + 1)

    # -- heartbeat ---------------------------------------------------------------------------------------
    def beat(self) -> None:
        from harness.service import grading

        try:
            self.store.worker_heartbeat(self.owner, host=socket.gethostname()[:255], pid=os.getpid(),
                                        kind=self.kind, queues=",".join(self.queues),
                                        concurrency=self.concurrency, busy=self.busy, graded=self.graded,
                                        version=grading.HARNESS_VERSION[:32])
            self.last_beat_ok = True
        except Exception as exc:
            self.last_beat_ok = False
            log.warning("worker heartbeat failed (%s)", type(exc).__name__)

    def start_heartbeat(self) -> None:
        def loop():
            while not self._stop.is_set():
                self.beat()
                self._stop.wait(self.settings.heartbeat_s)

        self._beat = threading.Thread(target=loop, name="grader-heartbeat", daemon=True)
        self._beat.start()

    def heartbeat_alive(self) -> bool:
        return self._beat is not None and self._beat.is_alive()

    def stopping(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=5)
        with self._lock:
            runners, self._runners = list(self._runners), []
        for r in runners:
            try:
                r.close()
            except Exception:  # pragma: no cover
                pass
        try:
            self.store.worker_stopped(self.owner)
        except Exception:
            pass


def declare_actors(broker: Broker, context_of) -> dict:
    """{queue: actor} on ``broker``; ``context_of()`` gives the WorkerContext the actor grades in (None in a
    process that only sends)."""
    import dramatiq

    def make(queue: str):
        def grade(submission_id: str) -> None:
            ctx = context_of()
            if ctx is None:
                raise RuntimeError("no grading context in this process")
            ctx.grade(submission_id, again=lambda delay_ms, waits: actor.send_with_options(
                args=(submission_id,), delay=delay_ms, lease_waits=waits))

        grade.__name__ = f"grade_{queue}"
        actor = dramatiq.actor(grade, broker=broker.dramatiq, actor_name=f"grade_{queue}", queue_name=queue,
                               priority=PRIORITY[queue])
        return actor

    return {q: make(q) for q in QUEUES}

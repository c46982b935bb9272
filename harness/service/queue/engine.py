"""The grading engine `grade serve` holds (the :class:`~harness.service.queue.pool.GradingQueue` the API
calls), and the reconciler.

* **The outbox.** The API commits a submission first and enqueues it second (:meth:`QueueEngine.enqueue`,
  best effort): a broker outage delays a submission, never loses it, because the reconciler sends every queued
  row the broker was never given (``enqueued_at`` NULL) or no longer holds (a Redis restart lost it).
* **Leases.** A running row's lease is renewed by its grader; the reconciler puts rows whose lease expired (a
  worker killed mid-grade, a host that vanished) back to queued and sends them again. A redelivered message
  for a row that is already done does nothing: grading is idempotent by id.
* **Two modes, one code path.** With ``--broker URL`` the actors run in `grade worker` processes and this
  process only sends and reconciles; without, the same actors run here on Dramatiq's in-process broker with
  ``settings.workers`` threads (the embedded mode: no Redis needed).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import threading
import time

from harness.service import grading
from harness.service.queue.actors import WorkerContext, declare_actors
from harness.service.queue.broker import QUEUES, Broker
from harness.service.queue.finished import Finished

log = logging.getLogger("grader.engine")


def reconcile(store, broker: Broker, actors: dict, settings, *, send=None) -> dict:
    """One pass: expired leases -> queued; queued rows the broker was never given or no longer holds -> sent.
    Returns counts {expired, sent, lost}. Raises when the store is unreachable (the caller retries)."""
    from harness.service.store.repository import now

    send = send or (lambda sub_id, queue: _send(store, broker, actors, sub_id, queue))
    expired = store.recover(all_running=False)
    sent = lost = 0
    for r in store.outbox(grace_s=settings.outbox_grace_s):
        if r["enqueued_at"] is not None:
            try:
                held = broker.holds(r["queue"], r["message_id"])
            except Exception as exc:
                log.warning("reconcile: the broker is unreachable (%s)", type(exc).__name__)
                break
            if held:
                continue
            if held is None:
                if (now() - r["enqueued_at"]).total_seconds() < settings.reenqueue_after_s:
                    continue
            else:
                again = store.get(r["id"])    # it may have been claimed meanwhile (its message acked)
                if again is None or again["status"] != "queued" or again["message_id"] != r["message_id"]:
                    continue
                lost += 1
        try:
            send(r["id"], r["queue"])
        except Exception as exc:
            log.warning("reconcile: could not enqueue %s (%s); next pass", r["id"], type(exc).__name__)
            break
        sent += 1
    if lost or expired:
        store.bump("redeliveries", lost + len(expired))
    if expired or sent:
        log.info("reconcile: %d expired leases re-queued, %d messages sent (%d lost by the broker)",
                 len(expired), sent, lost)
    return {"expired": len(expired), "sent": sent, "lost": lost}


def _send(store, broker: Broker, actors: dict, sub_id: str, queue: str) -> str:
    key = broker.send(actors.get(queue) or actors["interactive"], sub_id)
    try:
        store.mark_enqueued(sub_id, key)
    except Exception as exc:   # the message is out; at worst the reconciler sends a harmless duplicate
        log.warning("could not record the message of %s (%s)", sub_id, type(exc).__name__)
    return key


class QueueEngine:
    """What `grade serve` runs: sends, reconciles, and in embedded mode (no broker URL) grades in-process."""

    def __init__(self, store, settings, metrics=None, *, embedded: bool = True, runner_factory=None):
        self.store, self.settings, self.metrics = store, settings, metrics
        self.embedded = embedded
        # stable across restarts of the server on this machine and data dir (which it holds locked): what a
        # previous life left running can be taken back at once, without waiting for its lease to expire
        where = hashlib.sha256(f"{os.uname().nodename}:{settings.data_dir}".encode()).hexdigest()[:12]
        self.owner = f"{os.uname().nodename[:40]}:{where}"
        self.tag = where    # short: message keys must fit the store's column
        self.broker = Broker(settings.broker_url, settings, tag=self.tag)
        self.in_process = self.broker.kind == "stub"
        self.context: WorkerContext | None = None
        self.finished = Finished()    # ?wait requests woken when this process has graded their submission
        if self.in_process:
            self.context = WorkerContext(store, settings, self.broker, owner=self.owner, kind="embedded",
                                         concurrency=max(1, settings.workers), metrics=metrics,
                                         runner_factory=runner_factory, on_graded=self.finished.notify)
        self.actors = declare_actors(self.broker, lambda: self.context)
        self.worker = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started = False
        self.recovered: list[str] = []
        self.last_reconcile: float | None = None

    # -- GradingQueue --------------------------------------------------------------------------------------
    def enqueue(self, submission_id: str, queue: str = "interactive") -> None:
        """Best effort, after the row is committed: a failure leaves it to the reconciler."""
        try:
            _send(self.store, self.broker, self.actors, submission_id, queue if queue in QUEUES else "interactive")
        except Exception as exc:
            log.warning("could not enqueue %s (%s: %s); the reconciler will", submission_id, type(exc).__name__, exc)

    def start(self) -> None:
        (self.settings.data_dir / "work").mkdir(parents=True, exist_ok=True)
        swept = grading.sweep_leftovers(self.settings.data_dir / "work")
        if swept:
            log.info("removed %d leftovers of graders that were killed: %s", len(swept), ", ".join(swept[:5]))
        if self.in_process:
            import dramatiq

            self.recovered = self.store.recover(all_running=self.embedded, owner=self.owner)
            if self.recovered:
                log.info("recovered %d submissions left running by a previous process", len(self.recovered))
            self.store.clear_outbox(self.tag + "/")   # our in-process broker starts empty: none of ours is held
            n = max(1, self.settings.workers)
            self.worker = dramatiq.Worker(self.broker.dramatiq, worker_threads=n, worker_timeout=200)
            self.worker.queue_prefetch = n
            self.worker.start()
            self.context.start_heartbeat()
            for r in self.store.outbox(grace_s=0.0, limit=100000):
                self.enqueue(r["id"], r["queue"])
        self._thread = threading.Thread(target=self._loop, name="grader-reconcile", daemon=True)
        self._thread.start()
        self.started = True

    def stop(self) -> None:
        self._stop.set()
        if self.context is not None:
            self.context.stopping()
        if self._thread is not None:
            self._thread.join(timeout=15)
        if self.worker is not None:
            # finish what is being graded for a little while; what is left is recovered at the next start
            threading.Thread(target=self._close_runners_later, args=(12.0,), daemon=True).start()
            self.worker.stop(timeout=15000)
        if self.context is not None:
            self.context.close()
        self.broker.close()

    def _close_runners_later(self, after: float) -> None:
        time.sleep(after)
        if self.context is not None:
            self.context.close()

    def stats(self) -> dict:
        reconciler = self._thread is not None and self._thread.is_alive()
        if self.in_process:
            workers = self.worker.workers if self.worker is not None else []
            alive = sum(t.is_alive() for t in workers)
            busy = self.context.busy
            return {"workers": self.context.concurrency, "threads_alive": alive, "busy": busy, "mode": "embedded",
                    "healthy": self.started and reconciler and alive == len(workers) and not self._stop.is_set()}
        alive_workers = self.alive_workers()
        return {"workers": sum(w["concurrency"] for w in alive_workers), "hosts": len(alive_workers),
                "busy": sum(w["busy"] for w in alive_workers), "mode": "broker",
                "healthy": self.started and reconciler and bool(alive_workers) and not self._stop.is_set()}

    def alive_workers(self) -> list[dict]:
        try:
            return [w for w in self.store.list_workers(forget_after_s=3 * self.settings.heartbeat_s + 5)
                    if w["stopped_at"] is None]
        except Exception:
            return []

    # -- the reconciler ----------------------------------------------------------------------------------
    def reconcile_once(self) -> dict:
        out = reconcile(self.store, self.broker, self.actors, self.settings)
        self.last_reconcile = time.monotonic()
        return out

    def _loop(self) -> None:
        every = min(self.settings.reconcile_s, 1.0) if self.in_process else self.settings.reconcile_s
        while not self._stop.is_set():
            try:
                self.reconcile_once()
            except Exception as exc:   # the store or the broker is briefly unavailable: next pass
                log.warning("reconcile failed (%s: %s)", type(exc).__name__, str(exc)[:200])
            self._stop.wait(every)


def heartbeat_age(worker: dict) -> float:
    from harness.service.store.repository import now

    return (now() - worker["last_heartbeat"]).total_seconds() if isinstance(worker["last_heartbeat"], dt.datetime) \
        else float("inf")

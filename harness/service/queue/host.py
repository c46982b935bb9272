"""`grade worker`: one process per Docker host. It consumes the broker's queues with ``concurrency`` Dramatiq
worker threads (each driving one grading process in the sandbox of this host), writes reports to the shared
store, renews the lease of what it grades and writes a heartbeat row (the workers page).

Messages are acknowledged only after the report is stored (Dramatiq acks late): a worker killed mid-grade
leaves its message unacknowledged, and the Redis broker hands it to another worker once this one's heartbeat is
older than the lease; the reconciler of `grade serve` is the backstop. SIGTERM (or Ctrl-C) stops taking new
messages, lets running gradings finish for up to ``grace_s`` and gives prefetched messages back."""

from __future__ import annotations

import logging
import signal
import threading

from harness.service.queue.actors import WorkerContext, declare_actors, new_worker_id
from harness.service.queue.broker import QUEUES, Broker, redact

log = logging.getLogger("grader.worker")


def run_worker(settings, *, concurrency: int, queues=QUEUES, grace_s: float = 600.0, worker_id: str | None = None,
               ready=None) -> int:
    import dramatiq

    from harness.service.server import open_store

    if not settings.broker_url:
        raise ValueError("grade worker needs a broker: --broker redis://HOST:PORT/DB (or GRADER_BROKER_URL)")
    store = open_store(settings)
    (settings.data_dir / "work").mkdir(parents=True, exist_ok=True)
    from harness.service.grading import sweep_leftovers

    sweep_leftovers(settings.data_dir / "work")    # what a killed predecessor on this host left behind
    broker = Broker(settings.broker_url, settings)
    ctx = WorkerContext(store, settings, broker, owner=worker_id or new_worker_id(), kind="worker",
                        concurrency=concurrency, queues=queues)
    declare_actors(broker, lambda: ctx)
    stop = threading.Event()

    def on_signal(signum, frame):
        if stop.is_set():   # a second signal: leave now (unfinished gradings come back through their leases)
            raise SystemExit(130)
        log.info("signal %s: finishing running gradings (up to %g s), taking no new ones", signum, grace_s)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    worker = dramatiq.Worker(broker.dramatiq, queues=set(queues), worker_threads=concurrency, worker_timeout=500)
    worker.queue_prefetch = concurrency       # what a worker holds but is not grading waits for its heartbeat
    ctx.beat()
    worker.start()
    ctx.start_heartbeat()
    log.info("worker %s: %d threads on %s (queues %s), store %s", ctx.owner, concurrency, redact(settings.broker_url),
             ",".join(queues), "postgres" if not settings.is_sqlite else "sqlite")
    if ready is not None:
        ready(ctx)
    try:
        while not stop.wait(1.0):
            pass
    finally:
        ctx.stopping()
        worker.stop(timeout=int(grace_s * 1000))
        ctx.close()
        broker.close()
        store.dispose()
    return 0

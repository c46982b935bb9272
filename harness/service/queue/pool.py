"""The in-process grading pool: ``workers`` threads, each driving one long-lived grading process
(queue/worker.py) that grades one submission at a time in its own sandbox.

The store is the queue: a dispatcher thread reads due ``queued`` rows (and is woken at once by
:meth:`InProcessPool.enqueue`), so rows left queued or running by a process that died are graded at the next
start, and the in-memory queue is only a cache of ids. :func:`grade_submission` is the unit of work any engine
(this pool, a Dramatiq actor) calls: claim the row, grade it, write the report — or leave it alone when it is
not queued.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Protocol

log = logging.getLogger("grader.pool")
LEASE_S = 60.0          # a running row's lease, renewed every LEASE_S / 4 while its grading goes on
SWEEP_S = 15.0          # shared store: how often expired leases are looked for


class GradingQueue(Protocol):
    """What the API needs from a grading engine."""

    def enqueue(self, submission_id: str) -> None: ...   # best effort: the row is already committed
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def stats(self) -> dict: ...


class GraderProcess:
    """One grading process and its pipes; driven by a single thread."""

    def __init__(self, cwd: Path):
        env = dict(os.environ, PYTHONUNBUFFERED="1", GRADER_SERVICE_PARENT=str(os.getpid()))
        self.proc = subprocess.Popen([sys.executable, "-m", "harness.service.queue.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=str(cwd))
        self._buf = b""
        self.graded = 0

    def read(self, timeout: float, heartbeat: Callable[[], None] | None = None, every: float = 10.0):
        deadline = time.monotonic() + timeout
        next_beat = time.monotonic() + every
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                if heartbeat and time.monotonic() >= next_beat:
                    heartbeat()
                    next_beat = time.monotonic() + every
                if not sel.select(timeout=min(left, 1.0)):
                    continue
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return None
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            return None

    def ask(self, task: dict, timeout: float, heartbeat=None, every: float = 10.0):
        try:
            self.proc.stdin.write((json.dumps(task) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        answer = self.read(timeout, heartbeat, every)
        self.graded += 1
        return answer

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        for s in (self.proc.stdin, self.proc.stdout):
            try:
                s.close()
            except OSError:
                pass


class ProcessRunner:
    """Grades a task in a grading process it keeps (and replaces when it dies or misbehaves)."""

    RECYCLE_AFTER = 50

    def __init__(self, cwd: Path):
        self.cwd = cwd
        self.proc: GraderProcess | None = None

    def _ensure(self) -> GraderProcess:
        if self.proc is None or not self.proc.alive() or self.proc.graded >= self.RECYCLE_AFTER:
            if self.proc is not None:
                self.proc.stop()
            self.proc = GraderProcess(self.cwd)
            ready = self.proc.read(120.0)
            if not ready or ready.get("kind") != "ready":
                self.proc.stop()
                self.proc = None
                return None
        return self.proc

    def run(self, task: dict, timeout: float, heartbeat=None, every: float = 10.0) -> dict:
        proc = self._ensure()
        if proc is None:
            return {"kind": "infrastructure", "message": "the grading process could not start"}
        answer = proc.ask(task, timeout, heartbeat, every)
        if answer is None:
            died = not proc.alive()
            proc.stop(grace=5.0)
            self.proc = None
            return {"kind": "infrastructure",
                    "message": "the grading process died" if died else f"grading took longer than {timeout:g} s"}
        return answer

    def close(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None


def grade_submission(store, settings, submission_id: str, runner, *, owner: str, metrics=None,
                     on_done: Callable[[dict], None] | None = None) -> str | None:
    """Grade submission ``submission_id`` if it is queued (else do nothing); returns the status it ends in,
    or None when it was not claimable. Safe to call twice, from anywhere: only one claim wins."""
    from harness.service import views

    row = store.claim(submission_id, owner, LEASE_S)
    if row is None:
        return None
    attempt = row["attempts"]
    work = Path(tempfile.mkdtemp(prefix=f"sub-{submission_id}-", dir=settings.data_dir / "work"))
    t0 = time.monotonic()
    try:
        path = work / "submission.py"
        path.write_text(row["source"], encoding="utf-8")
        task = {"id": submission_id, "exercise": row["exercise"], "track": row["track_requested"],
                "sandbox": settings.sandbox, "seed": row["seed"], "path": str(path), "label": row["filename"]}
        answer = runner.run(task, settings.submission_timeout_s,
                            heartbeat=lambda: store.renew(submission_id, attempt, LEASE_S), every=LEASE_S / 4)
    finally:
        for f in work.iterdir():
            try:
                f.unlink()
            except OSError:
                pass
        try:
            work.rmdir()
        except OSError:
            pass
    seconds = time.monotonic() - t0
    if answer.get("kind") == "report":
        report = answer["report"]
        npz = None
        if answer.get("npz_b64"):
            import base64

            npz = base64.b64decode(answer["npz_b64"])
        hook = None
        if row["callback_url"]:
            done_row = dict(row, status="done", verdict=report.get("verdict"), score=report.get("score"),
                            max_score=report.get("max_score"))
            from harness.service.store.repository import now

            done_row["finished_at"] = now()
            hook = (row["callback_url"], json.dumps(views.webhook_payload(done_row)))
        final = store.finish(submission_id, attempt, report=report, npz=npz, webhook=hook)
        if final is None:
            log.warning("submission %s: attempt %s lost its claim; report discarded", submission_id, attempt)
            return None
        if metrics is not None:
            metrics.observe(seconds, exercise=row["exercise"], track=report.get("track", row["track"]),
                            sandbox=report.get("environment", {}).get("sandbox", settings.sandbox))
            metrics.inc("grader_verdicts_total", verdict=report.get("verdict"), exercise=row["exercise"])
        if on_done:
            on_done(final)
        return "done"
    message = answer.get("message", "grading failed")
    retry_after = settings.retry_backoff_s
    hook = None
    if row["callback_url"]:
        hook = (row["callback_url"], lambda r: json.dumps(views.webhook_payload(
            {c.key: getattr(r, c.key) for c in r.__table__.columns})))
    max_attempts = 1 if answer.get("kind") == "usage" else settings.max_attempts
    status = store.fail(submission_id, attempt, message, max_attempts=max_attempts, backoff_s=retry_after,
                        webhook_url_payload=hook)
    log.warning("submission %s attempt %s: infrastructure fault (%s) -> %s", submission_id, attempt, message, status)
    if metrics is not None:
        if status == "queued":
            metrics.inc("grader_grading_retries_total", exercise=row["exercise"])
        elif status == "infrastructure_error":
            metrics.inc("grader_verdicts_total", verdict="infrastructure_error", exercise=row["exercise"])
    if on_done and status == "infrastructure_error":
        on_done(store.get(submission_id))
    return status


class InProcessPool:
    """The embedded engine: a dispatcher over the store plus ``settings.workers`` grading threads."""

    def __init__(self, store, settings, metrics=None, *, poll_s: float = 1.0, embedded: bool = True,
                 runner_factory=None):
        self.store, self.settings, self.metrics = store, settings, metrics
        self.poll_s = poll_s
        self.embedded = embedded
        # stable across restarts of the server on this machine and data dir (which it holds locked): what a
        # previous life left running can be taken back at once, without waiting for its lease to expire
        import hashlib

        where = hashlib.sha256(f"{os.uname().nodename}:{settings.data_dir}".encode()).hexdigest()[:12]
        self.owner = f"{os.uname().nodename[:40]}:{where}"
        self._q: queue.Queue = queue.Queue()
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._runners: list = []
        self._busy = 0
        self._runner_factory = runner_factory or (lambda: ProcessRunner(settings.data_dir))
        self.started = False
        self.recovered: list[str] = []

    # -- interface ---------------------------------------------------------------------------------------
    def enqueue(self, submission_id: str) -> None:
        self._offer(submission_id)
        self._wake.set()

    def start(self) -> None:
        (self.settings.data_dir / "work").mkdir(parents=True, exist_ok=True)
        self.recovered = self.store.recover(all_running=self.embedded, owner=self.owner)
        if self.recovered:
            log.info("recovered %d submissions left running by a previous process", len(self.recovered))
        for i in range(max(1, self.settings.workers)):
            runner = self._runner_factory()
            self._runners.append(runner)
            t = threading.Thread(target=self._work, args=(runner,), name=f"grader-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        t = threading.Thread(target=self._dispatch, name="grader-dispatch", daemon=True)
        t.start()
        self._threads.append(t)
        self.started = True

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for _ in self._runners:
            self._q.put(None)
        for t in self._threads:
            t.join(timeout=15)
        for r in self._runners:
            r.close()

    def stats(self) -> dict:
        alive = sum(t.is_alive() for t in self._threads)
        return {"workers": len(self._runners), "threads_alive": alive, "busy": self._busy,
                "healthy": self.started and alive == len(self._threads) and not self._stop.is_set()}

    # -- internals ---------------------------------------------------------------------------------------
    def _offer(self, sub_id: str) -> None:
        with self._lock:
            if sub_id in self._pending:
                return
            self._pending.add(sub_id)
        self._q.put(sub_id)

    def _dispatch(self) -> None:
        last_sweep = 0.0
        while not self._stop.is_set():
            try:
                if not self.embedded and time.monotonic() - last_sweep > SWEEP_S:
                    self.store.recover(all_running=False)
                    last_sweep = time.monotonic()
                for sub_id in self.store.due_ids(limit=200):
                    self._offer(sub_id)
            except Exception:  # the store is briefly unavailable: try again next tick
                log.exception("dispatcher: could not read the queue")
            self._wake.wait(self.poll_s)
            self._wake.clear()

    def _work(self, runner) -> None:
        while not self._stop.is_set():
            sub_id = self._q.get()
            if sub_id is None:
                return
            with self._lock:
                self._busy += 1
            try:
                grade_submission(self.store, self.settings, sub_id, runner, owner=self.owner, metrics=self.metrics)
            except Exception:
                log.exception("submission %s: grading raised", sub_id)
            finally:
                with self._lock:
                    self._busy -= 1
                    self._pending.discard(sub_id)
                self._wake.set()  # a retry may be due, the next row may be waiting

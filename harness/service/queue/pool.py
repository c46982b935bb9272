"""The unit of work and what runs it: :func:`grade_submission` ("grade submission <id>", idempotent by id:
claim the row, grade it, write the report — or leave it alone when it is not claimable), and
:class:`ProcessRunner`, a long-lived grading process (queue/worker.py) that grades one submission at a time in
its own sandbox. The Dramatiq actors (queue/actors.py) call it, in `grade worker` processes or inside
`grade serve`."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Callable, Protocol

from harness.service.grading import Runner, grading_process

log = logging.getLogger("grader.pool")
LEASE_S = 60.0          # default lease of a running row (Settings.lease_s), renewed every lease / 4 while graded


class GradingQueue(Protocol):
    """What the API needs from a grading engine."""

    def enqueue(self, submission_id: str, queue: str = "interactive") -> None: ...   # best effort: committed first
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def stats(self) -> dict: ...


class ProcessRunner(Runner):
    """Grades a task in a grading process it keeps (harness/grading/process.py; replaced when it dies or
    misbehaves, recycled after ``RECYCLE_AFTER`` tasks or past ``RECYCLE_RSS_MB``).

    A fresh grading process costs ~0.4 s of CPU more than warm gradings do (its imports, its suites' collection,
    its first gradings' caches and warm pool): recycled every 50 tasks that was ~8 ms of each submission's
    ~120 (issue 27). What it keeps between tasks is bounded (the oracle's 512 answers and the diagnosis's 64 MiB
    of mutant outputs): grading mha, a correct and a wrong file in turn, one held 57 MiB after its first task,
    161 after 500 and 168 after 1,200; the resident bound catches whatever else would grow."""

    RECYCLE_AFTER = 1000
    RECYCLE_RSS_MB = 600

    def __init__(self, cwd: Path):
        self.cwd = cwd
        super().__init__(lambda: grading_process(cwd), recycle_after=self.RECYCLE_AFTER,
                         recycle_rss_mb=self.RECYCLE_RSS_MB)


def _patiently(write, lease: float):
    """Run a store write, retrying while the store is unreachable for up to most of the lease (after that
    the row's lease expires and another grader takes it; the write would be refused anyway)."""
    from sqlalchemy.exc import DBAPIError

    deadline = time.monotonic() + max(5.0, lease * 0.75)
    delay = 0.5
    while True:
        try:
            return write()
        except DBAPIError as exc:
            if time.monotonic() + delay > deadline:
                raise
            log.warning("the store is unavailable (%s); retrying in %.1f s", type(exc).__name__, delay)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


def grade_submission(store, settings, submission_id: str, runner, *, owner: str, metrics=None,
                     on_done: Callable[[dict], None] | None = None) -> str | None:
    """Grade submission ``submission_id`` if it is queued (else do nothing); returns the status it ends in,
    or None when it was not claimable. Safe to call twice, from anywhere: only one claim wins."""
    from harness.service import views

    lease = float(getattr(settings, "lease_s", LEASE_S))
    row = store.claim(submission_id, owner, lease, takeover=True)
    if row is None:
        return None
    attempt, fence = row["attempts"], row["lease"]
    if row.get("taken_over"):
        log.warning("submission %s: its lease expired (grader gone); attempt %s takes it over", submission_id, attempt)

    def beat():
        try:
            store.renew(submission_id, fence, lease)
        except Exception as exc:  # the store is briefly away: the lease has room for a few missed beats
            log.warning("submission %s: could not renew the lease (%s)", submission_id, type(exc).__name__)
    work = Path(tempfile.mkdtemp(prefix=f"sub-{os.getpid()}-{submission_id}-", dir=settings.data_dir / "work"))
    t0 = time.monotonic()
    try:
        path = work / "submission.py"
        path.write_text(row["source"], encoding="utf-8")
        task = {"id": submission_id, "exercise": row["exercise"], "track": row["track_requested"],
                "sandbox": settings.sandbox, "seed": row["seed"], "path": str(path), "label": row["filename"],
                "keep_artifacts": True, "warm": True,  # a warm pool per grading process
                # a fresh seed per submission: its oracle answers are never asked for again, so none is kept
                "answers_on_disk": False, "keep_answers": False}
        answer = runner.run(task, settings.submission_timeout_s,
                            heartbeat=beat, every=lease / 4)
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
        final = _patiently(lambda: store.finish(submission_id, fence, report=report, npz=npz, webhook=hook), lease)
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
    status = _patiently(lambda: store.fail(submission_id, fence, message, max_attempts=max_attempts,
                                           backoff_s=retry_after, webhook_url_payload=hook), lease)
    log.warning("submission %s attempt %s: infrastructure fault (%s) -> %s", submission_id, attempt, message, status)
    if metrics is not None:
        if status == "queued":
            metrics.inc("grader_grading_retries_total", exercise=row["exercise"])
        elif status == "infrastructure_error":
            metrics.inc("grader_verdicts_total", verdict="infrastructure_error", exercise=row["exercise"])
    if on_done and status == "infrastructure_error":
        on_done(store.get(submission_id))
    return status

"""Grading execution: Dramatiq actors (queue/actors.py) that call the unit of work :func:`grade_submission` —
"grade submission <id>", idempotent by id — on a Redis broker (`grade worker` processes on any number of
hosts) or on Dramatiq's in-process broker inside `grade serve` (embedded mode); the engine `grade serve` holds,
with the outbox and the reconciler (queue/engine.py); the `grade worker` process (queue/host.py)."""

from harness.service.queue.pool import GradingQueue, grade_submission  # noqa: F401

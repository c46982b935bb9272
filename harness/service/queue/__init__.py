"""Grading execution behind a small interface (:class:`GradingQueue`): the in-process pool today, a
Dramatiq/Redis actor later. Whatever runs it, the unit of work is :func:`grade_submission` — "grade submission
<id>" — idempotent by id: a submission not in ``queued`` is left alone, and only the attempt holding the claim
can write the report."""

from harness.service.queue.pool import GradingQueue, InProcessPool, grade_submission  # noqa: F401

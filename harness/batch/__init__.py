"""Batch grading: many submissions, N at once, one report file each, safe to kill and resume.

Design
* The engine runs the hidden suite with ``pytest.main`` in-process, so parallel grading needs separate
  processes: ``jobs`` long-lived grading processes (``python -m harness.batch.child``), each grading one
  submission at a time in its own sandbox (a fresh worker / container per submission, as ``grade run``
  does). A grading process is recycled after ``RECYCLE_AFTER`` submissions (or past its memory bound) and
  replaced when it dies.
* Only this (parent) process writes reports: each one atomically (temp file + rename) as soon as its
  submission finishes, named ``<path slug>.<sha256[:16]>.json``. A sidecar ``.npz`` of plot arrays (see
  harness/grading/artifacts.py) is written by the grading process *before* the report that names it.
* ``resume``: a submission is skipped when its report exists, validates, and its key (sha256, exercise,
  track, harness version) matches. A batch killed at any moment leaves only complete reports (rename is
  atomic), so re-running with ``resume`` ends with exactly one valid report per submission.
* Every submission gets a report. A file the engine rejects (binary, too large, not UTF-8) gets an
  ``error`` report (the submission's fault: exit 1). A grading that crashes, hangs past the batch watchdog
  or raises an infrastructure error gets an ``error`` report marked ``environment.batch.error.kind =
  "infrastructure"`` and makes the batch exit 3; ``resume`` grades such submissions again.
* Grading processes die with the batch: they ask the kernel for SIGTERM when their parent dies
  (PR_SET_PDEATHSIG), and SIGTERM unwinds the engine so its sandbox worker/container is killed.

Set ``ATTN_GRADER_BATCH_LOG=<file>`` to have every grading start append one line
(``start<TAB>sha256<TAB>path<TAB>pid``) to that file: the tests count sandbox starts with it.
"""

from harness.batch.plan import BatchOptions, Item, plan
from harness.batch.pool import BatchResult, run_batch

__all__ = ["BatchOptions", "BatchResult", "Item", "plan", "run_batch"]

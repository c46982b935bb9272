"""One grading process of a batch (``python -m harness.batch.child``): the one grading process
(:mod:`harness.grading.process`) with the batch's start log. Dies with the batch (SIGTERM on the parent's death),
and SIGTERM unwinds the engine so its sandbox worker is killed.

Set ``ATTN_GRADER_BATCH_LOG=<file>`` to have every grading start append one line
(``start<TAB>sha256<TAB>path<TAB>pid``) to that file: the tests count sandbox starts with it.
"""

from __future__ import annotations

import os
import sys

from harness.grading.process import grade_task, serve

START_LOG_ENV = "ATTN_GRADER_BATCH_LOG"
PARENT_ENV = "ATTN_GRADER_BATCH_PARENT"


def _log_start(task: dict) -> None:
    path = os.environ.get(START_LOG_ENV)
    if not path:
        return
    line = f"start\t{task['sha256']}\t{task['label']}\t{os.getpid()}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)  # one O_APPEND write: lines from parallel graders never interleave
    finally:
        os.close(fd)


def handle(task: dict) -> dict:
    """Grade one submission in this process; the answer sent back to the batch."""
    _log_start(task)
    return grade_task(task)


if __name__ == "__main__":
    sys.exit(serve(PARENT_ENV, handle))

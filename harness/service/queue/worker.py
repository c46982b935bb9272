"""A grading process of the service (``python -m harness.service.queue.worker``): the one grading process
(:mod:`harness.grading.process`), reading one JSON task per line on stdin and answering one JSON line on
stdout. The engine runs pytest in-process and sets process-wide warning filters, so grading happens here,
never in the API process or its threads. It dies with the server (``GRADER_SERVICE_PARENT``)."""

from __future__ import annotations

import sys

from harness.service.grading import serve_grading


if __name__ == "__main__":
    sys.exit(serve_grading())

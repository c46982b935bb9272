"""One grading process of a batch (``python -m harness.batch.child``): reads one task (JSON) per line on stdin,
grades it in this process with :func:`harness.grading.engine.grade`, answers one JSON line on stdout. Dies with
the batch (SIGTERM on the parent's death), and SIGTERM unwinds the engine so its sandbox worker is killed.

Set ``ATTN_GRADER_BATCH_LOG=<file>`` to have every grading start append one line
(``start<TAB>sha256<TAB>path<TAB>pid``) to that file: the tests count sandbox starts with it.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from harness.core.errors import GraderError, UsageError
from harness.core.process import TermWhileBusy, die_with_parent

START_LOG_ENV = "ATTN_GRADER_BATCH_LOG"


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


def grade_task(task: dict) -> dict:
    """Grade one submission in this process; the answer sent back to the batch."""
    from harness.core import sidecar
    from harness.grading.engine import grade

    notices: list[str] = []
    _log_start(task)
    try:
        report = grade(exercise=task["exercise"], submission=task["path"], track=task["track"],
                       sandbox=task["sandbox"], seed=task["seed"], limits=task["limits"] or None,
                       notice=notices.append, keep_artifacts=task["keep_artifacts"], warm=task.get("warm", False))
    except UsageError as exc:
        return {"kind": "usage", "message": exc.message, "notices": notices}
    except GraderError as exc:
        hint = getattr(exc, "hint", "")
        return {"kind": "infrastructure", "message": exc.message + (f" (fix: {hint})" if hint else ""),
                "notices": notices}
    except Exception as exc:  # a grader bug is an infrastructure fault for this submission, not a lost one
        return {"kind": "infrastructure", "message": f"internal error: {type(exc).__name__}: {exc}",
                "notices": notices}
    data = json.loads(report.to_json())
    if report.artifacts:
        data["artifacts"] = sidecar.save(report.artifacts, task["npz_path"])
    return {"kind": "report", "report": data, "notices": notices}


def main() -> int:
    die_with_parent(signal.SIGTERM, parent=int(os.environ.get("ATTN_GRADER_BATCH_PARENT", "0") or 0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the batch's to handle: it sends SIGTERM

    term = TermWhileBusy()   # mid-grading: unwinds pytest and the engine; idle or closing: lets the close finish
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)                                  # stray prints go to the log, never into the answers
    sys.stdout = sys.stderr
    try:
        import harness.grading.engine  # noqa: F401  (warm the imports before the first task)

        for line in sys.stdin:
            if not line.strip():
                continue
            with term.busy():
                answer = grade_task(json.loads(line))
            answers.write(json.dumps(answer, allow_nan=False) + "\n")
            answers.flush()
    except (KeyboardInterrupt, BrokenPipeError):
        return 143
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A grading process: reads one JSON task per line on stdin, grades it (through harness.service.grading),
answers one JSON line on stdout. The engine runs pytest in-process and sets process-wide warning filters, so
grading happens here, never in the API process or its threads.

It dies with the server: PR_SET_PDEATHSIG asks the kernel for SIGTERM when the parent goes (even on kill -9),
and SIGTERM unwinds the engine, whose ``finally`` kills the sandbox worker."""

from __future__ import annotations

import json
import os
import signal
import sys

from harness.core.process import TermWhileBusy, die_with_parent


def main() -> int:
    die_with_parent(signal.SIGTERM, parent=int(os.environ.get("GRADER_SERVICE_PARENT", "0") or 0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    term = TermWhileBusy()   # mid-grading: unwinds the engine; idle or closing: lets the warm pool close
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from harness.service import grading

    try:
        grading.warm_up()
        answers.write(json.dumps({"kind": "ready"}) + "\n")
        answers.flush()
        for line in sys.stdin:
            if not line.strip():
                continue
            task = json.loads(line)
            with term.busy():
                answer = grading.grade_source(exercise=task["exercise"], source_path=task["path"],
                                              track=task["track"], sandbox=task["sandbox"], seed=task["seed"],
                                              label=task.get("label"))
            answers.write(json.dumps(answer, allow_nan=False) + "\n")
            answers.flush()
    except (KeyboardInterrupt, BrokenPipeError):
        return 143
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Gradescope ``results.json`` for one report, per the published autograder specification
(https://gradescope-autograders.readthedocs.io/en/latest/specs/, "Output format"):

* top level: ``score``, ``execution_time`` (seconds), ``output`` (text for the whole submission),
  ``stdout_visibility``, ``extra_data``, ``tests``;
* each test: ``name``, ``score``, ``max_score``, ``status`` ("passed" | "failed"), ``visibility``
  ("visible" | "hidden" | "after_due_date" | "after_published"), ``output``, ``tags``.

Our ``hidden`` tests map to Gradescope ``hidden`` (never shown to students; instructors see everything), the
others to ``visible``. Every non-passing status (failed, error, timeout, memory, output_limit, skipped) is
``failed`` on Gradescope; the precise status is the first word of the test's output.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from harness.core.report import Report, TestResult, batch_error
from harness.reports.junit import diagnosis_text
from harness.core.report import write_atomic

VISIBILITY = {"visible": "visible", "hidden": "hidden"}


def _test_output(t: TestResult) -> str:
    message = t.message if t.status != "passed" else ""
    lines = [f"{t.status}: {message}" if message else t.status]
    if t.description:
        lines.append(t.description)
    for key, value in (t.diagnostics or {}).items():
        if key == "traceback":
            lines.append(f"traceback:\n{value}")
        else:
            lines.append(f"{key}: {json.dumps(value, default=str)}")
    return "\n".join(lines)


def results_json(report: Report) -> dict:
    tests = [{"name": t.id, "score": float(t.points), "max_score": float(t.max_points),
              "status": "passed" if t.status == "passed" else "failed",
              "visibility": VISIBILITY.get(t.visibility, "visible"),
              "output": _test_output(t), "tags": [t.category]}
             for t in report.tests]
    header = (f"{report.exercise} ({report.track} track): {report.verdict.upper()} "
              f"{report.score:g}/{report.max_score:g}")
    err = batch_error(report)
    parts = [header, diagnosis_text(report)]
    if err:
        parts.append(f"not graded ({err.get('kind')}): {err.get('message', '')}")
    return {"score": float(report.score),
            "execution_time": int(math.ceil(float(report.timings.get("total_s", 0.0)))),
            "output": "\n".join(p for p in parts if p),
            "stdout_visibility": "hidden",
            "extra_data": {"exercise": report.exercise, "track": report.track, "verdict": report.verdict,
                           "max_score": float(report.max_score), "sha256": report.submission.get("sha256"),
                           "diagnosis": [d.bug for d in report.diagnosis]},
            "tests": tests}


def write_results(path: str | os.PathLike, report: Report) -> None:
    write_atomic(Path(path), json.dumps(results_json(report), indent=2, allow_nan=False) + "\n")

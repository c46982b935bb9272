"""What every renderer says about a report: points and tests per category, failures grouped (an import error
shown once), why a report is an error, its title."""

from __future__ import annotations

import json

from harness.core.report import CATEGORIES, Report, TestResult, batch_error


def category_scores(report: Report) -> list[dict]:
    cats: dict[str, dict] = {}
    for t in report.tests:
        c = cats.setdefault(t.category, {"category": t.category, "score": 0.0, "max_score": 0.0,
                                         "passed": 0, "total": 0})
        c["score"] += t.points
        c["max_score"] += t.max_points
        c["passed"] += t.status == "passed"
        c["total"] += 1
    return [cats[c] for c in CATEGORIES if c in cats] + [v for k, v in cats.items() if k not in CATEGORIES]


def failure_groups(tests: list[TestResult]) -> list[list[TestResult]]:
    """Failing tests (not passed, not skipped) grouped by identical status, message and diagnostics, in order
    of first appearance: an import error or a worker that stopped answering fails every test the same way,
    and is shown once."""
    groups: dict[str, list[TestResult]] = {}
    for t in tests:
        if t.status in ("passed", "skipped"):
            continue
        key = json.dumps([t.status, t.message, t.diagnostics], sort_keys=True, default=str)
        groups.setdefault(key, []).append(t)
    return list(groups.values())


def error_reason(report: Report, limit: int = 100) -> str:
    """Why a report's verdict is ``error``, or why a failed report earned nothing, in one short line: the batch's
    own error (``usage: ...``, ``infrastructure: ...``), else the failure most tests share (an import error, a dead
    worker, a constructor that raises). Empty for other reports."""
    err = batch_error(report)
    tests = report.tests
    all_errored = bool(tests) and not any(t.status in ("passed", "failed", "skipped") for t in tests)
    if err:
        text = f"{err.get('kind')}: {err.get('message', '')}"
    elif report.verdict == "error" or all_errored:
        groups = failure_groups(tests)
        biggest = max(groups, key=len) if groups else None
        text = biggest[0].message if biggest else "no test ran"
    else:
        return ""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def title_of(report: Report) -> str:
    return report.submission.get("path") or report.submission.get("sha256", "")[:12]


def fmt(x) -> str:
    if isinstance(x, float):
        return f"{x:.4g}"
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(fmt(v) for v in x) + "]"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k}={fmt(v)}" for k, v in x.items()) + "}"
    return str(x)
